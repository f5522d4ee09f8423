//! Health of applied objects (kstatus-style rules, from each object's own status):
//!
//! - Deployment: the controller observed the current generation, every replica is
//!   updated and available, no old replica is left; `ProgressDeadlineExceeded` is Degraded.
//! - StatefulSet: observed generation, updated replicas (above the partition) and ready
//!   replicas equal `spec.replicas`.
//! - DaemonSet: observed generation, every scheduled pod updated and available.
//! - Job: `Complete` (a `Failed` condition is Degraded).
//! - CustomResourceDefinition: `Established` (`NamesAccepted=False` is Degraded).
//! - Everything else: ready once applied.
//!
//! A health rule in CEL for the object's apiVersion and kind ([`ApplyRequest::health`]:
//! the bundle's, else the agent's `healthChecks`) replaces the built-in rule:
//! `current` is ready, `failed` is Degraded at once, and an expression that cannot be
//! evaluated keeps the object not ready with the expression and the error named
//! ([`drover_proto::health`]).
//!
//! The wait polls (100 ms, backing off to 2 s) until every object is ready or failed, or
//! the timeout passes. Objects still not ready then are Degraded ("not ready after 2m");
//! with a zero timeout the state is sampled once and not-ready objects are Progressing.

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::Value;

use drover_proto::health::{Rules, Verdict};

use super::cluster::KubeTarget;
use crate::targets::{ApplyRequest, Health, HealthReport, ObjectHealth, PlannedObject};

/// The health of one object at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Ready.
    Ready,
    /// Not yet; why.
    Pending(String),
    /// Will not get there without a change; why.
    Failed(String),
}

/// True for kinds whose health is more than "it was applied".
pub fn has_health_rule(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet") | ("batch", "Job") | ("apiextensions.k8s.io", "CustomResourceDefinition")
    )
}

fn int(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

fn condition<'a>(v: &'a Value, kind: &str) -> Option<(&'a str, &'a str, &'a str)> {
    v.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == kind).map(|c| {
        (c["status"].as_str().unwrap_or(""), c["reason"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or(""))
    })
}

fn observed(v: &Value) -> Option<Check> {
    let generation = int(v, "/metadata/generation").unwrap_or(0);
    let seen = int(v, "/status/observedGeneration").unwrap_or(0);
    (seen < generation).then(|| Check::Pending(format!("the controller has not observed generation {generation} yet (observed {seen})")))
}

/// Evaluates one object (as returned by the server).
pub fn check_object(group: &str, kind: &str, v: &Value) -> Check {
    if let Some(m) = terminating(v) {
        // Being deleted: not what the bundle wants; recreated once its finalizers let go.
        return Check::Pending(m);
    }
    match (group, kind) {
        ("apps", "Deployment") => deployment(v),
        ("apps", "StatefulSet") => statefulset(v),
        ("apps", "DaemonSet") => daemonset(v),
        ("batch", "Job") => job(v),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(v),
        _ => Check::Ready,
    }
}

/// `Terminating for 5m 3s (since T), held by finalizers [a, b]` for an object being
/// deleted ([`super::compare::terminating`]); None otherwise.
pub fn terminating(v: &Value) -> Option<String> {
    if !super::compare::terminating(v) {
        return None;
    }
    let since = v.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).unwrap_or("?");
    let finalizers: Vec<String> = v
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|f| drover_proto::text::clean::bounded(f, 100))
        .collect();
    let age = since
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| std::time::Duration::from_secs(jiff::Timestamp::now().duration_since(t).as_secs().max(0) as u64))
        .map(|d| humantime::format_duration(d).to_string())
        .unwrap_or_else(|| "?".into());
    let since = drover_proto::text::clean::bounded(since, 40);
    Some(format!("Terminating for {age} (since {since}), held by finalizers [{}]", finalizers.join(", ")))
}

fn deployment(v: &Value) -> Check {
    if let Some(("False", "ProgressDeadlineExceeded", msg)) = condition(v, "Progressing") {
        return Check::Failed(format!("progress deadline exceeded: {msg}"));
    }
    if let Some(p) = observed(v) {
        return p;
    }
    let want = int(v, "/spec/replicas").unwrap_or(1);
    let updated = int(v, "/status/updatedReplicas").unwrap_or(0);
    let total = int(v, "/status/replicas").unwrap_or(0);
    let available = int(v, "/status/availableReplicas").unwrap_or(0);
    if updated < want {
        return Check::Pending(format!("{updated} of {want} replicas updated"));
    }
    if total > updated {
        return Check::Pending(format!("{} old replicas pending termination", total - updated));
    }
    if available < updated {
        return Check::Pending(format!("{available} of {updated} updated replicas available"));
    }
    Check::Ready
}

fn statefulset(v: &Value) -> Check {
    if let Some(p) = observed(v) {
        return p;
    }
    let want = int(v, "/spec/replicas").unwrap_or(1);
    let rolling = v.pointer("/spec/updateStrategy/type").and_then(Value::as_str).unwrap_or("RollingUpdate") == "RollingUpdate";
    if rolling {
        let partition = int(v, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0);
        let updated = int(v, "/status/updatedReplicas").unwrap_or(0);
        if updated < want - partition {
            return Check::Pending(format!("{updated} of {} replicas updated", want - partition));
        }
    }
    let ready = int(v, "/status/readyReplicas").unwrap_or(0);
    if ready < want {
        return Check::Pending(format!("{ready} of {want} replicas ready"));
    }
    Check::Ready
}

fn daemonset(v: &Value) -> Check {
    if let Some(p) = observed(v) {
        return p;
    }
    let desired = int(v, "/status/desiredNumberScheduled").unwrap_or(0);
    let rolling = v.pointer("/spec/updateStrategy/type").and_then(Value::as_str).unwrap_or("RollingUpdate") == "RollingUpdate";
    let updated = int(v, "/status/updatedNumberScheduled").unwrap_or(0);
    if rolling && updated < desired {
        return Check::Pending(format!("{updated} of {desired} scheduled pods updated"));
    }
    let available = int(v, "/status/numberAvailable").unwrap_or(0);
    if available < desired {
        return Check::Pending(format!("{available} of {desired} scheduled pods available"));
    }
    Check::Ready
}

fn job(v: &Value) -> Check {
    if let Some(("True", reason, msg)) = condition(v, "Failed") {
        return Check::Failed(format!("job failed: {reason} {msg}").trim().to_string());
    }
    if let Some(("True", _, _)) = condition(v, "Complete") {
        return Check::Ready;
    }
    let done = int(v, "/status/succeeded").unwrap_or(0);
    Check::Pending(format!("not complete ({done} succeeded)"))
}

fn crd(v: &Value) -> Check {
    if let Some(("False", reason, msg)) = condition(v, "NamesAccepted") {
        return Check::Failed(format!("names not accepted: {reason} {msg}").trim().to_string());
    }
    match condition(v, "Established") {
        Some(("True", _, _)) => Check::Ready,
        _ => Check::Pending("not Established yet".into()),
    }
}

/// Evaluates one object by its health rule in `rules`, else by the built-in rule.
pub fn check_with(rules: &Rules, api_version: &str, group: &str, kind: &str, v: &Value) -> Check {
    let Some(rule) = rules.get(api_version, kind) else { return check_object(group, kind, v) };
    if let Some(m) = terminating(v) {
        return Check::Pending(m);
    }
    match rule.evaluate(v) {
        Verdict::Current => Check::Ready,
        Verdict::Failed(m) => Check::Failed(m),
        Verdict::InProgress(m) | Verdict::Error(m) => Check::Pending(m),
    }
}

/// True when objects of `id`'s kind are waited for: a built-in rule or one in `rules`.
fn waited_for(rules: &Rules, id: &drover_proto::object::ObjectRef) -> bool {
    has_health_rule(id.group(), &id.kind) || rules.get(&id.api_version, &id.kind).is_some()
}

async fn check_planned(t: &KubeTarget, rules: &Rules, o: &PlannedObject) -> Check {
    match super::read::get_value(t, &o.id).await {
        Ok(Some(v)) => check_with(rules, &o.id.api_version, o.id.group(), &o.id.kind, &v),
        Ok(None) => Check::Pending("not found".into()),
        Err(m) => Check::Pending(format!("cannot read it: {m}")),
    }
}

/// Waits at most `timeout` for the objects of `req` to become healthy.
pub(super) async fn wait(t: &KubeTarget, req: &ApplyRequest, timeout: Duration) -> HealthReport {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<(&PlannedObject, String)> =
        req.objects().filter(|o| waited_for(&req.health, &o.id)).map(|o| (o, String::new())).collect();
    let mut report = HealthReport::healthy();
    let mut pause = Duration::from_millis(100);
    loop {
        let futs = pending.iter().map(|(o, _)| check_planned(t, &req.health, o));
        let checks: Vec<Check> = stream::iter(futs).buffered(t.opts.concurrency.max(1)).collect().await;
        let mut still = Vec::new();
        for ((o, _), c) in pending.into_iter().zip(checks) {
            match c {
                Check::Ready => {}
                Check::Failed(m) => report.objects.push(ObjectHealth { object: o.id.clone(), health: Health::Degraded, message: m }),
                Check::Pending(m) => still.push((o, m)),
            }
        }
        pending = still;
        let now = Instant::now();
        if pending.is_empty() || now >= deadline {
            break;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
    for (o, m) in pending {
        let (health, message) = if timeout.is_zero() {
            (Health::Progressing, m)
        } else {
            (Health::Degraded, format!("not ready after {}: {m}", humantime::format_duration(timeout)))
        };
        report.objects.push(ObjectHealth { object: o.id.clone(), health, message });
    }
    report.health = if report.objects.iter().any(|o| o.health == Health::Degraded) {
        Health::Degraded
    } else if report.objects.is_empty() {
        Health::Healthy
    } else {
        Health::Progressing
    };
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_rules() {
        let mut d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 2}, "status": {"observedGeneration": 1}});
        assert!(matches!(deployment(&d), Check::Pending(_)));
        d["status"] = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2});
        assert!(matches!(deployment(&d), Check::Pending(m) if m.contains("old replicas")));
        d["status"]["replicas"] = json!(2);
        assert_eq!(deployment(&d), Check::Ready);
        d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "too slow"}]);
        assert!(matches!(deployment(&d), Check::Failed(_)));
    }

    #[test]
    fn job_crd_and_others() {
        assert!(matches!(job(&json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}})), Check::Failed(_)));
        assert_eq!(job(&json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})), Check::Ready);
        assert_eq!(crd(&json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}})), Check::Ready);
        assert!(matches!(crd(&json!({})), Check::Pending(_)));
        assert_eq!(check_object("", "ConfigMap", &json!({})), Check::Ready);
        let ds = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3}});
        assert_eq!(daemonset(&ds), Check::Ready);
        let sts = json!({"metadata": {"generation": 1}, "spec": {"replicas": 3}, "status": {"observedGeneration": 1, "updatedReplicas": 3, "readyReplicas": 2}});
        assert!(matches!(statefulset(&sts), Check::Pending(_)));
    }
}
