//! What the agent tells the cluster's operators about its attempts, where they look first
//! (`kubectl get events`): one [`Event`] per outcome worth seeing — a bundle applied, a
//! bundle refused, a hold, drift corrected or reported, a prune refused, a failure. The
//! pipeline makes them at its decision points and hands them to the target
//! ([`crate::targets::Target::record_event`]); the kube target records them as
//! `events.k8s.io/v1` Events regarding its state ConfigMap, a repeat as a series
//! (`targets/kube/events.rs`). Nothing is made for a poll that changed nothing (an
//! unchanged digest, a resync without drift).
//!
//! The note of an Event is immutable on the API server and a repeat is the same Event
//! only when its note is the same, so notes hold what identifies the outcome (digest,
//! sequence, reason) and no counters that move from poll to poll.

use drover_proto::channel::Position;

/// Longest note the API server accepts (bytes).
pub const NOTE_LIMIT: usize = 1024;
/// Objects named in a note (the rest are counted).
const NAMED: usize = 5;

/// One Event: type, reason, action, note.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// `Warning` (true) or `Normal`.
    pub warning: bool,
    /// Why, in PascalCase: `Applied`, `Rejected`, `Held`, `DriftCorrected`,
    /// `DriftReported`, `PruneRefused`, `RolledBack`, `RollbackReleased`, `Failed`.
    pub reason: &'static str,
    /// What the agent was doing: `Apply`, `Resync`, `Prune`, `Hold` or the stage that
    /// stopped (`Resolve`, `Fetch`, `Verify`, ...).
    pub action: String,
    /// The human-readable note (at most [`NOTE_LIMIT`] bytes, one line per fact).
    pub note: String,
}

impl Event {
    fn new(warning: bool, reason: &'static str, action: &str, note: String) -> Event {
        Event { warning, reason, action: action.to_string(), note: bounded(&note) }
    }

    /// A new bundle applied: its digest, sequence and object count.
    pub fn applied(digest: &str, sequence: u64, objects: usize, changed: usize, pruned: usize) -> Event {
        Event::new(false, "Applied", "Apply", format!("Applied {digest} (sequence {sequence}): {objects} object(s), {changed} changed, {pruned} pruned"))
    }

    /// A resync changed objects back to the applied bundle.
    pub fn drift_corrected(digest: &str, sequence: u64, objects: &[String]) -> Event {
        Event::new(
            true,
            "DriftCorrected",
            "Resync",
            format!("Resync of {digest} (sequence {sequence}) corrected drift on {} object(s): {}", objects.len(), named(objects)),
        )
    }

    /// A resync of `--drift report` found drift and left it (`description`: [`crate::drift::describe`]).
    pub fn drift_reported(description: &str) -> Event {
        Event::new(true, "DriftReported", "Resync", description.to_string())
    }

    /// Prune refused to delete (the safety valve, a Namespace holding other objects).
    pub fn prune_refused(message: &str) -> Event {
        Event::new(true, "PruneRefused", "Prune", message.to_string())
    }

    /// A bundle refused (signature, expectations, rollback, content, policy).
    pub fn rejected(digest: &str, reason: &str, message: &str, stage: &str) -> Event {
        Event::new(true, "Rejected", &action_of(stage), format!("Refused {digest} ({reason}): {message}"))
    }

    /// Nothing applied because the agent is held (`what`: the attempt's reason).
    pub fn held(what: &str) -> Event {
        Event::new(false, "Held", "Hold", what.to_string())
    }

    /// A Degraded new bundle was replaced by the last bundle Healthy here
    /// (`--on-degraded rollback`).
    pub fn rolled_back(from: &Position, to: &Position, why: &str) -> Event {
        Event::new(true, "RolledBack", "Rollback", format!("Rolled back from {} (sequence {}) to {} (sequence {}): {why}", from.digest, from.sequence, to.digest, to.sequence))
    }

    /// An operator released a rollback's refusal (`drover-agent release --rollback`).
    pub fn rollback_released(note: &str) -> Event {
        Event::new(false, "RollbackReleased", "Release", note.to_string())
    }

    /// An attempt failed at `stage` (the registry unreachable, an apply failed).
    pub fn failed(stage: &str, message: &str) -> Event {
        Event::new(true, "Failed", &action_of(stage), message.to_string())
    }

    /// A verified new bundle waits for the sources it depends on (`what`: the attempt's
    /// reason).
    pub fn waiting(what: &str) -> Event {
        Event::new(false, "Waiting", "DependsOn", what.to_string())
    }

    /// Objects of an applied bundle refused by the source's policy (`--allow-namespace`,
    /// `--deny-kind`), named.
    pub fn objects_refused(message: &str) -> Event {
        Event::new(true, "Refused", "Plan", message.to_string())
    }

    /// The Event of source `name`: its note starts with `[name] ` (the agent's Events of
    /// every source share one stream; the regarded state ConfigMap names the reference).
    pub fn of_source(self, name: &str) -> Event {
        Event { note: bounded(&format!("[{name}] {}", self.note)), ..self }
    }
}

/// `Resolve`, `Apply`, ... for a pipeline stage name.
fn action_of(stage: &str) -> String {
    let mut c = stage.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => "Poll".into(),
    }
}

/// The first [`NAMED`] of `objects`, `; and N more`.
fn named(objects: &[String]) -> String {
    let more = objects.len().saturating_sub(NAMED);
    let mut s = objects.iter().take(NAMED).cloned().collect::<Vec<_>>().join("; ");
    if more > 0 {
        s.push_str(&format!("; and {more} more"));
    }
    s
}

/// `note` as an Event may carry it: control characters (other than newlines) removed —
/// notes repeat messages from registries and API servers — and cut to [`NOTE_LIMIT`]
/// bytes at a character boundary, ending in `…` when cut.
pub fn bounded(note: &str) -> String {
    let clean = drover_proto::text::clean::lines(note).into_owned();
    if clean.len() <= NOTE_LIMIT {
        return clean;
    }
    let mut end = NOTE_LIMIT - '…'.len_utf8();
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &clean[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_name_what_happened_and_fit() {
        let e = Event::applied("sha256:ab", 17, 12, 3, 1);
        assert_eq!((e.warning, e.reason, e.action.as_str()), (false, "Applied", "Apply"));
        assert!(e.note.contains("sequence 17") && e.note.contains("12 object(s)"), "{}", e.note);
        let r = Event::rejected("sha256:cd", "unsigned", "no signature \u{1b}[31m", "verify");
        assert_eq!((r.warning, r.action.as_str()), (true, "Verify"));
        assert!(!r.note.contains('\u{1b}'), "{}", r.note);
        let long = Event::failed("apply", &"é".repeat(2000));
        assert!(long.note.len() <= NOTE_LIMIT && long.note.ends_with('…'));
        let objs: Vec<String> = (0..7).map(|i| format!("ConfigMap a/c{i} (v1)")).collect();
        assert!(Event::drift_corrected("sha256:ef", 2, &objs).note.ends_with("; and 2 more"));
    }
}
