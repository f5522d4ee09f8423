//! Throughput of the FAKE API server itself (so agent benchmarks know it is not the
//! bottleneck): 1,000 ConfigMaps server-side applied through `kube`, one at a time and
//! 16 at a time, then `kubectl apply --server-side` of the same 1,000 objects.
//! Ignored by default; run with
//! `cargo test --release -p drover-tests --test fakekube_bench -- --ignored --nocapture`.

use drover_tests::fakekube::{kubectl_ok, FakeApiServer};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use std::time::Instant;

const N: usize = 1000;

fn body(i: usize, ns: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}"), "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "drover"}}, "data": {"i": i.to_string(), "payload": "x".repeat(200)}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn apply_1000_objects() {
    let fake = FakeApiServer::start();
    let client = drover_tests::fakekube::KubeEnv::Real { kubeconfig: fake.kubeconfig_path().to_path_buf() }.client().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in ["seq", "par", "kubectl"] {
        nss.patch(ns, &PatchParams::apply("bench"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))).await.unwrap();
    }
    let seq: Api<ConfigMap> = Api::namespaced(client.clone(), "seq");
    let t = Instant::now();
    for i in 0..N {
        seq.patch(&format!("cm-{i}"), &PatchParams::apply("drover").force(), &Patch::Apply(body(i, "seq"))).await.unwrap();
    }
    let t_seq = t.elapsed();
    let par: Api<ConfigMap> = Api::namespaced(client.clone(), "par");
    let t = Instant::now();
    futures::stream::iter(0..N)
        .map(|i| {
            let par = par.clone();
            async move { par.patch(&format!("cm-{i}"), &PatchParams::apply("drover").force(), &Patch::Apply(body(i, "par"))).await.unwrap() }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let t_par = t.elapsed();
    let docs: Vec<String> = (0..N).map(|i| serde_yaml_ng::to_string(&body(i, "kubectl")).unwrap()).collect();
    let t = Instant::now();
    kubectl_ok(fake.kubeconfig_path(), &["apply", "--server-side", "-f", "-"], &docs.join("---\n"));
    let t_kubectl = t.elapsed();
    assert_eq!(fake.objects().len(), 3 * N + 7);
    println!("fake-apiserver: {N} SSA applies: sequential {t_seq:?}, 16 concurrent {t_par:?}, kubectl apply --server-side {t_kubectl:?}");
}
