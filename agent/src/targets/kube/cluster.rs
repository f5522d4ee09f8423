//! The connection to one cluster: one client shared by every source ([`KubeCluster`]), and
//! per source a [`KubeTarget`] with its handles on it (the one for the bundle's objects,
//! which impersonates `--service-account` when set, and the agent's own for its state),
//! its options, a reachability probe and reading one live object. The other `kube`
//! modules take a [`KubeTarget`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::{Client, Config};

use super::discovery::Resolver;
use super::retry::{with_retry, RetryPolicy};
use super::writes::WriteCounter;
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

/// What the kube targets of every source share: one client (one connection pool, the
/// agent's credentials), the discovery cache, the in-cluster records last read or written
/// and the Events recorder. Each source's [`KubeTarget`] is a view of it
/// ([`KubeCluster::target`]) with its own options, impersonation and write count.
pub struct KubeCluster {
    /// The one client, with the agent's own identity (leader election uses it too).
    base: Client,
    cluster: String,
    default_namespace: String,
    resolver: Arc<Resolver>,
    records: Arc<Mutex<HashMap<String, TargetRecord>>>,
    events: Arc<super::events::Recorder>,
}

impl KubeCluster {
    /// Connects with the in-cluster config or `KUBECONFIG` (as `kubectl` does). Does not
    /// talk to the server yet. Events go to `state_namespace`; discovery retries as `retry`.
    pub async fn connect(state_namespace: &str, retry: RetryPolicy) -> Result<Self, TargetError> {
        let config = Config::infer().await.map_err(|e| {
            TargetError::Unavailable(format!("no Kubernetes configuration: {e} (run in a pod with a service account, or set KUBECONFIG)"))
        })?;
        let cluster = config.cluster_url.to_string();
        let default_namespace = config.default_namespace.clone();
        // kube picks the aws-lc-rs rustls provider itself when none is installed.
        let base = Client::try_from(config).map_err(|e| TargetError::Unavailable(format!("Kubernetes client for {cluster}: {e}")))?;
        // Discovery with the agent's own identity, shared: a CRD one source applies is
        // known to the others at once.
        let resolver = Arc::new(Resolver::new(base.clone(), retry));
        let events = Arc::new(super::events::Recorder::new(base.clone(), state_namespace));
        Ok(KubeCluster { base, cluster, default_namespace, resolver, records: Arc::default(), events })
    }

    /// `kube (URL)`.
    pub fn describe(&self) -> String {
        format!("kube ({})", self.cluster)
    }

    /// The one client (the agent's own identity).
    pub fn client(&self) -> Client {
        self.base.clone()
    }

    /// A handle on the one client that counts the writes sent through it into `writes`
    /// and, with `impersonate`, asks the API server to act as that user (the
    /// `Impersonate-User` header, as kubectl's `--as`; the server gives a service account
    /// its groups itself).
    fn handle(&self, writes: &WriteCounter, impersonate: Option<&str>) -> Result<Client, TargetError> {
        let base = self.base.clone();
        let send = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let base = base.clone();
            async move { base.send(req).await }
        });
        let user = match impersonate {
            Some(u) => Some(http::HeaderValue::from_str(u).map_err(|e| TargetError::Unavailable(format!("impersonating {u:?}: {e}")))?),
            None => None,
        };
        let counter = writes.clone();
        let svc = tower::ServiceBuilder::new()
            .map_request(move |mut req: http::Request<kube::client::Body>| {
                counter.observe(&req);
                if let Some(u) = &user {
                    req.headers_mut().insert("Impersonate-User", u.clone());
                }
                req
            })
            .service(send);
        Ok(Client::new(svc, self.default_namespace.clone()))
    }

    /// The target of one source: its options, its clients (the bundle's objects
    /// impersonate `opts.impersonate` when set; its state with the agent's identity), its
    /// write count.
    pub fn target(&self, opts: KubeOptions) -> Result<KubeTarget, TargetError> {
        let writes = WriteCounter::default();
        let own = self.handle(&writes, None)?;
        let client = match &opts.impersonate {
            Some(user) => self.handle(&writes, Some(user))?,
            None => own.clone(),
        };
        Ok(KubeTarget {
            client,
            own,
            cluster: self.cluster.clone(),
            opts,
            resolver: self.resolver.clone(),
            records: self.records.clone(),
            writes,
            events: self.events.clone(),
            minor: AtomicU8::new(0),
            openapi: Default::default(),
            sources: Default::default(),
        })
    }
}

/// The Kubernetes target of one source.
pub struct KubeTarget {
    /// Client for the bundle's objects (impersonating `opts.impersonate` when set):
    /// apply, health, prune.
    pub(super) client: Client,
    /// Client with the agent's own identity: the in-cluster state.
    pub(super) own: Client,
    pub(super) cluster: String,
    pub(super) opts: KubeOptions,
    /// Discovery (shared by every source, the agent's identity).
    pub(super) resolver: Arc<Resolver>,
    /// The in-cluster record last read or written per source ([`super::state`]): a
    /// write that would only move `appliedAt` is not sent.
    pub(super) records: Arc<Mutex<HashMap<String, TargetRecord>>>,
    /// Writes sent through `client` and `own` ([`super::writes`]).
    pub(super) writes: WriteCounter,
    /// The Events about the sources ([`super::events`]), with the agent's identity.
    pub(super) events: Arc<super::events::Recorder>,
    /// The server's Kubernetes minor (`/version`, read by every probe; 0 until read).
    minor: AtomicU8,
    /// Schemas from the server's OpenAPI, per group-version ([`super::schemas`]).
    pub(super) openapi: OpenApiCache,
    /// Where each kind's schema came from ([`super::schemas`]), for `status`.
    sources: Mutex<std::collections::BTreeMap<(String, String), crate::targets::SchemaSource>>,
}

/// The schemas one group-version's OpenAPI document gave, by kind (None: the server
/// serves no OpenAPI for it, or reading it failed).
pub(super) type OpenApiCache = tokio::sync::Mutex<HashMap<String, Option<Arc<HashMap<String, drover_ssa::Schema>>>>>;

impl KubeTarget {
    /// Connects a target of its own (one source): [`KubeCluster::connect`], then
    /// [`KubeCluster::target`].
    pub async fn connect(opts: KubeOptions) -> Result<Self, TargetError> {
        KubeCluster::connect(&opts.state_namespace, opts.retry).await?.target(opts)
    }

    /// One cheap request (`/version`): fails with [`TargetError::Unavailable`] when the
    /// API server cannot be reached, before anything is attempted; learns the server's
    /// Kubernetes minor, which decides the schemas of the compare ([`super::schemas`]).
    pub(super) async fn probe(&self) -> Result<(), TargetError> {
        let info = with_retry(&self.opts.retry, || self.client.apiserver_version())
            .await
            .map_err(|f| TargetError::Unavailable(format!("Kubernetes API at {}: {f}", self.cluster)))?;
        let minor = server_minor(&info.major, &info.minor);
        if self.minor.swap(minor, Ordering::Relaxed) != minor {
            tracing::info!(version = %info.git_version, minor, "Kubernetes API server version");
        }
        Ok(())
    }

    /// The server's Kubernetes minor as the last probe read it; 255 (newer than every
    /// table) until then or when `/version` does not say.
    pub(super) fn minor(&self) -> u8 {
        match self.minor.load(Ordering::Relaxed) {
            0 => drover_ssa::builtin::NEWER,
            m => m,
        }
    }

    /// Notes where the schema of (`api_version`, `kind`) came from.
    pub(super) fn note_schema(&self, api_version: &str, kind: &str, source: crate::targets::SchemaSource) {
        self.sources.lock().expect("schema sources").insert((api_version.to_string(), kind.to_string()), source);
    }

    /// Where the schema of each kind compared so far came from.
    pub(super) fn schema_sources(&self) -> Vec<crate::targets::KindSchema> {
        let sources = self.sources.lock().expect("schema sources");
        sources.iter().map(|((av, k), s)| crate::targets::KindSchema { api_version: av.clone(), kind: k.clone(), source: *s }).collect()
    }
}

/// The minor of a `/version` answer (`"1"`, `"30"`; providers append `+`: `"30+"`); 255
/// when it is not a 1.x version.
fn server_minor(major: &str, minor: &str) -> u8 {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    match (major.trim_end_matches('+'), digits.parse::<u8>()) {
        ("1", Ok(m)) if m > 0 => m,
        _ => drover_ssa::builtin::NEWER,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_minor_of_version_answers() {
        assert_eq!(super::server_minor("1", "30"), 30);
        assert_eq!(super::server_minor("1", "29+"), 29, "EKS and GKE append +");
        assert_eq!(super::server_minor("1", ""), 255);
        assert_eq!(super::server_minor("2", "0"), 255);
    }
}
