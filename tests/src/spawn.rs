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
/// `ru_maxrss`, from `wait4` on that one process): a limit that holds shows as a small peak,
/// a missing one as a peak near the cap (the allocation that fails may be one the program
/// survives).
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

/// [`run_measured`] with environment variables, also returning the CPU time it used.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives its rusage
pub fn run_measured_env(data: u64, limit: Duration, name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(Out, Usage), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_p, err_p) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let child = Command::new("prlimit")
        .arg(format!("--data={data}"))
        .arg("--")
        .arg(bin(name))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_p).unwrap())
        .stderr(std::fs::File::create(&err_p).unwrap())
        .spawn()
        .expect("spawn (prlimit is util-linux)");
    let pid = child.id() as libc::pid_t;
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value; wait4 writes it for this child only.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own child, the pointers are valid for the call.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
            let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
            let usage = Usage { peak: usage.ru_maxrss as u64 * 1024, cpu: time(usage.ru_utime) + time(usage.ru_stime) };
            return Ok((Out { code, stdout: read(&out_p), stderr: read(&err_p) }, usage));
        }
        if start.elapsed() > limit {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("{name} {args:?} still running after {limit:?}; stderr so far:\n{}", read(&err_p)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
