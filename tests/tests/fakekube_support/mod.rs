//! Helpers shared by the fakekube_* tests: a `kube` client from a kubeconfig and
//! small object builders.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};
use std::path::Path;

/// A `kube` client through the kubeconfig at `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(cfg).expect("kube client")
}

/// Server-side apply parameters for field manager `manager`.
pub fn ssa(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

/// (code, reason, message) of an API error; panics on other errors.
pub fn api_err(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Applies Namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.patch(
        name,
        &ssa("drover").force(),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
    )
    .await
    .expect("apply namespace");
}

/// A ConfigMap labelled `app: web` with `data`.
pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "web"}}, "data": data})
}

/// A one-container Deployment with `replicas`.
pub fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}
    })
}

/// The `metadata.managedFields` entries of an object.
pub fn managed(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
