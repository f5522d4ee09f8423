//! The cluster's report key on the kube target (issue 26): made at the first start, kept
//! in a Secret of the agent's namespace, and the same for every later agent of the
//! cluster — a restart, a new leader, a new pod with an empty state directory — so its
//! reports keep verifying against the roster. The private key stays in the cluster: the
//! report carries only the public half. FAKE API server, or a real cluster.

mod kube_support;

use base64::Engine as _;
use drover_proto::keys::{PrivateKey, PublicKey};
use kube_support::{Agent, Env};
use serde_json::Value;

scenarios!(a_new_pod_keeps_the_clusters_report_key);

/// The report `edge.<name>` as skopeo reads it: (manifest, the document's bytes).
fn report(env: &Env, name: &str) -> (Value, Vec<u8>) {
    let reference = format!("docker://{}", env.reg.reference(&format!("fleet/drover-reports:edge.{name}")));
    let manifest: Value = serde_json::from_str(&drover_tests::tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &reference])).unwrap();
    let data = base64::engine::general_purpose::STANDARD.decode(manifest["config"]["data"].as_str().unwrap()).unwrap();
    (manifest, data)
}

fn a_new_pod_keeps_the_clusters_report_key(env: &Env) {
    let docs = vec![env.namespace(), env.configmap("settings", "one", &[])];
    env.push(&docs, &["--cluster-type", "edge", "--environment", "prod"]);
    let reporting = ["--cluster-name", "k1", "--expect-cluster-type", "edge", "--expect-environment", "prod"];
    env.agent_ok_in(&Agent::with_state("pod-a"), &reporting);
    let (manifest, doc) = report(env, "k1");
    let key_b64 = manifest["annotations"]["dev.drover.report.key"].as_str().expect("the report is signed").to_string();

    // The Secret holds the private key; the report its public half, which verifies the
    // report's signature.
    let secret = env.get_in(&env.ns, "secret", "drover-report-key").expect("the report key Secret in the agent's namespace");
    let pem = base64::engine::general_purpose::STANDARD.decode(secret["data"]["key.pem"].as_str().unwrap()).unwrap();
    let private = PrivateKey::from_pem(&pem, "", "the Secret").unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let public = PublicKey::from_spki_der(b64.decode(&key_b64).unwrap(), "the report").unwrap();
    assert_eq!(private.public_key().fingerprint(), public.fingerprint());
    let sig = b64.decode(manifest["annotations"]["dev.drover.report.signature"].as_str().unwrap()).unwrap();
    assert!(public.verify(&doc, &sig), "the report's signature verifies with the key it names");
    assert!(!serde_json::to_string(&manifest).unwrap().contains("PRIVATE KEY"), "the private key never leaves the cluster");

    // A new pod (another, empty state directory): the same key signs its reports.
    env.agent_ok_in(&Agent::with_state("pod-b"), &reporting);
    let (again, _) = report(env, "k1");
    assert_eq!(again["annotations"]["dev.drover.report.key"].as_str(), Some(key_b64.as_str()), "the cluster keeps its identity");
    assert!(!env.dir.path().join("pod-b/report-key.pem").exists(), "the kube target keeps the key in the cluster, not in the state directory");
}
