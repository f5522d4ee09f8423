//! The state directory belongs to the agent. Attacked by a neighbour on the host (another
//! uid, via `setpriv`; the tests run as root, like an agent on an edge box):
//!
//! - she makes `--state-dir` first, in a sticky world-writable directory (as `/tmp`), with
//!   her own database and report key in it: the agent refuses to start, naming the path,
//!   her uid and the mode, and uses none of her files;
//! - she owns the directory the state directory (or the `dir:` target) sits in, so she can
//!   swap it for a link to a root-owned directory: the agent refuses to start, naming her
//!   directory, and changes nothing there;
//! - `hold.json` is a link to `/dev/zero`, or a FIFO: the agent stays under 64 MiB, keeps
//!   answering `/healthz`, holds (fail-closed, saying why) and exits on SIGTERM.

mod agent_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_support::{cm, http_get, live_status, objs, snapshot, terminate, wait_until, Fx};
use drover_tests::neighbour::{self, chmod, chown};
use drover_tests::{bin, Out};

/// `drover-agent run --once` with the common flags, `state` as `--state-dir` and `target`
/// as the `dir:` target.
fn once_at(fx: &Fx, state: &Path, target: &Path) -> Out {
    let mut args = fx.agent_args(&fx.tag_ref);
    let at = |args: &[String], flag: &str| args.iter().position(|a| a == flag).unwrap() + 1;
    let i = at(&args, "--state-dir");
    args[i] = state.display().to_string();
    let i = at(&args, "--target");
    args[i] = format!("dir:{}", target.display());
    args.push("--once".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    drover_tests::run("drover-agent", &refs, &[])
}

/// Every file under `dir` with its bytes, mode and modification time.
fn files_and_times(dir: &Path) -> Vec<(String, Vec<u8>, u32, i64, i64)> {
    let mut out: Vec<_> = snapshot(dir)
        .into_iter()
        .map(|(p, data)| {
            let md = std::fs::symlink_metadata(dir.join(&p)).unwrap();
            (p, data, md.mode(), md.mtime(), md.mtime_nsec())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_state_directory_another_user_made_is_refused_and_none_of_her_files_is_used() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    chmod(fx.tmp.path(), 0o755);
    // A sticky, world-writable directory, as /tmp.
    let shared = fx.p("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o1777);
    let state = shared.join("state");
    // The neighbour makes the state directory before the agent starts: her own agent run
    // creates the database, and she leaves her report key in it.
    let hers = neighbour::run(
        bin("drover-agent"),
        &[
            "run", "--once", "--source", "127.0.0.1:9/fleet/edge:prod", "--plain-http", "--insecure-skip-verify", "--target",
            &format!("dir:{}", shared.join("her-target").display()), "--state-dir", &state.display().to_string(),
        ],
    );
    assert!(state.join("db").is_dir(), "her agent made a database: {}", hers.stderr);
    std::fs::copy(fx.p("k2/drover.key"), state.join("report-key.pem")).unwrap();
    chown(&state.join("report-key.pem"));
    assert_eq!(std::fs::metadata(&state).unwrap().uid(), neighbour::UID);
    let mode = std::fs::metadata(&state).unwrap().mode() & 0o7777;
    let before = files_and_times(&state);

    let target = fx.p("out");
    let out = once_at(&fx, &state, &target);
    assert_ne!(out.code, 0, "the agent started on a state directory another user made:\n{}", out.stderr);
    assert!(
        out.stderr.contains(&state.display().to_string()) && out.stderr.contains(&format!("uid {}", neighbour::UID)) && out.stderr.contains(&format!("mode {mode:o}")),
        "the refusal names the path, its owner and its mode:\n{}",
        out.stderr
    );
    assert_eq!(files_and_times(&state), before, "none of her files was read into use or written");
    assert!(!target.exists(), "nothing was applied");
}

#[test]
fn a_state_directory_or_target_in_a_directory_another_user_may_swap_is_refused() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    chmod(fx.tmp.path(), 0o755);
    // Her own directory (her home, say), and a root-owned directory elsewhere.
    let her = fx.p("her");
    std::fs::create_dir(&her).unwrap();
    chown(&her);
    chmod(&her, 0o755);
    let victim = fx.p("victim");
    std::fs::create_dir(&victim).unwrap();
    chmod(&victim, 0o755);
    std::fs::write(victim.join("keep"), "root's").unwrap();
    // The state directory is configured inside her directory; she makes it a link to the
    // root-owned one.
    let state = her.join("state");
    std::os::unix::fs::symlink(&victim, &state).unwrap();
    chown(&state);
    let out = once_at(&fx, &state, &fx.p("out"));
    assert_ne!(out.code, 0, "the agent followed a link another user controls:\n{}", out.stderr);
    assert!(out.stderr.contains(&her.display().to_string()) && out.stderr.contains(&format!("uid {}", neighbour::UID)), "names her directory and her:\n{}", out.stderr);
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o7777, 0o755, "the root-owned directory was not made the agent's");
    assert_eq!(snapshot(&victim).into_keys().collect::<Vec<_>>(), ["keep"], "nothing was written into it");

    // A real, root-owned state directory in her directory: she may rename it away and put
    // hers in its place between two starts.
    std::fs::remove_file(&state).unwrap();
    std::fs::create_dir(&state).unwrap();
    chmod(&state, 0o700);
    let out = once_at(&fx, &state, &fx.p("out"));
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&her.display().to_string()), "names the directory she may swap it in:\n{}", out.stderr);
    assert!(!fx.p("out").exists(), "nothing was applied");

    // The dir: target follows the same rule.
    let target = her.join("out");
    let out = once_at(&fx, &fx.p("state"), &target);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&her.display().to_string()) && out.stderr.contains(&format!("uid {}", neighbour::UID)), "{}", out.stderr);
    assert!(!target.exists(), "the target was not created in her directory");

    // In the agent's own directories it runs.
    let out = once_at(&fx, &fx.p("state"), &fx.p("out"));
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// Peak resident memory of `pid` (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(kb * 1024)
}

/// A long-running agent polling every second under a 256 MiB data cap.
fn capped_agent(fx: &Fx, listen: &str) -> Child {
    let mut args = fx.agent_args(&fx.tag_ref);
    let i = args.iter().position(|a| a == "--listen").unwrap();
    args[i + 1] = listen.to_string();
    args.extend(["--interval", "1s"].map(String::from));
    Command::new("prlimit")
        .arg(format!("--data={}", 256u64 << 20))
        .arg("--")
        .arg(bin("drover-agent"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(fx.p("agent.log")).unwrap())
        .spawn()
        .expect("prlimit (util-linux)")
}

fn healthz_within_1s(listen: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(addr) = listen.parse() else { return false };
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

/// Runs the agent for a few polls over the hold file `make` left in its state directory:
/// it must answer `/healthz` every second, stay under 64 MiB, hold saying why, and exit
/// on SIGTERM.
fn survives_hold_file(fx: &Fx, what: &str, make: impl Fn(&Path)) {
    let hold = fx.p("state/hold.json");
    let _ = std::fs::remove_file(&hold);
    make(&hold);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = capped_agent(fx, &listen);
    let log = || std::fs::read_to_string(fx.p("agent.log")).unwrap_or_default();
    let start = Instant::now();
    while !healthz_within_1s(&listen) {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}: the agent never answered /healthz:\n{}", log());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Five polls (one a second), each reading the hold file.
    for i in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        assert!(healthz_within_1s(&listen), "{what}: /healthz did not answer within 1 s after {i} s:\n{}", log());
    }
    wait_until(10, "the hold shows in /status", || http_get(&listen, "/status").is_some() && live_status(&listen)["held"].is_object());
    let st = live_status(&listen);
    let reason = st["held"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("hold.json"), "{what}: held, saying which file cannot be read: {st:#}");
    let peak = peak_rss(agent.id()).expect("the agent runs");
    eprintln!("{what}: peak resident memory {} KiB", peak >> 10);
    assert!(peak < 64 << 20, "{what}: the agent peaked at {} MiB", peak >> 20);
    assert_eq!(terminate(&mut agent), Some(0), "{what}: exits 0 on SIGTERM:\n{}", log());
}

#[test]
fn a_hold_file_that_is_a_link_to_dev_zero_or_a_fifo_keeps_the_agent_small_answering_and_stoppable() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    survives_hold_file(&fx, "hold.json -> /dev/zero", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    survives_hold_file(&fx, "hold.json a FIFO", |p| {
        let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
        assert!(ok, "mkfifo");
    });
    // The state directory is private whatever happened in it.
    assert_eq!(std::fs::metadata(fx.p("state")).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn a_state_volume_writable_by_all_is_accepted_as_the_parent_only_when_declared() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    // A Kubernetes emptyDir as the pod sees it: root-owned, writable by all, not sticky.
    let volume = fx.p("volume");
    std::fs::create_dir(&volume).unwrap();
    chmod(&volume, 0o2777);
    let state = volume.join("state");
    let out = once_at(&fx, &state, &fx.p("out"));
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&volume.display().to_string()) && out.stderr.contains("not sticky"), "{}", out.stderr);
    assert!(!state.exists(), "nothing created in it");
    // The shipped DaemonSet declares it (sharedStateParent): the state directory below is
    // the agent's, private.
    let mut args = fx.agent_args(&fx.tag_ref);
    let i = args.iter().position(|a| a == "--state-dir").unwrap();
    args[i + 1] = state.display().to_string();
    args.extend(["--once", "--shared-state-parent"].map(String::from));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = drover_tests::run("drover-agent", &refs, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o7777, 0o700);
}
