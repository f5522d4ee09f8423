//! The one ownership rule of the kube target: who a live object belongs to, read from
//! drover's label `app.kubernetes.io/managed-by: drover` and annotation
//! `drover.dev/source`. Apply and prune both decide from it:
//!
//! | live object | apply | prune |
//! |---|---|---|
//! | labelled, this source | applied | deleted |
//! | labelled, another source | `conflict`: not applied, not in the inventory | refused |
//! | labelled, no source annotation | `adopted` (applied, now this source's) | refused |
//! | not labelled (by hand, another tool) | `adopted` (applied, now this source's) | refused |

use drover_proto::media;
use kube::api::ObjectMeta;
use serde_json::Value;

/// Who a live object belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Labelled as drover's and annotated with this source.
    This,
    /// Labelled as drover's and annotated with another source (named).
    Other(String),
    /// Labelled as drover's without a source annotation.
    Unrecorded,
    /// Not labelled as drover's: made by hand or by another tool.
    Foreign,
}

/// The owner of an object with metadata `meta`, seen from `source`.
pub fn owner(meta: &ObjectMeta, source: &str) -> Owner {
    let label = meta.labels.as_ref().and_then(|l| l.get(media::LABEL_MANAGED_BY));
    let annotation = meta.annotations.as_ref().and_then(|a| a.get(media::ANN_OBJ_SOURCE));
    decide(label.map(String::as_str), annotation.map(String::as_str), source)
}

/// [`owner`] of a live object as JSON (as the API server returns it).
pub fn owner_of(live: &Value, source: &str) -> Owner {
    let meta = &live["metadata"];
    decide(meta["labels"][media::LABEL_MANAGED_BY].as_str(), meta["annotations"][media::ANN_OBJ_SOURCE].as_str(), source)
}

fn decide(label: Option<&str>, annotation: Option<&str>, source: &str) -> Owner {
    if label != Some(media::MANAGED_BY_VALUE) {
        return Owner::Foreign;
    }
    match annotation {
        Some(s) if s == source => Owner::This,
        Some(other) => Owner::Other(other.to_string()),
        None => Owner::Unrecorded,
    }
}

/// Why `source` must not delete an object owned by `owner`, if it must not.
pub fn prune_refusal(owner: &Owner) -> Option<String> {
    match owner {
        Owner::This => None,
        Owner::Other(other) => Some(format!("owned by another drover source: {} is {other:?}", media::ANN_OBJ_SOURCE)),
        Owner::Unrecorded => Some(format!("no {} annotation: cannot tell which source owns it", media::ANN_OBJ_SOURCE)),
        Owner::Foreign => Some(format!("not managed by drover (no label {}: {})", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE)),
    }
}

/// The message of an apply that met an object of another source.
pub fn conflict_message(other: &str) -> String {
    format!(
        "owned by drover source {other} ({} annotation): not applied, not added to this source's inventory, never pruned by it; two sources declare this object: remove it from one of them",
        media::ANN_OBJ_SOURCE
    )
}

/// The message of an apply that took over an object drover did not manage.
pub fn adopted_message(owner: &Owner) -> String {
    let was = match owner {
        Owner::Unrecorded => format!("it had drover's label but no {} annotation", media::ANN_OBJ_SOURCE),
        _ => format!("it existed without the label {}: {} (made by hand or by another tool)", media::LABEL_MANAGED_BY, media::MANAGED_BY_VALUE),
    };
    format!("adopted: {was}; this source manages it from now on and prunes it when a bundle drops it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(label: Option<&str>, source: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: label.map(|l| BTreeMap::from([(media::LABEL_MANAGED_BY.to_string(), l.to_string())])),
            annotations: source.map(|s| BTreeMap::from([(media::ANN_OBJ_SOURCE.to_string(), s.to_string())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn ownership() {
        assert_eq!(owner(&meta(Some("drover"), Some("a")), "a"), Owner::This);
        assert_eq!(owner(&meta(Some("drover"), Some("b")), "a"), Owner::Other("b".into()));
        assert_eq!(owner(&meta(Some("drover"), None), "a"), Owner::Unrecorded);
        assert_eq!(owner(&meta(None, Some("a")), "a"), Owner::Foreign, "the label decides, not the annotation alone");
        assert_eq!(owner(&meta(Some("helm"), None), "a"), Owner::Foreign);
        assert!(prune_refusal(&Owner::Other("b".into())).unwrap().contains("another drover source"));
        assert!(prune_refusal(&Owner::Foreign).unwrap().contains("not managed"));
        assert_eq!(prune_refusal(&Owner::This), None);
    }
}
