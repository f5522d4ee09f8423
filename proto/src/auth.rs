//! Registry credentials: explicit `--username`/`--password-stdin`, else the Docker
//! config (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`), else anonymous.

use std::path::PathBuf;

use base64::Engine as _;

/// Username and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.username)
    }
}

/// Path of the Docker config file that would be read.
pub fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// Looks `registry` (`HOST[:PORT]`) up in the Docker config's `auths`. Returns `None`
/// when there is no file or no entry; a malformed file is an error naming it.
pub fn docker_config_credentials(registry: &str) -> Result<Option<Credentials>, String> {
    let Some(path) = docker_config_path() else { return Ok(None) };
    docker_config_credentials_in(&path, registry)
}

/// Like [`docker_config_credentials`] from the Docker config file `path` (e.g. a mounted
/// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`).
pub fn docker_config_credentials_in(path: &std::path::Path, registry: &str) -> Result<Option<Credentials>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read Docker config {}: {e}", path.display())),
    };
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("Docker config {} is not valid JSON: {e}", path.display()))?;
    let Some(auths) = doc.get("auths").and_then(|a| a.as_object()) else { return Ok(None) };
    let entry = auths.iter().find(|(k, _)| {
        let k = k.trim_start_matches("https://").trim_start_matches("http://");
        k.trim_end_matches('/').split('/').next() == Some(registry)
    });
    let Some((_, entry)) = entry else { return Ok(None) };
    if let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth)
            .map_err(|e| format!("Docker config {}: auths.{registry}.auth is not base64: {e}", path.display()))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| format!("Docker config {}: auths.{registry}.auth is not UTF-8", path.display()))?;
        let (u, p) = decoded
            .split_once(':')
            .ok_or_else(|| format!("Docker config {}: auths.{registry}.auth must encode user:password", path.display()))?;
        return Ok(Some(Credentials { username: u.into(), password: p.into() }));
    }
    let u = entry.get("username").and_then(|v| v.as_str());
    let p = entry.get("password").and_then(|v| v.as_str());
    Ok(match (u, p) {
        (Some(u), Some(p)) => Some(Credentials { username: u.into(), password: p.into() }),
        _ => None,
    })
}
