//! Locating and running the built binaries (`drover`, `drover-agent`, `fake-apiserver`)
//! as a user would: as spawned processes. `tests/run.sh` builds them first.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Path of a workspace binary in the same target directory as the running test, or in
/// `DROVER_TEST_BINS` when set: the attack-first practice runs a new test against the
/// binaries of the code before the fix (`DROVER_TEST_BINS=/tmp/base-bins cargo test ...`)
/// to see it fail.
pub fn bin(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("DROVER_TEST_BINS") {
        let p = PathBuf::from(dir).join(name);
        assert!(p.is_file(), "{} does not exist (DROVER_TEST_BINS)", p.display());
        return p;
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
    let p = dir.join(name);
    assert!(p.is_file(), "{} is not built; run `cargo build --workspace --bins` (tests/run.sh does)", p.display());
    p
}

/// A finished command: exit status, stdout and stderr as text.
#[derive(Debug)]
pub struct Out {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Parses stdout as JSON, panicking with both streams when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

impl From<Output> for Out {
    fn from(o: Output) -> Self {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs binary `name` with `args` and extra `env`, stdin closed.
pub fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(bin(name));
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn").into()
}

/// Runs binary `name` with `args` and extra `env` under a data-segment cap of `data_cap`
/// bytes (`prlimit --data`): a test whose input could balloon a process without a limit
/// cannot take the machine down.
pub fn run_capped(name: &str, data_cap: u64, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--data={data_cap}")).arg("--").arg(bin(name)).args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("prlimit (util-linux) must be installed").into()
}

/// Like [`run`] but panics (showing stderr) unless the exit code is 0.
pub fn run_ok(name: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let out = run(name, args, env);
    assert_eq!(out.code, 0, "{name} {args:?} failed:\nstdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    out
}

/// Runs an external tool (skopeo, python3, ...) and returns its stdout, panicking with
/// its stderr unless it exits 0.
pub fn tool_ok(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd} must be installed (tests/run.sh installs it): {e}"));
    assert!(out.status.success(), "{cmd} {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}
