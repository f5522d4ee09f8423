//! Shared fixtures of the fleet tests: bundles pushed and signed with the real `drover
//! push`, real `drover-agent run --once` per cluster (dir target, or kube against a
//! cluster's kubeconfig) with `--cluster-name`, the real `drover fleet ...` commands, and
//! the registry read back with skopeo / written with curl as independent peers.
#![allow(dead_code)]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use drover_tests::{run, run_ok, Out};
use serde_json::Value;

pub const ENV: &[(&str, &str)] = &[("DROVER_KEY_PASSWORD", "")];

/// The Fleet file of [`Fleet::fleet_file`]: comments a reviewer wrote, no clusters yet.
pub const FLEET_FILE: &str = "# The fleet, reviewed by the platform team.\napiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  # Promotion order.\n  environments: [dev, prod]\n  # Every cluster, one entry each (drover fleet enroll --fleet adds them).\n  clusters: []\n  clusterScopedKinds: []  # none\n";

/// Where a simulated cluster's agent applies.
pub enum Target<'a> {
    /// `dir:` in the fleet's scratch directory.
    Dir,
    /// `kube` with this kubeconfig; the agent's namespace (`POD_NAMESPACE`, where the
    /// cluster's report key Secret lives): one the bundle creates.
    Kube(&'a Path, &'a str),
}

/// A fleet: a registry address, a key pair, a scratch directory.
pub struct Fleet {
    /// `127.0.0.1:PORT` of the registry.
    pub reg: String,
    /// Scratch directory (keys, inputs, agent state and targets).
    pub dir: PathBuf,
}

impl Fleet {
    /// A fleet on registry `reg`, keys made with `drover keygen` in `dir/keys`.
    pub fn new(reg: &str, dir: &Path) -> Fleet {
        let keys = dir.join("fleetkeys");
        if !keys.join("drover.key").exists() {
            run_ok("drover", &["keygen", "--out-dir", keys.to_str().unwrap()], ENV);
        }
        Fleet { reg: reg.to_string(), dir: dir.to_path_buf() }
    }

    pub fn key(&self) -> String {
        self.dir.join("fleetkeys/drover.key").display().to_string()
    }

    pub fn pubkey(&self) -> String {
        self.dir.join("fleetkeys/drover.pub").display().to_string()
    }

    /// `REG/fleet/<cluster_type>:<channel>`.
    pub fn channel(&self, cluster_type: &str, channel: &str) -> String {
        format!("{}/fleet/{cluster_type}:{channel}", self.reg)
    }

    /// Pushes `docs` (YAML documents) signed to `fleet/<type>:<channel>` as environment
    /// `env` with `sequence`; returns the digest.
    pub fn push(&self, cluster_type: &str, env: &str, channel: &str, sequence: u64, docs: &[String]) -> String {
        let input = self.dir.join(format!("in-{cluster_type}-{channel}-{sequence}"));
        let _ = std::fs::remove_dir_all(&input);
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(input.join("all.yaml"), docs.join("---\n")).unwrap();
        let seq = sequence.to_string();
        let reference = self.channel(cluster_type, channel);
        let key = self.key();
        let out = run_ok(
            "drover",
            &[
                "-o", "json", "push", input.to_str().unwrap(), &reference, "--plain-http", "--key", &key, "--sequence", &seq,
                "--cluster-type", cluster_type, "--environment", env,
            ],
            ENV,
        );
        out.json()["digest"].as_str().expect("digest").to_string()
    }

    /// One cycle of the agent of cluster `name` (its own state dir and target), following
    /// `fleet/<type>:<channel>`, reporting with `--cluster-name name`, plus `extra`.
    pub fn agent(&self, name: &str, cluster_type: &str, env: &str, channel: &str, target: Target, extra: &[&str]) -> Out {
        let state = self.dir.join(format!("agents/{name}/state"));
        let source = self.channel(cluster_type, channel);
        let pubkey = self.pubkey();
        let (target_arg, kubeconfig) = match target {
            Target::Dir => (format!("dir:{}", self.dir.join(format!("agents/{name}/out")).display()), None),
            Target::Kube(k, ns) => ("kube".to_string(), Some((k.display().to_string(), ns.to_string()))),
        };
        let mut args = vec![
            "run", "--once", "--source", &source, "--plain-http", "--trust-key", &pubkey, "--expect-cluster-type", cluster_type,
            "--expect-environment", env, "--target", &target_arg, "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0",
            "--cluster-name", name, "--resync", "0s",
        ];
        args.extend_from_slice(extra);
        // A kube agent names its namespace as a pod does (POD_NAMESPACE): with it unset and
        // no drover-system the agent refuses to start (kube_state tests that).
        let envs: Vec<(&str, &str)> = kubeconfig.as_ref().map(|(k, ns)| vec![("KUBECONFIG", k.as_str()), ("POD_NAMESPACE", ns.as_str())]).unwrap_or_default();
        run("drover-agent", &args, &envs)
    }

    /// Like [`Fleet::agent`], asserting exit 0.
    pub fn agent_ok(&self, name: &str, cluster_type: &str, env: &str, channel: &str, target: Target, extra: &[&str]) -> Out {
        let out = self.agent(name, cluster_type, env, channel, target, extra);
        assert_eq!(out.code, 0, "agent {name}:\n{}", out.stderr);
        out
    }

    /// The state directory of cluster `name`'s agent.
    pub fn state_dir(&self, name: &str) -> PathBuf {
        self.dir.join(format!("agents/{name}/state"))
    }

    /// `drover <args> --plain-http`.
    pub fn drover(&self, args: &[&str]) -> Out {
        let mut a: Vec<&str> = args.to_vec();
        a.push("--plain-http");
        run("drover", &a, ENV)
    }

    /// `drover -o json fleet status --registry REG/fleet --trust-key PUB`.
    pub fn status(&self) -> Value {
        let prefix = format!("{}/fleet", self.reg);
        let out = self.drover(&["-o", "json", "fleet", "status", "--registry", &prefix, "--trust-key", &self.pubkey()]);
        assert_eq!(out.code, 0, "fleet status: {}", out.stderr);
        out.json()
    }

    /// `drover -o json fleet enroll --registry REG/fleet --key KEY` with `selection`
    /// (`--all-pending`, `--cluster TYPE.NAME`, ...); asserts exit 0.
    pub fn enroll(&self, selection: &[&str]) -> Value {
        let prefix = format!("{}/fleet", self.reg);
        let mut a = vec!["-o", "json", "fleet", "enroll", "--registry", &prefix];
        let key = self.key();
        a.extend_from_slice(&["--key", &key]);
        a.extend_from_slice(selection);
        let out = self.drover(&a);
        assert_eq!(out.code, 0, "fleet enroll: {}", out.stderr);
        out.json()
    }

    /// A platform's Fleet file, `dir/platform/fleet.yaml`, with a comment a reviewer wrote
    /// and no clusters yet, beside `cluster-types/<t>.yaml` for each of `types`.
    pub fn fleet_file(&self, types: &[&str]) -> PathBuf {
        let root = self.dir.join("platform");
        std::fs::create_dir_all(root.join("cluster-types")).unwrap();
        for t in types {
            std::fs::write(root.join(format!("cluster-types/{t}.yaml")), format!("apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  name: {t}\n")).unwrap();
        }
        let file = root.join("fleet.yaml");
        std::fs::write(&file, FLEET_FILE).unwrap();
        file
    }

    /// `drover -o json fleet enroll --fleet FILE --registry REG/fleet` with `selection`;
    /// asserts exit 0.
    pub fn enroll_fleet(&self, file: &Path, selection: &[&str]) -> Value {
        let prefix = format!("{}/fleet", self.reg);
        let mut a = vec!["-o", "json", "fleet", "enroll", "--fleet", file.to_str().unwrap(), "--registry", &prefix];
        a.extend_from_slice(selection);
        let out = self.drover(&a);
        assert_eq!(out.code, 0, "fleet enroll --fleet: {}", out.stderr);
        out.json()
    }

    /// `drover -o json fleet status --registry REG/fleet --fleet FILE` (+ `extra`).
    pub fn status_fleet(&self, file: &Path, extra: &[&str]) -> Value {
        let prefix = format!("{}/fleet", self.reg);
        let mut a = vec!["-o", "json", "fleet", "status", "--registry", &prefix, "--fleet", file.to_str().unwrap()];
        a.extend_from_slice(extra);
        let out = self.drover(&a);
        assert_eq!(out.code, 0, "fleet status --fleet: {}", out.stderr);
        out.json()
    }

    /// The row of `cluster` (`<type>.<name>`) in a status document.
    pub fn row(status: &Value, cluster_type: &str, name: &str) -> Value {
        status["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["clusterType"] == cluster_type && c["clusterName"] == name)
            .unwrap_or_else(|| panic!("{cluster_type}.{name} not in {status:#}"))
            .clone()
    }

    /// The report stored under `tag`, read with skopeo (manifest) as an independent peer:
    /// (manifest, report document from the manifest's embedded config data).
    pub fn raw_report(&self, tag: &str) -> (Value, Value) {
        let reference = format!("docker://{}/fleet/drover-reports:{tag}", self.reg);
        let manifest: Value = serde_json::from_str(&drover_tests::tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &reference])).unwrap();
        let data = manifest["config"]["data"].as_str().expect("config.data");
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
        (manifest.clone(), serde_json::from_slice(&bytes).unwrap())
    }

    /// The digest a tag holds (skopeo, independent of drover), or None.
    pub fn digest_of(&self, reference: &str) -> Option<String> {
        let out = Command::new("skopeo").args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{reference}")]).output().unwrap();
        out.status.success().then(|| {
            use sha2::Digest;
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(&out.stdout)))
        })
    }
}

impl Fleet {
    /// Rewrites cluster `name`'s last report with `change` applied, signed with that
    /// cluster's own report key (from its agent's state directory): what the cluster
    /// itself could have written (e.g. a report from hours ago). Written with curl.
    pub fn rewrite_own_report(&self, cluster_type: &str, name: &str, change: impl FnOnce(&mut Value)) {
        let tag = format!("{cluster_type}.{name}");
        let (_, mut report) = self.raw_report(&tag);
        change(&mut report);
        let pem = std::fs::read(self.state_dir(name).join("report-key.pem")).expect("the agent's report key");
        let key = drover_proto::keys::PrivateKey::from_pem(&pem, "", "report-key.pem").unwrap();
        let body = serde_json::to_vec(&report).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        let annotations = serde_json::json!({
            "dev.drover.report.key": b64.encode(key.public_key().spki_der()),
            "dev.drover.report.signature": b64.encode(key.sign(&body).unwrap()),
        });
        let tag = format!("{cluster_type}.{}", report["clusterName"].as_str().unwrap());
        curl_report_bytes(&self.reg, "fleet/drover-reports", &tag, &body, annotations);
    }
}

/// Writes a report document into `repo` under `tag` with curl (raw HTTP, no drover):
/// config blob, then an OCI manifest with the report artifact type (unsigned).
pub fn curl_report(reg: &str, repo: &str, tag: &str, report: &Value) {
    curl_report_bytes(reg, repo, tag, &serde_json::to_vec(report).unwrap(), serde_json::json!({}));
}

/// [`curl_report`] of the document `body`, with manifest `annotations`.
pub fn curl_report_bytes(reg: &str, repo: &str, tag: &str, body: &[u8], annotations: Value) {
    use sha2::Digest;
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(body)));
    let tmp = tempfile::tempdir().unwrap();
    let blob = tmp.path().join("blob");
    std::fs::write(&blob, body).unwrap();
    let head = Command::new("curl")
        .args(["-sS", "-D", "-", "-o", "/dev/null", "-X", "POST", &format!("http://{reg}/v2/{repo}/blobs/uploads/")])
        .output()
        .unwrap();
    let headers = String::from_utf8_lossy(&head.stdout).to_string();
    let location = headers
        .lines()
        .find_map(|l| l.strip_prefix("Location: ").or_else(|| l.strip_prefix("location: ")))
        .unwrap_or_else(|| panic!("no upload location: {headers}"))
        .trim()
        .to_string();
    let location = if location.starts_with("http") { location } else { format!("http://{reg}{location}") };
    let sep = if location.contains('?') { '&' } else { '?' };
    let put = Command::new("curl")
        .args(["-sSf", "-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary"])
        .arg(format!("@{}", blob.display()))
        .arg(format!("{location}{sep}digest={digest}"))
        .output()
        .unwrap();
    assert!(put.status.success(), "blob upload: {}", String::from_utf8_lossy(&put.stderr));
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.drover.report.v1",
        "config": {"mediaType": "application/vnd.drover.report.v1+json", "digest": digest, "size": body.len(),
                   "data": base64::engine::general_purpose::STANDARD.encode(body)},
        "layers": [],
        "annotations": annotations
    });
    let mfile = tmp.path().join("manifest");
    std::fs::write(&mfile, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let put = Command::new("curl")
        .args(["-sSf", "-X", "PUT", "-H", "Content-Type: application/vnd.oci.image.manifest.v1+json", "--data-binary"])
        .arg(format!("@{}", mfile.display()))
        .arg(format!("http://{reg}/v2/{repo}/manifests/{tag}"))
        .output()
        .unwrap();
    assert!(put.status.success(), "manifest upload: {}", String::from_utf8_lossy(&put.stderr));
}

/// A registry that accepts connections and never answers (a stalled registry). Keeps
/// every connection it accepted, numbered in order.
pub struct Stalled {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

fn alive(s: &TcpStream) -> bool {
    s.set_nonblocking(true).ok();
    let mut buf = [0u8; 1024];
    let mut r = s;
    let open = loop {
        match r.read(&mut buf) {
            Ok(0) => break false,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
            Err(_) => break false,
        }
    };
    s.set_nonblocking(false).ok();
    open
}

impl Stalled {
    pub fn start() -> Stalled {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let held = Arc::new(Mutex::new(Vec::new()));
        let h = held.clone();
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                h.lock().unwrap().push(conn);
            }
        });
        Stalled { addr, held }
    }

    /// Connections accepted and still open (the client has not given up on them).
    pub fn open(&self) -> usize {
        self.held.lock().unwrap().iter().filter(|s| alive(s)).count()
    }

    /// The number of the first connection still open.
    pub fn first_accepted(&self) -> usize {
        self.held.lock().unwrap().iter().position(alive).expect("an open connection")
    }

    /// True when connection number `i` is still open.
    pub fn still_open(&self, i: usize) -> bool {
        self.held.lock().unwrap().get(i).is_some_and(alive)
    }
}

/// A Namespace, a ConfigMap and a Deployment `web` (image `image`) in namespace `ns`.
pub fn workload(ns: &str, value: &str, image: Option<&str>) -> Vec<String> {
    let mut docs = vec![
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  value: {value:?}\n"),
    ];
    if let Some(image) = image {
        docs.push(format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: main\n        image: {image:?}\n"
        ));
    }
    docs
}
