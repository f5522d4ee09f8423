//! A FAKE Kubernetes API server for drover's tests (no kube-apiserver can be installed
//! on the test machines). Plain HTTP on 127.0.0.1, used through a generated kubeconfig by
//! the real `kube` client and by `kubectl`: discovery, CRUD, label selectors, watches,
//! CRDs, server-side apply with managed fields, JSON merge patch, plus test hooks
//! (rollout status, error injection, request log and counts), and RBAC for impersonated
//! requests. Test support only: never shipped.
//! What it simplifies versus a real API server: `docs/fake-apiserver.md`.

pub mod apiserver;
pub mod controller;
pub mod counts;
pub mod crd;
pub mod discovery;
pub mod env;
pub mod events;
pub mod hookapi;
pub mod hooks;
pub mod kubectl;
pub mod names;
pub mod openapi;
pub mod paging;
pub mod patch;
pub mod process;
pub mod rbac;
pub mod reply;
pub mod resources;
pub mod rollout;
pub mod routes;
pub mod scale;
pub mod selector;
pub mod server;
pub mod shared;
pub mod status;
pub mod store;
pub mod strategic;
pub mod table;
pub mod util;
pub mod validate;
pub mod watch;
pub mod writes;

pub use apiserver::{kubeconfig_yaml, FakeApiServer, FakeOptions};
pub use store::DEFAULT_MINOR;
pub use counts::{CountRow, RequestCounts, Verb};
pub use env::KubeEnv;
pub use hooks::{ErrorRule, RequestRecord};
pub use kubectl::{kubectl, kubectl_ok};
pub use process::FakeApiProcess;
pub use rollout::RolloutMode;
