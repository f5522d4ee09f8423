//! The connection to one cluster: the clients (the one for the bundle's objects, which
//! impersonates `--service-account` when set, and the agent's own for its state), the
//! target's options, a reachability probe and reading one live object. The other `kube`
//! modules take a [`KubeTarget`].

use std::time::Duration;

use kube::{Client, Config};

use super::discovery::Resolver;
use super::retry::{with_retry, RetryPolicy};
use crate::targets::{TargetError, TargetRecord};

/// Settings of the kube target.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// Take over fields owned by other managers (`force=true`); `--no-force` clears it.
    pub force: bool,
    /// Objects applied (and health-checked, pruned) at once inside an order group.
    pub concurrency: usize,
    /// How long to wait for applied CRDs to be Established before the next group.
    pub crd_timeout: Duration,
    /// Retries of transient API errors.
    pub retry: RetryPolicy,
    /// User every request about the bundle's objects impersonates
    /// (`system:serviceaccount:NS:NAME` for `--service-account NS/NAME`); None: the
    /// agent's own identity.
    pub impersonate: Option<String>,
    /// The agent's namespace: where the in-cluster state ConfigMaps live.
    pub state_namespace: String,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            force: true,
            concurrency: 8,
            crd_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            impersonate: None,
            state_namespace: "drover-system".into(),
        }
    }
}

/// The Kubernetes target.
pub struct KubeTarget {
    /// Client for the bundle's objects (impersonating `opts.impersonate` when set):
    /// discovery, apply, health, prune.
    pub(super) client: Client,
    /// Client with the agent's own identity: the in-cluster state.
    pub(super) own: Client,
    pub(super) cluster: String,
    pub(super) opts: KubeOptions,
    pub(super) resolver: Resolver,
    /// The in-cluster record last read or written per source ([`super::state`]): a
    /// write that would only move `appliedAt` is not sent.
    pub(super) records: std::sync::Mutex<std::collections::HashMap<String, TargetRecord>>,
    /// Writes sent through `client` and `own` ([`super::writes`]).
    pub(super) writes: super::writes::WriteCounter,
    /// The Events about this target's sources ([`super::events`]), with the agent's identity.
    pub(super) events: super::events::Recorder,
}

impl KubeTarget {
    /// Connects with the in-cluster config or `KUBECONFIG` (as `kubectl` does). Does not
    /// talk to the server yet.
    pub async fn connect(opts: KubeOptions) -> Result<Self, TargetError> {
        let config = Config::infer().await.map_err(|e| {
            TargetError::Unavailable(format!("no Kubernetes configuration: {e} (run in a pod with a service account, or set KUBECONFIG)"))
        })?;
        Self::from_config(config, opts)
    }

    /// Builds the target from a client configuration: the agent's own client, and the
    /// one for the bundle's objects (impersonating when `opts.impersonate` is set).
    fn from_config(config: Config, opts: KubeOptions) -> Result<Self, TargetError> {
        let cluster = config.cluster_url.to_string();
        let writes = super::writes::WriteCounter::default();
        let build = |c: Config| -> Result<Client, TargetError> {
            let counter = writes.clone();
            let count = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
                counter.observe(&req);
                req
            });
            Ok(kube::client::ClientBuilder::try_from(c)
                .map_err(|e| TargetError::Unavailable(format!("Kubernetes client for {cluster}: {e}")))?
                .with_layer(&count)
                .build())
        };
        // kube picks the aws-lc-rs rustls provider itself when none is installed.
        let own = build(config.clone())?;
        let client = match &opts.impersonate {
            Some(user) => {
                let mut c = config;
                c.auth_info.impersonate = Some(user.clone());
                // The API server gives an impersonated service account its groups itself.
                c.auth_info.impersonate_groups = None;
                build(c)?
            }
            None => own.clone(),
        };
        let events = super::events::Recorder::new(own.clone(), &opts.state_namespace);
        Ok(KubeTarget { client: client.clone(), own, cluster, resolver: Resolver::new(client, opts.retry), opts, records: Default::default(), writes, events })
    }

    /// One cheap request (`/api`): fails with [`TargetError::Unavailable`] when the API
    /// server cannot be reached, before anything is attempted.
    pub(super) async fn probe(&self) -> Result<(), TargetError> {
        with_retry(&self.opts.retry, || self.client.list_core_api_versions())
            .await
            .map(|_| ())
            .map_err(|f| TargetError::Unavailable(format!("Kubernetes API at {}: {f}", self.cluster)))
    }
}
