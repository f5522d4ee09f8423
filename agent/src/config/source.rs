//! The settings of one source: what it polls, whom it trusts, what it may change, how
//! often, and where it reports. Validated from one merged [`ConfigLayer`] (an entry of
//! `sources:` over the defaults, or the whole layer for the single unnamed source).

use std::path::PathBuf;
use std::time::Duration;

use drover_proto::Reference;

use super::layer::{duration, duration_or_zero, invalid, ConfigError, ConfigLayer, DriftMode, HealthChecks, OnDegraded, TargetSpec};
use crate::window::Windows;

/// The name of the single unnamed source (`--source` without a `sources:` list): its
/// label in `/status`, `/metrics` and `--source`.
pub const DEFAULT_NAME: &str = "default";

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

/// The validated settings of one source.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    /// Its name (`sources[].name`, 1-63 of `[a-z0-9-]`), or [`DEFAULT_NAME`].
    pub name: String,
    /// True when it comes from a `sources:` list (false: the single `--source`).
    pub named: bool,
    /// The sources whose current bundle must be applied and Healthy before this one
    /// applies a new bundle.
    pub depends_on: Vec<String>,
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
    /// Allowed namespaces (empty: all).
    pub allowed_namespaces: Vec<String>,
    /// Cluster-scoped kinds allowed despite `allowed_namespaces`.
    pub allowed_cluster_kinds: Vec<String>,
    /// Denied kinds.
    pub denied_kinds: Vec<String>,
    /// Bound of the wait stage.
    pub health_timeout: Duration,
    /// The source's own health rules (`healthChecks`), compiled; a bundle's own win.
    pub health_checks: std::sync::Arc<drover_proto::health::Rules>,
    /// What a Degraded new bundle leads to (`onDegraded`).
    pub on_degraded: OnDegraded,
    /// Kube target: bound of one API request.
    pub api_timeout: Duration,
    /// Kube target: apply without force.
    pub no_force: bool,
    /// Kube target: objects applied at once inside an order group.
    pub apply_concurrency: usize,
    /// Kube target: the service account `(namespace, name)` to impersonate.
    pub service_account: Option<(String, String)>,
    /// Fleet reporting, when on.
    pub report: Option<ReportSettings>,
}

/// True when `name` is a source name: 1-63 of `[a-z0-9-]`, starting and ending with a
/// letter or digit (it appears in labels, file names and flags).
pub fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn drift_mode(v: Option<&str>) -> Result<DriftMode, ConfigError> {
    match v.map(str::trim).unwrap_or("correct") {
        "correct" => Ok(DriftMode::Correct),
        "report" => Ok(DriftMode::Report),
        other => Err(invalid("driftMode", "drift", format!("{other:?} is neither correct nor report"))),
    }
}

fn on_degraded(v: Option<&str>) -> Result<OnDegraded, ConfigError> {
    match v.map(str::trim).unwrap_or("report") {
        "report" => Ok(OnDegraded::Report),
        "rollback" => Ok(OnDegraded::Rollback),
        other => Err(invalid("onDegraded", "on-degraded", format!("{other:?} is neither report nor rollback"))),
    }
}

/// The source's health rules, compiled (a rule that does not compile stops the agent
/// before anything is applied, naming it).
fn health_checks(v: Option<HealthChecks>) -> Result<std::sync::Arc<drover_proto::health::Rules>, ConfigError> {
    let bad = |m: String| invalid("healthChecks", "health-checks", m);
    let rules = v.map(HealthChecks::load).transpose().map_err(bad)?.unwrap_or_default();
    let compiled = drover_proto::health::Rules::compile(&rules).map_err(|e| bad(e.to_string()))?;
    Ok(std::sync::Arc::new(compiled))
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

impl SourceSettings {
    /// Validates the per-source settings of `c` for the source `name` (None: the single
    /// unnamed source) on `target`.
    pub fn validate(name: Option<String>, depends_on: Vec<String>, c: ConfigLayer, target: &TargetSpec) -> Result<Self, ConfigError> {
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
        let max_prune_ratio = c.max_prune_ratio.unwrap_or(0.5);
        if !(0.0..=1.0).contains(&max_prune_ratio) {
            return Err(invalid("maxPruneRatio", "max-prune-ratio", format!("{max_prune_ratio} is not between 0 and 1")));
        }
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
        let interval = duration("interval", "interval", c.interval, "30s")?;
        let apply_windows = Windows::parse(c.apply_windows.as_deref().unwrap_or_default())
            .and_then(|w| w.polled_every(interval).map(|_| w))
            .map_err(|m| invalid("applyWindows", "apply-window", m))?;
        Ok(SourceSettings {
            named: name.is_some(),
            name: name.unwrap_or_else(|| DEFAULT_NAME.into()),
            depends_on,
            source,
            reference,
            plain_http: c.plain_http.unwrap_or(false),
            ca_file: c.ca_file,
            trust_keys,
            threshold,
            insecure_skip_verify,
            expect_cluster_type: c.expect_cluster_type,
            expect_environment: c.expect_environment,
            interval,
            resync: duration_or_zero("resync", "resync", c.resync, "10m")?,
            drift_mode: drift_mode(c.drift_mode.as_deref())?,
            apply_windows,
            field_manager,
            max_prune_ratio,
            allowed_namespaces,
            allowed_cluster_kinds,
            denied_kinds: c.denied_kinds.unwrap_or_default(),
            health_timeout: duration_or_zero("healthTimeout", "health-timeout", c.health_timeout, "2m")?,
            health_checks: health_checks(c.health_checks)?,
            on_degraded: on_degraded(c.on_degraded.as_deref())?,
            api_timeout: duration("apiTimeout", "api-timeout", c.api_timeout, "30s")?,
            no_force: c.no_force.unwrap_or(false),
            apply_concurrency: match c.apply_concurrency.unwrap_or(8) {
                n @ 1..=64 => n,
                n => return Err(invalid("applyConcurrency", "apply-concurrency", format!("{n} is not between 1 and 64"))),
            },
            service_account: service_account(c.service_account, target)?,
            report,
        })
    }

    /// How logs, Events and messages name this source: `source NAME (REFERENCE)` when
    /// named, else the reference.
    pub fn describe(&self) -> String {
        if self.named {
            format!("source {} ({})", self.name, self.source)
        } else {
            self.source.clone()
        }
    }
}
