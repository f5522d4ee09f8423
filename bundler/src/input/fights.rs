//! Known fights between a bundle's objects and the controllers it configures: a field the
//! bundle sets that a controller the same bundle sets up keeps changing, so drover would
//! change it back on every resync and the two would write forever (docs/kubernetes.md,
//! "Fields that fight"). Reported as warnings naming both objects (`--strict`: errors):
//!
//! - a Deployment, StatefulSet or ReplicaSet that sets `spec.replicas` while a
//!   HorizontalPodAutoscaler (or a KEDA ScaledObject) of the bundle scales it;
//! - a ClusterRole with an `aggregationRule` that also sets `rules` (the aggregation
//!   controller owns them).

use std::collections::BTreeMap;

use drover_proto::object::ObjectRef;
use serde_json::Value;

/// One object as the check sees it: its value and where it came from.
pub struct Seen<'a> {
    /// The parsed object.
    pub value: &'a Value,
    /// `FILE (document N)`.
    pub source: &'a str,
}

/// The fights among `objects`, one warning each.
pub fn check(objects: &BTreeMap<&ObjectRef, Seen>) -> Vec<String> {
    let mut out = Vec::new();
    for (&id, c) in objects {
        if let Some(target) = scaled_target(id, c.value) {
            let found = objects.iter().find(|(&t, _)| {
                t.kind == target.kind && t.name == target.name && t.namespace == id.namespace && (target.group.is_none() || target.group.as_deref() == Some(t.group()))
            });
            if let Some((t, tc)) = found {
                if let Some(r) = tc.value.pointer("/spec/replicas").filter(|r| !r.is_null()) {
                    out.push(format!(
                        "{} {} scales {} {}, whose spec.replicas ({r}) the bundle also sets ({}): drover and the autoscaler would set it back and forth on every resync; remove spec.replicas from the {} (the autoscaler owns it)",
                        id.kind, show(id), t.kind, show(t), tc.source, t.kind
                    ));
                }
            }
        }
        if id.kind == "ClusterRole" && id.group() == "rbac.authorization.k8s.io" && c.value.get("aggregationRule").is_some_and(|a| !a.is_null()) && c.value.get("rules").is_some() {
            out.push(format!(
                "ClusterRole {} has an aggregationRule and also sets rules ({}): the aggregation controller owns rules and drover would reset them on every resync; remove rules",
                id.name, c.source
            ));
        }
    }
    out
}

fn show(id: &ObjectRef) -> String {
    match &id.namespace {
        Some(ns) => format!("{ns}/{}", id.name),
        None => id.name.clone(),
    }
}

struct Target {
    kind: String,
    name: String,
    group: Option<String>,
}

/// What an autoscaler object scales (`scaleTargetRef`): HPA (any version) and KEDA's
/// ScaledObject (kind defaults to Deployment).
fn scaled_target(id: &ObjectRef, v: &Value) -> Option<Target> {
    let hpa = id.kind == "HorizontalPodAutoscaler" && id.group() == "autoscaling";
    let keda = id.kind == "ScaledObject" && id.group() == "keda.sh";
    if !hpa && !keda {
        return None;
    }
    let r = v.pointer("/spec/scaleTargetRef")?;
    let kind = r["kind"].as_str().unwrap_or(if keda { "Deployment" } else { "" }).to_string();
    let group = r["apiVersion"].as_str().map(|av| av.rsplit_once('/').map(|(g, _)| g.to_string()).unwrap_or_default());
    Some(Target { kind, name: r["name"].as_str()?.to_string(), group })
}
