//! `drover keygen`: writes `drover.key` (cosign's encrypted private-key format, mode
//! 0600) and `drover.pub` (PEM SubjectPublicKeyInfo, mode 0644), ECDSA P-256.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use drover_proto::keys::{password_from_env, PrivateKey, COSIGN_PASSWORD_ENV, PASSWORD_ENV};
use serde::Serialize;

use crate::output::{warn, Report, Text};

/// Arguments of `drover keygen`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write drover.key and drover.pub into (created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out_dir: PathBuf,
    /// Overwrite existing drover.key / drover.pub.
    #[arg(long)]
    pub force: bool,
}

/// What `keygen` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeygenReport {
    /// The private key file (mode 0600).
    pub private_key: String,
    /// The public key file (mode 0644): give it to verifiers with `--trust-key`.
    pub public_key: String,
    /// Hex sha256 of the public key's DER SubjectPublicKeyInfo.
    pub fingerprint: String,
    /// True when no password was set (DROVER_KEY_PASSWORD / COSIGN_PASSWORD).
    pub encrypted_with_empty_password: bool,
}

impl Report for KeygenReport {
    fn write_text(&self, out: &mut Text) {
        out.table(
            &["PRIVATE KEY", "PUBLIC KEY", "FINGERPRINT"],
            &[vec![self.private_key.clone(), self.public_key.clone(), self.fingerprint.clone()]],
        );
    }
}

/// Writes `data` to `path` with exactly `mode`, via a temporary file and rename.
fn write_with_mode(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("key");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        f.write_all(data)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?; // umask-proof
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.with_context(|| format!("writing {}", path.display()))
}

/// Runs `drover keygen`.
pub async fn run(args: Args) -> anyhow::Result<KeygenReport> {
    let key_path = args.out_dir.join("drover.key");
    let pub_path = args.out_dir.join("drover.pub");
    if !args.force {
        for p in [&key_path, &pub_path] {
            if p.symlink_metadata().is_ok() {
                anyhow::bail!("{} already exists; refusing to overwrite a key (pass --force to replace it)", p.display());
            }
        }
    }
    std::fs::create_dir_all(&args.out_dir).with_context(|| format!("creating {}", args.out_dir.display()))?;
    let password = password_from_env();
    let key = PrivateKey::generate()?;
    let encrypted = key.to_encrypted_pem(&password)?;
    let public = key.public_key().to_pem();
    write_with_mode(&key_path, encrypted.as_bytes(), 0o600)?;
    write_with_mode(&pub_path, public.as_bytes(), 0o644)?;
    if password.is_empty() {
        warn(format_args!("{} is encrypted with an empty password (set {PASSWORD_ENV} or {COSIGN_PASSWORD_ENV})", key_path.display()));
    }
    Ok(KeygenReport {
        private_key: key_path.display().to_string(),
        public_key: pub_path.display().to_string(),
        fingerprint: key.public_key().fingerprint().to_string(),
        encrypted_with_empty_password: password.is_empty(),
    })
}
