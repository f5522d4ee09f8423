//! Shared fixtures of the first-hour tests (`cli_output`, `first_hour`): one world in
//! which every `drover` and `drover-agent` command has something to work on, the list of
//! those commands, a run with a closed stdout, and a JSON key checker.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use drover_tests::{bin, run, run_ok, Out, Registry};

/// The key password of every key made here.
pub const ENV: &[(&str, &str)] = &[("DROVER_KEY_PASSWORD", "")];

/// Writes `files` (relative path, content) under `root`.
pub use drover_tests::write_files as write;

/// A directory of rendered YAML: one ConfigMap whose `data.value` is `value`.
pub fn input(dir: &Path, value: &str) {
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: demo\ndata:\n  value: {value:?}\n");
    write(dir, &[("settings.yaml", &cm), ("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n")]);
}

/// A two-environment platform with cluster types `edge` and `cloud` and one workload.
pub fn platform(root: &Path) {
    write(
        root,
        &[
            ("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, staging, prod]\n"),
            ("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory}\n"),
            ("cluster-types/cloud.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud}\n"),
            ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\nvalues: {level: debug}\n"),
            ("environments/staging.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: staging}\nvalues: {level: info}\n"),
            ("environments/prod.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: prod}\nvalues: {level: warn}\n"),
            ("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\n"),
            (
                "workloads/app/templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {{ namespace }}\ndata:\n  level: {{ values.level | tojson }}\n",
            ),
        ],
    );
}

/// One world: a registry, a key pair, inputs, bundles in `fleet/edge` (prod-41, prod-42,
/// both signed), `fleet/rb` (the same, for rollback), a publish of `dev` to `pub`, an
/// export archive and an agent's state directory (its report in `fleet/drover-reports`).
pub struct World {
    /// The registry.
    pub reg: Registry,
    /// Everything else.
    pub tmp: tempfile::TempDir,
}

impl World {
    /// Builds the world through the binaries.
    pub fn new() -> World {
        let reg = Registry::start();
        let tmp = tempfile::tempdir().unwrap();
        let w = World { reg, tmp };
        run_ok("drover", &["keygen", "--out-dir", &w.s("keys")], ENV);
        input(&w.p("in41"), "forty-one");
        input(&w.p("in42"), "forty-two");
        platform(&w.p("platform"));
        for repo in ["edge", "rb"] {
            for seq in ["41", "42"] {
                let r = w.r(&format!("fleet/{repo}:prod"));
                w.drover_ok(&[
                    "push", &w.s(&format!("in{seq}")), &r, "--key", &w.key(), "--cluster-type", "edge", "--environment", "prod", "--sequence", seq,
                ]);
            }
        }
        w.drover_ok(&["publish", &w.s("platform"), "--env", "dev", "--registry", &w.r("pub"), "--key", &w.key(), "--revision", "r1"]);
        w.drover_ok(&["export", &w.r("fleet/edge:prod"), "--out", &w.s("export.tar")]);
        // A reporting agent: its report in fleet/drover-reports feeds `drover fleet ...`.
        let out = w.agent_once(&w.r("fleet/edge:prod"), "state", &["--cluster-name", "e1"]);
        assert_eq!(out.code, 0, "agent --once: {}", out.stderr);
        w
    }

    /// A path in the world.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// The same, as a string.
    pub fn s(&self, rel: &str) -> String {
        self.p(rel).display().to_string()
    }

    /// `HOST:PORT/<rest>` in the registry.
    pub fn r(&self, rest: &str) -> String {
        format!("{}/{rest}", self.reg.addr)
    }

    /// The private key.
    pub fn key(&self) -> String {
        self.s("keys/drover.key")
    }

    /// The public key.
    pub fn pubkey(&self) -> String {
        self.s("keys/drover.pub")
    }

    /// `drover ARGS --plain-http` (registry commands), asserting exit 0.
    pub fn drover_ok(&self, args: &[&str]) -> Out {
        let a = with_plain_http(args);
        run_ok("drover", &a.iter().map(String::as_str).collect::<Vec<_>>(), ENV)
    }

    /// `drover ARGS --plain-http` (registry commands).
    pub fn drover(&self, args: &[&str]) -> Out {
        let a = with_plain_http(args);
        run("drover", &a.iter().map(String::as_str).collect::<Vec<_>>(), ENV)
    }

    /// `drover-agent run --once` from `source` into `dir:<state>-target` with state `<state>`.
    pub fn agent_once(&self, source: &str, state: &str, extra: &[&str]) -> Out {
        let target = format!("dir:{}", self.s(&format!("{state}-target")));
        let pubkey = self.pubkey();
        let mut args = vec![
            "run", "--once", "--source", source, "--plain-http", "--trust-key", &pubkey, "--expect-cluster-type", "edge",
            "--expect-environment", "prod", "--target", &target, "--state-dir",
        ];
        let state_dir = self.s(state);
        args.push(&state_dir);
        args.extend_from_slice(extra);
        run("drover-agent", &args, &[])
    }

    /// Every command of both binaries with arguments that succeed on this world, each
    /// with its expected exit code; `n` makes output paths fresh.
    pub fn commands(&self, n: usize) -> Vec<(&'static str, Vec<String>, i32)> {
        let (key, pubkey) = (self.key(), self.pubkey());
        let edge = self.r("fleet/edge:prod");
        let mut v: Vec<(&'static str, Vec<&str>, i32)> = Vec::new();
        let keys_n = self.s(&format!("k{n}"));
        let render_n = self.s(&format!("render{n}"));
        let layout_n = format!("oci:{}:v1", self.s(&format!("layout{n}")));
        let pull_n = self.s(&format!("pull{n}"));
        let export_n = self.s(&format!("export{n}.tar"));
        let (in41, in42, platform, export) = (self.s("in41"), self.s("in42"), self.s("platform"), self.s("export.tar"));
        let (scratch, pubprefix, record) = (self.r("fleet/scratch:dev"), self.r("pub"), self.r("pub/drover-releases:dev"));
        let (prod41, rb, imported) = (self.r("fleet/edge:prod-41"), self.r("fleet/rb:prod"), self.r("imported"));
        let state = self.s("state");
        let (fleet, view_n) = (self.r("fleet"), self.s(&format!("fleet{n}.html")));
        v.push(("drover", vec!["keygen", "--out-dir", &keys_n], 0));
        v.push(("drover", vec!["render", &platform, "--env", "dev", "--out", &render_n], 0));
        v.push(("drover", vec!["build", &in41, "--out", &layout_n, "--sequence", "1"], 0));
        v.push(("drover", vec!["push", &in41, &scratch, "--key", &key, "--environment", "dev", "--plain-http"], 0));
        v.push(("drover", vec!["publish", &platform, "--env", "dev", "--registry", &pubprefix, "--key", &key, "--revision", "r1", "--plain-http"], 0));
        v.push(("drover", vec!["releases", "--registry", &pubprefix, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["sign", &edge, "--key", &key, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["verify", &edge, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["inspect", &edge, "--plain-http"], 0));
        v.push(("drover", vec!["inspect", &record, "--plain-http"], 0));
        v.push(("drover", vec!["pull", &edge, "--out", &pull_n, "--plain-http"], 0));
        v.push(("drover", vec!["diff", &in41, &in41], 0));
        v.push(("drover", vec!["diff", &prod41, &edge, "--plain-http"], 1));
        v.push(("drover", vec!["promote", &edge, "prod-ring0", "--key", &key, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["rollback", &rb, "--to", "prod-41", "--key", &key, "--plain-http"], 0));
        v.push(("drover", vec!["export", &edge, "--out", &export_n, "--plain-http"], 0));
        v.push(("drover", vec!["import", &export, "--to", &imported, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["fleet", "enroll", "--registry", &fleet, "--key", &key, "--all-pending", "--plain-http"], 0));
        v.push(("drover", vec!["fleet", "status", "--registry", &fleet, "--trust-key", &pubkey, "--plain-http"], 0));
        v.push(("drover", vec!["fleet", "view", "--registry", &fleet, "--trust-key", &pubkey, "--out", &view_n, "--plain-http"], 0));
        v.push(("drover", vec!["fleet", "wait", &edge, "--trust-key", &pubkey, "--timeout", "1s", "--interval", "1s", "--plain-http"], 0));
        // Refusals that still print a report: the gate holds (the soak is not over).
        v.push(("drover", vec!["fleet", "wait", &edge, "--trust-key", &pubkey, "--soak", "1h", "--timeout", "1s", "--interval", "1s", "--plain-http"], 1));
        v.push(("drover", vec!["promote", &edge, "prod-ring9", "--key", &key, "--trust-key", &pubkey, "--require-healthy", "100%", "--soak", "1h", "--plain-http"], 1));
        let (target, reason) = (format!("dir:{}", self.s("state-target")), "a test hold");
        v.push(("drover-agent", vec!["hold", "--state-dir", &state, "--reason", reason], 0));
        v.push(("drover-agent", vec!["release", "--state-dir", &state], 0));
        v.push((
            "drover-agent",
            vec![
                "plan", "--source", &edge, "--plain-http", "--trust-key", &pubkey, "--expect-cluster-type", "edge", "--expect-environment", "prod",
                "--target", &target, "--state-dir", &state,
            ],
            0,
        ));
        v.push(("drover-agent", vec!["status", "--state-dir", &state, "--endpoint", "http://127.0.0.1:9"], 0));
        v.push(("drover-agent", vec!["history", "--state-dir", &state, "--endpoint", "http://127.0.0.1:9"], 0));
        let _ = in42;
        v.into_iter().map(|(b, a, c)| (b, a.into_iter().map(String::from).collect(), c)).collect()
    }
}

fn with_plain_http(args: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let local = ["keygen", "render", "build", "diff"];
    if !local.contains(&args[0]) && !a.iter().any(|x| x == "--plain-http") {
        a.push("--plain-http".into());
    }
    a
}

/// Runs `name ARGS` with stdout a pipe whose reading end is already closed (as
/// `... | head -1` once head has exited): the first write fails with a broken pipe.
pub fn run_closed_stdout(name: &str, args: &[String], env: &[(&str, &str)]) -> Out {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut cmd = Command::new(bin(name));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::from(writer)).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn");
    Out { code: out.status.code().unwrap_or(-1), stdout: String::new(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// Problems with the object keys of a JSON document: keys given twice in one object,
/// and keys that are not camelCase (an `_` in the name). Keys inside `annotations` and
/// `labels` are data, not field names, and are skipped.
pub fn key_problems(text: &str) -> Vec<String> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
    struct Walk<'a> {
        path: String,
        data: bool,
        out: &'a RefCell<Vec<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = HashSet::new();
            while let Some(k) = map.next_key::<String>()? {
                let path = format!("{}.{k}", self.path);
                if !seen.insert(k.clone()) {
                    self.out.borrow_mut().push(format!("{path}: given twice"));
                }
                if !self.data && k.contains('_') {
                    self.out.borrow_mut().push(format!("{path}: not camelCase"));
                }
                let data = self.data || k == "annotations" || k == "labels";
                map.next_value_seed(Walk { path, data, out: self.out })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0;
            while seq.next_element_seed(Walk { path: format!("{}[{i}]", self.path), data: self.data, out: self.out })?.is_some() {
                i += 1;
            }
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let out = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_str(text);
    if let Err(e) = (Walk { path: "$".into(), data: false, out: &out }).deserialize(&mut de) {
        return vec![format!("not JSON: {e}")];
    }
    out.into_inner()
}
