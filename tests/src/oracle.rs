//! The real structured-merge-diff as a test oracle: `tests/oracle/smd/main.go` built
//! against the library as Debian packages it (`golang-k8s-sigs-structured-merge-diff-dev`,
//! `golang-go`; `tests/run.sh` installs both), and a drover-ssa schema written in its
//! schema language. `tests/tests/ssa_oracle.rs` runs generated sequences of applies and
//! updates through both and compares.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use drover_ssa::schema::{ListKind, Scalar, Struct, Type};
use serde_json::{json, Value};

const SMD_SRC: &str = "/usr/share/gocode/src/sigs.k8s.io/structured-merge-diff";

/// Builds the oracle into `dir` (a scratch GOPATH there); Err says what is missing.
pub fn build(dir: &Path) -> Result<PathBuf, String> {
    if Command::new("go").arg("version").output().is_err() || !Path::new(SMD_SRC).is_dir() {
        return Err(format!(
            "the real structured-merge-diff is not installed (go and {SMD_SRC}): run tests/run.sh, which installs golang-go and golang-k8s-sigs-structured-merge-diff-dev"
        ));
    }
    let gp = dir.join("gopath");
    let lib = gp.join("src/sigs.k8s.io/structured-merge-diff");
    let prog = gp.join("src/smdoracle");
    std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&prog).map_err(|e| e.to_string())?;
    // The package's import path has /v4, its Debian directory not.
    let v4 = lib.join("v4");
    if !v4.exists() {
        std::os::unix::fs::symlink(SMD_SRC, &v4).map_err(|e| e.to_string())?;
    }
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("oracle/smd/main.go");
    std::fs::copy(&main, prog.join("main.go")).map_err(|e| e.to_string())?;
    let bin = dir.join("smd-oracle");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&prog)
        .env("GOPATH", format!("{}:/usr/share/gocode", gp.display()))
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("building the oracle: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(bin)
}

/// Runs `cases` (each a list of ops: `{"op","manager","object","force"}`) of objects of
/// `type_name` under `schema` through the oracle; one result per case.
pub fn run(bin: &Path, schema: &Value, type_name: &str, cases: &[Vec<Value>]) -> Vec<Value> {
    let input = json!({"schema": schema.to_string(), "type": type_name, "cases": cases.iter().map(|ops| json!({"ops": ops})).collect::<Vec<_>>()});
    let mut child = Command::new(bin).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("oracle");
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("oracle output")
}

/// `root` (and every type it reaches) in structured-merge-diff's schema language (JSON
/// is YAML); the root's name is returned with it.
pub fn schema(root: &Type) -> (Value, String) {
    let mut w = Writer::default();
    let top = w.type_ref(root);
    w.types.push(json!({"name": "__untyped_atomic_", "scalar": "untyped",
        "list": {"elementType": {"namedType": "__untyped_atomic_"}, "elementRelationship": "atomic"},
        "map": {"elementType": {"namedType": "__untyped_atomic_"}, "elementRelationship": "atomic"}}));
    w.types.push(json!({"name": "__untyped_deduced_", "scalar": "untyped",
        "list": {"elementType": {"namedType": "__untyped_atomic_"}, "elementRelationship": "atomic"},
        "map": {"elementType": {"namedType": "__untyped_deduced_"}, "elementRelationship": "separable"}}));
    let name = top["namedType"].as_str().expect("a named root").to_string();
    (json!({"types": w.types}), name)
}

#[derive(Default)]
struct Writer {
    types: Vec<Value>,
    named: HashMap<String, ()>,
    inline: HashMap<usize, String>,
}

impl Writer {
    fn type_ref(&mut self, t: &Type) -> Value {
        match t {
            Type::Scalar(s) => match s {
                Scalar::Str | Scalar::Bytes => json!({"scalar": "string"}),
                Scalar::Int | Scalar::Float => json!({"scalar": "numeric"}),
                Scalar::Bool => json!({"scalar": "boolean"}),
                Scalar::Quantity | Scalar::IntOrStr | Scalar::Time => json!({"scalar": "untyped"}),
                Scalar::Untyped => json!({"namedType": "__untyped_atomic_"}),
            },
            Type::Deduced => json!({"namedType": "__untyped_deduced_"}),
            Type::List(e, k) => {
                let mut l = json!({"elementType": self.type_ref(e)});
                match k {
                    ListKind::Atomic => l["elementRelationship"] = json!("atomic"),
                    ListKind::Set => l["elementRelationship"] = json!("associative"),
                    ListKind::Keys(keys) => {
                        l["elementRelationship"] = json!("associative");
                        l["keys"] = json!(keys.to_vec());
                    }
                }
                json!({"list": l})
            }
            Type::Map(e, atomic) => json!({"map": {"elementType": self.type_ref(e), "elementRelationship": if *atomic { "atomic" } else { "separable" }}}),
            Type::Builtin(name) => {
                if !self.named.contains_key(*name) {
                    self.named.insert(name.to_string(), ());
                    let s = drover_ssa::schema::builtin_struct(name);
                    self.define(name, &s);
                }
                json!({"namedType": name})
            }
            Type::Struct(s) => {
                let key = Arc::as_ptr(s) as usize;
                let name = match self.inline.get(&key) {
                    Some(n) => n.clone(),
                    None => {
                        let n = format!("inline{}", self.inline.len());
                        self.inline.insert(key, n.clone());
                        self.define(&n, s);
                        n
                    }
                };
                json!({"namedType": name})
            }
        }
    }

    fn define(&mut self, name: &str, s: &Struct) {
        let slot = self.types.len();
        self.types.push(Value::Null);
        let fields: Vec<Value> = s
            .fields
            .iter()
            .map(|f| {
                let mut v = json!({"name": f.name, "type": self.type_ref(&f.ty)});
                if let Some(d) = &f.default {
                    v["default"] = d.clone();
                }
                v
            })
            .collect();
        let mut m = json!({"fields": fields});
        if let Some(rest) = &s.rest {
            m["elementType"] = self.type_ref(rest);
        }
        if s.atomic {
            m["elementRelationship"] = json!("atomic");
        }
        self.types[slot] = json!({"name": name, "map": m});
    }
}
