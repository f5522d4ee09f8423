//! The report format's limits, enforced by the reader (docs/fleet.md, "The report"): a
//! report comes from a registry anyone with push rights may have written, so nothing in
//! it is shown before it is bounded and cleaned ([`crate::text::clean`]).
//!
//! - **Refused** (the report is skipped, the field named): a document over 64 KiB, not
//!   JSON, another schema version, identity that is not a cluster type, cluster name,
//!   environment or channel, a digest that is not one, a time that does not parse, a
//!   `lastAttempt.result` that is not one of the agent's.
//! - **Cut** (the report is shown, with what was cut, and never counts toward a gate: no
//!   agent writes it): more than [`MAX_FAILING`] failing objects, a message or reason over
//!   [`MAX_MESSAGE`] characters, an object identity or version over its length, more than
//!   [`MAX_OUTCOMES`] object counts.
//! - **Cleaned**: every free-text field, control characters written as visible escapes.

use crate::digest::is_valid_digest;
use crate::reference::valid_tag;
use crate::text::clean;

use super::{check_cluster_name, check_cluster_type, Report, MAX_FAILING, MAX_MESSAGE};

/// Most object-count entries (`objects`) kept.
pub const MAX_OUTCOMES: usize = 16;
/// Longest object kind, namespace, outcome or state name kept.
const MAX_NAME: usize = 63;
/// Longest object name or apiVersion kept (DNS subdomain).
const MAX_LONG_NAME: usize = 253;
/// The results an agent records.
const RESULTS: [&str; 7] = ["Applied", "Unchanged", "Rejected", "Failed", "Held", "Waiting", "RolledBack"];

/// `text` cleaned and cut to `max` characters; what was cut is noted as `field`.
fn bound(text: &mut String, max: usize, field: &str, cut: &mut Vec<String>) {
    let n = text.chars().count();
    if n > max {
        cut.push(format!("{field}: {n} characters, cut to {max}"));
    }
    let cleaned = clean::bounded(text, max);
    if cleaned != *text {
        *text = cleaned;
    }
}

fn time(field: &str, value: &str) -> Result<(), String> {
    crate::time::parse_rfc3339(value).map(|_| ()).map_err(|e| format!("{field} {:?}: {e}", clean::bounded(value, 40)))
}

fn digest(field: &str, value: Option<&str>) -> Result<(), String> {
    match value {
        Some(d) if !is_valid_digest(d) => Err(format!("{field} {:?} is not a sha256 digest", clean::bounded(d, 80))),
        _ => Ok(()),
    }
}

/// An environment name: 1-63 letters, digits, `-`, `_` or `.`.
fn check_environment(s: &str) -> Result<(), String> {
    let ok = !s.is_empty() && s.len() <= 63 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("environment {:?} is not an environment name (1-63 letters, digits, '-', '_', '.')", clean::bounded(s, 80)))
    }
}

impl Report {
    /// Reads a report from a registry: parsed and checked ([`Report::from_slice`]), then
    /// every list and text field cut to the format's limits and cleaned. Returns the
    /// report and what was cut (empty for a report an agent wrote).
    pub fn read_bounded(data: &[u8]) -> Result<(Report, Vec<String>), String> {
        let mut r = Report::from_slice(data)?;
        let mut cut = Vec::new();
        if r.failing.len() > MAX_FAILING {
            cut.push(format!("failing: {} objects, the first {MAX_FAILING} kept", r.failing.len()));
            r.failing.truncate(MAX_FAILING);
        }
        for (i, f) in r.failing.iter_mut().enumerate() {
            bound(&mut f.message, MAX_MESSAGE, &format!("failing[{i}].message"), &mut cut);
            bound(&mut f.state, MAX_NAME, &format!("failing[{i}].state"), &mut cut);
            bound(&mut f.object.api_version, MAX_LONG_NAME, &format!("failing[{i}].apiVersion"), &mut cut);
            bound(&mut f.object.kind, MAX_NAME, &format!("failing[{i}].kind"), &mut cut);
            bound(&mut f.object.name, MAX_LONG_NAME, &format!("failing[{i}].name"), &mut cut);
            if let Some(ns) = f.object.namespace.as_mut() {
                bound(ns, MAX_NAME, &format!("failing[{i}].namespace"), &mut cut);
            }
        }
        if let Some(a) = r.last_attempt.as_mut() {
            bound(&mut a.reason, MAX_MESSAGE, "lastAttempt.reason", &mut cut);
        }
        if let Some(h) = r.held.as_mut() {
            bound(&mut h.reason, MAX_MESSAGE, "held.reason", &mut cut);
        }
        if r.objects.len() > MAX_OUTCOMES {
            cut.push(format!("objects: {} outcomes, the first {MAX_OUTCOMES} kept", r.objects.len()));
            r.objects = std::mem::take(&mut r.objects).into_iter().take(MAX_OUTCOMES).collect();
        }
        if r.objects.keys().any(|k| k.chars().count() > MAX_NAME || k.chars().any(clean::is_unsafe)) {
            cut.push("objects: outcome names cut".into());
            r.objects = std::mem::take(&mut r.objects).into_iter().map(|(k, v)| (clean::bounded(&k, MAX_NAME), v)).collect();
        }
        bound(&mut r.agent_version, MAX_NAME, "agentVersion", &mut cut);
        Ok((r, cut))
    }

    /// The checks of [`Report::from_slice`] beyond the schema: identity, digests, times,
    /// results (refused when wrong: a report naming things that cannot be is not shown).
    pub(super) fn check_fields(&self) -> Result<(), String> {
        check_cluster_type(&self.cluster_type)?;
        check_cluster_name(&self.cluster_name)?;
        check_environment(&self.environment)?;
        if !valid_tag(&self.channel) && !is_valid_digest(&self.channel) {
            return Err(format!("channel {:?} is neither a tag nor a digest", clean::bounded(&self.channel, 140)));
        }
        digest("appliedDigest", self.applied_digest.as_deref())?;
        time("reportedAt", &self.reported_at)?;
        if let Some(s) = &self.health_since {
            time("healthSince", s)?;
        }
        if let Some(a) = &self.last_attempt {
            digest("lastAttempt.digest", a.digest.as_deref())?;
            time("lastAttempt.at", &a.at)?;
            if !RESULTS.contains(&a.result.as_str()) {
                return Err(format!("lastAttempt.result {:?} is not one of {}", clean::bounded(&a.result, 40), RESULTS.join(", ")));
            }
        }
        if let Some(r) = &self.rolled_back {
            digest("rolledBack.digest", Some(&r.digest))?;
            digest("rolledBack.toDigest", Some(&r.to_digest))?;
            time("rolledBack.at", &r.at)?;
        }
        if let Some(h) = &self.held {
            digest("held.waitingDigest", h.waiting_digest.as_deref())?;
            time("held.since", &h.since)?;
            if let Some(w) = &h.next_window {
                time("held.nextWindow", w)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FailingObject, ReportHealth};
    use super::*;
    use crate::object::ObjectRef;

    /// The shared sample, Degraded.
    fn sample() -> Report {
        Report { cluster_name: "c1".into(), health: ReportHealth::Degraded, objects: Default::default(), ..super::super::sample() }
    }

    #[test]
    fn an_agents_report_is_within_the_limits() {
        let (r, cut) = Report::read_bounded(&sample().to_bytes()).unwrap();
        assert_eq!(r, sample());
        assert!(cut.is_empty());
    }

    #[test]
    fn lists_and_texts_over_the_limits_are_cut_and_named() {
        let mut r = sample();
        let id = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("a".into()), name: "n".into() };
        // Within the 64 KiB a report may take: 40 objects with 320-character messages.
        r.failing = (0..40).map(|_| FailingObject { object: id.clone(), state: "failed".into(), message: "\x1b[2J".repeat(80) }).collect();
        r.last_attempt.as_mut().unwrap().reason = "y".repeat(5000);
        r.objects = (0..40).map(|i| (format!("o{i}"), 1)).collect();
        let (back, cut) = Report::read_bounded(&r.to_bytes()).unwrap();
        assert_eq!(back.failing.len(), MAX_FAILING);
        assert!(back.failing.iter().all(|f| f.message.chars().count() <= MAX_MESSAGE && !f.message.contains('\x1b')));
        assert_eq!(back.last_attempt.unwrap().reason.chars().count(), MAX_MESSAGE);
        assert_eq!(back.objects.len(), MAX_OUTCOMES);
        let text = cut.join("; ");
        for field in ["failing: 40 objects", "failing[0].message", "lastAttempt.reason: 5000 characters", "objects: 40 outcomes"] {
            assert!(text.contains(field), "{field} in {text}");
        }
    }

    #[test]
    fn identity_that_cannot_be_is_refused_by_name() {
        let refuse = |f: &dyn Fn(&mut Report), field: &str| {
            let mut r = sample();
            f(&mut r);
            let e = Report::read_bounded(&r.to_bytes()).unwrap_err();
            assert!(e.contains(field), "{field}: {e}");
        };
        refuse(&|r| r.environment = "prod\n::error::x".into(), "environment");
        refuse(&|r| r.channel = "a b".into(), "channel");
        refuse(&|r| r.applied_digest = Some("sha256:zz".into()), "appliedDigest");
        refuse(&|r| r.last_attempt.as_mut().unwrap().result = "\x1b[32mHealthy".into(), "lastAttempt.result");
        refuse(&|r| r.last_attempt.as_mut().unwrap().at = "now".into(), "lastAttempt.at");
    }
}
