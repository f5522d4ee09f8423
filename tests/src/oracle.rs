//! The real structured-merge-diff as a test oracle: `tests/oracle/smd/main.go` built
//! against the library as Debian packages it (`golang-k8s-sigs-structured-merge-diff-dev`,
//! `golang-go`; `tests/run.sh` installs both), given either the schema a real server of a
//! Kubernetes minor builds from its published OpenAPI ([`spec_schema`]) or a drover-ssa
//! schema written in its schema language ([`schema`], for custom resources).
//! `tests/tests/ssa_oracle.rs` runs generated sequences of applies and updates through
//! both and compares; `tests/tests/ssa_record.rs` records scenarios with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use drover_ssa::schema::Type;
use drover_ssa::smd;
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
/// is YAML), as drover-ssa has it; the root's name is returned with it.
pub fn schema(root: &Type) -> (Value, String) {
    let (tops, types) = smd::render(&[root]);
    let name = tops[0]["namedType"].as_str().expect("a named root").to_string();
    (smd::for_v4_1(&types), name)
}

/// The schema a Kubernetes 1.`minor` API server builds from its published OpenAPI v3
/// (`ssa/gen/openapi-smd.json`, by kube-openapi schemaconv's rules), in the language of
/// Debian's library: what the oracle runs built-in kinds with, so that drover-ssa's table
/// meets the real server's schema, not its own.
pub fn spec_schema(minor: u8) -> Value {
    let extract: Value = serde_json::from_str(include_str!("../../ssa/gen/openapi-smd.json")).expect("the spec extract");
    smd::for_v4_1(&smd::spec_types(&extract, minor))
}

/// `v` with every array sorted, for comparing objects whose merged lists the real library
/// and drover-ssa (or two versions of the library) may order differently.
pub fn canon(v: &Value) -> Value {
    match v {
        Value::Array(a) => {
            let mut items: Vec<Value> = a.iter().map(canon).collect();
            items.sort_by_key(|i| i.to_string());
            Value::Array(items)
        }
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), canon(v))).collect()),
        v => v.clone(),
    }
}
