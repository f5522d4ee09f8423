//! The sources an agent runs with, recorded in its state directory ([`FILE`], JSON, mode
//! 0600, written at start to a temporary file and renamed into place, read relative to
//! the directory and bounded: [`crate::statedir`]) for the commands
//! that name a source with `--source NAME` without asking the agent (`hold`, `release`,
//! and `status`/`history` reading the database when no agent answers): a name that is
//! not there is refused, listing the names that are.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::SourceSettings;
use crate::fsat::Found;
use crate::statedir::StateDir;

/// The file in the state directory.
pub const FILE: &str = "sources.json";

/// One configured source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Configured {
    /// Its name.
    pub name: String,
    /// Its reference (the key of its state).
    pub source: String,
    /// What it depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

/// Largest record read (names and references of the sources).
const MAX_FILE: u64 = 1 << 20;

/// Records `sources` in the state directory (best effort: a failure is logged; the
/// commands then say the list is missing).
pub fn write(state: &StateDir, sources: &[SourceSettings]) {
    let list: Vec<Configured> =
        sources.iter().map(|s| Configured { name: s.name.clone(), source: s.source.clone(), depends_on: s.depends_on.clone() }).collect();
    let body = serde_json::to_vec_pretty(&list).expect("the list serializes");
    if let Err(e) = state.replace(FILE, &body) {
        tracing::warn!("cannot record the configured sources in {}: {e} (`--source NAME` of hold and release will not find them)", state.path().display());
    }
}

/// The sources recorded in `state_dir`; None when there is no record the agent wrote
/// (read relative to the directory, not through a link, bounded: [`crate::statedir`]).
pub fn read(state_dir: &Path) -> Option<Vec<Configured>> {
    let state = StateDir::existing(state_dir).ok()?;
    match state.read(FILE, MAX_FILE).ok()? {
        Found::Ours(data) => serde_json::from_slice(&data).ok(),
        _ => None,
    }
}

/// Checks that `name` is one of the sources recorded in `state_dir`.
pub fn check(state_dir: &Path, name: &str) -> Result<(), String> {
    let Some(list) = read(state_dir) else {
        return Err(format!(
            "{} records no sources ({FILE} is missing): start the agent once with this state directory, or leave out --source",
            state_dir.display()
        ));
    };
    if list.iter().any(|c| c.name == name) {
        return Ok(());
    }
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    Err(format!("the agent of {} has no source named {name:?}; its sources are: {}", state_dir.display(), names.join(", ")))
}
