//! Agent settings: one definition ([`ConfigLayer`]) serves the `--config` YAML file, the
//! `run` flags and their `DROVER_*` environment variables; the layers are merged (flags
//! and environment win over the file) and validated into one [`Settings`]: the agent-wide
//! settings and one [`SourceSettings`] per source. A file may list several sources
//! (`sources:`, [`file`]); its top-level values and the flags are then the defaults of
//! every entry. Without a list, the one `--source` is a single unnamed source.


use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub mod file;
pub mod layer;
pub mod source;

pub use self::file::{ConfigFile, SourceEntry, AGENT_WIDE};
pub use self::layer::{ConfigError, ConfigLayer, DriftMode, HealthChecks, LogFormat, OnDegraded, TargetSpec, DEFAULT_LISTEN};
pub use self::source::{ReportSettings, SourceSettings, DEFAULT_NAME};
use self::layer::{duration, invalid};

/// Validated, merged settings: what the whole agent shares, and its sources.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The target.
    pub target: TargetSpec,
    /// State directory (one database for every source).
    pub state_dir: PathBuf,
    /// The state directory's parent may be writable by others (`--shared-state-parent`).
    pub shared_state_parent: bool,
    /// HTTP listen address, when given (`run` defaults to [`DEFAULT_LISTEN`]; a one-shot
    /// run serves HTTP only when asked).
    pub listen: Option<SocketAddr>,
    /// Log format.
    pub log_format: LogFormat,
    /// Leader election: `(namespace, name, duration)` of the Lease, when enabled.
    pub leader_election: Option<(String, String, Duration)>,
    /// The agent's namespace (`POD_NAMESPACE`, else `drover-system`): its in-cluster
    /// state and, by default, its Lease.
    pub agent_namespace: String,
    /// The sources, in the order configured (at least one; names unique, references
    /// unique, `dependsOn` without cycles).
    pub sources: Vec<SourceSettings>,
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

impl Settings {
    /// Merges the command line layer (flags and environment, higher precedence) over
    /// the file and validates. With a `sources:` list in the file, each entry's own
    /// values win over both (flags and top-level values are the entries' defaults).
    pub fn merge(flags: ConfigLayer, file: impl Into<ConfigFile>) -> Result<Self, ConfigError> {
        let file = file.into();
        let origin = file.origin();
        let defaults = flags.over(file.layer);
        let Some(entries) = file.entries else {
            return Self::validate(defaults);
        };
        if let Some(s) = &defaults.source {
            return Err(ConfigError::Parse {
                path: origin,
                message: format!(
                    "`source` ({s}, from the file's top level, --source or DROVER_SOURCE) and a `sources:` list are both given: with a list, every source is an entry (name: and source:); remove the single one"
                ),
            });
        }
        let agent = Self::agent_wide(&defaults)?;
        let mut sources = Vec::with_capacity(entries.len());
        for e in entries {
            let layer = e.layer.clone().over(defaults.clone());
            let s = SourceSettings::validate(Some(e.name.clone()), e.depends_on.clone(), layer, &agent.target).map_err(|err| ConfigError::Entry {
                origin: origin.clone(),
                entry: e.label(),
                error: Box::new(err),
            })?;
            sources.push(s);
        }
        file::check_sources(&origin, &sources)?;
        Ok(Settings { sources, ..agent })
    }

    /// Validates one (merged) layer holding a single source (no `sources:` list): the
    /// unnamed source [`DEFAULT_NAME`].
    pub fn validate(c: ConfigLayer) -> Result<Self, ConfigError> {
        let agent = Self::agent_wide(&c)?;
        let source = SourceSettings::validate(None, Vec::new(), c, &agent.target)?;
        Ok(Settings { sources: vec![source], ..agent })
    }

    /// The agent-wide settings of `c` (no sources yet).
    fn agent_wide(c: &ConfigLayer) -> Result<Self, ConfigError> {
        let target_text = c.target.clone().ok_or_else(|| invalid("target", "target", "required: kube or dir:PATH"))?;
        let target = TargetSpec::parse(&target_text)
            .ok_or_else(|| invalid("target", "target", format!("{target_text:?} is neither kube nor dir:PATH")))?;
        let state_dir = c.state_dir.clone().ok_or_else(|| invalid("stateDir", "state-dir", "required: a directory for the agent's database"))?;
        let listen = match &c.listen {
            Some(text) => Some(text.parse().map_err(|_| invalid("listen", "listen", format!("{text:?} is not an address like {DEFAULT_LISTEN}")))?),
            None => None,
        };
        let log_format = match c.log_format.as_deref().unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(invalid("logFormat", "log-format", format!("{other:?} is neither text nor json"))),
        };
        Ok(Settings {
            target,
            state_dir,
            shared_state_parent: c.shared_state_parent.unwrap_or(false),
            listen,
            log_format,
            leader_election: lease(c.leader_election, c.lease_namespace.clone(), c.lease_name.clone(), c.lease_duration.clone())?,
            agent_namespace: agent_namespace(),
            sources: Vec::new(),
        })
    }

    /// The source named `name`; the error lists the names there are.
    pub fn source(&self, name: &str) -> Result<&SourceSettings, ConfigError> {
        self.sources.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.sources.iter().map(|s| s.name.as_str()).collect();
            invalid("sources", "source", format!("no source is named {name:?}; the configured sources are: {}", names.join(", ")))
        })
    }

    /// True when the sources come from a `sources:` list (named), false for the single
    /// unnamed `--source`.
    pub fn named(&self) -> bool {
        self.sources.iter().any(|s| s.named)
    }
}

#[cfg(test)]
mod tests;
