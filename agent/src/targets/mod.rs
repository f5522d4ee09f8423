//! Where desired state lands: the [`Target`] trait every target implements (`dir:` here,
//! `kube` in `targets/kube`), and the typed values the pipeline exchanges with it.
//!
//! Modelled on fluxcd/pkg `ssa`: the pipeline hands a target a [`ApplyRequest`] with the
//! objects already checked and sorted into [`OrderGroup`]s (plan stage); the target
//!
//! 1. [`Target::apply`]s the groups in order (a target may wait between groups, e.g. for
//!    CRDs to be Established) and reports one [`ObjectOutcome`] per object. An outcome
//!    says whether the object changed on the target ([`Action::Created`] /
//!    [`Action::Configured`]): on a resync of an unchanged bundle every change is a drift
//!    correction. An object that fails is that object's outcome: the kube target applies
//!    every other object and every later group all the same (one object a tenant made
//!    unappliable must not stop the rest). A target that cannot apply objects one by one
//!    stops at the first failure and reports the rest as [`Action::Skipped`]; it must
//!    leave nothing half-written that it can avoid (the dir target stages then renames);
//! 2. [`Target::wait`]s, bounded by a timeout, for the applied objects to become healthy
//!    and returns a [`HealthReport`] (Healthy / Progressing / Degraded);
//! 3. [`Target::prune`]s the objects the pipeline asks it to delete ([`PruneRequest`]:
//!    the candidates plus the previous inventory for context). The target itself honours
//!    `drover.dev/prune: disabled` (kept) and ownership (an object whose
//!    `drover.dev/source` names another source, or that lacks our managed-by label, is
//!    refused), and reports deleted / kept / refused per object. Before deciding, the
//!    pipeline asks what deleting a Namespace would take with it
//!    ([`Target::namespace_contents`]).
//!
//! A target may also keep a [`TargetRecord`] (floor and inventory) next to the objects
//! ([`Target::read_record`], [`Target::write_record`]): the kube target does, so a new
//! agent with an empty state directory knows what is applied.
//!
//! Decisions that are NOT the target's: which objects to prune (inventory difference),
//! the prune-ratio safety valve, and what follows a failure all live in the pipeline
//! (`prune.rs`, `pipeline/`): after failures of single objects the rest goes on (wait,
//! prune, record, the failed objects named and Degraded); after an apply that stopped
//! (objects skipped) or applied nothing, nothing is pruned. Targets never see unverified
//! content.
//!
//! The trait is object-safe (`Box<dyn Target>`): async methods return a [`BoxFuture`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use drover_proto::object::ObjectRef;
use serde::{Deserialize, Serialize};

use crate::order::ApplyStage;

pub mod dir;
pub mod kube;

/// A boxed future: what the async trait methods return. Not required to be `Send`: the
/// agent drives the pipeline on a current-thread runtime (implementations may still
/// return `Send` futures).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// One verified, policy-checked object ready to apply.
#[derive(Debug, Clone)]
pub struct PlannedObject {
    /// Identity (as in the signed config index).
    pub id: ObjectRef,
    /// Path inside the bundle (`manifests/...`); the dir target writes it there.
    pub path: String,
    /// The exact bytes from the bundle (hash checked against the signed index).
    pub yaml: Arc<Vec<u8>>,
}

impl PlannedObject {
    /// The parsed object, parsed from [`PlannedObject::yaml`] on every call and not kept:
    /// parsed trees take several times the bytes (10,000 objects: tens of MiB), and a
    /// target needs one object at a time. The unpack stage already parsed and checked the
    /// bytes, so this fails only for an object that was never unpacked.
    pub fn value(&self) -> Result<serde_json::Value, String> {
        drover_proto::bundle::parse_single_object(&self.yaml).map_err(|e| format!("{}: {e}", self.path))
    }
}

/// The objects of one apply stage, in a stable order.
#[derive(Debug, Clone)]
pub struct OrderGroup {
    /// The apply stage.
    pub stage: ApplyStage,
    /// Its objects.
    pub objects: Vec<PlannedObject>,
}

/// Everything a target needs to apply one bundle.
#[derive(Debug, Clone)]
pub struct ApplyRequest {
    /// The configured source reference (value of `drover.dev/source`).
    pub source: String,
    /// The bundle's manifest digest (value of `drover.dev/digest`).
    pub digest: String,
    /// The bundle's sequence.
    pub sequence: u64,
    /// Server-side apply field manager (`--field-manager`, default `drover`).
    pub field_manager: String,
    /// The object groups in apply order (empty groups are omitted).
    pub groups: Vec<OrderGroup>,
    /// The health rules in CEL for its objects (the bundle's over the agent's
    /// `healthChecks`, [`crate::wait::rules`]); a target that reads live objects applies
    /// them in [`Target::wait`] instead of its built-in rule for the kind.
    pub health: Arc<drover_proto::health::Rules>,
}

impl ApplyRequest {
    /// All objects across groups, in apply order.
    pub fn objects(&self) -> impl Iterator<Item = &PlannedObject> {
        self.groups.iter().flat_map(|g| g.objects.iter())
    }
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Apply: did not exist, now does.
    Created,
    /// Apply: existed and was changed (on a resync: a drift correction).
    Configured,
    /// Apply: already as desired.
    Unchanged,
    /// Apply: failed (see `message`).
    Failed,
    /// Apply: not attempted because an earlier group failed.
    Skipped,
    /// Prune: deleted.
    Deleted,
    /// Prune: kept on purpose (`drover.dev/prune: disabled`, or the object is already gone).
    Kept,
    /// Prune: refused (not ours, or the safety valve held it back).
    Refused,
    /// Apply: the object existed without drover's label (made by hand or another tool)
    /// and was taken over; drover manages (and prunes) it from now on.
    Adopted,
    /// Apply: the object belongs to another drover source; not applied, not in this
    /// source's inventory, never pruned by it (see `message`).
    Conflict,
    /// Apply: the object is being deleted (`deletionTimestamp` set, held by finalizers);
    /// not applied (see `message`: since when, which finalizers); recreated once gone.
    Terminating,
}

impl Action {
    /// Every action (the label values of `drover_objects_total`).
    pub const ALL: [Action; 11] = [
        Action::Created,
        Action::Configured,
        Action::Unchanged,
        Action::Failed,
        Action::Skipped,
        Action::Deleted,
        Action::Kept,
        Action::Refused,
        Action::Adopted,
        Action::Conflict,
        Action::Terminating,
    ];

    /// True when the target changed this object.
    pub fn changed(self) -> bool {
        matches!(self, Action::Created | Action::Configured | Action::Adopted | Action::Deleted)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        f.write_str(&s)
    }
}

/// The outcome for one object (recorded in history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectOutcome {
    /// The object.
    pub object: ObjectRef,
    /// What happened.
    pub action: Action,
    /// Why (errors, reasons for kept/refused); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ObjectOutcome {
    /// An outcome without a message.
    pub fn new(object: ObjectRef, action: Action) -> Self {
        ObjectOutcome { object, action, message: String::new() }
    }

    /// An outcome with a message.
    pub fn with(object: ObjectRef, action: Action, message: impl Into<String>) -> Self {
        ObjectOutcome { object, action, message: message.into() }
    }
}

/// The result of [`Target::apply`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApplyReport {
    /// One outcome per requested object, in apply order.
    pub outcomes: Vec<ObjectOutcome>,
    /// What the target found worth saying about the attempt as a whole (the dir target:
    /// files it did not write); they join the attempt's reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ApplyReport {
    /// True when any object failed (the pipeline then neither waits nor prunes).
    pub fn failed(&self) -> bool {
        self.outcomes.iter().any(|o| o.action == Action::Failed)
    }

    /// Number of objects the target changed (drift corrections on a resync).
    pub fn changed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.action.changed()).count()
    }

    /// The first failure, for the attempt's reason.
    pub fn first_failure(&self) -> Option<&ObjectOutcome> {
        self.outcomes.iter().find(|o| o.action == Action::Failed)
    }

    /// Objects another drover source owns (not applied; not this source's).
    pub fn conflicts(&self) -> impl Iterator<Item = &ObjectOutcome> {
        self.outcomes.iter().filter(|o| o.action == Action::Conflict)
    }
}

/// Health of the applied state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Health {
    /// Every object is ready.
    Healthy,
    /// Still rolling out when the wait timed out; not an error.
    #[default]
    Progressing,
    /// An object failed (rollout failed, Job failed, CRD not established, ...).
    Degraded,
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Health::Healthy => "Healthy",
            Health::Progressing => "Progressing",
            Health::Degraded => "Degraded",
        })
    }
}

/// Health of one object that is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectHealth {
    /// The object.
    pub object: ObjectRef,
    /// Its health.
    pub health: Health,
    /// Why.
    pub message: String,
}

/// The result of [`Target::wait`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    /// Overall: the worst of all objects.
    pub health: Health,
    /// Objects that are not healthy (empty when healthy).
    pub objects: Vec<ObjectHealth>,
}

impl HealthReport {
    /// A report saying everything is healthy.
    pub fn healthy() -> Self {
        HealthReport { health: Health::Healthy, objects: Vec::new() }
    }
}

/// What the pipeline asks a target to delete.
#[derive(Debug, Clone)]
pub struct PruneRequest {
    /// The configured source (objects owned by another source are refused).
    pub source: String,
    /// The digest just applied.
    pub digest: String,
    /// Objects to delete: in the previous inventory, not in the new bundle.
    pub delete: Vec<ObjectRef>,
    /// The previous inventory (context; the delete list is a subset).
    pub previous: Vec<ObjectRef>,
}

/// The result of [`Target::prune`]: one outcome per requested object
/// ([`Action::Deleted`], [`Action::Kept`] or [`Action::Refused`], or [`Action::Failed`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PruneReport {
    /// Outcomes.
    pub outcomes: Vec<ObjectOutcome>,
}

impl PruneReport {
    /// Objects deleted.
    pub fn deleted(&self) -> usize {
        self.outcomes.iter().filter(|o| o.action == Action::Deleted).count()
    }

    /// Objects that stay on the target (kept, refused or failed): they stay in the inventory.
    pub fn remaining(&self) -> impl Iterator<Item = &ObjectRef> {
        self.outcomes.iter().filter(|o| o.action != Action::Deleted).map(|o| &o.object)
    }
}

/// What a target keeps about one source next to the objects themselves: the anti-rollback
/// floor and the prune inventory, a copy of the agent's own record that outlives its state
/// directory (the kube target: a ConfigMap in the agent's namespace). The agent reads it
/// on every apply decision (the higher floor wins) and writes it after every recorded
/// apply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetRecord {
    /// The source it is about.
    pub source: String,
    /// The applied bundle (digest and sequence), when one was applied.
    pub floor: Option<drover_proto::channel::Position>,
    /// Fingerprint of the trust policy the applied bundle was verified under (empty when
    /// unknown).
    pub policy_fingerprint: String,
    /// When it was applied (RFC 3339), empty when unknown.
    pub applied_at: String,
    /// The objects on the target that belong to the source.
    pub inventory: Vec<ObjectRef>,
    /// The bundle refused after a rollback (`--on-degraded rollback`), while the refusal
    /// stands: it raises the floor, and a new leader refuses it too ([`crate::rollback`]).
    pub rolled_back: Option<drover_proto::channel::Position>,
}

/// What applying (or pruning) would do to one object (`drover-agent plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PlanAction {
    /// Does not exist: would be created.
    Create,
    /// Exists and would change (see the diff).
    Update,
    /// Exists as desired: nothing would change.
    Unchanged,
    /// Not in the new bundle: would be deleted.
    Prune,
    /// Not in the new bundle but would not be deleted (safety valve, ownership,
    /// `drover.dev/prune: disabled`, a Namespace holding other objects).
    PruneRefused,
    /// Belongs to another drover source: would not be applied.
    Conflict,
    /// Would fail (the API server refused the dry run, an unsafe path).
    Failed,
    /// Refused by the source's policy (`--allow-namespace`, `--deny-kind`): would not be
    /// applied.
    Refused,
}

impl PlanAction {
    /// True when the target would change.
    pub fn changes(self) -> bool {
        matches!(self, PlanAction::Create | PlanAction::Update | PlanAction::Prune)
    }
}

/// What would happen to one object, with the changed fields of an update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectPlan {
    /// The object.
    pub object: ObjectRef,
    /// What would happen.
    pub action: PlanAction,
    /// Why (refusals, failures, notes); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The changed fields of an update.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<crate::diff::FieldChange>,
}

impl ObjectPlan {
    /// A plan entry with a message.
    pub fn with(object: ObjectRef, action: PlanAction, message: impl Into<String>) -> Self {
        ObjectPlan { object, action, message: message.into(), diff: Vec::new() }
    }
}

/// A hold the target keeps (the kube target: the `drover.dev/hold` annotation on the
/// agent's state ConfigMap, see [`crate::hold`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetHold {
    /// The operator's reason (the annotation's value).
    pub reason: String,
    /// Since when (RFC 3339), when the target can tell.
    pub since: Option<String>,
}

/// What deleting one Namespace would take with it (prune safety).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceContents {
    /// The Namespace.
    pub namespace: ObjectRef,
    /// The objects inside it, without those that are derived from others (owner
    /// references) and those every namespace has (see the target's docs).
    pub objects: Vec<ObjectRef>,
    /// Set when the contents could not be listed completely (the Namespace is then kept).
    pub error: Option<String>,
}

/// A target failure that is not about one object (cannot reach the cluster, disk full).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The target cannot be reached or used; nothing was changed.
    #[error("target unavailable: {0}")]
    Unavailable(String),
    /// The record the target keeps ([`TargetRecord`]) cannot be read or written.
    #[error("{0}")]
    Record(String),
    /// A local file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What failed.
        message: String,
    },
}

/// Where the kube target took a kind's schema from for its compare (docs/kubernetes.md,
/// "Which schema"): shown in `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "source")]
pub enum SchemaSource {
    /// drover-ssa's built-in table, as the server's Kubernetes minor has it (255: newer
    /// than every published spec the table holds).
    Builtin {
        /// The minor whose answers were used.
        minor: u8,
    },
    /// The CRD the bundle carries.
    BundleCrd,
    /// The CRD on the cluster.
    ClusterCrd,
    /// The server's own OpenAPI v3 of the kind's group-version.
    ServerOpenapi,
    /// None known: every map granular, every list atomic.
    Deduced,
}

impl fmt::Display for SchemaSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaSource::Builtin { minor: 255 } => f.write_str("built-in (newer than 1.35: the Go API types)"),
            SchemaSource::Builtin { minor } => write!(f, "built-in (Kubernetes 1.{minor})"),
            SchemaSource::BundleCrd => f.write_str("the bundle's CRD"),
            SchemaSource::ClusterCrd => f.write_str("the cluster's CRD"),
            SchemaSource::ServerOpenapi => f.write_str("the server's OpenAPI"),
            SchemaSource::Deduced => f.write_str("deduced (no schema: lists atomic)"),
        }
    }
}

/// A kind and where its schema came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindSchema {
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Where its schema came from.
    #[serde(flatten)]
    pub source: SchemaSource,
}

/// Writes sent to the API server, by verb.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Writes {
    /// POST.
    pub create: u64,
    /// PUT.
    pub update: u64,
    /// PATCH (server-side apply included).
    pub patch: u64,
    /// DELETE.
    pub delete: u64,
}

impl Writes {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.create + self.update + self.patch + self.delete
    }

    /// `self - before`.
    pub fn since(&self, before: &Writes) -> Writes {
        Writes {
            create: self.create.saturating_sub(before.create),
            update: self.update.saturating_sub(before.update),
            patch: self.patch.saturating_sub(before.patch),
            delete: self.delete.saturating_sub(before.delete),
        }
    }
}

/// A place desired state is applied to. Implementations: [`dir::DirTarget`], and the
/// Kubernetes target. Object-safe: use as `Arc<dyn Target>`.
pub trait Target: Send + Sync {
    /// Short description for logs and status (`dir:/srv/out`, `kube`).
    fn describe(&self) -> String;

    /// The writes sent to the target's API so far, when it counts them (the kube target);
    /// the pipeline records the difference per attempt.
    fn writes(&self) -> Option<Writes> {
        None
    }

    /// Where the schema of each kind compared so far came from (the kube target); shown
    /// in `status`.
    fn schemas(&self) -> Vec<KindSchema> {
        Vec::new()
    }

    /// Whether objects of `kind` in `api_version` are cluster-scoped on this target, when
    /// the target can tell (the kube target asks discovery); `Ok(None)` (the default): it
    /// cannot (unknown kind); `Err`: asking failed (worth retrying). The plan stage asks it
    /// for objects that claim a namespace while `--allow-namespace` is in force: a
    /// cluster-scoped object is not confined by the namespace it claims.
    fn cluster_scoped<'a>(&'a self, _api_version: &'a str, _kind: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(async { Ok(None) })
    }

    /// Applies the groups in order; one outcome per object. `Err` only when nothing could
    /// be attempted (then nothing was changed).
    fn apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<ApplyReport, TargetError>>;

    /// Waits at most `timeout` for the applied objects to become healthy.
    fn wait<'a>(&'a self, req: &'a ApplyRequest, timeout: Duration) -> BoxFuture<'a, HealthReport>;

    /// Deletes the requested objects, honouring `drover.dev/prune: disabled` and ownership.
    fn prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<PruneReport, TargetError>>;

    /// What deleting each of `namespaces` would take with it. Default: nothing (a target
    /// whose Namespaces are plain objects).
    fn namespace_contents<'a>(&'a self, namespaces: &'a [ObjectRef]) -> BoxFuture<'a, Vec<NamespaceContents>> {
        Box::pin(async move {
            namespaces.iter().map(|n| NamespaceContents { namespace: n.clone(), objects: Vec::new(), error: None }).collect()
        })
    }

    /// The record this target keeps for `source`; `Ok(None)` when it keeps none.
    /// Default: the target keeps no record.
    fn read_record<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Option<TargetRecord>, TargetError>> {
        let _ = source;
        Box::pin(async { Ok(None) })
    }

    /// The cluster's report key kept on the target (PKCS#8 PEM), stored as `generated`
    /// when there is none yet (the first agent to start wins; the others read its key);
    /// `Ok(None)`: the target keeps no key and the agent keeps it in its state directory
    /// ([`crate::identity`]). Default: none.
    fn report_key<'a>(&'a self, generated: &'a [u8]) -> BoxFuture<'a, Result<Option<Vec<u8>>, TargetError>> {
        let _ = generated;
        Box::pin(async { Ok(None) })
    }

    /// The operator's hold on `source` kept on the target, `Ok(None)` when there is none.
    /// Read on every poll ([`crate::hold::Gate`]). Default: the target keeps no hold.
    fn read_hold<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Option<TargetHold>, TargetError>> {
        let _ = source;
        Box::pin(async { Ok(None) })
    }

    /// What [`Target::apply`] of `req` would do, per object, changing nothing (the kube
    /// target asks the API server with a server-side dry run).
    fn plan_apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        let _ = req;
        Box::pin(async move { Err(TargetError::Unavailable(format!("{} cannot plan", self.describe()))) })
    }

    /// What [`Target::prune`] of `req` would do, per object ([`PlanAction::Prune`] or
    /// [`PlanAction::PruneRefused`]), changing nothing.
    fn plan_prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        let _ = req;
        Box::pin(async move { Err(TargetError::Unavailable(format!("{} cannot plan", self.describe()))) })
    }

    /// What re-applying `req` (the applied bundle, on a resync) would change, per object,
    /// changing nothing: the resync of `--drift report` ([`crate::drift`]). An
    /// [`PlanAction::Update`] carries the drifted fields. Default: [`Target::plan_apply`].
    fn check_drift<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        self.plan_apply(req)
    }

    /// Stores `record` (after a recorded apply). Default: nothing is kept.
    fn write_record<'a>(&'a self, record: &'a TargetRecord) -> BoxFuture<'a, Result<(), TargetError>> {
        let _ = record;
        Box::pin(async { Ok(()) })
    }

    /// Tells the target's operators what an attempt of `source` ended with ([`crate::events`];
    /// the kube target: an Event regarding its state ConfigMap). Never blocks and never
    /// fails: best effort, queued and written in the background. Default: not recorded.
    fn record_event(&self, source: &str, event: &crate::events::Event) {
        let _ = (source, event);
    }

    /// Waits at most `timeout` for the recorded events to be written (before the agent
    /// exits). Default: nothing to wait for.
    fn flush_events(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        let _ = timeout;
        Box::pin(async {})
    }
}
