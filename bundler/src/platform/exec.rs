//! Running one renderer process (docs/platform.md, "Bring your own renderer"): no shell,
//! in a given directory, with a minimal environment (`PATH`, a fresh empty `HOME` and
//! `TMPDIR`, `LANG=C.UTF-8`, `TZ=UTC`, plus the caller's variables: nothing else of
//! drover's environment, so no registry password or cloud token reaches the tool), the
//! input on stdin, stdout collected up to a limit, the last lines of stderr kept for the
//! error message, and a deadline after which the whole process group is killed. Whatever
//! the process left running in its group when it exits is killed too, so a renderer never
//! outlives the render.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of stderr an error shows.
pub const STDERR_LINES: usize = 20;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 300;
/// Bytes of stderr kept while reading (the tail; older output is dropped).
const STDERR_KEEP: usize = 64 << 10;
/// The `PATH` given when drover itself has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long the output readers may take after the process ended (its pipes close when the
/// group is killed; a grandchild that left the group could hold them).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// One run of a program.
pub struct Invocation<'a> {
    /// Program and arguments; a program with a `/` is relative to `dir`, one without is
    /// looked up in `PATH`.
    pub argv: &'a [String],
    /// The working directory.
    pub dir: &'a Path,
    /// Variables set besides the minimal environment.
    pub vars: &'a [(&'a str, &'a str)],
    /// Written to the program's stdin (then closed).
    pub stdin: &'a [u8],
    /// The deadline, from the start.
    pub timeout: Duration,
    /// Most bytes of stdout accepted.
    pub max_stdout: usize,
}

/// What a successful run printed.
#[derive(Debug)]
pub struct Ran {
    /// Everything on stdout.
    pub stdout: Vec<u8>,
    /// The last lines of stderr, cleaned ([`tail_lines`]).
    pub stderr: String,
}

/// Why a run failed. Every variant but [`ExecError::Start`] carries the last lines of stderr.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The program could not be started.
    #[error("cannot run {program}: {message}")]
    Start {
        /// The program as given.
        program: String,
        /// The system's answer and what to do.
        message: String,
    },
    /// It exited with a non-zero status (or was killed by a signal).
    #[error("exited with {status}{}", stderr_block(.stderr))]
    Exit {
        /// `status 3`, `signal 9`.
        status: String,
        /// Last lines of stderr.
        stderr: String,
    },
    /// It did not finish in time; its process group was killed.
    #[error("did not finish within {} (spec.render.timeout); its process group was killed{}", humantime::format_duration(*.after), stderr_block(.stderr))]
    Timeout {
        /// The deadline.
        after: Duration,
        /// Last lines of stderr.
        stderr: String,
    },
    /// It exited, but its stdout stayed open (a process it started outside its group).
    #[error("exited, but its output was still open {}s later (a process it started outside its process group holds it){}", DRAIN_GRACE.as_secs(), stderr_block(.stderr))]
    OutputOpen {
        /// Last lines of stderr.
        stderr: String,
    },
    /// It printed more than the limit; it was stopped.
    #[error("printed more than {limit} bytes on stdout; it was stopped{}", stderr_block(.stderr))]
    TooMuchOutput {
        /// The limit.
        limit: usize,
        /// Last lines of stderr.
        stderr: String,
    },
}

impl ExecError {
    /// The last lines of stderr the error carries (empty for [`ExecError::Start`]).
    pub fn stderr(&self) -> &str {
        match self {
            ExecError::Start { .. } => "",
            ExecError::Exit { stderr, .. }
            | ExecError::Timeout { stderr, .. }
            | ExecError::TooMuchOutput { stderr, .. }
            | ExecError::OutputOpen { stderr } => stderr,
        }
    }
}

/// `\n  stderr (last lines):\n    LINE...`, or nothing for an empty stderr.
pub fn stderr_block(stderr: &str) -> String {
    if stderr.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = stderr.lines().map(|l| format!("    {l}")).collect();
    format!("\n  stderr (last lines):\n{}", lines.join("\n"))
}

/// Runs `inv` to the end (or to its deadline).
pub fn run(inv: &Invocation<'_>) -> Result<Ran, ExecError> {
    let program = inv.argv.first().map(String::as_str).unwrap_or("");
    let start_err = |message: String| ExecError::Start { program: program.to_string(), message };
    let home = tempfile::Builder::new()
        .prefix("drover-render-home-")
        .tempdir()
        .map_err(|e| start_err(format!("cannot create its empty HOME directory: {e}")))?;
    let mut cmd = Command::new(resolve(program, inv.dir));
    cmd.args(&inv.argv[1..])
        .current_dir(inv.dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()))
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("LANG", "C.UTF-8")
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in inv.vars {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound if program.contains('/') => format!(" (no such file in {})", inv.dir.display()),
            std::io::ErrorKind::NotFound => " (not found in PATH; install it, or give its path)".to_string(),
            std::io::ErrorKind::PermissionDenied => " (is it executable? chmod +x)".to_string(),
            _ => String::new(),
        };
        start_err(format!("{e}{hint}"))
    })?;
    let deadline = Instant::now() + inv.timeout;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = inv.stdin.to_vec();
    // A tool that never reads its stdin must not block drover: the write has its own thread
    // and its error (a closed pipe) is ignored.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let limit = inv.max_stdout;
    let stdout = reader(child.stdout.take().expect("stdout is piped"), move |r| read_limited(r, limit));
    let stderr = reader(child.stderr.take().expect("stderr is piped"), read_tail);
    let finished = wait_until(&mut child, deadline);
    // Before the process is reaped, so its group id cannot have been reused.
    kill_group(&child);
    let status = child.wait();
    let drain_by = Instant::now() + DRAIN_GRACE;
    let out = stdout.recv_timeout(drain_by.saturating_duration_since(Instant::now())).ok();
    let err = stderr.recv_timeout(drain_by.saturating_duration_since(Instant::now())).map(|b| tail_lines(&b, STDERR_LINES)).unwrap_or_default();
    if let Some(Err(Overflow)) = out {
        return Err(ExecError::TooMuchOutput { limit: inv.max_stdout, stderr: err });
    }
    let status = match (finished, status) {
        (true, Ok(s)) => s,
        _ => return Err(ExecError::Timeout { after: inv.timeout, stderr: err }),
    };
    let Some(Ok(out)) = out else { return Err(ExecError::OutputOpen { stderr: err }) };
    if !status.success() {
        return Err(ExecError::Exit { status: describe_status(status), stderr: err });
    }
    Ok(Ran { stdout: out, stderr: err })
}

/// A program name with a `/` is a path relative to `dir` (as it would be in a shell
/// started there); a bare name is looked up in `PATH` by the system.
fn resolve(program: &str, dir: &Path) -> PathBuf {
    let p = Path::new(program);
    if program.contains('/') && p.is_relative() {
        dir.join(p)
    } else {
        p.to_path_buf()
    }
}

/// Reads a pipe on its own thread; the result arrives on the returned channel.
fn reader<R: Read + Send + 'static, T: Send + 'static>(pipe: R, f: impl FnOnce(R) -> T + Send + 'static) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f(pipe));
    });
    rx
}

/// stdout was over the limit.
#[derive(Debug)]
struct Overflow;

/// Everything from `r`, or [`Overflow`] past `limit` bytes (reading stops: the writer then
/// gets a closed pipe).
fn read_limited(r: impl Read, limit: usize) -> Result<Vec<u8>, Overflow> {
    let mut out = Vec::new();
    match r.take(limit as u64 + 1).read_to_end(&mut out) {
        Ok(_) if out.len() > limit => Err(Overflow),
        _ => Ok(out),
    }
}

/// The last [`STDERR_KEEP`] bytes of `r`.
fn read_tail(mut r: impl Read) -> Vec<u8> {
    let mut keep = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                keep.extend_from_slice(&buf[..n]);
                if keep.len() > 2 * STDERR_KEEP {
                    keep.drain(..keep.len() - STDERR_KEEP);
                }
            }
        }
    }
    if keep.len() > STDERR_KEEP {
        keep.drain(..keep.len() - STDERR_KEEP);
    }
    keep
}

/// The last `n` non-empty lines of `bytes` as text a terminal shows safely: invalid UTF-8
/// replaced, tabs as spaces, each line cleaned by the one rule for untrusted text
/// (`drover_proto::text::clean::bounded`: control characters shown as escapes, never
/// sent; no line that starts a CI runner's command) and at most [`STDERR_LINE_CHARS`]
/// characters. Renderer output is
/// text from a tool the platform team chose, not from a registry, but a tool's colours
/// and progress bars must not reach a CI log as escape sequences.
pub fn tail_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let cleaned: Vec<String> = text
        .split('\n')
        .map(|l| drover_proto::text::clean::bounded(l.replace('\t', " ").trim_end(), STDERR_LINE_CHARS))
        .filter(|l| !l.is_empty())
        .collect();
    cleaned[cleaned.len().saturating_sub(n)..].join("\n")
}

/// Waits for `child` to exit until `deadline` (true when it did), without reaping it: its
/// pid, the id of its process group, stays taken until [`kill_group`] ran.
fn wait_until(child: &mut Child, deadline: Instant) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if exited(child) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Whether `child` has exited, leaving it a zombie (`waitid` with `WNOWAIT`).
#[cfg(unix)]
fn exited(child: &mut Child) -> bool {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    // An error (no such child) is an end too: nothing is left to wait for.
    !matches!(waitid(WaitId::Pid(Pid::from_child(child)), options), Ok(None))
}

#[cfg(not(unix))]
fn exited(child: &mut Child) -> bool {
    !matches!(child.try_wait(), Ok(None))
}

/// Kills the process group `child` leads (every process it started and did not move out);
/// the group may already be gone.
fn kill_group(child: &Child) {
    #[cfg(unix)]
    {
        let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(child), rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = child;
}

fn describe_status(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("signal {sig}");
        }
    }
    match status.code() {
        Some(c) => format!("status {c}"),
        None => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Result<Ran, ExecError> {
        let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        run(&Invocation { argv: &argv, dir: Path::new("/"), vars: &[("X", "y")], stdin: b"in", timeout, max_stdout: 1 << 20 })
    }

    #[test]
    fn environment_is_minimal_and_stdin_arrives() {
        std::env::set_var("DROVER_TEST_SECRET", "s3cret");
        let r = sh("cat; echo; env | sort", Duration::from_secs(10)).unwrap();
        let out = String::from_utf8(r.stdout).unwrap();
        assert!(out.starts_with("in\n"), "{out}");
        assert!(out.contains("X=y") && out.contains("TZ=UTC") && out.contains("HOME=/") && out.contains("drover-render-home-"), "{out}");
        assert!(!out.contains("s3cret"), "inherited variables do not reach the tool: {out}");
    }

    #[test]
    fn failure_keeps_the_last_lines_of_stderr_cleaned() {
        let e = sh("for i in $(seq 1 30); do echo line $i >&2; done; printf '\\033[31mred\\033[0m\\r\\n' >&2; exit 3", Duration::from_secs(10)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("exited with status 3"), "{msg}");
        assert!(msg.contains("line 30") && !msg.contains("line 10\n"), "{msg}");
        // Cleaned by the one rule (proto text::clean): escapes shown, never sent.
        assert!(msg.contains("\\u{1b}[31mred") && !msg.contains('\u{1b}') && !msg.contains('\r'), "{msg}");
        assert_eq!(e.stderr().lines().count(), STDERR_LINES);
    }

    #[test]
    fn timeout_kills_the_group() {
        let t = Instant::now();
        let e = sh("echo started >&2; sleep 30 & sleep 30; echo never", Duration::from_millis(300)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(matches!(e, ExecError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("started"), "{e}");
    }

    #[test]
    fn output_held_open_outside_the_group_is_an_error() {
        // A process in its own session keeps stdout open after the tool exits.
        let e = sh("setsid sleep 4 & sleep 0.5; echo partial", Duration::from_secs(10)).unwrap_err();
        assert!(matches!(e, ExecError::OutputOpen { .. }), "{e}");
    }

    #[test]
    fn output_over_the_limit_is_refused() {
        let argv = vec!["sh".to_string(), "-c".to_string(), "yes".to_string()];
        let inv = Invocation { argv: &argv, dir: Path::new("/"), vars: &[], stdin: b"", timeout: Duration::from_secs(10), max_stdout: 1000 };
        assert!(matches!(run(&inv), Err(ExecError::TooMuchOutput { limit: 1000, .. })));
    }

    #[test]
    fn missing_program_is_named() {
        let argv = vec!["./nope.sh".to_string()];
        let inv = Invocation { argv: &argv, dir: Path::new("/tmp"), vars: &[], stdin: b"", timeout: Duration::from_secs(1), max_stdout: 10 };
        let e = run(&inv).unwrap_err().to_string();
        assert!(e.contains("./nope.sh") && e.contains("/tmp"), "{e}");
    }
}
