//! The parts of each source, built from the settings, with what the sources share built
//! once ([`Clients`]): one registry client per transport (plain HTTP, CA file: clones share
//! the connection pool and what was learnt about authentication), one Kubernetes client
//! ([`KubeCluster`]). Per source: its trust policy, plan policy, target (a view of the one
//! cluster connection; on the dir target its own directory when sources are named) and
//! source.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::trust::TrustPolicy;

use crate::config::{Settings, SourceSettings, TargetSpec};
use crate::plan::Policy;
use crate::targets::kube::{retry::RetryPolicy, KubeCluster, KubeOptions};
use crate::targets::Target;
use crate::verify::Trust;

/// What every source shares.
#[derive(Default)]
pub struct Clients {
    registry: Vec<((bool, Option<PathBuf>), RegistryClient)>,
    kube: Option<KubeCluster>,
}

impl Clients {
    /// The shared clients of `settings`: on the kube target, the cluster connection (and,
    /// with `check`, the state namespace checked, [`check_state_namespace`]).
    pub async fn new(settings: &Settings, check: bool) -> anyhow::Result<Self> {
        let mut c = Clients::default();
        if settings.target == TargetSpec::Kube {
            let api_timeout = settings.sources.iter().map(|s| s.api_timeout).max().unwrap_or_default();
            let retry = RetryPolicy { request_timeout: api_timeout, ..RetryPolicy::default() };
            let cluster = KubeCluster::connect(&settings.agent_namespace, retry).await.context("target kube")?;
            if check {
                check_state_namespace(&cluster, &settings.agent_namespace).await?;
            }
            c.kube = Some(cluster);
        }
        Ok(c)
    }

    /// The cluster connection (kube target).
    pub fn kube(&self) -> Option<&KubeCluster> {
        self.kube.as_ref()
    }

    /// The registry client of source `s`: shared with every source of the same transport.
    pub fn registry(&mut self, s: &SourceSettings) -> anyhow::Result<RegistryClient> {
        let key = (s.plain_http, s.ca_file.clone());
        if let Some((_, c)) = self.registry.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let c = RegistryClient::new(RegistryOptions { plain_http: s.plain_http, ca_file: s.ca_file.clone(), ..Default::default() }).context("registry client")?;
        self.registry.push((key, c.clone()));
        Ok(c)
    }

    /// The target of source `s` (opened for writing; `read_only`: as it is, for `plan`).
    pub fn target(&self, settings: &Settings, s: &SourceSettings, read_only: bool) -> anyhow::Result<Arc<dyn Target>> {
        match &settings.target {
            TargetSpec::Dir(root) => {
                let p = dir_of(root, s);
                if read_only {
                    return Ok(Arc::new(crate::targets::dir::DirTarget::at(&p)));
                }
                Ok(Arc::new(crate::targets::dir::DirTarget::open(&p).with_context(|| format!("target dir:{}", p.display()))?))
            }
            TargetSpec::Kube => {
                let cluster = self.kube.as_ref().expect("the kube target was connected");
                let opts = KubeOptions {
                    force: !s.no_force,
                    concurrency: s.apply_concurrency,
                    impersonate: s.service_account.as_ref().map(|(ns, name)| format!("system:serviceaccount:{ns}:{name}")),
                    state_namespace: settings.agent_namespace.clone(),
                    retry: RetryPolicy { request_timeout: s.api_timeout, ..RetryPolicy::default() },
                    ..KubeOptions::default()
                };
                Ok(Arc::new(cluster.target(opts).context("target kube")?))
            }
        }
    }
}

/// The directory source `s` writes on the dir target `root`: `root` itself for the single
/// unnamed source, `root/NAME` for a named one (sources never share a tree: each prunes
/// its own).
pub fn dir_of(root: &std::path::Path, s: &SourceSettings) -> PathBuf {
    if s.named {
        root.join(&s.name)
    } else {
        root.to_path_buf()
    }
}

/// Refuses to start when the agent's namespace is the default `drover-system`
/// (POD_NAMESPACE unset) and does not exist: its anti-rollback floor could never be kept
/// in the cluster, and a new leader would replay an older signed bundle. With
/// `POD_NAMESPACE` set (in a pod, the downward API names the namespace the pod runs in) no
/// request is made; a namespace that is missing then shows as a failed write, a warning
/// as every transient write failure. A check that cannot tell (no `get` on namespaces,
/// the API server unreachable) is a warning too.
async fn check_state_namespace(cluster: &KubeCluster, namespace: &str) -> anyhow::Result<()> {
    if std::env::var("POD_NAMESPACE").is_ok_and(|s| !s.is_empty()) {
        return Ok(());
    }
    match cluster.state_namespace_exists(namespace).await {
        Ok(true) => Ok(()),
        Ok(false) => anyhow::bail!(
            "the agent's state namespace {namespace} does not exist (POD_NAMESPACE is unset, so the agent uses {namespace}): \
             it keeps its anti-rollback floor and inventory there, and without them a new leader would replay an older \
             signed bundle. Create the namespace {namespace}, or set POD_NAMESPACE to the namespace the agent runs in"
        ),
        Err(e) => {
            tracing::warn!(namespace, "cannot tell whether the agent's state namespace exists: {e}");
            Ok(())
        }
    }
}

/// The trust policy of source `s`.
pub fn trust(s: &SourceSettings) -> anyhow::Result<Trust> {
    if s.insecure_skip_verify {
        tracing::warn!(source = %s.name, "--insecure-skip-verify: bundles are applied WITHOUT signature verification");
        return Ok(Trust::SkipInsecure);
    }
    let policy = TrustPolicy::from_files(&s.trust_keys, s.threshold).context("loading --trust-key")?;
    Ok(Trust::Policy(policy))
}

/// The plan policy of source `s`.
pub fn policy(s: &SourceSettings) -> Policy {
    Policy { allowed_namespaces: s.allowed_namespaces.clone(), allowed_cluster_kinds: s.allowed_cluster_kinds.clone(), denied_kinds: s.denied_kinds.clone() }
}
