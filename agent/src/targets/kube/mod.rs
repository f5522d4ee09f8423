//! The `kube` target: server-side apply to a Kubernetes cluster (in-cluster config or
//! `KUBECONFIG`), in order groups with bounded concurrency, then a bounded health wait and
//! an ownership-checked prune. Decisions are written down in `docs/kubernetes.md`.
//!
//! Data flow inside the target: `cluster` (clients, options, probe) → `discovery` (kind →
//! resource) → `list` (paged LISTs read one item at a time) → `apply` (ownership, `compare`: skip what is already as desired, SSA,
//! `unlisted`: what the LISTs did not find is applied without a GET,
//! change detection, CRDs Established) → `wait` (health rules) → `contents` (what
//! deleting a Namespace takes with it) → `prune` (ownership, phases); `dryrun` what apply
//! and prune would do (`drover-agent plan`); `owner` is the one ownership rule, `state`
//! the in-cluster copy of the agent's record, `events` the Events about its attempts,
//! `retry` classifies API errors and retries transient ones.

pub mod adopt;
pub mod apply;
pub mod cluster;
pub mod compare;
pub mod contents;
pub mod discovery;
pub mod dryrun;
pub mod events;
pub mod identity;
pub mod list;
pub mod owner;
pub mod prune;
pub mod read;
pub mod retry;
pub mod schemas;
pub mod state;
pub mod unlisted;
pub mod wait;
pub mod writes;

use std::time::Duration;

pub use self::cluster::{KubeCluster, KubeOptions, KubeTarget};
use drover_proto::object::ObjectRef;

use super::{ApplyReport, ApplyRequest, BoxFuture, HealthReport, NamespaceContents, ObjectPlan, PruneReport, PruneRequest, Target, TargetError, TargetHold, TargetRecord};

impl Target for KubeTarget {
    fn describe(&self) -> String {
        match &self.opts.impersonate {
            Some(user) => format!("kube ({} as {user})", self.cluster),
            None => format!("kube ({})", self.cluster),
        }
    }

    fn writes(&self) -> Option<crate::targets::Writes> {
        Some(self.writes.total())
    }

    fn schemas(&self) -> Vec<crate::targets::KindSchema> {
        self.schema_sources()
    }

    fn cluster_scoped<'a>(&'a self, api_version: &'a str, kind: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(async move {
            match self.resolver.resolve(api_version, kind).await {
                Ok(r) => Ok(Some(!r.namespaced)),
                Err(discovery::ResolveError::Unknown(_)) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<ApplyReport, TargetError>> {
        Box::pin(async move {
            self.probe().await?;
            Ok(apply::apply(self, req).await)
        })
    }

    fn wait<'a>(&'a self, req: &'a ApplyRequest, timeout: Duration) -> BoxFuture<'a, HealthReport> {
        Box::pin(wait::wait(self, req, timeout))
    }

    fn prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<PruneReport, TargetError>> {
        Box::pin(async move {
            self.probe().await?;
            Ok(prune::prune(self, req).await)
        })
    }

    fn namespace_contents<'a>(&'a self, namespaces: &'a [ObjectRef]) -> BoxFuture<'a, Vec<NamespaceContents>> {
        Box::pin(contents::namespace_contents(self, namespaces))
    }

    fn read_record<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Option<TargetRecord>, TargetError>> {
        Box::pin(state::read(self, source))
    }

    fn read_hold<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Option<TargetHold>, TargetError>> {
        Box::pin(state::read_hold(self, source))
    }

    fn report_key<'a>(&'a self, generated: &'a [u8]) -> BoxFuture<'a, Result<Option<Vec<u8>>, TargetError>> {
        Box::pin(async move { identity::report_key(self, generated).await.map(Some) })
    }

    fn plan_apply<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        Box::pin(async move {
            self.probe().await?;
            Ok(dryrun::plan_apply(self, req).await)
        })
    }

    fn check_drift<'a>(&'a self, req: &'a ApplyRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        Box::pin(async move {
            self.probe().await?;
            Ok(dryrun::check_drift(self, req).await)
        })
    }

    fn plan_prune<'a>(&'a self, req: &'a PruneRequest) -> BoxFuture<'a, Result<Vec<ObjectPlan>, TargetError>> {
        Box::pin(async move {
            self.probe().await?;
            Ok(dryrun::plan_prune(self, req).await)
        })
    }

    fn write_record<'a>(&'a self, record: &'a TargetRecord) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(state::write(self, record))
    }

    fn record_event(&self, source: &str, event: &crate::events::Event) {
        let blank = state::blank(source, &self.opts.state_namespace).map(|object| events::Blank { object, manager: state::MANAGER });
        self.events.record(&state::configmap_name(source), blank, event);
    }

    fn flush_events(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        Box::pin(self.events.flush(timeout))
    }
}
