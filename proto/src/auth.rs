//! Registry credentials: explicit `--username`/`--password-stdin` bound to the one
//! registry host they were given for, else the Docker config (`$DOCKER_CONFIG/config.json`
//! or `~/.docker/config.json`) entry for the host, else anonymous. [`CredentialSource`]
//! says where credentials came from (or where they were looked for) for error messages.

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

/// Explicit credentials and the registry host (`HOST[:PORT]`) they belong to: they are
/// sent to that host (and the token service it names) and nowhere else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCredentials {
    /// `HOST[:PORT]` as written in references.
    pub registry: String,
    /// The credentials.
    pub credentials: Credentials,
}

/// Where the credentials used for a registry came from, or where they were looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// `--username USER --password-stdin` given for this registry.
    Explicit {
        /// The user name.
        username: String,
    },
    /// The Docker config's `auths` entry for the registry.
    DockerConfig {
        /// The file read.
        path: PathBuf,
        /// The user name.
        username: String,
    },
    /// None found: no explicit credentials for this host, no Docker config entry.
    None {
        /// Host the explicit credentials were given for, if they were given at all.
        explicit_for: Option<String>,
        /// How the program takes explicit credentials (its flags), when it does.
        how: Option<&'static str>,
        /// The Docker config file consulted (`None` when neither DOCKER_CONFIG nor HOME is set).
        docker_config: Option<PathBuf>,
    },
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Explicit { username } => write!(f, "used user {username} given on the command line"),
            CredentialSource::DockerConfig { path, username } => {
                write!(f, "used user {username} from the Docker config {}", path.display())
            }
            CredentialSource::None { explicit_for, how, docker_config } => {
                match (explicit_for, how) {
                    (Some(h), _) => write!(f, "no credentials: the user given on the command line is for {h}, not this registry")?,
                    (None, Some(how)) => write!(f, "no credentials: no {how}")?,
                    (None, None) => write!(f, "no credentials")?,
                }
                match docker_config {
                    Some(p) => write!(f, ", and no entry for this registry in the Docker config {} (DOCKER_CONFIG=DIR selects another)", p.display()),
                    None => write!(f, ", and no Docker config (neither DOCKER_CONFIG nor HOME is set)"),
                }
            }
        }
    }
}

/// Path of the Docker config file that would be read.
pub fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// The credentials for `registry`: the explicit ones when they were given for this very
/// host, else the Docker config entry. Returns them with their source (or where they
/// were looked for, `how` naming the program's flags for explicit ones, when it has any);
/// a malformed Docker config is an error naming it.
pub fn credentials_for(registry: &str, explicit: Option<&HostCredentials>, how: Option<&'static str>) -> Result<(Option<Credentials>, CredentialSource), String> {
    if let Some(e) = explicit {
        if e.registry == registry {
            let source = CredentialSource::Explicit { username: e.credentials.username.clone() };
            return Ok((Some(e.credentials.clone()), source));
        }
    }
    let path = docker_config_path();
    match docker_config_credentials(registry)? {
        Some(c) => {
            let source = CredentialSource::DockerConfig { path: path.unwrap_or_default(), username: c.username.clone() };
            Ok((Some(c), source))
        }
        None => Ok((None, CredentialSource::None { explicit_for: explicit.map(|e| e.registry.clone()), how, docker_config: path })),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_credentials_apply_to_their_host_only() {
        let explicit = HostCredentials { registry: "a.example:5000".into(), credentials: Credentials { username: "alice".into(), password: "pw".into() } };
        let (c, src) = credentials_for("a.example:5000", Some(&explicit), None).unwrap();
        assert_eq!(c.unwrap().username, "alice");
        assert_eq!(src, CredentialSource::Explicit { username: "alice".into() });
        // Another host (port differs): never the explicit credentials.
        let (c, src) = credentials_for("a.example:5001", Some(&explicit), None).unwrap();
        if let Some(c) = c {
            assert_ne!(c.password, "pw");
        }
        assert!(!matches!(src, CredentialSource::Explicit { .. }), "{src:?}");
    }
}
