//! Agent settings: the `--config` YAML file and the `run` flags, merged (flags win) into
//! one validated [`Settings`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drover_proto::Reference;
use serde::Deserialize;

/// Why settings are unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("cannot read config file {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The config file is not valid (unknown field, wrong type, bad YAML).
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, naming the field.
        message: String,
    },
    /// A setting has a bad value or a required one is missing.
    #[error("setting `{field}` (flag --{flag}): {message}")]
    Invalid {
        /// The YAML field name.
        field: &'static str,
        /// The flag name.
        flag: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

/// The settings as written in the YAML file; every field is also a `run` flag.
/// Field names are camelCase; unknown fields are errors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    /// `--source`.
    pub source: Option<String>,
    /// `--plain-http`.
    pub plain_http: Option<bool>,
    /// `--ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `--trust-key` (list).
    pub trust_keys: Option<Vec<PathBuf>>,
    /// `--threshold`.
    pub threshold: Option<usize>,
    /// `--insecure-skip-verify`.
    pub insecure_skip_verify: Option<bool>,
    /// `--expect-cluster-type`.
    pub expect_cluster_type: Option<String>,
    /// `--expect-environment`.
    pub expect_environment: Option<String>,
    /// `--target`.
    pub target: Option<String>,
    /// `--state-dir`.
    pub state_dir: Option<PathBuf>,
    /// `--interval` (humantime, e.g. `30s`).
    pub interval: Option<String>,
    /// `--resync`.
    pub resync: Option<String>,
    /// `--field-manager`.
    pub field_manager: Option<String>,
    /// `--max-prune-ratio`.
    pub max_prune_ratio: Option<f64>,
    /// `--listen`.
    pub listen: Option<String>,
    /// `--log-format`.
    pub log_format: Option<String>,
    /// `--allow-namespace` (list; empty = all).
    pub allowed_namespaces: Option<Vec<String>>,
    /// `--deny-kind` (list).
    pub denied_kinds: Option<Vec<String>>,
    /// `--health-timeout`.
    pub health_timeout: Option<String>,
    /// `--no-force` (kube target: do not take over fields of other managers).
    pub no_force: Option<bool>,
    /// `--apply-concurrency` (kube target: objects applied at once inside an order group).
    pub apply_concurrency: Option<usize>,
    /// `--leader-election` (one agent per cluster polls and applies; a Lease elects it).
    pub leader_election: Option<bool>,
    /// `--lease-namespace` (default: `POD_NAMESPACE`, else `drover-system`).
    pub lease_namespace: Option<String>,
    /// `--lease-name` (default `drover-agent`).
    pub lease_name: Option<String>,
    /// `--lease-duration` (default `15s`).
    pub lease_duration: Option<String>,
}

impl FileConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.display().to_string(), message: e.to_string() })?;
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_yaml_ng::from_str(&text).map_err(|e| ConfigError::Parse { path: path.display().to_string(), message: e.to_string() })
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human text.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// The Kubernetes cluster (in-cluster or `KUBECONFIG`).
    Kube,
    /// A directory.
    Dir(PathBuf),
}

impl TargetSpec {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "kube" => Some(TargetSpec::Kube),
            _ => s.strip_prefix("dir:").filter(|p| !p.is_empty()).map(|p| TargetSpec::Dir(PathBuf::from(p))),
        }
    }
}

/// Validated, merged settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The source reference text (as configured; used as the state key and `drover.dev/source`).
    pub source: String,
    /// The parsed source.
    pub reference: Reference,
    /// Plain HTTP to the registry.
    pub plain_http: bool,
    /// Extra CA.
    pub ca_file: Option<PathBuf>,
    /// Trusted public keys.
    pub trust_keys: Vec<PathBuf>,
    /// Signatures required.
    pub threshold: usize,
    /// Apply without signature verification (explicit opt-out).
    pub insecure_skip_verify: bool,
    /// Required `clusterType` of the signed config.
    pub expect_cluster_type: Option<String>,
    /// Required `environment` of the signed config.
    pub expect_environment: Option<String>,
    /// The target.
    pub target: TargetSpec,
    /// State directory.
    pub state_dir: PathBuf,
    /// Poll interval (jittered).
    pub interval: Duration,
    /// Re-apply interval of an unchanged bundle (drift correction).
    pub resync: Duration,
    /// SSA field manager.
    pub field_manager: String,
    /// Prune safety valve.
    pub max_prune_ratio: f64,
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// Log format.
    pub log_format: LogFormat,
    /// Allowed namespaces (empty: all).
    pub allowed_namespaces: Vec<String>,
    /// Denied kinds.
    pub denied_kinds: Vec<String>,
    /// Bound of the wait stage.
    pub health_timeout: Duration,
    /// Kube target: apply without force.
    pub no_force: bool,
    /// Kube target: objects applied at once inside an order group.
    pub apply_concurrency: usize,
    /// Leader election: `(namespace, name, duration)` of the Lease, when enabled.
    pub leader_election: Option<(String, String, Duration)>,
}

fn invalid(field: &'static str, flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field, flag, message: message.into() }
}

fn duration(field: &'static str, flag: &'static str, v: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    let text = v.unwrap_or_else(|| default.to_string());
    let d = humantime::parse_duration(&text).map_err(|e| invalid(field, flag, format!("{text:?} is not a duration like 30s or 10m: {e}")))?;
    if d.is_zero() {
        return Err(invalid(field, flag, "must be greater than zero"));
    }
    Ok(d)
}

/// Like [`duration`], but zero is allowed (`--resync 0s`: re-apply on every poll).
fn duration_or_zero(field: &'static str, flag: &'static str, v: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    match v.as_deref().map(str::trim) {
        Some("0") | Some("0s") => Ok(Duration::ZERO),
        _ => duration(field, flag, v, default),
    }
}

impl Settings {
    /// Merges flag values (`flags`, higher precedence) over file values and validates.
    pub fn merge(flags: FileConfig, file: FileConfig) -> Result<Self, ConfigError> {
        macro_rules! pick {
            ($f:ident) => {
                flags.$f.clone().or(file.$f.clone())
            };
        }
        let source = pick!(source).ok_or_else(|| invalid("source", "source", "required: the bundle reference to poll, e.g. registry.example/fleet/edge:prod"))?;
        let reference = Reference::parse(&source).map_err(|e| invalid("source", "source", e.to_string()))?;
        if let Reference::Registry(r) = &reference {
            if r.lookup().is_none() {
                return Err(invalid("source", "source", format!("{source} has no tag or digest; add the channel tag, e.g. {source}:prod")));
            }
        }
        let trust_keys = pick!(trust_keys).unwrap_or_default();
        let insecure_skip_verify = pick!(insecure_skip_verify).unwrap_or(false);
        if trust_keys.is_empty() && !insecure_skip_verify {
            return Err(invalid(
                "trustKeys",
                "trust-key",
                "no trusted public key: give --trust-key drover.pub (repeatable); to run without verification pass --insecure-skip-verify (never in production)",
            ));
        }
        let threshold = pick!(threshold).unwrap_or(1);
        if !insecure_skip_verify && (threshold == 0 || threshold > trust_keys.len()) {
            return Err(invalid("threshold", "threshold", format!("must be between 1 and the number of trust keys ({})", trust_keys.len())));
        }
        let target_text = pick!(target).ok_or_else(|| invalid("target", "target", "required: kube or dir:PATH"))?;
        let target = TargetSpec::parse(&target_text)
            .ok_or_else(|| invalid("target", "target", format!("{target_text:?} is neither kube nor dir:PATH")))?;
        let state_dir = pick!(state_dir).ok_or_else(|| invalid("stateDir", "state-dir", "required: a directory for the agent's database"))?;
        let max_prune_ratio = pick!(max_prune_ratio).unwrap_or(0.5);
        if !(0.0..=1.0).contains(&max_prune_ratio) {
            return Err(invalid("maxPruneRatio", "max-prune-ratio", format!("{max_prune_ratio} is not between 0 and 1")));
        }
        let listen_text = pick!(listen).unwrap_or_else(|| "127.0.0.1:9464".into());
        let listen = listen_text
            .parse()
            .map_err(|_| invalid("listen", "listen", format!("{listen_text:?} is not an address like 127.0.0.1:9464")))?;
        let log_format = match pick!(log_format).as_deref().unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(invalid("logFormat", "log-format", format!("{other:?} is neither text nor json"))),
        };
        let field_manager = pick!(field_manager).unwrap_or_else(|| "drover".into());
        if field_manager.is_empty() {
            return Err(invalid("fieldManager", "field-manager", "must not be empty"));
        }
        Ok(Settings {
            source,
            reference,
            plain_http: pick!(plain_http).unwrap_or(false),
            ca_file: pick!(ca_file),
            trust_keys,
            threshold,
            insecure_skip_verify,
            expect_cluster_type: pick!(expect_cluster_type),
            expect_environment: pick!(expect_environment),
            target,
            state_dir,
            interval: duration("interval", "interval", pick!(interval), "30s")?,
            resync: duration_or_zero("resync", "resync", pick!(resync), "10m")?,
            field_manager,
            max_prune_ratio,
            listen,
            log_format,
            allowed_namespaces: pick!(allowed_namespaces).unwrap_or_default(),
            denied_kinds: pick!(denied_kinds).unwrap_or_default(),
            health_timeout: duration("healthTimeout", "health-timeout", pick!(health_timeout), "2m")?,
            no_force: pick!(no_force).unwrap_or(false),
            apply_concurrency: match pick!(apply_concurrency).unwrap_or(8) {
                n @ 1..=64 => n,
                n => return Err(invalid("applyConcurrency", "apply-concurrency", format!("{n} is not between 1 and 64"))),
            },
            leader_election: if pick!(leader_election).unwrap_or(false) {
                let namespace = pick!(lease_namespace)
                    .or_else(|| std::env::var("POD_NAMESPACE").ok().filter(|s| !s.is_empty()))
                    .unwrap_or_else(|| "drover-system".into());
                let duration = duration("leaseDuration", "lease-duration", pick!(lease_duration), "15s")?;
                if duration < Duration::from_secs(2) {
                    return Err(invalid("leaseDuration", "lease-duration", "must be at least 2s (the leader renews every third of it)"));
                }
                Some((namespace, pick!(lease_name).unwrap_or_else(|| "drover-agent".into()), duration))
            } else {
                None
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_is_named() {
        let e = serde_yaml_ng::from_str::<FileConfig>("sourse: x\n").unwrap_err().to_string();
        assert!(e.contains("sourse"), "{e}");
    }

    #[test]
    fn flags_win_and_key_required() {
        let file = FileConfig {
            source: Some("r.example/a:prod".into()),
            target: Some("dir:/tmp/x".into()),
            state_dir: Some("/tmp/s".into()),
            interval: Some("1m".into()),
            ..Default::default()
        };
        assert!(Settings::merge(FileConfig::default(), file.clone()).is_err());
        let flags = FileConfig { trust_keys: Some(vec!["k.pub".into()]), interval: Some("5s".into()), ..Default::default() };
        let s = Settings::merge(flags, file).unwrap();
        assert_eq!(s.interval, Duration::from_secs(5));
        assert_eq!(s.target, TargetSpec::Dir("/tmp/x".into()));
    }
}
