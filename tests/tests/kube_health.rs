//! Health and API errors on the kube target end to end: a Deployment that never becomes
//! ready is Degraded after `--health-timeout` (status and history say so); transient API
//! errors (503) are retried with backoff (fake only: it needs the fake's error injection).

mod kube_support;

use drover_tests::fakekube::{ErrorRule, RolloutMode};
use kube_support::{http_get, Cluster, Env};

scenarios!(deployment_never_ready_is_degraded);

fn deployment_never_ready_is_degraded(env: &Env) {
    if let Some(fake) = env.cluster.fake_server() {
        fake.set_rollout_for(&env.ns, "stuck", RolloutMode::Stuck);
    }
    // On a real cluster the image cannot be pulled, so the pod never becomes available.
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.deployment("stuck", "registry.invalid/drover-e2e/never:1")], &[]);
    let started = std::time::Instant::now();
    env.agent(&["--health-timeout", "3s"]);
    let took = started.elapsed();
    assert!(took.as_secs_f64() >= 3.0, "the wait is bounded by --health-timeout, not skipped ({took:?})");
    let attempt = env.last_attempt();
    assert_eq!(attempt["health"], "Degraded", "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("Deployment") && reason.contains("stuck") && reason.contains("not ready after 3s"), "{reason}");
    assert_eq!(env.status()["health"], "Degraded");
    assert!(env.get("configmap", "a").is_some(), "applied objects stay applied");
    // The running agent reports it in /status and /metrics too.
    let port = drover_tests::free_port();
    let mut agent = env.agent_daemon(port, &["--health-timeout", "2s", "--interval", "1h"]);
    let metrics = kube_support::eventually(30, || http_get(port, "/metrics").filter(|m| m.lines().any(|l| l.starts_with("drover_health{") && l.contains("state=\"Degraded\"") && l.ends_with(" 1"))));
    let status = http_get(port, "/status");
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(metrics.is_some(), "drover_health{{state=\"Degraded\"}} 1 in /metrics");
    let status: serde_json::Value = serde_json::from_str(&status.expect("/status answers")).unwrap();
    assert_eq!(status["health"], "Degraded", "{status:#}");
}

#[test]
fn transient_errors_are_retried_fake_only() {
    let env = Env::new(Cluster::fake(), "transient");
    let fake = env.cluster.fake_server().unwrap();
    let path = format!("/api/v1/namespaces/{}/configmaps/a", env.ns);
    fake.inject(ErrorRule::new("PATCH", &path, 503, "etcd leader changed").times(2));
    fake.inject(ErrorRule::new("PATCH", &path.replace("/a", "/b"), 429, "slow down").reason("TooManyRequests").times(1));
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.configmap("b", "1", &[])], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(Env::action(&attempt, "ConfigMap", "a").0, "created", "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "b").0, "created", "{attempt:#}");
    assert_eq!(fake.count("PATCH", &path), 3, "two 503s then success");
    // A persistent 5xx is reported with the server's message after the retries.
    fake.inject(ErrorRule::new("PATCH", &path, 500, "storage is on fire").times(100));
    env.push(&[env.namespace(), env.configmap("a", "2", &[]), env.configmap("b", "1", &[])], &[]);
    assert_eq!(env.agent(&[]).code, 1);
    let (action, message) = Env::action(&env.last_attempt(), "ConfigMap", "a");
    assert_eq!(action, "failed");
    assert!(message.contains("500") && message.contains("storage is on fire") && message.contains("attempts"), "{message}");
}
