//! The cluster's identity for fleet reports (docs/fleet.md, "Who can write a report"): an
//! ECDSA P-256 report key, made at the agent's first start and kept across restarts and
//! leader changes. The kube target keeps it in a Secret in the agent's namespace
//! ([`crate::targets::Target::report_key`]); other targets in the state directory, file
//! `report-key.pem`, mode 0600 (PKCS#8 PEM), created once and never overwritten. The key
//! never leaves the cluster: every report carries its signature and public key, and
//! `drover fleet enroll` approves that key into the fleet roster. Its fingerprint is
//! logged at start so an operator can compare it with what `enroll` lists.

use std::path::Path;

use drover_proto::keys::PrivateKey;

use crate::fsat::Found;
use crate::statedir::StateDir;
use crate::targets::Target;

/// The report key's file in the state directory (targets that keep no key).
pub const KEY_FILE: &str = "report-key.pem";

/// The cluster's report key: from the target, else from the state directory; made and
/// stored first when there is none.
pub async fn report_key(target: &dyn Target, state_dir: &Path) -> Result<PrivateKey, String> {
    let generated = PrivateKey::generate().map_err(|e| e.to_string())?;
    let pem = generated.to_pkcs8_pem().map_err(|e| e.to_string())?;
    let (stored, where_) = match target.report_key(pem.as_bytes()).await.map_err(|e| e.to_string())? {
        Some(stored) => (stored, format!("the target ({})", target.describe())),
        None => (from_state_dir(state_dir, pem.as_bytes())?, state_dir.join(KEY_FILE).display().to_string()),
    };
    let key = PrivateKey::from_pem(&stored, "", &where_).map_err(|e| format!("the report key in {where_}: {e}"))?;
    tracing::info!(fingerprint = %key.public_key().fingerprint(), "report key (kept in {where_}); enroll it with `drover fleet enroll`");
    Ok(key)
}

/// Largest report key file read (a P-256 key in PEM is about 250 bytes).
const MAX_KEY_FILE: u64 = 16 << 10;

/// The key file in `state_dir`, created (0600, never overwritten) with `generated` when
/// it does not exist; read only when it is a regular file of the agent's user (or root),
/// not through a link, at most [`MAX_KEY_FILE`] bytes.
fn from_state_dir(state_dir: &Path, generated: &[u8]) -> Result<Vec<u8>, String> {
    let path = state_dir.join(KEY_FILE);
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let dir = StateDir::existing(state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
    match dir.create_new(KEY_FILE, generated) {
        // Written whole (and synced) before anything reads it.
        Ok(()) => return Ok(generated.to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(named(e)),
    }
    match dir.read(KEY_FILE, MAX_KEY_FILE).map_err(named)? {
        Found::Ours(data) => Ok(data),
        Found::Missing => Err(format!("{}: removed while it was read", path.display())),
        Found::TooLarge => Err(format!("{}: larger than {MAX_KEY_FILE} bytes: not a report key", path.display())),
        Found::Foreign(what) => Err(format!("{}: it is {what}, not the agent's report key; move it aside (a new key is made, to enrol again)", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_directory_key_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let a = from_state_dir(dir.path(), b"first").unwrap();
        let b = from_state_dir(dir.path(), b"second").unwrap();
        assert_eq!((a.as_slice(), b.as_slice()), (&b"first"[..], &b"first"[..]), "never overwritten");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
}
