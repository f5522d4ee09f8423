//! Where a Kubernetes end-to-end scenario runs: the in-process FAKE API server, or a real
//! cluster named by `DROVER_E2E_KUBECONFIG`. [`kube_scenario!`](crate::kube_scenario)
//! turns one scenario function into two tests, `<name>::fake` and
//! `<name>::real_cluster`; the latter is `#[ignore]`d so that without a cluster it is
//! reported as ignored (skipped), never as passed. Run it with
//! `DROVER_E2E_KUBECONFIG=... cargo test -- --include-ignored`.

use super::apiserver::FakeApiServer;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable naming a real cluster's kubeconfig.
pub const E2E_KUBECONFIG: &str = "DROVER_E2E_KUBECONFIG";

/// A Kubernetes API to run a scenario against.
pub enum KubeEnv {
    /// The in-process FAKE API server (hooks available).
    Fake(FakeApiServer),
    /// A real cluster (no hooks: scenarios use real means, e.g. an unpullable image).
    Real {
        /// Its kubeconfig.
        kubeconfig: PathBuf,
    },
}

impl KubeEnv {
    /// A fresh FAKE API server.
    pub fn fake() -> KubeEnv {
        KubeEnv::Fake(FakeApiServer::start())
    }

    /// The real cluster of `DROVER_E2E_KUBECONFIG`; panics naming the variable when it is
    /// unset (these tests are `#[ignore]`d, so that only happens with `--include-ignored`).
    pub fn real() -> KubeEnv {
        match std::env::var_os(E2E_KUBECONFIG) {
            Some(p) if !p.is_empty() => KubeEnv::Real { kubeconfig: PathBuf::from(p) },
            _ => panic!("{E2E_KUBECONFIG} is not set: point it at a real cluster's kubeconfig to run the real_cluster tests (they are skipped otherwise)"),
        }
    }

    /// Whether `DROVER_E2E_KUBECONFIG` is set.
    pub fn real_available() -> bool {
        std::env::var_os(E2E_KUBECONFIG).is_some_and(|p| !p.is_empty())
    }

    /// The kubeconfig to hand to clients and to the agent (`KUBECONFIG`).
    pub fn kubeconfig_path(&self) -> &Path {
        match self {
            KubeEnv::Fake(f) => f.kubeconfig_path(),
            KubeEnv::Real { kubeconfig } => kubeconfig,
        }
    }

    /// The fake server's hooks, or None on a real cluster.
    pub fn fake_server(&self) -> Option<&FakeApiServer> {
        match self {
            KubeEnv::Fake(f) => Some(f),
            KubeEnv::Real { .. } => None,
        }
    }

    /// Whether this is the FAKE API server.
    pub fn is_fake(&self) -> bool {
        matches!(self, KubeEnv::Fake(_))
    }

    /// A `kube` client through the kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.kubeconfig_path()).unwrap_or_else(|e| {
            panic!(
                "reading kubeconfig {}: {e}",
                self.kubeconfig_path().display()
            )
        });
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", self.kubeconfig_path().display()));
        kube::Client::try_from(cfg).expect("kube client")
    }

    /// A name unique to this process and call (`base-<pid>-<n>`), for namespaces and
    /// objects that must not collide on a shared real cluster.
    pub fn unique_name(&self, base: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!(
            "{base}-{:x}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// Turns a scenario `fn NAME_fn(env: KubeEnv)` (or `async fn`, with `async`) into two
/// tests: `NAME::fake` and `NAME::real_cluster` (ignored unless run with
/// `--include-ignored`, which needs `DROVER_E2E_KUBECONFIG`).
///
/// `drover_tests::kube_scenario!(prune_refused => prune_refused_scenario);`
/// `drover_tests::kube_scenario!(async apply_roundtrip => apply_roundtrip_scenario);`
#[macro_export]
macro_rules! kube_scenario {
    (async $name:ident => $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fake() {
                super::$body($crate::fakekube::env::KubeEnv::fake()).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "real cluster: set DROVER_E2E_KUBECONFIG and run with --ignored"]
            async fn real_cluster() {
                super::$body($crate::fakekube::env::KubeEnv::real()).await
            }
        }
    };
    ($name:ident => $body:ident) => {
        mod $name {
            #[test]
            fn fake() {
                super::$body($crate::fakekube::env::KubeEnv::fake())
            }
            #[test]
            #[ignore = "real cluster: set DROVER_E2E_KUBECONFIG and run with --ignored"]
            fn real_cluster() {
                super::$body($crate::fakekube::env::KubeEnv::real())
            }
        }
    };
}
