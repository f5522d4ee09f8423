//! Running the built binaries with a time limit (a test of a stall must not hang the
//! suite when the stall wins) or with standard input (`--password-stdin`).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bins::{bin, Out};

/// Runs binary `name`; returns `Err` with what it printed when it did not finish within
/// `limit` (it is killed then).
pub fn run_within(limit: Duration, name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(Out, Duration), String> {
    let mut cmd = Command::new(bin(name));
    cmd.args(args);
    finish_within(cmd, limit, &format!("{name} {args:?}"), env)
}

/// [`run_within`] under a data-segment cap of `data` bytes (`prlimit --data`): a test of
/// a limit that could balloon shows a missing limit as an allocation failure (an abort,
/// exit code -1 or 134) instead of taking the machine down.
pub fn run_capped(data: u64, limit: Duration, name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(Out, Duration), String> {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--data={data}")).arg("--").arg(bin(name)).args(args);
    finish_within(cmd, limit, &format!("{name} {args:?} (data capped at {data} bytes)"), env)
}

/// [`run_capped`], also returning the binary's peak resident memory in bytes (its
/// `ru_maxrss`): a limit that holds shows as a small peak, a missing one as a peak near
/// the cap (the allocation that fails may be one the program survives).
pub fn run_measured(data: u64, limit: Duration, name: &str, args: &[&str]) -> Result<(Out, u64), String> {
    run_measured_env(data, limit, name, args, &[]).map(|(out, usage)| (out, usage.peak))
}

/// What [`run_measured_env`] measured of the one process.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Peak resident memory, bytes (`ru_maxrss`).
    pub peak: u64,
    /// CPU time, user plus system.
    pub cpu: Duration,
}

/// Forks the command from a small process and writes its `wait4` usage as JSON. A process
/// keeps the resident high-water mark of the image it was forked from across `exec`
/// (Linux records the old image's peak in `ru_maxrss`): forked from a test process that
/// holds a fake API server full of large objects, the measured binary would report the
/// test's size, not its own.
const MEASURE: &str = r#"
import json, os, sys, time
out, limit, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
end = time.time() + limit
while True:
    r, status, ru = os.wait4(pid, os.WNOHANG)
    if r == pid:
        break
    if time.time() > end:
        os.kill(pid, 9)
        os.wait4(pid, 0)
        json.dump({"timeout": True}, open(out, "w"))
        sys.exit(0)
    time.sleep(0.02)
json.dump({"code": os.waitstatus_to_exitcode(status), "maxrss_kib": ru.ru_maxrss, "cpu": ru.ru_utime + ru.ru_stime}, open(out, "w"))
"#;

/// [`run_measured`] with environment variables, also returning the CPU time it used.
pub fn run_measured_env(data: u64, limit: Duration, name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(Out, Usage), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_p, err_p, usage_p) = (dir.path().join("stdout"), dir.path().join("stderr"), dir.path().join("usage.json"));
    let status = Command::new("python3")
        .args(["-c", MEASURE])
        .arg(&usage_p)
        .arg(limit.as_secs_f64().to_string())
        .arg("prlimit")
        .arg(format!("--data={data}"))
        .arg("--")
        .arg(bin(name))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_p).unwrap())
        .stderr(std::fs::File::create(&err_p).unwrap())
        .status()
        .expect("spawn python3 (prlimit is util-linux)");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let usage: serde_json::Value = serde_json::from_str(&read(&usage_p)).map_err(|e| format!("measuring {name} failed ({status}): {e}\n{}", read(&err_p)))?;
    if usage["timeout"] == true {
        return Err(format!("{name} {args:?} still running after {limit:?}; stderr so far:\n{}", read(&err_p)));
    }
    let usage_v = usage;
    let code = usage_v["code"].as_i64().unwrap_or(-1) as i32;
    let usage = Usage { peak: usage_v["maxrss_kib"].as_u64().unwrap_or(0) * 1024, cpu: Duration::from_secs_f64(usage_v["cpu"].as_f64().unwrap_or(0.0)) };
    Ok((Out { code, stdout: read(&out_p), stderr: read(&err_p) }, usage))
}

fn finish_within(mut cmd: Command, limit: Duration, label: &str, env: &[(&str, &str)]) -> Result<(Out, Duration), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_p, err_p) = (dir.path().join("stdout"), dir.path().join("stderr"));
    cmd.stdin(Stdio::null()).stdout(std::fs::File::create(&out_p).unwrap()).stderr(std::fs::File::create(&err_p).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn (prlimit is util-linux)");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            let out = Out { code: st.code().unwrap_or(-1), stdout: read(&out_p), stderr: read(&err_p) };
            return Ok((out, start.elapsed()));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{label} still running after {limit:?}; stderr so far:\n{}", read(&err_p)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs binary `name` with `stdin` as its standard input.
pub fn run_with_stdin(name: &str, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Out {
    let mut cmd = Command::new(bin(name));
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("wait").into()
}
