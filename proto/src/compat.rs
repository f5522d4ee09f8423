//! Which agent a bundle needs (docs/bundle.md, "Compatibility"): the one table of the
//! bundle config's top-level fields, the agent version that first understands each, and
//! whether an older agent may ignore it; the bundler stamps `minAgentVersion` from it
//! ([`stamp`]), the agent refuses a bundle it is too old for ([`check`]), and every reader
//! parses a config by it ([`prepare`]).
//!
//! The format rule, from 0.2.0 on:
//!
//! - a field an older agent must understand (it changes what is applied, or how health is
//!   judged) raises `minAgentVersion` to the version that introduced it; such a config is
//!   refused by older agents with reason `agent-too-old`, naming both versions;
//! - a field an older agent may ignore (provenance, notes) is listed by name in the
//!   config's `ignorable` list and does not raise `minAgentVersion`; an agent that does
//!   not know it drops it and reads the rest strictly;
//! - every other unknown field is an error (the config stays strict).
//!
//! `minAgentVersion` is written only when a field needs more than [`BASELINE`] (or the
//! publisher asks for more): agents from before 0.2.0 parse strictly and refuse any
//! unknown field, `minAgentVersion` included, with a parse error — that is the last time.

pub use semver::Version;
use serde_json::{Map, Value};

/// The version every agent has: a config that needs no more carries no `minAgentVersion`.
pub const BASELINE: &str = "0.1.0";
/// This build's version (the agent's, the bundler's: one workspace version).
pub const THIS: &str = env!("CARGO_PKG_VERSION");

/// What an agent that does not know a field may do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// It must understand it: the field raises `minAgentVersion`.
    Required,
    /// It may drop it (listed in the config's `ignorable`).
    Ignorable,
}

/// Every top-level field of the bundle config: name, the first agent version that
/// understands it, and its kind (docs/bundle.md prints this table).
pub const FIELDS: &[(&str, &str, FieldKind)] = &[
    ("schemaVersion", "0.1.0", FieldKind::Required),
    ("clusterType", "0.1.0", FieldKind::Required),
    ("environment", "0.1.0", FieldKind::Required),
    ("sequence", "0.1.0", FieldKind::Required),
    ("source", "0.1.0", FieldKind::Required),
    ("allowMassPrune", "0.1.0", FieldKind::Required),
    ("workloads", "0.1.0", FieldKind::Required),
    ("objects", "0.1.0", FieldKind::Required),
    ("minAgentVersion", "0.2.0", FieldKind::Required),
    ("ignorable", "0.2.0", FieldKind::Required),
    ("healthChecks", "0.2.0", FieldKind::Required),
];

/// Parses a version (`MAJOR.MINOR.PATCH`), naming `what` when it is not one.
pub fn parse(text: &str, what: &str) -> Result<Version, String> {
    Version::parse(text.trim()).map_err(|_| format!("{what} {text:?} is not a version like 0.2.0 (MAJOR.MINOR.PATCH)"))
}

fn version(text: &str) -> Version {
    Version::parse(text).expect("the table's versions parse")
}

/// This build's version.
pub fn this() -> Version {
    version(THIS)
}

/// The lowest agent version that understands every field present in `config` (a config
/// as JSON), not counting `minAgentVersion` itself.
pub fn needed(config: &Map<String, Value>) -> Version {
    let mut need = version(BASELINE);
    for key in config.keys().filter(|k| k.as_str() != "minAgentVersion") {
        if let Some((_, since, FieldKind::Required)) = FIELDS.iter().find(|(name, _, _)| name == key) {
            need = need.max(version(since));
        }
    }
    need
}

/// The `minAgentVersion` to write into `config` (as JSON): the version its fields need,
/// raised to `raise` when given (`--min-agent-version`); `None` when that is
/// [`BASELINE`] and nothing was asked (every agent reads it, older ones included).
pub fn stamp(config: &Map<String, Value>, raise: Option<&Version>) -> Option<String> {
    let need = needed(config);
    let asked = raise.cloned().unwrap_or_else(|| version(BASELINE));
    let min = need.max(asked);
    if min <= version(BASELINE) {
        return None;
    }
    // The field itself needs an agent that knows it.
    Some(min.max(version("0.2.0")).to_string())
}

/// A config read for this build: `minAgentVersion` parsed, unknown fields an older
/// writer marked `ignorable` dropped. When the config needs a newer agent than this
/// build, every unknown field is dropped (the reader learns the version and decides: the
/// agent refuses with `agent-too-old`); otherwise unknown fields stay (and the strict
/// parse names them).
pub fn prepare(raw: &mut Map<String, Value>) -> Result<Option<Version>, String> {
    let min = match raw.get("minAgentVersion") {
        None => None,
        Some(Value::String(s)) => Some(parse(s, "minAgentVersion")?),
        Some(other) => return Err(format!("minAgentVersion {other} is not a version string like \"0.2.0\"")),
    };
    let known = |k: &str| FIELDS.iter().any(|(name, _, _)| *name == k);
    if min.as_ref().is_some_and(|m| *m > this()) {
        raw.retain(|k, _| known(k));
        return Ok(min);
    }
    let ignorable: Vec<String> = match raw.get("ignorable") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(_) => return Err("ignorable is not a list of field names".into()),
    };
    raw.retain(|k, _| known(k) || !ignorable.iter().any(|i| i == k));
    Ok(min)
}

/// Refuses a config that needs a newer agent than `agent`: the message names both
/// versions and what to do.
pub fn check(min_agent_version: Option<&str>, agent: &str) -> Result<(), String> {
    let Some(min) = min_agent_version else { return Ok(()) };
    let need = parse(min, "minAgentVersion")?;
    let have = parse(agent, "the agent version")?;
    if have >= need {
        return Ok(());
    }
    Err(format!(
        "the bundle needs drover-agent {need} or newer (its minAgentVersion); this agent is {have}: upgrade the agent, nothing was applied"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn stamped_only_when_needed_or_asked() {
        let plain = obj(json!({"schemaVersion": 1, "objects": [], "workloads": []}));
        assert_eq!(stamp(&plain, None), None, "a config every agent reads carries no minAgentVersion");
        let health = obj(json!({"schemaVersion": 1, "healthChecks": []}));
        assert_eq!(stamp(&health, None).as_deref(), Some("0.2.0"));
        assert_eq!(stamp(&health, Some(&version("1.4.0"))).as_deref(), Some("1.4.0"));
        assert_eq!(stamp(&health, Some(&version("0.1.5"))).as_deref(), Some("0.2.0"), "never below what the fields need");
        assert_eq!(stamp(&plain, Some(&version("0.1.0"))), None);
    }

    #[test]
    fn older_agents_are_refused_naming_both_versions() {
        assert!(check(None, "0.1.0").is_ok());
        assert!(check(Some("0.2.0"), "0.2.0").is_ok());
        let e = check(Some("9.0.0"), "0.2.0").unwrap_err();
        assert!(e.contains("9.0.0") && e.contains("0.2.0"), "{e}");
        assert!(check(Some("nine"), "0.2.0").unwrap_err().contains("not a version"));
    }

    #[test]
    fn ignorable_fields_are_dropped_others_kept() {
        let mut raw = obj(json!({"schemaVersion": 1, "ignorable": ["note"], "note": "x", "other": 1}));
        assert_eq!(prepare(&mut raw).unwrap(), None);
        assert!(!raw.contains_key("note") && raw.contains_key("other"), "{raw:?}");
        let mut newer = obj(json!({"schemaVersion": 1, "minAgentVersion": "99.0.0", "fancy": {}}));
        assert_eq!(prepare(&mut newer).unwrap(), Some(version("99.0.0")));
        assert!(!newer.contains_key("fancy"));
    }
}
