//! Agent settings: one definition ([`ConfigLayer`]) serves the `--config` YAML file, the
//! `run` flags and their `DROVER_*` environment variables; the layers are merged (flags
//! and environment win over the file) and validated into one [`Settings`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drover_proto::Reference;

use crate::window::{WindowSpec, Windows};
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
    /// Distinct trusted keys that must have signed (default 1).
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
    /// Poll interval (jittered), e.g. 30s.
    #[arg(long, env = "DROVER_INTERVAL")]
    pub interval: Option<String>,
    /// Re-apply an unchanged bundle this often (drift correction), e.g. 10m.
    #[arg(long, env = "DROVER_RESYNC")]
    pub resync: Option<String>,
    /// What a resync does about drift: `correct` (re-apply, the default) or `report` (record
    /// the drifted objects and fields in status, change nothing).
    #[arg(long = "drift", value_name = "MODE", env = "DROVER_DRIFT")]
    pub drift_mode: Option<String>,
    /// Apply window `SCHEDULE;DURATION[;TIME_ZONE]` (cron, e.g. "0 22 * * 1-5;6h;Europe/Berlin"):
    /// with windows, a new bundle is applied only inside one; repeatable (in the
    /// environment: separated by `|`).
    #[arg(long = "apply-window", value_name = "SCHEDULE;DURATION[;TIME_ZONE]", env = "DROVER_APPLY_WINDOW", value_delimiter = '|')]
    pub apply_windows: Option<Vec<WindowSpec>>,
    /// Server-side apply field manager.
    #[arg(long, env = "DROVER_FIELD_MANAGER")]
    pub field_manager: Option<String>,
    /// Refuse to prune more than this fraction of the inventory (unless the bundle opts in).
    #[arg(long, env = "DROVER_MAX_PRUNE_RATIO")]
    pub max_prune_ratio: Option<f64>,
    /// Address of the HTTP server (/healthz /readyz /status /metrics); default
    /// 127.0.0.1:9464, and none for `run --once` unless given.
    #[arg(long, env = "DROVER_LISTEN")]
    pub listen: Option<String>,
    /// Log format: text or json.
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
    /// Bound of the health wait after an apply, e.g. 2m.
    #[arg(long, env = "DROVER_HEALTH_TIMEOUT")]
    pub health_timeout: Option<String>,
    /// kube target: bound of one API request, e.g. 30s; no answer by then is a
    /// transient error (retried, then the attempt fails).
    #[arg(long, env = "DROVER_API_TIMEOUT")]
    pub api_timeout: Option<String>,
    /// kube target: do not force-take fields owned by other managers.
    #[arg(long, env = "DROVER_NO_FORCE", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub no_force: Option<bool>,
    /// kube target: impersonate this service account (NAMESPACE/NAME) for every request
    /// about the bundle's objects; the API server's RBAC decides what bundles may change.
    #[arg(long, env = "DROVER_SERVICE_ACCOUNT", value_name = "NAMESPACE/NAME")]
    pub service_account: Option<String>,
    /// kube target: objects applied at once inside an order group (default 8).
    #[arg(long, env = "DROVER_APPLY_CONCURRENCY")]
    pub apply_concurrency: Option<usize>,
    /// Elect one agent per cluster with a coordination.k8s.io Lease; the others stand by.
    #[arg(long, env = "DROVER_LEADER_ELECTION", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub leader_election: Option<bool>,
    /// Namespace of the Lease (default: POD_NAMESPACE, else drover-system).
    #[arg(long, env = "DROVER_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the Lease (default drover-agent).
    #[arg(long, env = "DROVER_LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Lease duration, e.g. 15s (the leader renews every third of it).
    #[arg(long, env = "DROVER_LEASE_DURATION")]
    pub lease_duration: Option<String>,
    /// This cluster's name in fleet reports (unique within its cluster type); reporting is
    /// on when it is set.
    #[arg(long, env = "DROVER_CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// Reports repository: HOST/REPO or oci:DIR (default: <parent of the source repository>/drover-reports).
    #[arg(long, env = "DROVER_REPORT_TO")]
    pub report_to: Option<String>,
    /// Heartbeat: write the report at least this often, e.g. 5m (changes are written at once).
    #[arg(long, env = "DROVER_REPORT_INTERVAL")]
    pub report_interval: Option<String>,
    /// Docker config file with the credentials for the reports repository (push rights only).
    #[arg(long, env = "DROVER_REPORT_DOCKER_CONFIG")]
    pub report_docker_config: Option<PathBuf>,
    /// Write no fleet reports even when a cluster name is set.
    #[arg(long, env = "DROVER_NO_REPORT", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub no_report: Option<bool>,
}

impl ConfigLayer {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.display().to_string(), message: e.to_string() })?;
        if text.trim().is_empty() {
            return Ok(ConfigLayer::default());
        }
        serde_yaml_ng::from_str(&text).map_err(|e| ConfigError::Parse { path: path.display().to_string(), message: e.to_string() })
    }

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
    fn parse(s: &str) -> Option<Self> {
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

fn drift_mode(v: Option<&str>) -> Result<DriftMode, ConfigError> {
    match v.map(str::trim).unwrap_or("correct") {
        "correct" => Ok(DriftMode::Correct),
        "report" => Ok(DriftMode::Report),
        other => Err(invalid("driftMode", "drift", format!("{other:?} is neither correct nor report"))),
    }
}

/// Fleet reporting (docs/fleet.md), when on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSettings {
    /// This cluster's name.
    pub cluster_name: String,
    /// Its cluster type (`--expect-cluster-type`).
    pub cluster_type: String,
    /// Its environment (`--expect-environment`).
    pub environment: String,
    /// The channel followed: the source's tag (or digest).
    pub channel: String,
    /// The reports repository (no tag).
    pub to: Reference,
    /// Heartbeat interval.
    pub interval: Duration,
    /// Docker config with the reports repository's credentials.
    pub docker_config: Option<PathBuf>,
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
    /// The state directory's parent may be writable by others (`--shared-state-parent`).
    pub shared_state_parent: bool,
    /// Poll interval (jittered).
    pub interval: Duration,
    /// Re-apply interval of an unchanged bundle (drift correction).
    pub resync: Duration,
    /// What a resync does about drift.
    pub drift_mode: DriftMode,
    /// When new bundles may be applied (empty: any time).
    pub apply_windows: Windows,
    /// SSA field manager.
    pub field_manager: String,
    /// Prune safety valve.
    pub max_prune_ratio: f64,
    /// HTTP listen address, when given (`run` defaults to [`DEFAULT_LISTEN`]; a one-shot
    /// run serves HTTP only when asked).
    pub listen: Option<SocketAddr>,
    /// Log format.
    pub log_format: LogFormat,
    /// Allowed namespaces (empty: all).
    pub allowed_namespaces: Vec<String>,
    /// Cluster-scoped kinds allowed despite `allowed_namespaces`.
    pub allowed_cluster_kinds: Vec<String>,
    /// Denied kinds.
    pub denied_kinds: Vec<String>,
    /// Bound of the wait stage.
    pub health_timeout: Duration,
    /// Kube target: bound of one API request.
    pub api_timeout: Duration,
    /// Kube target: apply without force.
    pub no_force: bool,
    /// Kube target: objects applied at once inside an order group.
    pub apply_concurrency: usize,
    /// Leader election: `(namespace, name, duration)` of the Lease, when enabled.
    pub leader_election: Option<(String, String, Duration)>,
    /// Kube target: the service account `(namespace, name)` to impersonate.
    pub service_account: Option<(String, String)>,
    /// The agent's namespace (`POD_NAMESPACE`, else `drover-system`): its in-cluster
    /// state and, by default, its Lease.
    pub agent_namespace: String,
    /// Fleet reporting, when on.
    pub report: Option<ReportSettings>,
}

/// The agent's namespace: `POD_NAMESPACE`, else `drover-system`.
pub fn agent_namespace() -> String {
    std::env::var("POD_NAMESPACE").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "drover-system".into())
}

/// This agent's name in the cluster (its Lease identity, its Events' reporting instance):
/// `POD_NAME` (the DaemonSet sets it), else the host name, else `drover-agent`.
pub fn pod_name() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "drover-agent".into())
}

/// `--service-account NAMESPACE/NAME`.
fn service_account(v: Option<String>, target: &TargetSpec) -> Result<Option<(String, String)>, ConfigError> {
    let Some(text) = v else { return Ok(None) };
    let bad = |m: String| invalid("serviceAccount", "service-account", m);
    if *target != TargetSpec::Kube {
        return Err(bad("only the kube target impersonates a service account".into()));
    }
    let label = |s: &str, max: usize| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    match text.split_once('/') {
        Some((ns, name)) if label(ns, 63) && !ns.contains('.') && label(name, 253) => Ok(Some((ns.into(), name.into()))),
        _ => Err(bad(format!("{text:?} is not NAMESPACE/NAME of a service account, e.g. team-a/deployer"))),
    }
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

/// `--leader-election`: the Lease's `(namespace, name, duration)`, when enabled.
fn lease(
    enabled: Option<bool>,
    namespace: Option<String>,
    name: Option<String>,
    duration_text: Option<String>,
) -> Result<Option<(String, String, Duration)>, ConfigError> {
    if !enabled.unwrap_or(false) {
        return Ok(None);
    }
    let namespace = namespace.unwrap_or_else(agent_namespace);
    let duration = duration("leaseDuration", "lease-duration", duration_text, "15s")?;
    if duration < Duration::from_secs(2) {
        return Err(invalid("leaseDuration", "lease-duration", "must be at least 2s (the leader renews every third of it)"));
    }
    Ok(Some((namespace, name.unwrap_or_else(|| "drover-agent".into()), duration)))
}

/// The channel a source follows: its tag, else its digest.
fn channel_of(reference: &Reference) -> String {
    let name = match reference {
        Reference::Registry(r) => r.tag.clone().or_else(|| r.digest.clone()),
        Reference::Layout { name, .. } | Reference::Archive { name, .. } => name.clone(),
    };
    let name = name.unwrap_or_default();
    if drover_proto::digest::is_valid_digest(&name) {
        return name;
    }
    name.rsplit(':').next().unwrap_or_default().to_string()
}

/// Fleet reporting: on with a cluster name unless `--no-report`; needs the expected
/// cluster type and environment (they name the report) and a reports repository.
fn report(c: &ConfigLayer, reference: &Reference) -> Result<Option<ReportSettings>, ConfigError> {
    if c.no_report.unwrap_or(false) {
        return Ok(None);
    }
    let Some(cluster_name) = c.cluster_name.clone() else {
        if c.report_to.is_some() {
            return Err(invalid("clusterName", "cluster-name", "--report-to is set but there is no --cluster-name: reports are named after the cluster"));
        }
        return Ok(None);
    };
    drover_proto::report::check_cluster_name(&cluster_name).map_err(|e| invalid("clusterName", "cluster-name", e))?;
    let need = |v: &Option<String>, field, flag| {
        v.clone().ok_or_else(|| invalid(field, flag, "required for fleet reports (--cluster-name is set): the report names the cluster type and environment; or pass --no-report"))
    };
    let cluster_type = need(&c.expect_cluster_type, "expectClusterType", "expect-cluster-type")?;
    drover_proto::report::check_cluster_type(&cluster_type).map_err(|e| invalid("expectClusterType", "expect-cluster-type", e))?;
    let environment = need(&c.expect_environment, "expectEnvironment", "expect-environment")?;
    let to = match (&c.report_to, reference) {
        (Some(text), _) => {
            let to = Reference::parse(text).map_err(|e| invalid("reportTo", "report-to", e.to_string()))?;
            match &to {
                Reference::Registry(r) if r.lookup().is_some() => {
                    return Err(invalid("reportTo", "report-to", format!("{text} names a tag or digest; give the repository only, e.g. {}", r.repository_url())))
                }
                Reference::Archive { .. } => return Err(invalid("reportTo", "report-to", "an oci-archive cannot be written; give HOST/REPO or oci:DIR")),
                _ => to,
            }
        }
        (None, Reference::Registry(r)) => Reference::Registry(drover_proto::report::default_repository(r)),
        (None, _) => {
            return Err(invalid("reportTo", "report-to", "the source is not in a registry, so there is no default reports repository: give --report-to HOST/REPO or oci:DIR, or --no-report"))
        }
    };
    Ok(Some(ReportSettings {
        cluster_name,
        cluster_type,
        environment,
        channel: channel_of(reference),
        to,
        interval: duration("reportInterval", "report-interval", c.report_interval.clone(), "5m")?,
        docker_config: c.report_docker_config.clone(),
    }))
}

impl Settings {
    /// Merges the command line layer (flags and environment, higher precedence) over
    /// the file layer and validates.
    pub fn merge(flags: ConfigLayer, file: ConfigLayer) -> Result<Self, ConfigError> {
        Self::validate(flags.over(file))
    }

    /// Validates one (merged) layer: required settings, ranges, defaults.
    pub fn validate(c: ConfigLayer) -> Result<Self, ConfigError> {
        let source = c.source.clone().ok_or_else(|| invalid("source", "source", "required: the bundle reference to poll, e.g. registry.example/fleet/edge:prod"))?;
        let reference = Reference::parse(&source).map_err(|e| invalid("source", "source", e.to_string()))?;
        if let Reference::Registry(r) = &reference {
            if r.lookup().is_none() {
                return Err(invalid("source", "source", format!("{source} has no tag or digest; add the channel tag, e.g. {source}:prod")));
            }
        }
        let report = report(&c, &reference)?;
        let trust_keys = c.trust_keys.unwrap_or_default();
        let insecure_skip_verify = c.insecure_skip_verify.unwrap_or(false);
        if trust_keys.is_empty() && !insecure_skip_verify {
            return Err(invalid(
                "trustKeys",
                "trust-key",
                "no trusted public key: give --trust-key drover.pub (repeatable); to run without verification pass --insecure-skip-verify (never in production)",
            ));
        }
        let threshold = c.threshold.unwrap_or(1);
        if !insecure_skip_verify && (threshold == 0 || threshold > trust_keys.len()) {
            return Err(invalid("threshold", "threshold", format!("must be between 1 and the number of trust keys ({})", trust_keys.len())));
        }
        let target_text = c.target.ok_or_else(|| invalid("target", "target", "required: kube or dir:PATH"))?;
        let target = TargetSpec::parse(&target_text)
            .ok_or_else(|| invalid("target", "target", format!("{target_text:?} is neither kube nor dir:PATH")))?;
        let state_dir = c.state_dir.ok_or_else(|| invalid("stateDir", "state-dir", "required: a directory for the agent's database"))?;
        let max_prune_ratio = c.max_prune_ratio.unwrap_or(0.5);
        if !(0.0..=1.0).contains(&max_prune_ratio) {
            return Err(invalid("maxPruneRatio", "max-prune-ratio", format!("{max_prune_ratio} is not between 0 and 1")));
        }
        let listen = match c.listen {
            Some(text) => Some(text.parse().map_err(|_| invalid("listen", "listen", format!("{text:?} is not an address like {DEFAULT_LISTEN}")))?),
            None => None,
        };
        let log_format = match c.log_format.as_deref().unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(invalid("logFormat", "log-format", format!("{other:?} is neither text nor json"))),
        };
        let allowed_namespaces = c.allowed_namespaces.unwrap_or_default();
        let allowed_cluster_kinds = c.allowed_cluster_kinds.unwrap_or_default();
        if !allowed_cluster_kinds.is_empty() && allowed_namespaces.is_empty() {
            return Err(invalid(
                "allowedClusterKinds",
                "allow-cluster-kind",
                "only means something with --allow-namespace (without an allow list every kind is allowed); add --allow-namespace or drop it",
            ));
        }
        let field_manager = c.field_manager.unwrap_or_else(|| "drover".into());
        if field_manager.is_empty() {
            return Err(invalid("fieldManager", "field-manager", "must not be empty"));
        }
        let service_account = service_account(c.service_account, &target)?;
        let drift_mode = drift_mode(c.drift_mode.as_deref())?;
        let interval = duration("interval", "interval", c.interval, "30s")?;
        let apply_windows = Windows::parse(c.apply_windows.as_deref().unwrap_or_default())
            .and_then(|w| w.polled_every(interval).map(|_| w))
            .map_err(|m| invalid("applyWindows", "apply-window", m))?;
        Ok(Settings {
            source,
            reference,
            plain_http: c.plain_http.unwrap_or(false),
            ca_file: c.ca_file,
            trust_keys,
            threshold,
            insecure_skip_verify,
            expect_cluster_type: c.expect_cluster_type,
            expect_environment: c.expect_environment,
            target,
            state_dir,
            shared_state_parent: c.shared_state_parent.unwrap_or(false),
            interval,
            resync: duration_or_zero("resync", "resync", c.resync, "10m")?,
            drift_mode,
            apply_windows,
            field_manager,
            max_prune_ratio,
            listen,
            log_format,
            allowed_namespaces,
            allowed_cluster_kinds,
            denied_kinds: c.denied_kinds.unwrap_or_default(),
            health_timeout: duration("healthTimeout", "health-timeout", c.health_timeout, "2m")?,
            api_timeout: duration("apiTimeout", "api-timeout", c.api_timeout, "30s")?,
            no_force: c.no_force.unwrap_or(false),
            apply_concurrency: match c.apply_concurrency.unwrap_or(8) {
                n @ 1..=64 => n,
                n => return Err(invalid("applyConcurrency", "apply-concurrency", format!("{n} is not between 1 and 64"))),
            },
            leader_election: lease(c.leader_election, c.lease_namespace, c.lease_name, c.lease_duration)?,
            service_account,
            agent_namespace: agent_namespace(),
            report,
        })
    }
}

#[cfg(test)]
mod tests;
