//! The statuses of the controller the FAKE API server pretends to run: after a workload
//! (Deployment, StatefulSet, DaemonSet, Job) is written, its status shows it rolled out
//! (`Ready`), stuck with no ready pods (`Stuck`), or untouched (`None`). The writes
//! themselves are in [`super::controller`].

use super::resources::ResourceInfo;
use super::util::now_rfc3339;
use serde_json::{json, Value};

/// What the fake controller does with a workload's status after a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutMode {
    /// Rolled out: observedGeneration current, all replicas ready (Job: Complete).
    Ready,
    /// Observed but never ready: replicas updated, none ready/available (Job: active).
    Stuck,
    /// No controller: status is left as it is.
    None,
}

impl RolloutMode {
    /// Parses `ready`, `stuck` or `none`.
    pub fn parse(s: &str) -> Option<RolloutMode> {
        match s {
            "ready" => Some(RolloutMode::Ready),
            "stuck" => Some(RolloutMode::Stuck),
            "none" => Some(RolloutMode::None),
            _ => None,
        }
    }
}

/// Whether the fake controller manages this resource's status.
pub fn is_workload(res: &ResourceInfo) -> bool {
    matches!(
        (res.group.as_str(), res.plural.as_str()),
        ("apps", "deployments" | "statefulsets" | "daemonsets") | ("batch", "jobs")
    )
}

/// Whether a pod template names an image under the reserved `.invalid` TLD (e.g.
/// `registry.invalid/app:1`): such a workload never becomes ready, here as on a real
/// cluster, so one bundle exercises "never ready" on both.
pub fn unpullable(obj: &Value) -> bool {
    let spec = &obj["spec"]["template"]["spec"];
    ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec[k].as_array())
        .flatten()
        .filter_map(|c| c["image"].as_str())
        .any(|img| {
            let host = img.split('/').next().unwrap_or("");
            img.contains('/') && host.split(':').next().unwrap_or("").ends_with(".invalid")
        })
}

fn replicas(obj: &Value) -> i64 {
    obj["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn generation(obj: &Value) -> i64 {
    obj["metadata"]["generation"].as_i64().unwrap_or(1)
}

/// The status of a finished rollout, or None for non-workloads.
pub fn ready_status(res: &ResourceInfo, obj: &Value) -> Option<Value> {
    let (n, g) = (replicas(obj), generation(obj));
    Some(match res.plural.as_str() {
        "deployments" => json!({
            "observedGeneration": g, "replicas": n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet has successfully progressed."}
            ]
        }),
        "statefulsets" => json!({
            "observedGeneration": g, "replicas": n, "readyReplicas": n, "currentReplicas": n, "updatedReplicas": n, "availableReplicas": n,
            "currentRevision": format!("{}-{g}", obj["metadata"]["name"].as_str().unwrap_or("")),
            "updateRevision": format!("{}-{g}", obj["metadata"]["name"].as_str().unwrap_or("")),
        }),
        "daemonsets" => json!({
            "observedGeneration": g, "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
            "numberReady": 1, "numberAvailable": 1, "numberMisscheduled": 0,
        }),
        "jobs" => {
            if obj["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Complete"))
            {
                return Some(obj["status"].clone());
            }
            let now = now_rfc3339();
            json!({
                "startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0, "terminating": 0,
                "uncountedTerminatedPods": {},
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now}
                ]
            })
        }
        _ => return None,
    })
}

/// The status of a rollout that has started and has no ready pods.
pub fn progressing_status(res: &ResourceInfo, obj: &Value) -> Option<Value> {
    let (n, g) = (replicas(obj), generation(obj));
    Some(match res.plural.as_str() {
        "deployments" => json!({
            "observedGeneration": g, "replicas": n, "updatedReplicas": n, "unavailableReplicas": n,
            "conditions": [
                {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ReplicaSet is progressing."}
            ]
        }),
        "statefulsets" => {
            json!({"observedGeneration": g, "replicas": n, "currentReplicas": n, "updatedReplicas": n, "readyReplicas": 0, "availableReplicas": 0})
        }
        "daemonsets" => {
            json!({"observedGeneration": g, "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1, "numberReady": 0, "numberAvailable": 0, "numberUnavailable": 1, "numberMisscheduled": 0})
        }
        "jobs" => {
            json!({"startTime": obj["status"]["startTime"].as_str().map(str::to_string).unwrap_or_else(now_rfc3339), "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
        }
        _ => return None,
    })
}
