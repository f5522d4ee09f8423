//! The FAKE API server in process: started on a free loopback port with its own thread
//! and tokio runtime, a generated kubeconfig, and the test hooks as methods.

use super::counts::RequestCounts;
use super::hooks::{ErrorRule, RequestRecord};
use super::rollout::RolloutMode;
use super::server;
use super::shared::Shared;
use super::store::{self, Settings, State};
use super::util;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Options for [`FakeApiServer::start_with`].
#[derive(Clone, Debug)]
pub struct FakeOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Rollout mode for workloads (default `Ready`).
    pub rollout: RolloutMode,
    /// How long a `Ready` rollout shows Progressing first (default 0).
    pub rollout_delay: Duration,
    /// How long a new CRD waits before it is Established (default 0).
    pub crd_delay: Duration,
    /// The Kubernetes minor it plays (default [`store::DEFAULT_MINOR`]).
    pub minor: u8,
}

impl Default for FakeOptions {
    fn default() -> Self {
        FakeOptions {
            port: 0,
            rollout: RolloutMode::Ready,
            rollout_delay: Duration::ZERO,
            crd_delay: Duration::ZERO,
            minor: store::DEFAULT_MINOR,
        }
    }
}

/// The kubeconfig YAML for a fake server at `url` (plain HTTP, a dummy token).
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n    token: fake-token\n"
    )
}

/// A running in-process FAKE API server (its own thread and tokio runtime, so it works
/// from sync and async tests alike). Stops when dropped.
pub struct FakeApiServer {
    url: String,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl FakeApiServer {
    /// Starts on a free loopback port with default options; panics if it cannot.
    pub fn start() -> FakeApiServer {
        Self::start_with(FakeOptions::default()).expect("start the fake API server")
    }

    /// Starts with `opts`, writes a kubeconfig into a temporary directory, and returns
    /// once the server accepts connections.
    pub fn start_with(opts: FakeOptions) -> std::io::Result<FakeApiServer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", opts.port))?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let settings = Settings {
            rollout_default: opts.rollout,
            rollout_overrides: HashMap::new(),
            rollout_delay: opts.rollout_delay,
            crd_delay: opts.crd_delay,
            minor: opts.minor,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(settings)),
            hooks: Mutex::new(Default::default()),
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = server::router(shared.clone());
        let thread = std::thread::Builder::new()
            .name("fake-apiserver".into())
            .spawn(move || {
                // Objects nest up to 10,000 levels, as on a real server: cloning, dropping
                // and writing such a value recurses that deep (reserved, not resident).
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_stack_size(256 << 20)
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    // Not a graceful shutdown: open watches would hold it for minutes.
                    tokio::select! {
                        _ = async { axum::serve(listener, app).await } => {}
                        _ = rx => {}
                    }
                });
                rt.shutdown_timeout(Duration::from_millis(200));
            })?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&url))?;
        Ok(FakeApiServer {
            url,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
            _dir: dir,
            kubeconfig,
        })
    }

    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Path of the generated kubeconfig (lives as long as the server).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes the kubeconfig to another path.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, kubeconfig_yaml(&self.url))
    }

    /// Sets the rollout mode for all workloads without a per-object override.
    pub fn set_rollout_mode(&self, mode: RolloutMode) {
        self.shared.state().settings.rollout_default = mode;
    }

    /// Sets the rollout mode of the workload(s) named `name` in `namespace`.
    pub fn set_rollout_for(&self, namespace: &str, name: &str, mode: RolloutMode) {
        self.shared
            .state()
            .settings
            .rollout_overrides
            .insert((namespace.into(), name.into()), mode);
    }

    /// How long a `Ready` rollout shows Progressing before it is ready.
    pub fn set_rollout_delay(&self, delay: Duration) {
        self.shared.state().settings.rollout_delay = delay;
    }

    /// Serves an aggregated API (`POST /fake/apis`): the resource `res` with the OpenAPI v3
    /// document `openapi` (its `components.schemas`), which also manages its objects.
    pub fn add_aggregated_api(&self, res: super::resources::ResourceInfo, openapi: serde_json::Value) {
        self.shared.state().apis.push((res, openapi));
    }

    /// How long new CRDs wait before they are Established (and served).
    pub fn set_crd_establish_delay(&self, delay: Duration) {
        self.shared.state().settings.crd_delay = delay;
    }

    /// Replaces an object's `status` (bumps resourceVersion when it changes); returns
    /// the object, or None when the kind is unknown or the object absent.
    pub fn set_status(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        status: serde_json::Value,
    ) -> Option<serde_json::Value> {
        let mut st = self.shared.state();
        let res = st.resolve_kind(api_version, kind)?;
        let k = store::key(&res, namespace, name);
        st.write_status(&res, &k, status)
    }

    /// Adds an error-injection rule (first matching rule wins).
    pub fn inject(&self, rule: ErrorRule) {
        self.shared.hooks().rules.push(rule);
    }

    /// Removes all error rules.
    pub fn clear_errors(&self) {
        self.shared.hooks().rules.clear();
    }

    /// Every request served so far (hooks excluded), oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.hooks().log.clone()
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        self.shared.hooks().log.clear();
    }

    /// Requests counted per verb and resource since the start or the last reset
    /// (injected errors included; discovery and hooks not counted).
    pub fn request_counts(&self) -> RequestCounts {
        self.shared.hooks().counts.clone()
    }

    /// Forgets the request counts (the request log is kept).
    pub fn reset_request_counts(&self) {
        self.shared.hooks().counts.reset();
    }

    /// How many logged requests match `method` (`*` = any) and the path glob.
    pub fn count(&self, method: &str, path_glob: &str) -> usize {
        self.shared
            .hooks()
            .log
            .iter()
            .filter(|r| {
                (method == "*" || r.method.eq_ignore_ascii_case(method))
                    && util::glob_match(path_glob, &r.path)
            })
            .count()
    }

    /// The stored object, as a GET would return it.
    pub fn object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<serde_json::Value> {
        let st = self.shared.state();
        let res = st.resolve_kind(api_version, kind)?;
        st.get(&res, namespace, name).ok()
    }

    /// Every stored object.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        self.shared.state().objects.values().cloned().collect()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.state().rv
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // What the store holds may nest 10,000 levels (as on a real server): it is dropped
        // on a thread with a stack for that, not on the caller's.
        let shared = self.shared.clone();
        let dropper = std::thread::Builder::new().stack_size(256 << 20).spawn(move || {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let settings = st.settings.clone();
            drop(std::mem::replace(&mut *st, State::new(settings)));
        });
        if let Ok(t) = dropper {
            let _ = t.join();
        }
    }
}
