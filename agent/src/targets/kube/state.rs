//! The in-cluster copy of the agent's record: the anti-rollback floor and the prune
//! inventory of one source, in a ConfigMap of the agent's namespace (`POD_NAMESPACE`,
//! else `drover-system`), so a new leader, a drained node or a recreated pod (an
//! `emptyDir` state directory) still knows what is applied.
//!
//! - name `drover-state-<first 10 hex of sha256(source)>`; labels
//!   `app.kubernetes.io/managed-by: drover-agent` and `drover.dev/state: "true"`;
//!   annotation `drover.dev/source: <source>` (a record for another source is ignored);
//! - `data`: `appliedDigest`, `appliedSequence`, `policyFingerprint`, `appliedAt` (empty
//!   strings when unknown); while a rollback's refusal stands (`--on-degraded rollback`)
//!   also `rolledBackDigest` and `rolledBackSequence`, the refused bundle (it raises the
//!   floor, and a new leader refuses it too); `binaryData.inventory`: gzip of the JSON list of object
//!   identities, sorted (10,000 objects take ~170 KiB; the whole object must stay under
//!   the API server's 1 MiB, checked before writing);
//! - written with server-side apply, field manager `drover-agent`, with the agent's own
//!   identity (never the `--service-account` it impersonates for the bundle's objects);
//!   not written when it would only move `appliedAt` past the record read (or written)
//!   last in this process: a resync that changed nothing writes nothing, and `appliedAt`
//!   is the time of the apply that last changed the record. A record deleted meanwhile
//!   is read as missing before the next apply and written again after it.
//!
//! Whoever may write ConfigMaps in the agent's namespace can raise the floor (the agent
//! then refuses every bundle below it) or lower it by deleting the ConfigMap (the agent's
//! local record still holds it). They cannot make the agent apply anything unsigned: the
//! floor only ever refuses, and pruning stays limited to objects labelled as this
//! source's.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use drover_proto::channel::Position;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams};
use sha2::Digest;

use super::cluster::{KubeCluster, KubeTarget};
use super::retry::{with_retry, RetryPolicy};
use crate::hold::ANN_HOLD;
use crate::targets::{TargetError, TargetHold, TargetRecord};

/// Field manager (and `app.kubernetes.io/managed-by` value) of the state ConfigMaps.
pub const MANAGER: &str = "drover-agent";
/// The label every state ConfigMap carries (`"true"`).
pub const LABEL_STATE: &str = "drover.dev/state";
/// The API server's limit for a ConfigMap (data and binaryData together): 1 MiB.
pub const MAX_BYTES: usize = 1 << 20;
/// Largest inventory accepted when reading (decompressed JSON): a bomb is refused.
const MAX_INVENTORY_JSON: u64 = 64 << 20;

/// `drover-state-<first 10 hex of sha256(source)>`.
pub fn configmap_name(source: &str) -> String {
    let hash = hex::encode(sha2::Sha256::digest(source.as_bytes()));
    format!("drover-state-{}", &hash[..10])
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// The ConfigMap holding `rec` in `namespace`; fails when it would not fit in 1 MiB.
pub fn encode(rec: &TargetRecord, namespace: &str) -> Result<ConfigMap, String> {
    let mut inventory = rec.inventory.clone();
    inventory.sort();
    inventory.dedup();
    let json = serde_json::to_vec(&inventory).expect("object identities serialize");
    let (digest, sequence) = match &rec.floor {
        Some(p) => (p.digest.clone(), p.sequence.to_string()),
        None => (String::new(), String::new()),
    };
    let mut data = BTreeMap::from([
        ("appliedDigest".to_string(), digest),
        ("appliedSequence".to_string(), sequence),
        ("policyFingerprint".to_string(), rec.policy_fingerprint.clone()),
        ("appliedAt".to_string(), rec.applied_at.clone()),
    ]);
    if let Some(p) = &rec.rolled_back {
        data.insert("rolledBackDigest".to_string(), p.digest.clone());
        data.insert("rolledBackSequence".to_string(), p.sequence.to_string());
    }
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(configmap_name(&rec.source)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (drover_proto::media::LABEL_MANAGED_BY.to_string(), MANAGER.to_string()),
                (LABEL_STATE.to_string(), "true".to_string()),
            ])),
            annotations: Some(BTreeMap::from([(drover_proto::media::ANN_OBJ_SOURCE.to_string(), rec.source.clone())])),
            ..ObjectMeta::default()
        },
        data: Some(data),
        binary_data: Some(BTreeMap::from([("inventory".to_string(), ByteString(gzip(&json)))])),
        ..ConfigMap::default()
    };
    let size = serde_json::to_vec(&cm).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_BYTES {
        return Err(format!(
            "the record of {} objects takes {size} bytes, over the 1 MiB a ConfigMap may hold; the local state is kept",
            inventory.len()
        ));
    }
    Ok(cm)
}

/// The bundle the data keys `digest_key` and `sequence_key` name (both empty: none).
fn position(field: &dyn Fn(&str) -> String, digest_key: &str, sequence_key: &str) -> Result<Option<Position>, String> {
    let (digest, sequence) = (field(digest_key), field(sequence_key));
    match (digest.is_empty(), sequence.is_empty()) {
        (true, true) => Ok(None),
        (false, false) if digest.starts_with("sha256:") => {
            let sequence = sequence.parse::<u64>().map_err(|_| format!("{sequence_key} {sequence:?} is not a number"))?;
            Ok(Some(Position { digest, sequence }))
        }
        _ => Err(format!("{digest_key} {digest:?} and {sequence_key} {sequence:?} do not name a bundle")),
    }
}

/// Reads the record of `source` from its ConfigMap.
pub fn decode(cm: &ConfigMap, source: &str) -> Result<TargetRecord, String> {
    let owner = cm.metadata.annotations.as_ref().and_then(|a| a.get(drover_proto::media::ANN_OBJ_SOURCE));
    if owner.map(String::as_str) != Some(source) {
        return Err(format!("it is annotated {}: {owner:?}, not this agent's source {source:?}", drover_proto::media::ANN_OBJ_SOURCE));
    }
    let field = |k: &str| cm.data.as_ref().and_then(|d| d.get(k)).cloned().unwrap_or_default();
    let floor = position(&field, "appliedDigest", "appliedSequence")?;
    let rolled_back = position(&field, "rolledBackDigest", "rolledBackSequence")?;
    let inventory = match cm.binary_data.as_ref().and_then(|b| b.get("inventory")) {
        None => Vec::new(),
        Some(ByteString(gz)) => {
            let mut json = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .take(MAX_INVENTORY_JSON)
                .read_to_end(&mut json)
                .map_err(|e| format!("binaryData.inventory is not gzip: {e}"))?;
            serde_json::from_slice(&json).map_err(|e| format!("binaryData.inventory is not a list of object identities: {e}"))?
        }
    };
    Ok(TargetRecord { source: source.to_string(), floor, policy_fingerprint: field("policyFingerprint"), applied_at: field("appliedAt"), inventory, rolled_back })
}

fn describe(t: &KubeTarget, source: &str) -> String {
    format!("in-cluster state ConfigMap {}/{}", t.opts.state_namespace, configmap_name(source))
}

impl KubeCluster {
    /// Whether the state namespace exists (`Ok(false)`: the API server said it does not);
    /// `Err` when it cannot tell (unreachable, not allowed to get namespaces).
    pub async fn state_namespace_exists(&self, namespace: &str) -> Result<bool, String> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client());
        match with_retry(&RetryPolicy::default(), || api.get_opt(namespace)).await {
            Ok(found) => Ok(found.is_some()),
            Err(f) if f.not_found() => Ok(false),
            Err(f) => Err(f.message),
        }
    }
}

/// The record of `source`, `Ok(None)` when there is none (or its namespace does not exist).
pub(super) async fn read(t: &KubeTarget, source: &str) -> Result<Option<TargetRecord>, TargetError> {
    let api: Api<ConfigMap> = Api::namespaced(t.own.clone(), &t.opts.state_namespace);
    let name = configmap_name(source);
    let record = |m: String| TargetError::Record(format!("{}: {m}", describe(t, source)));
    match with_retry(&t.opts.retry, || api.get_opt(&name)).await {
        Ok(Some(cm)) => {
            seen(t, source, &cm);
            let rec = decode(&cm, source).map_err(record);
            remember(t, source, rec.as_ref().ok());
            rec.map(Some)
        }
        Ok(None) => {
            remember(t, source, None);
            Ok(None)
        }
        Err(f) => {
            remember(t, source, None);
            if f.not_found() {
                Ok(None)
            } else {
                Err(record(f.message))
            }
        }
    }
}

/// `rec` as the cluster holds it (inventory sorted, no duplicates), without `appliedAt`.
fn durable(rec: &TargetRecord) -> TargetRecord {
    let mut r = TargetRecord { applied_at: String::new(), ..rec.clone() };
    r.inventory.sort();
    r.inventory.dedup();
    r
}

/// Keeps what the cluster holds for `source` (None: unknown or missing).
fn remember(t: &KubeTarget, source: &str, rec: Option<&TargetRecord>) {
    let mut records = t.records.lock().expect("records lock");
    match rec {
        Some(r) => records.insert(source.to_string(), durable(r)),
        None => records.remove(source),
    };
}

/// The `drover.dev/hold` annotation of the state ConfigMap of `source`: its value is the
/// reason; since = the time of the managedFields entry that set it (the manager that
/// annotated), when there is one. No ConfigMap (or no namespace): no hold. The agent's
/// own writes (server-side apply, manager `drover-agent`) never own the annotation, so
/// they leave it in place.
pub(super) async fn read_hold(t: &KubeTarget, source: &str) -> Result<Option<TargetHold>, TargetError> {
    let api: Api<ConfigMap> = Api::namespaced(t.own.clone(), &t.opts.state_namespace);
    let name = configmap_name(source);
    let cm = match with_retry(&t.opts.retry, || api.get_opt(&name)).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return Ok(None),
        Err(f) if f.not_found() => return Ok(None),
        Err(f) => return Err(TargetError::Record(format!("{}: {}", describe(t, source), f.message))),
    };
    seen(t, source, &cm);
    Ok(hold_of(&cm))
}

/// Tells the Events which object they regard (its uid).
fn seen(t: &KubeTarget, source: &str, cm: &ConfigMap) {
    if let Some(uid) = &cm.metadata.uid {
        t.events.seen(&configmap_name(source), uid);
    }
}

/// The state ConfigMap of `source` holding no record (no floor, no inventory: what a
/// missing one means to every reader): what the Events create when it does not exist yet,
/// so that they regard it by uid from the first on (`super::events`).
pub(super) fn blank(source: &str, namespace: &str) -> Option<ConfigMap> {
    let empty = TargetRecord { source: source.to_string(), floor: None, policy_fingerprint: String::new(), applied_at: String::new(), inventory: Vec::new(), rolled_back: None };
    encode(&empty, namespace).ok()
}

/// The hold an annotated state ConfigMap carries.
pub fn hold_of(cm: &ConfigMap) -> Option<TargetHold> {
    let reason = cm.metadata.annotations.as_ref()?.get(ANN_HOLD)?.clone();
    let key = format!("f:{ANN_HOLD}");
    let since = cm.metadata.managed_fields.iter().flatten().find_map(|m| {
        let fields = &m.fields_v1.as_ref()?.0;
        fields.pointer("/f:metadata/f:annotations")?.get(&key)?;
        m.time.as_ref().map(|t| t.0.to_string())
    });
    Some(TargetHold { reason, since })
}

/// Writes `rec` (server-side apply, field manager `drover-agent`, the agent's identity).
pub(super) async fn write(t: &KubeTarget, rec: &TargetRecord) -> Result<(), TargetError> {
    let record = |m: String| TargetError::Record(format!("{}: {m}", describe(t, &rec.source)));
    if t.records.lock().expect("records lock").get(&rec.source) == Some(&durable(rec)) {
        tracing::debug!("{} already holds this floor and inventory: not rewritten", describe(t, &rec.source));
        return Ok(());
    }
    let cm = encode(rec, &t.opts.state_namespace).map_err(record)?;
    let api: Api<ConfigMap> = Api::namespaced(t.own.clone(), &t.opts.state_namespace);
    let params = PatchParams::apply(MANAGER).force();
    let patch = Patch::Apply(&cm);
    let name = configmap_name(&rec.source);
    let written = with_retry(&t.opts.retry, || api.patch(&name, &params, &patch)).await.map(|cm| seen(t, &rec.source, &cm)).map_err(|f| record(f.message));
    remember(t, &rec.source, written.as_ref().ok().map(|_| rec));
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::object::ObjectRef;

    fn record(n: usize) -> TargetRecord {
        // Realistic identities: several kinds, many namespaces, names with hash suffixes
        // (the part gzip cannot squeeze).
        let kinds = [("v1", "ConfigMap"), ("apps/v1", "Deployment"), ("v1", "Service"), ("rbac.authorization.k8s.io/v1", "RoleBinding")];
        let inventory = (0..n)
            .map(|i| {
                let (api_version, kind) = kinds[i % kinds.len()];
                let h = hex::encode(sha2::Sha256::digest(i.to_le_bytes()));
                ObjectRef {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    namespace: Some(format!("team-{:03}", i % 300)),
                    name: format!("service-{}-{}", &h[..10], &h[10..16]),
                }
            })
            .collect();
        TargetRecord {
            source: "registry.example.com/fleet/cloud-standard:prod-ring0".into(),
            floor: Some(Position { digest: format!("sha256:{}", "ab".repeat(32)), sequence: 1_764_000_000 }),
            policy_fingerprint: format!("sha256:{}", "cd".repeat(32)),
            applied_at: "2026-11-23T09:00:00Z".into(),
            inventory,
            rolled_back: None,
        }
    }

    #[test]
    fn name_is_the_hash_prefix() {
        let n = configmap_name("registry.example/fleet/edge:prod");
        assert!(n.starts_with("drover-state-") && n.len() == "drover-state-".len() + 10, "{n}");
        assert_ne!(n, configmap_name("registry.example/fleet/edge:dev"));
    }

    #[test]
    fn round_trip() {
        let rec = record(50);
        let cm = encode(&rec, "drover-system").unwrap();
        assert_eq!(cm.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"], "drover-agent");
        assert_eq!(cm.metadata.labels.as_ref().unwrap()["drover.dev/state"], "true");
        let back = decode(&cm, &rec.source).unwrap();
        let mut want = rec.clone();
        want.inventory.sort();
        assert_eq!(back, want);
        assert!(decode(&cm, "registry.example/other:prod").unwrap_err().contains("not this agent's source"));
        let empty = TargetRecord { source: rec.source.clone(), ..TargetRecord::default() };
        assert_eq!(decode(&encode(&empty, "x").unwrap(), &rec.source).unwrap(), empty);
    }

    #[test]
    fn ten_thousand_objects_fit_in_a_configmap() {
        for n in [10_000, 20_000] {
            let cm = encode(&record(n), "drover-system").unwrap();
            let size = serde_json::to_vec(&cm).unwrap().len();
            assert!(size < MAX_BYTES / 2, "{n} objects: {size} bytes");
            println!("{n} objects: {size} bytes");
        }
        // Names of 192 random hex characters (the longest names are 253): too big.
        let mut huge = record(20_000);
        for (i, o) in huge.inventory.iter_mut().enumerate() {
            o.name = (0..3u64).map(|k| hex::encode(sha2::Sha256::digest((i as u64 + (k << 32)).to_le_bytes()))).collect();
        }
        let err = encode(&huge, "drover-system").unwrap_err();
        assert!(err.contains("over the 1 MiB"), "{err}");
    }

    #[test]
    fn bad_records_are_refused() {
        let rec = record(1);
        let mut cm = encode(&rec, "x").unwrap();
        cm.data.as_mut().unwrap().insert("appliedSequence".into(), "many".into());
        assert!(decode(&cm, &rec.source).unwrap_err().contains("appliedSequence"));
        let mut cm = encode(&rec, "x").unwrap();
        cm.binary_data.as_mut().unwrap().insert("inventory".into(), ByteString(b"not gzip".to_vec()));
        assert!(decode(&cm, &rec.source).unwrap_err().contains("not gzip"));
    }
}
