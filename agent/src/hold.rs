//! The hold gate: an operator at the edge stops this agent from changing its target,
//! without the CI stage and without stopping the agent. Two ways to hold:
//!
//! - `drover-agent hold --state-dir DIR --reason TEXT` writes [`FILE`] into the state
//!   directory (JSON `{reason, since}`, mode 0600, written to a temporary file and renamed
//!   into place): it holds every source of the agent; with `--source NAME` it writes
//!   `hold-NAME.json` and holds that source only. `drover-agent release --state-dir DIR
//!   [--source NAME]` removes it (without `--source`: every hold file). The running agent
//!   reads them on every poll (sled is locked by the agent; these files are not), relative
//!   to the state directory ([`crate::statedir`]): not through a link, not blocking on a
//!   FIFO, at most [`MAX_FILE`] bytes — anything else there is an unreadable hold;
//! - the kube target: the annotation [`ANN_HOLD`] (`drover.dev/hold: "<reason>"`) on the
//!   agent's in-cluster state ConfigMap ([`Target::read_hold`]), for an operator who only
//!   has kubectl;
//! - apply windows ([`crate::window`], `--apply-window`, config `applyWindows`): while
//!   windows are set and none is open, the gate holds with [`HoldOrigin::Window`] and the
//!   next window's start. Such a hold stops new bundles only: the resync of the applied
//!   bundle goes on ([`Hold::blocks_resync`]). An operator's hold wins over it.
//!
//! While held the agent keeps polling, verifying and reporting; it applies nothing — no
//! new bundle, no resync (drift stays as it is), no prune. The pipeline asks [`Gate::check`]
//! on every poll and stops right before apply. Fail-closed: a hold that cannot be read (a
//! hold file that is unreadable or not a hold, an API error reading the ConfigMap) holds
//! too, with the error as the reason. Release: the next poll applies the newest verified
//! bundle.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsat::Found;
use crate::statedir::StateDir;
use crate::targets::Target;
use crate::window::{WindowState, Windows};

/// The hold file in the state directory.
pub const FILE: &str = "hold.json";
/// The annotation on the kube target's state ConfigMap that holds the agent.
pub const ANN_HOLD: &str = "drover.dev/hold";
/// Longest reason accepted (a reason is shown in status and in fleet reports).
pub const MAX_REASON: usize = 300;
/// Largest hold file read (a hold is a reason and a time).
pub const MAX_FILE: u64 = 16 << 10;

/// Why the hold file cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// The state directory does not exist.
    #[error("{0} does not exist; give the agent's --state-dir")]
    NoStateDir(String),
    /// The directory exists but holds no agent's state (no database): a wrong directory,
    /// often one level too high; a hold there would hold nothing.
    #[error("{dir} holds no agent state (no {dir}/db): give the --state-dir the agent runs with{hint}")]
    NotStateDir {
        /// The directory given.
        dir: String,
        /// ` (DIR/x holds one)` when a directory below it does.
        hint: String,
    },
    /// The reason is empty or too long.
    #[error("--reason: {0}")]
    Reason(String),
    /// A file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The hold file is not a hold.
    #[error("{path} is not a hold file ({message}); remove it with `drover-agent release --state-dir DIR` or hold again")]
    Corrupt {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
}

/// Where a hold comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HoldOrigin {
    /// The hold file in the state directory (`drover-agent hold`).
    File,
    /// The `drover.dev/hold` annotation on the in-cluster state ConfigMap.
    Annotation,
    /// The hold could not be read: held until it can (fail-closed).
    Unreadable,
    /// No apply window is open ([`crate::window`]): new bundles wait for the next one; the
    /// resync of the applied bundle goes on.
    Window,
}

impl std::fmt::Display for HoldOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HoldOrigin::File => "hold file",
            HoldOrigin::Annotation => "annotation drover.dev/hold",
            HoldOrigin::Unreadable => "unreadable hold",
            HoldOrigin::Window => "apply window",
        })
    }
}

/// A hold in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// Why (the operator's words).
    pub reason: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// Where it comes from.
    pub by: HoldOrigin,
    /// When the next apply window opens (RFC 3339), while apply windows are set and none
    /// is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<String>,
}

impl Hold {
    fn new(reason: String, since: String, by: HoldOrigin) -> Self {
        Hold { reason, since, by, next_window: None }
    }

    /// True when the hold also stops the resync of the applied bundle (every hold but a
    /// closed apply window: drift correction is not restricted by windows).
    pub fn blocks_resync(&self) -> bool {
        self.by != HoldOrigin::Window
    }
}

/// What the hold file holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileHold {
    reason: String,
    since: String,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> HoldError + '_ {
    move |e| HoldError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// The name of the hold file of `source` in the state directory (None: of the whole agent).
fn file_name(source: Option<&str>) -> String {
    match source {
        Some(name) => format!("hold-{name}.json"),
        None => FILE.to_string(),
    }
}

fn open(dir: &Path) -> Result<StateDir, HoldError> {
    StateDir::existing(dir).map_err(io_err(dir))
}

/// Refuses a directory that is not an agent's state directory (hold and release act only
/// on one: a hold file elsewhere holds nothing, and "held" would be a lie).
fn state_dir(dir: &Path) -> Result<(), HoldError> {
    if !dir.is_dir() {
        return Err(HoldError::NoStateDir(dir.display().to_string()));
    }
    if crate::record::holds_state(dir) {
        return Ok(());
    }
    let below: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| crate::record::holds_state(p))
        .map(|p| p.display().to_string())
        .take(3)
        .collect();
    let hint = if below.is_empty() { String::new() } else { format!(" ({} holds one)", below.join(", ")) };
    Err(HoldError::NotStateDir { dir: dir.display().to_string(), hint })
}

/// `drover-agent hold`: writes the hold file of `source` (None: of every source),
/// atomically, mode 0600. Holding again replaces the reason and keeps the first `since`.
/// The caller checks that `source` names one of the agent's sources.
pub fn hold(dir: &Path, source: Option<&str>, reason: &str) -> Result<Hold, HoldError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(HoldError::Reason("say why the agent is held (shown in status and fleet reports)".into()));
    }
    if reason.chars().count() > MAX_REASON {
        return Err(HoldError::Reason(format!("at most {MAX_REASON} characters")));
    }
    state_dir(dir)?;
    let since = match read_file(dir, source) {
        Ok(Some(h)) => h.since,
        _ => drover_proto::time::now_rfc3339(),
    };
    let body = serde_json::to_vec_pretty(&FileHold { reason: reason.to_string(), since: since.clone() }).expect("hold serializes");
    let name = file_name(source);
    open(dir)?.replace(&name, &body).map_err(io_err(&dir.join(&name)))?;
    Ok(Hold::new(reason.to_string(), since, HoldOrigin::File))
}

/// `drover-agent release`: removes the hold file of `source` (None: the agent-wide one);
/// the hold it removed, if any.
pub fn release(dir: &Path, source: Option<&str>) -> Result<Option<Hold>, HoldError> {
    state_dir(dir)?;
    let held = read_file(dir, source).unwrap_or(None);
    let name = file_name(source);
    match open(dir)?.remove(&name) {
        Ok(true) => Ok(held.or_else(|| Some(Hold::new(String::new(), String::new(), HoldOrigin::File)))),
        Ok(false) => Ok(None),
        Err(e) => Err(io_err(&dir.join(&name))(e)),
    }
}

/// The sources with a hold file of their own in `dir` (`hold-NAME.json`), sorted.
pub fn held_sources(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("hold-")?.strip_suffix(".json").map(str::to_string)))
        .filter(|n| crate::config::source::valid_name(n))
        .collect();
    out.sort();
    out
}

/// The hold file's hold of `source` (None: the agent-wide one), `None` when there is no
/// such hold file.
pub fn read_file(dir: &Path, source: Option<&str>) -> Result<Option<Hold>, HoldError> {
    let name = file_name(source);
    let path = dir.join(&name);
    let corrupt = |message: String| HoldError::Corrupt { path: path.display().to_string(), message };
    let data = match open(dir)?.read(&name, MAX_FILE).map_err(io_err(&path))? {
        Found::Missing => return Ok(None),
        Found::Ours(d) => d,
        Found::TooLarge => return Err(corrupt(format!("larger than {MAX_FILE} bytes"))),
        Found::Foreign(what) => return Err(corrupt(format!("it is {what}, not a file `drover-agent hold` writes"))),
    };
    let h: FileHold = serde_json::from_slice(&data).map_err(|e| HoldError::Corrupt { path: path.display().to_string(), message: e.to_string() })?;
    Ok(Some(Hold::new(h.reason, h.since, HoldOrigin::File)))
}

/// Reads the holds of one source on every poll, and its apply windows. Remembers when it
/// first saw an annotation hold, for its `since` when the ConfigMap does not tell.
#[derive(Debug, Default)]
pub struct Gate {
    dir: Option<PathBuf>,
    name: Option<String>,
    windows: Windows,
    seen: Option<(HoldOrigin, String)>,
}

impl Gate {
    /// A gate reading the hold files in `state_dir` (the agent's, then source `name`'s)
    /// and the target's hold.
    pub fn new(state_dir: &Path, name: &str) -> Self {
        Gate { dir: Some(state_dir.to_path_buf()), name: Some(name.to_string()), windows: Windows::default(), seen: None }
    }

    /// The time of the source's rollback release request, consumed
    /// ([`take_rollback_release`]: `drover-agent release --rollback` leaves it in the state
    /// directory whose hold files this gate reads).
    pub fn take_rollback_release(&self) -> Option<String> {
        take_rollback_release(self.dir.as_deref()?, self.name.as_deref()?)
    }

    /// The gate also holds new bundles while none of `windows` is open.
    pub fn with_windows(self, windows: Windows) -> Self {
        Gate { windows, ..self }
    }

    /// The operator's `hold` (which wins), else a [`HoldOrigin::Window`] hold while apply
    /// windows are set and none is open; either way with the next window's start.
    fn window(&self, hold: Option<Hold>) -> Option<Hold> {
        let WindowState::Closed { since, next } = self.windows.at(jiff::Timestamp::now()) else {
            return hold;
        };
        let next = next.map(|t| drover_proto::time::format_rfc3339(t.as_second()).unwrap_or_else(|_| t.to_string()));
        let mut hold = hold.unwrap_or_else(|| {
            let since = since.and_then(|t| drover_proto::time::format_rfc3339(t.as_second()).ok()).unwrap_or_default();
            let reason = match &next {
                Some(n) => format!("outside the apply windows; the next opens at {n}"),
                None => "outside the apply windows; no schedule opens one again".to_string(),
            };
            Hold::new(reason, since, HoldOrigin::Window)
        });
        hold.next_window = next;
        Some(hold)
    }

    /// The hold in force for `source`, if any: the agent's hold file first, then the
    /// source's, then the target's. A hold that cannot be read is a hold
    /// ([`HoldOrigin::Unreadable`]).
    pub async fn check(&mut self, target: &dyn Target, source: &str) -> Option<Hold> {
        let from_file = match &self.dir {
            Some(dir) => match read_file(dir, None) {
                Ok(None) => read_file(dir, self.name.as_deref()),
                other => other,
            }
            .map_err(|e| e.to_string()),
            None => Ok(None),
        };
        let found = match from_file {
            Ok(Some(h)) => Ok(Some(h)),
            Err(e) => Err(e),
            Ok(None) => match target.read_hold(source).await {
                Ok(Some(th)) => Ok(Some((th.reason, th.since, HoldOrigin::Annotation))),
                Ok(None) => Ok(None),
                Err(e) => Err(format!("cannot read the {ANN_HOLD} annotation: {e}")),
            }
            .map(|o| o.map(|(reason, since, by)| Hold::new(reason, since.unwrap_or_default(), by))),
        };
        let mut hold = match found {
            Ok(h) => h,
            Err(e) => Some(Hold::new(format!("{e}; holding until it can be read"), String::new(), HoldOrigin::Unreadable)),
        };
        hold = self.window(hold);
        match hold.as_mut() {
            None => self.seen = None,
            Some(h) => {
                let first = match &self.seen {
                    Some((by, at)) if *by == h.by => at.clone(),
                    _ => drover_proto::time::now_rfc3339(),
                };
                self.seen = Some((h.by, first.clone()));
                if h.since.is_empty() {
                    h.since = first;
                }
                if h.reason.trim().is_empty() {
                    h.reason = "(no reason given)".into();
                }
            }
        }
        if let Some(h) = &hold {
            tracing::debug!(by = %h.by, reason = %h.reason, "held");
        }
        hold
    }
}

/// True when a rollback (`--on-degraded rollback`) may run under `hold`: no hold, or only
/// closed apply windows (a rollback finishes the apply a window allowed); an operator's
/// hold keeps the Degraded bundle (nothing is changed while held).
pub fn allows_rollback(hold: Option<&Hold>) -> bool {
    hold.is_none_or(|h| h.by == HoldOrigin::Window)
}

/// The file `drover-agent release --rollback` writes into the state directory for
/// source `name`: `release-rollback-NAME.json` (each source takes its own).
pub fn rollback_release_file(name: &str) -> String {
    format!("release-rollback-{name}.json")
}

#[derive(Serialize, Deserialize)]
struct ReleaseRequest {
    at: String,
}

/// `drover-agent release --rollback`: asks source `name` of the agent of `dir` to lift its
/// rollback refusal (written like the hold file: in the state directory, replaced
/// atomically; [`crate::rollback`]). Returns the request's time. The caller checks that
/// `name` is one of the agent's sources.
pub fn request_rollback_release(dir: &Path, name: &str) -> Result<String, HoldError> {
    state_dir(dir)?;
    let at = drover_proto::time::now_rfc3339();
    let body = serde_json::to_vec(&ReleaseRequest { at: at.clone() }).expect("request serializes");
    let file = rollback_release_file(name);
    open(dir)?.replace(&file, &body).map_err(io_err(&dir.join(&file)))?;
    Ok(at)
}

/// The agent's side, for source `name`: the time of its rollback release request in
/// `dir`, consumed (removed); read as the hold file is (relative to the state directory,
/// bounded); anything else there is removed and logged.
pub fn take_rollback_release(dir: &Path, name: &str) -> Option<String> {
    let state = open(dir).ok()?;
    let file = rollback_release_file(name);
    let found = state.read(&file, MAX_FILE);
    if matches!(found, Ok(Found::Missing)) {
        return None;
    }
    let _ = state.remove(&file);
    let shown = dir.join(&file).display().to_string();
    match found {
        Ok(Found::Ours(data)) => match serde_json::from_slice::<ReleaseRequest>(&data) {
            Ok(r) => Some(r.at),
            Err(e) => {
                tracing::warn!("{shown}: not a release request ({e}); removed");
                None
            }
        },
        Ok(other) => {
            tracing::warn!("{shown}: not a release request ({other:?}); removed");
            None
        }
        Err(e) => {
            tracing::warn!("{shown}: {e}");
            None
        }
    }
}

/// A hold as status and reports show it: the hold plus the newest verified bundle that
/// waits for the release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// Why.
    pub reason: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// Where the hold comes from.
    pub by: HoldOrigin,
    /// The newest verified digest that is not applied because of the hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_digest: Option<String>,
    /// Its sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_sequence: Option<u64>,
    /// When the next apply window opens (RFC 3339), while apply windows are set and none
    /// is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<String>,
}

impl Held {
    /// `hold` with the waiting bundle `(digest, sequence)`.
    pub fn new(hold: Hold, waiting: Option<&(String, u64)>) -> Self {
        Held {
            reason: hold.reason,
            since: hold.since,
            by: hold.by,
            waiting_digest: waiting.map(|w| w.0.clone()),
            waiting_sequence: waiting.map(|w| w.1),
            next_window: hold.next_window,
        }
    }
}

/// The hold shown by `drover-agent status` when no agent answers: the hold file of
/// `state_dir` (the agent's, else source `name`'s), waiting for the digest of the last
/// attempt when it was held.
pub fn offline(state_dir: Option<&Path>, name: &str, state: &crate::record::SourceState) -> Option<Held> {
    let dir = state_dir?;
    let hold = read_file(dir, None).ok().flatten().or_else(|| read_file(dir, Some(name)).ok().flatten())?;
    let waiting = state
        .last_attempt
        .as_ref()
        .filter(|a| a.result == crate::record::AttemptResult::Held && a.digest != state.applied_digest)
        .and_then(|a| Some((a.digest.clone()?, a.sequence?)));
    Some(Held::new(hold, waiting.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_do_not_stop_a_rollback_an_operator_hold_does() {
        let hold = |by| Hold { reason: "r".into(), since: String::new(), by, next_window: None };
        assert!(allows_rollback(None));
        assert!(allows_rollback(Some(&hold(HoldOrigin::Window))));
        assert!(!allows_rollback(Some(&hold(HoldOrigin::File))));
        assert!(!allows_rollback(Some(&hold(HoldOrigin::Annotation))));
        assert!(!allows_rollback(Some(&hold(HoldOrigin::Unreadable))));
    }

    #[test]
    fn a_rollback_release_request_is_taken_by_its_own_source_once() {
        let tmp = tempfile::tempdir().unwrap();
        crate::record::Store::open(tmp.path()).unwrap();
        let at = request_rollback_release(tmp.path(), "team-a").unwrap();
        assert_eq!(take_rollback_release(tmp.path(), "team-b"), None, "another source's request");
        assert_eq!(take_rollback_release(tmp.path(), "team-a"), Some(at));
        assert_eq!(take_rollback_release(tmp.path(), "team-a"), None, "consumed");
        fs::write(tmp.path().join(rollback_release_file("team-a")), "garbage").unwrap();
        assert_eq!(take_rollback_release(tmp.path(), "team-a"), None);
        assert!(!tmp.path().join(rollback_release_file("team-a")).exists(), "not a request: removed");
    }

    #[test]
    fn hold_release_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(read_file(tmp.path(), None).unwrap().is_none());
        assert!(hold(tmp.path(), None, "  ").is_err());
        assert!(matches!(hold(tmp.path(), None, "x"), Err(HoldError::NotStateDir { .. })), "no database: not a state directory");
        crate::record::Store::open(tmp.path()).unwrap();
        let h = hold(tmp.path(), None, "night shift").unwrap();
        let again = hold(tmp.path(), None, "still the night shift").unwrap();
        assert_eq!(again.since, h.since, "holding again keeps since");
        assert_eq!(read_file(tmp.path(), None).unwrap().unwrap().reason, "still the night shift");
        hold(tmp.path(), Some("team-a"), "team a only").unwrap();
        assert_eq!(held_sources(tmp.path()), ["team-a"]);
        assert_eq!(read_file(tmp.path(), Some("team-a")).unwrap().unwrap().reason, "team a only");
        assert!(release(tmp.path(), None).unwrap().is_some());
        assert!(release(tmp.path(), None).unwrap().is_none());
        assert!(release(tmp.path(), Some("team-a")).unwrap().is_some());
        assert!(held_sources(tmp.path()).is_empty());
        fs::write(tmp.path().join(FILE), "garbage").unwrap();
        assert!(read_file(tmp.path(), None).unwrap_err().to_string().contains("not a hold file"));
        assert!(hold(&tmp.path().join("nope"), None, "x").unwrap_err().to_string().contains("--state-dir"));
    }
}
