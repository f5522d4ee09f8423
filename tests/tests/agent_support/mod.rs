//! Shared fixtures of the agent end-to-end tests: a real registry, real keys from
//! `drover keygen`, bundles pushed with `drover push` (or assembled by hand for hostile
//! cases), and `drover-agent` runs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_proto::bundle::Bundle;
use drover_proto::layout::Layout;
use drover_tests::{bin, run, run_ok, tool_ok, Out, Registry};

/// One test's world.
pub struct Fx {
    /// The registry.
    pub reg: Registry,
    /// Temp dir holding keys, inputs, state and target.
    pub tmp: tempfile::TempDir,
    /// Repository:tag polled by the agent.
    pub tag_ref: String,
}

pub const ENV: &[(&str, &str)] = &[("DROVER_KEY_PASSWORD", "")];

impl Fx {
    /// Starts a registry and makes two key pairs (`k1` trusted, `k2` not).
    pub fn new() -> Fx {
        let reg = Registry::start();
        let tmp = tempfile::tempdir().unwrap();
        for k in ["k1", "k2"] {
            run_ok("drover", &["keygen", "--out-dir", tmp.path().join(k).to_str().unwrap()], ENV);
        }
        let tag_ref = reg.reference("fleet/edge:prod");
        Fx { reg, tmp, tag_ref }
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    pub fn s(&self, rel: &str) -> String {
        self.p(rel).display().to_string()
    }

    pub fn key(&self, k: &str) -> String {
        self.s(&format!("{k}/drover.key"))
    }

    pub fn pubkey(&self, k: &str) -> String {
        self.s(&format!("{k}/drover.pub"))
    }

    pub fn target(&self) -> PathBuf {
        self.p("out")
    }

    pub fn state(&self) -> String {
        self.s("state")
    }

    /// Writes `objects` (name → YAML) into a fresh input dir and pushes it signed with `key`.
    /// Returns the digest.
    pub fn push(&self, objects: &[(&str, String)], seq: u64, key: Option<&str>, extra: &[&str]) -> String {
        self.push_for("edge", objects, seq, key, extra)
    }

    /// Like [`Fx::push`] for another cluster type.
    pub fn push_for(&self, cluster_type: &str, objects: &[(&str, String)], seq: u64, key: Option<&str>, extra: &[&str]) -> String {
        self.push_at(&self.tag_ref, cluster_type, objects, seq, key, extra)
    }

    /// Like [`Fx::push_for`] to another channel `reference`.
    pub fn push_at(&self, reference: &str, cluster_type: &str, objects: &[(&str, String)], seq: u64, key: Option<&str>, extra: &[&str]) -> String {
        let dir = self.p(&format!("in-{seq}-{}", objects.len()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, yaml) in objects {
            std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
        }
        let seq_s = seq.to_string();
        let mut args = vec![
            "-o", "json", "push", dir.to_str().unwrap(), reference, "--plain-http", "--sequence", &seq_s,
            "--cluster-type", cluster_type, "--environment", "prod",
        ];
        let key_path;
        if let Some(k) = key {
            key_path = self.key(k);
            args.extend(["--key", &key_path]);
        }
        args.extend(extra);
        let out = run_ok("drover", &args, ENV);
        let v = out.json();
        v["digest"].as_str().unwrap_or_else(|| panic!("no digest in {}", out.stdout)).to_string()
    }

    /// Signs `digest` in the polled repository with `key`.
    pub fn sign(&self, digest: &str, key: &str) {
        let r = format!("{}/fleet/edge@{digest}", self.reg.addr);
        run_ok("drover", &["sign", &r, "--key", &self.key(key), "--plain-http"], ENV);
    }

    /// Places `digest` (signed with `key`) on the polled channel with `key`'s signed
    /// statement: `drover promote REPO@digest TAG --key` (the channel tag may already name
    /// it, e.g. after an attacker's skopeo copy: only the statement is written then).
    pub fn place(&self, digest: &str, key: &str) {
        let r = format!("{}/fleet/edge@{digest}", self.reg.addr);
        let tag = self.tag_ref.rsplit(':').next().unwrap().to_string();
        run_ok("drover", &["promote", &r, &tag, "--key", &self.key(key), "--trust-key", &self.pubkey(key), "--plain-http"], ENV);
    }

    /// The common `run` flags (trusting k1, expecting edge/prod, dir target).
    pub fn agent_args(&self, source: &str) -> Vec<String> {
        [
            "run", "--source", source, "--plain-http", "--trust-key", &self.pubkey("k1"), "--expect-cluster-type", "edge",
            "--expect-environment", "prod", "--target", &format!("dir:{}", self.target().display()), "--state-dir",
            &self.state(), "--listen", &format!("127.0.0.1:{}", drover_tests::free_port()),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// `drover-agent run --once` with the common flags plus `extra`.
    pub fn once(&self, extra: &[&str]) -> Out {
        self.once_from(&self.tag_ref.clone(), extra)
    }

    /// Like [`Fx::once`] from another source.
    pub fn once_from(&self, source: &str, extra: &[&str]) -> Out {
        let mut args = self.agent_args(source);
        args.push("--once".into());
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run("drover-agent", &refs, &[])
    }

    /// `drover-agent run --once` from `source` trusting exactly the public keys of `keys`
    /// (instead of k1 alone), plus `extra`.
    pub fn once_trusting(&self, source: &str, keys: &[&str], extra: &[&str]) -> Out {
        let mut args = self.agent_args(source);
        let i = args.iter().position(|a| a == "--trust-key").unwrap();
        args.drain(i..i + 2);
        for k in keys {
            args.extend(["--trust-key".to_string(), self.pubkey(k)]);
        }
        args.push("--once".into());
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run("drover-agent", &refs, &[])
    }

    /// Spawns a long-running agent (killed when the returned guard is dropped, so a
    /// failing test leaves no agent behind).
    pub fn spawn(&self, source: &str, listen: &str, extra: &[&str]) -> Running {
        let mut args = self.agent_args(source);
        let i = args.iter().position(|a| a == "--listen").unwrap();
        args[i + 1] = listen.to_string();
        args.extend(extra.iter().map(|s| s.to_string()));
        Command::new(bin("drover-agent"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.p(&format!("agent-{}.log", drover_tests::free_port()))).unwrap())
            .spawn()
            .map(Running)
            .unwrap()
    }

    /// The attacker's write: puts `bundle` into an OCI layout with the proto layout code
    /// (as any OCI tool could), then copies it to `repository:tag` of the registry with
    /// skopeo. Nothing of drover touches the registry.
    pub fn skopeo_put(&self, bundle: &Bundle, dest: &str) {
        let dir = self.p(&format!("skopeo-{}", &bundle.digest[7..19]));
        let layout = Layout::create(&dir).unwrap();
        for blob in [&bundle.config, &bundle.layer, &bundle.manifest] {
            layout.write_blob(blob).unwrap();
        }
        let desc = drover_proto::manifest::Descriptor::of(drover_proto::media::OCI_MANIFEST, &bundle.manifest);
        layout.set_ref(Some("put"), desc).unwrap();
        tool_ok(
            "skopeo",
            &["copy", "--quiet", "--dest-tls-verify=false", &format!("oci:{}:put", dir.display()), &format!("docker://{}", self.reg.reference(dest))],
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `drover-agent status -o json` from the state dir (no agent running).
    pub fn status(&self) -> serde_json::Value {
        run_ok(
            "drover-agent",
            &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &self.state()],
            &[],
        )
        .json()
    }

    /// `drover-agent history -o json` from the state dir.
    pub fn history(&self) -> Vec<serde_json::Value> {
        let v = run_ok(
            "drover-agent",
            &["history", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &self.state()],
            &[],
        )
        .json();
        v.as_array().unwrap().clone()
    }
}

/// A ConfigMap in namespace `ns`.
pub fn cm(ns: &str, name: &str, data: &str) -> (String, String) {
    (
        format!("cm-{ns}-{name}"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  v: {data:?}\n"),
    )
}

/// Borrowing view for [`Fx::push`].
pub fn objs(v: &[(String, String)]) -> Vec<(&str, String)> {
    v.iter().map(|(n, y)| (n.as_str(), y.clone())).collect()
}

/// Every file under `dir` with its content (relative paths).
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Waits until `f` is true or panics after `secs`.
pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out after {secs}s waiting for {what}");
}

/// GET `http://addr/path` → (status, body), or None when nothing listens.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.get(9..12)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((code, body))
}

/// `/status` of the agent listening on `listen` (it must answer 200).
pub fn live_status(listen: &str) -> serde_json::Value {
    let (code, body) = http_get(listen, "/status").expect("the agent answers");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The value of a metric line `series` (exact series text) at `listen`, 0 when absent.
pub fn metric(listen: &str, series: &str) -> f64 {
    let body = http_get(listen, "/metrics").map(|r| r.1).unwrap_or_default();
    sample_sum(&body, series)
}

/// The sum of the samples on the page `body` of `series` (`name` or `name{label="v",...}`):
/// every line of that name whose labels include the given ones (the agent labels each
/// series with its source too), 0 when there is none.
pub fn sample_sum(body: &str, series: &str) -> f64 {
    let series = series.trim();
    let (name, want): (&str, Vec<&str>) = match series.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end_matches('}').split(',').filter(|s| !s.is_empty()).collect()),
        None => (series, Vec::new()),
    };
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            let (n, labels) = match head.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}').split(',').collect::<Vec<_>>()),
                None => (head, Vec::new()),
            };
            (n == name && want.iter().all(|w| labels.contains(w))).then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

impl Fx {
    /// The fleet report of cluster `edge.<name>`, read with skopeo (independent of drover).
    pub fn report(&self, name: &str) -> Option<serde_json::Value> {
        use base64::Engine;
        let reference = format!("docker://{}/fleet/drover-reports:edge.{name}", self.reg.addr);
        let out = Command::new("skopeo").args(["inspect", "--raw", "--tls-verify=false", &reference]).output().unwrap();
        if !out.status.success() {
            return None;
        }
        let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(manifest["config"]["data"].as_str()?).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// Sends SIGTERM and waits (bounded) for the exit code.
pub fn terminate(child: &mut Child) -> Option<i32> {
    unsafe_kill(child.id(), "TERM");
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("agent did not exit within 15 s of SIGTERM");
}

/// `kill -SIG PID` through the kill binary (no libc dependency in the tests).
pub fn unsafe_kill(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

/// A counting TCP proxy on loopback in front of `upstream`: counts HTTP requests
/// (request lines) sent by clients, and records them.
pub struct CountingProxy {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    count: Arc<AtomicUsize>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl CountingProxy {
    /// Starts the proxy on a free port.
    pub fn start(upstream: &str) -> CountingProxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let count = Arc::new(AtomicUsize::new(0));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (c, ls, up) = (count.clone(), lines.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&up) else { continue };
                let (c, ls) = (c.clone(), ls.clone());
                let (mut cr, mut sw) = (conn.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    let mut pending = Vec::new();
                    while let Ok(n) = cr.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(i) = pending.windows(2).position(|w| w == b"\r\n") {
                            let line = String::from_utf8_lossy(&pending[..i]).into_owned();
                            if line.ends_with(" HTTP/1.1") || line.ends_with(" HTTP/1.0") {
                                c.fetch_add(1, Ordering::SeqCst);
                                ls.lock().unwrap().push(line);
                            }
                            pending.drain(..i + 2);
                        }
                        if sw.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown(std::net::Shutdown::Write);
                });
                let (mut sr, mut cw) = (server, conn);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut sr, &mut cw);
                    let _ = cw.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        CountingProxy { addr, count, lines }
    }

    /// Requests seen so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Request lines seen so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// A running agent process, killed (and reaped) when dropped: a test that panics before
/// it stops the agent does not leave it running.
pub struct Running(pub Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
