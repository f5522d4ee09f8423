//! Report-only drift (`--drift report`, config `driftMode: report`): a resync of the
//! applied bundle asks the target what applying it again would change
//! ([`crate::targets::Target::check_drift`], the comparer `drover-agent plan` uses) and
//! records the objects that drifted from it — with the drifted field paths — instead of
//! changing them back. The list lives in the source's state (status, `drover-agent
//! status`), its length in `drover_drifted_objects` and in the fleet report. Applying a
//! new digest is not affected (and empties the list: the apply puts every object back).

use drover_proto::object::ObjectRef;
use serde::{Deserialize, Serialize};

use crate::targets::{ObjectPlan, PlanAction};

/// Objects named in an attempt's reason (the rest are counted).
const NAMED: usize = 5;

/// How an object drifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftKind {
    /// It exists with other values in the bundle's fields.
    Changed,
    /// It is gone from the target.
    Missing,
    /// Whether it drifted cannot be told (it cannot be read, or the target's check of it
    /// failed): the reason says why. Reported, never dropped: an object a tenant made
    /// unreadable is not "no drift".
    Unknown,
}

impl std::fmt::Display for DriftKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DriftKind::Changed => "changed",
            DriftKind::Missing => "missing",
            DriftKind::Unknown => "unknown",
        })
    }
}

/// One object that differs from the applied bundle and was left as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedObject {
    /// The object.
    pub object: ObjectRef,
    /// Changed or missing.
    pub drift: DriftKind,
    /// The drifted field paths (dotted, as `drover-agent plan` shows them), when the target
    /// can tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// Since when (RFC 3339): the first resync that found it drifted.
    pub since: String,
    /// Why its drift is [`DriftKind::Unknown`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The drifted objects among `plans` (what re-applying the bundle would do), keeping the
/// `since` of the objects already in `previous`.
pub fn drifted(plans: &[ObjectPlan], previous: &[DriftedObject], now: &str) -> Vec<DriftedObject> {
    plans
        .iter()
        .filter_map(|p| {
            let (drift, reason) = match p.action {
                PlanAction::Update => (DriftKind::Changed, None),
                PlanAction::Create => (DriftKind::Missing, None),
                PlanAction::Failed => (DriftKind::Unknown, Some(p.message.clone())),
                _ => return None,
            };
            let fields: Vec<String> = p.diff.iter().map(|c| c.path.clone()).filter(|f| !f.is_empty()).collect();
            let since = previous.iter().find(|d| d.object == p.object && d.drift == drift).map(|d| d.since.clone()).unwrap_or_else(|| now.to_string());
            Some(DriftedObject { object: p.object.clone(), drift, fields, since, reason })
        })
        .collect()
}

/// One line for an attempt's reason and the log: the count and the first objects.
pub fn describe(drifted: &[DriftedObject]) -> String {
    if drifted.is_empty() {
        return String::new();
    }
    let named: Vec<String> = drifted.iter().take(NAMED).map(one).collect();
    let more = drifted.len().saturating_sub(NAMED);
    let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
    format!("drift reported, not corrected (--drift report): {} object(s) differ from the applied bundle or cannot be checked: {}{tail}", drifted.len(), named.join("; "))
}

/// `ConfigMap app/a (v1): changed data.v, data.w`, `... : unknown (why)`.
pub fn one(d: &DriftedObject) -> String {
    match (d.drift, d.fields.is_empty()) {
        (DriftKind::Changed, false) => format!("{}: changed {}", d.object, d.fields.join(", ")),
        (DriftKind::Unknown, _) => format!("{}: unknown ({})", d.object, d.reason.as_deref().unwrap_or("the check failed")),
        (kind, _) => format!("{}: {kind}", d.object),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::FieldChange;

    fn obj(name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("app".into()), name: name.into() }
    }

    #[test]
    fn changed_and_missing_keep_since() {
        let field = |p: &str| FieldChange { path: p.into(), before: None, after: None };
        let plans = vec![
            ObjectPlan { object: obj("a"), action: PlanAction::Update, message: String::new(), diff: vec![field("data.v")] },
            ObjectPlan::with(obj("b"), PlanAction::Create, ""),
            ObjectPlan::with(obj("c"), PlanAction::Unchanged, ""),
            ObjectPlan::with(obj("d"), PlanAction::Failed, "reading the live object: HTTP 500"),
        ];
        let first = drifted(&plans, &[], "t1");
        assert_eq!(first.len(), 3);
        assert_eq!((first[2].drift, first[2].reason.as_deref()), (DriftKind::Unknown, Some("reading the live object: HTTP 500")), "a check that failed is reported, not dropped");
        assert_eq!((first[0].drift, first[0].fields.as_slice(), first[1].drift), (DriftKind::Changed, ["data.v".to_string()].as_slice(), DriftKind::Missing));
        let again = drifted(&plans, &first, "t2");
        assert_eq!(again[0].since, "t1", "still drifted: since the first resync that saw it");
        assert!(describe(&again).contains("ConfigMap app/a (v1): changed data.v; ConfigMap app/b (v1): missing; ConfigMap app/d (v1): unknown (reading the live object: HTTP 500)"), "{}", describe(&again));
        assert_eq!(describe(&[]), "");
    }
}
