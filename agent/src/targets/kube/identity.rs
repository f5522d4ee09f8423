//! The cluster's report key on the kube target (docs/fleet.md, "Who can write a report"):
//! a Secret `drover-report-key` in the agent's namespace (`POD_NAMESPACE`, else
//! `drover-system`), `data["key.pem"]` = the PKCS#8 PEM private key, labelled
//! `app.kubernetes.io/managed-by: drover-agent`. Created by the first agent that needs it
//! (create, never overwrite: two agents starting at once both end with the key that was
//! stored first), read by every later one — a restart, a new leader, a new pod with an
//! empty state directory keep the cluster's identity. The key never leaves the cluster:
//! reports carry only its public half. Read and created with the agent's own identity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};

use super::cluster::KubeTarget;
use super::retry::with_retry;
use super::state::MANAGER;
use crate::targets::TargetError;

/// The Secret's name.
pub const SECRET: &str = "drover-report-key";
/// The key inside it.
pub const FIELD: &str = "key.pem";

fn failed(t: &KubeTarget, what: &str, m: impl std::fmt::Display) -> TargetError {
    TargetError::Record(format!(
        "{what} the report key Secret {}/{SECRET}: {m} (the agent needs get and create on secrets named {SECRET} in its namespace)",
        t.opts.state_namespace
    ))
}

fn key_of(t: &KubeTarget, s: &Secret) -> Result<Vec<u8>, TargetError> {
    s.data
        .as_ref()
        .and_then(|d| d.get(FIELD))
        .map(|b| b.0.clone())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| failed(t, "reading", format!("it has no data[{FIELD:?}]")))
}

/// The report key stored in the Secret, storing `generated` first when there is none.
pub(super) async fn report_key(t: &KubeTarget, generated: &[u8]) -> Result<Vec<u8>, TargetError> {
    let api: Api<Secret> = Api::namespaced(t.own.clone(), &t.opts.state_namespace);
    match with_retry(&t.opts.retry, || api.get_opt(SECRET)).await {
        Ok(Some(s)) => return key_of(t, &s),
        Ok(None) => {}
        Err(f) if f.not_found() => {}
        Err(f) => return Err(failed(t, "reading", f.message)),
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SECRET.into()),
            namespace: Some(t.opts.state_namespace.clone()),
            labels: Some(BTreeMap::from([(drover_proto::media::LABEL_MANAGED_BY.to_string(), MANAGER.to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(FIELD.to_string(), ByteString(generated.to_vec()))])),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    let params = PostParams { field_manager: Some(MANAGER.into()), ..Default::default() };
    match with_retry(&t.opts.retry, || api.create(&params, &secret)).await {
        Ok(_) => {
            tracing::info!("created the report key Secret {}/{SECRET}", t.opts.state_namespace);
            Ok(generated.to_vec())
        }
        // Another agent stored its key first: that one is the cluster's.
        Err(f) if f.conflict() => match with_retry(&t.opts.retry, || api.get(SECRET)).await {
            Ok(s) => key_of(t, &s),
            Err(f) => Err(failed(t, "reading", f.message)),
        },
        Err(f) => Err(failed(t, "creating", f.message)),
    }
}
