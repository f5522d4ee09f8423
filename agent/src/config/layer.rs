//! One layer of settings ([`ConfigLayer`]: the file's top level, a `sources:` entry, or the
//! flags and environment), the errors settings are refused with, and the value types and
//! checks every part of the configuration shares.

use std::path::PathBuf;
use std::time::Duration;

use crate::window::WindowSpec;
use clap::builder::BoolishValueParser;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// One entry of `sources:` is unusable.
    #[error("{origin}: {entry}: {error}")]
    Entry {
        /// `config file PATH` (or `flags` when no file names the entry).
        origin: String,
        /// `sources[INDEX] (NAME)`.
        entry: String,
        /// What is wrong with it.
        error: Box<ConfigError>,
    },
}

/// One layer of settings, defined once for all three ways to give them: the `--config`
/// YAML file (camelCase fields, unknown fields are errors), the `run` flags and their
/// `DROVER_*` environment variables (clap: a flag wins over its variable). Every field is
/// optional; [`ConfigLayer::over`] merges two layers field by field and
/// [`Settings::validate`] checks the result. Lists take comma-separated values from the
/// environment.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigLayer {
    /// Bundle reference to poll: HOST/REPO:TAG, oci:DIR:REF or oci-archive:FILE:REF.
    #[arg(long, env = "DROVER_SOURCE")]
    pub source: Option<String>,
    /// Talk plain HTTP to the registry.
    #[arg(long, env = "DROVER_PLAIN_HTTP", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub plain_http: Option<bool>,
    /// Extra CA certificate (PEM) for the registry.
    #[arg(long, env = "DROVER_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Trusted public key (PEM); repeat for several keys (rotation, two-party release).
    #[arg(long = "trust-key", value_name = "TRUST_KEY", env = "DROVER_TRUST_KEY", value_delimiter = ',')]
    pub trust_keys: Option<Vec<PathBuf>>,
    /// Distinct trusted keys that must have signed [default: 1].
    #[arg(long, env = "DROVER_THRESHOLD")]
    pub threshold: Option<usize>,
    /// Apply bundles WITHOUT checking signatures. Only for trying drover out.
    #[arg(long, env = "DROVER_INSECURE_SKIP_VERIFY", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub insecure_skip_verify: Option<bool>,
    /// Refuse bundles whose signed config has another clusterType.
    #[arg(long, env = "DROVER_EXPECT_CLUSTER_TYPE")]
    pub expect_cluster_type: Option<String>,
    /// Refuse bundles whose signed config has another environment.
    #[arg(long, env = "DROVER_EXPECT_ENVIRONMENT")]
    pub expect_environment: Option<String>,
    /// Where to apply: kube or dir:PATH.
    #[arg(long, env = "DROVER_TARGET")]
    pub target: Option<String>,
    /// Directory of the agent's database (the agent's own: created 0700; refused when
    /// another user owns it or may write it or a directory on the way to it).
    #[arg(long, env = "DROVER_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// The state directory's parent is a volume only this pod sees, writable by others by
    /// its mode (a Kubernetes emptyDir: root-owned, 0777): accept that one directory.
    #[arg(long, env = "DROVER_SHARED_STATE_PARENT", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub shared_state_parent: Option<bool>,
    /// Poll interval (jittered), e.g. 1m [default: 30s].
    #[arg(long, env = "DROVER_INTERVAL")]
    pub interval: Option<String>,
    /// Re-apply an unchanged bundle this often (drift correction), e.g. 1h; 0s: on every
    /// poll [default: 10m].
    #[arg(long, env = "DROVER_RESYNC")]
    pub resync: Option<String>,
    /// What a resync does about drift: `correct` (re-apply) or `report` (record the drifted
    /// objects and fields in status, change nothing) [default: correct].
    #[arg(long = "drift", value_name = "MODE", env = "DROVER_DRIFT")]
    pub drift_mode: Option<String>,
    /// Apply window `SCHEDULE;DURATION[;TIME_ZONE]` (cron, e.g. "0 22 * * 1-5;6h;Europe/Berlin"):
    /// with windows, a new bundle is applied only inside one; repeatable (in the
    /// environment: separated by `|`).
    #[arg(long = "apply-window", value_name = "SCHEDULE;DURATION[;TIME_ZONE]", env = "DROVER_APPLY_WINDOW", value_delimiter = '|')]
    pub apply_windows: Option<Vec<WindowSpec>>,
    /// Server-side apply field manager [default: drover].
    #[arg(long, env = "DROVER_FIELD_MANAGER")]
    pub field_manager: Option<String>,
    /// Refuse to prune more than this fraction of the inventory (unless the bundle opts in)
    /// [default: 0.5].
    #[arg(long, env = "DROVER_MAX_PRUNE_RATIO")]
    pub max_prune_ratio: Option<f64>,
    /// Address of the HTTP server (/healthz /readyz /status /metrics); default
    /// 127.0.0.1:9464, and none for `run --once` unless given.
    #[arg(long, env = "DROVER_LISTEN")]
    pub listen: Option<String>,
    /// Log format: text or json [default: text].
    #[arg(long, env = "DROVER_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Allowed namespace for namespaced objects; repeatable (default: all).
    #[arg(long = "allow-namespace", value_name = "ALLOW_NAMESPACE", env = "DROVER_ALLOW_NAMESPACE", value_delimiter = ',')]
    pub allowed_namespaces: Option<Vec<String>>,
    /// Cluster-scoped kind allowed despite --allow-namespace (which refuses cluster-scoped objects); repeatable.
    #[arg(long = "allow-cluster-kind", value_name = "ALLOW_CLUSTER_KIND", env = "DROVER_ALLOW_CLUSTER_KIND", value_delimiter = ',')]
    pub allowed_cluster_kinds: Option<Vec<String>>,
    /// Kind that bundles may not contain; repeatable.
    #[arg(long = "deny-kind", value_name = "DENY_KIND", env = "DROVER_DENY_KIND", value_delimiter = ',')]
    pub denied_kinds: Option<Vec<String>>,
    /// Bound of the health wait after an apply, e.g. 5m (0s: sample once, not-ready
    /// objects are Progressing) [default: 2m].
    #[arg(long, env = "DROVER_HEALTH_TIMEOUT")]
    pub health_timeout: Option<String>,
    /// Health rules in CEL for kinds installed outside drover: a YAML file with a list of
    /// {apiVersion, kind, current, failed?, inProgress?} (config: the list itself, or the
    /// file); a bundle's own rule wins for its kind (docs/kubernetes.md, "Health rules").
    #[arg(long = "health-checks", value_name = "FILE", env = "DROVER_HEALTH_CHECKS", value_parser = HealthChecks::from_flag)]
    pub health_checks: Option<HealthChecks>,
    /// What to do when a new bundle is Degraded at the end of the health timeout: `report`
    /// [default] or `rollback` (re-apply the last bundle that was Healthy here;
    /// docs/agent.md, "Rollback").
    #[arg(long = "on-degraded", value_name = "ACTION", env = "DROVER_ON_DEGRADED")]
    pub on_degraded: Option<String>,
    /// kube target: bound of one API request, e.g. 1m; no answer by then is a transient
    /// error (retried, then the attempt fails) [default: 30s].
    #[arg(long, env = "DROVER_API_TIMEOUT")]
    pub api_timeout: Option<String>,
    /// kube target: do not force-take fields owned by other managers.
    #[arg(long, env = "DROVER_NO_FORCE", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub no_force: Option<bool>,
    /// kube target: impersonate this service account (NAMESPACE/NAME) for every request
    /// about the bundle's objects; the API server's RBAC decides what bundles may change.
    #[arg(long, env = "DROVER_SERVICE_ACCOUNT", value_name = "NAMESPACE/NAME")]
    pub service_account: Option<String>,
    /// kube target: objects applied at once inside an order group, 1 to 64 [default: 8].
    #[arg(long, env = "DROVER_APPLY_CONCURRENCY")]
    pub apply_concurrency: Option<usize>,
    /// Elect one agent per cluster with a coordination.k8s.io Lease; the others stand by.
    #[arg(long, env = "DROVER_LEADER_ELECTION", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub leader_election: Option<bool>,
    /// Namespace of the Lease (default: POD_NAMESPACE, else drover-system).
    #[arg(long, env = "DROVER_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the Lease [default: drover-agent].
    #[arg(long, env = "DROVER_LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Lease duration, at least 2s (the leader renews every third of it) [default: 15s].
    #[arg(long, env = "DROVER_LEASE_DURATION")]
    pub lease_duration: Option<String>,
    /// This cluster's name in fleet reports (unique within its cluster type); reporting is
    /// on when it is set.
    #[arg(long, env = "DROVER_CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// Reports repository: HOST/REPO or oci:DIR (default: <parent of the source repository>/drover-reports).
    #[arg(long, env = "DROVER_REPORT_TO")]
    pub report_to: Option<String>,
    /// Heartbeat: write the report at least this often, e.g. 15m (changes are written at
    /// once) [default: 5m].
    #[arg(long, env = "DROVER_REPORT_INTERVAL")]
    pub report_interval: Option<String>,
    /// Docker config file with the credentials for the reports repository (push rights only).
    #[arg(long, env = "DROVER_REPORT_DOCKER_CONFIG")]
    pub report_docker_config: Option<PathBuf>,
    /// Write no fleet reports even when a cluster name is set.
    #[arg(long, env = "DROVER_NO_REPORT", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub no_report: Option<bool>,
    /// The config file's `sources:` list as written (file only; [`ConfigFile::load`] reads
    /// each entry).
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    pub sources: Option<Vec<serde_yaml_ng::Value>>,
}

impl ConfigLayer {
    /// This layer over `lower`: every field set here wins, the others come from `lower`.
    pub fn over(self, lower: ConfigLayer) -> ConfigLayer {
        let (Ok(Value::Object(upper)), Ok(Value::Object(mut merged))) = (serde_json::to_value(self), serde_json::to_value(lower)) else {
            unreachable!("a ConfigLayer serializes to a JSON object")
        };
        merged.extend(upper.into_iter().filter(|(_, v)| !v.is_null()));
        serde_json::from_value(Value::Object(merged)).expect("merged layers have the layer's own fields")
    }
}

/// Where a long-running agent serves HTTP when `--listen` is not given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

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
    /// `kube` or `dir:PATH`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "kube" => Some(TargetSpec::Kube),
            _ => s.strip_prefix("dir:").filter(|p| !p.is_empty()).map(|p| TargetSpec::Dir(PathBuf::from(p))),
        }
    }
}

/// What a resync of the applied bundle does about objects that drifted from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DriftMode {
    /// Re-apply them (the default).
    #[default]
    Correct,
    /// Record them (object and fields) and leave them as they are.
    Report,
}

/// `healthChecks`: the rules themselves (config file), or a YAML file holding them (the
/// flag, or a string in the config file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub enum HealthChecks {
    /// The rules.
    List(Vec<drover_proto::health::HealthRule>),
    /// A file with a YAML list of rules.
    File(PathBuf),
}

impl HealthChecks {
    fn from_flag(s: &str) -> Result<HealthChecks, String> {
        Ok(HealthChecks::File(PathBuf::from(s)))
    }

    /// The rules, read from the file when given one.
    pub(super) fn load(self) -> Result<Vec<drover_proto::health::HealthRule>, String> {
        match self {
            HealthChecks::List(rules) => Ok(rules),
            HealthChecks::File(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                drover_proto::health::parse_yaml(&text, &path.display().to_string())
            }
        }
    }
}

impl TryFrom<Value> for HealthChecks {
    type Error = String;

    fn try_from(v: Value) -> Result<Self, String> {
        match v {
            Value::String(path) => Ok(HealthChecks::File(PathBuf::from(path))),
            other => drover_proto::health::from_value(other, "healthChecks").map(HealthChecks::List),
        }
    }
}

impl From<HealthChecks> for Value {
    fn from(h: HealthChecks) -> Value {
        match h {
            HealthChecks::List(rules) => serde_json::to_value(rules).expect("rules serialize"),
            HealthChecks::File(path) => Value::String(path.display().to_string()),
        }
    }
}

/// What the agent does when a new bundle is Degraded at the end of its health wait.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnDegraded {
    /// Report it (status, history, metrics, report), keep it applied (the default).
    #[default]
    Report,
    /// Re-apply the last bundle that was Healthy on this cluster ([`crate::pipeline`]).
    Rollback,
}

pub(super) fn invalid(field: &'static str, flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field, flag, message: message.into() }
}

pub(super) fn duration(field: &'static str, flag: &'static str, v: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    let text = v.unwrap_or_else(|| default.to_string());
    let d = humantime::parse_duration(&text).map_err(|e| invalid(field, flag, format!("{text:?} is not a duration like 30s or 10m: {e}")))?;
    if d.is_zero() {
        return Err(invalid(field, flag, "must be greater than zero"));
    }
    Ok(d)
}

/// Like [`duration`], but zero is allowed (`--resync 0s`: re-apply on every poll).
pub(super) fn duration_or_zero(field: &'static str, flag: &'static str, v: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    match v.as_deref().map(str::trim) {
        Some("0") | Some("0s") => Ok(Duration::ZERO),
        _ => duration(field, flag, v, default),
    }
}
