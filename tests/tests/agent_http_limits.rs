//! The agent's HTTP port (the DaemonSet listens on every address, under a 64 MiB memory
//! limit) attacked by its clients, from raw sockets: 200 slow clients each holding an
//! unfinished 400 KB request head, and hundreds of connections that never send a byte.
//! The agent runs under a 64 MiB data-segment cap (`prlimit --data`), keeps its private
//! memory under 40 MiB while they hold on, closes them after its header timeout and
//! answers `/healthz` again.
//!
//! Private memory is `RssAnon` (resident minus the binary's own pages: a debug build's
//! text alone is ~24 MiB; the release figures are in docs/agent.md).

mod transport_support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drover_tests::{bin, free_port};
use transport_support::keygen;

const MIB: u64 = 1 << 20;

/// A long-running agent (nothing to apply: its registry is not there) listening on a free
/// loopback port, under a 64 MiB data cap. Returns it and its address.
fn agent(tmp: &std::path::Path) -> (Child, String) {
    let (_, public) = keygen(tmp);
    let listen = format!("127.0.0.1:{}", free_port());
    let child = Command::new("prlimit")
        .arg(format!("--data={}", 64 * MIB))
        .arg("--")
        .arg(bin("drover-agent"))
        .args(["run", "--source", "127.0.0.1:9/fleet/edge:prod", "--plain-http", "--trust-key", &public, "--interval", "1h"])
        .args(["--target", &format!("dir:{}", tmp.join("out").display()), "--state-dir", &tmp.join("state").display().to_string()])
        .args(["--listen", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.join("agent.log")).unwrap())
        .spawn()
        .expect("prlimit (util-linux)");
    let deadline = Instant::now() + Duration::from_secs(30);
    while healthz(&listen).is_none() {
        assert!(Instant::now() < deadline, "the agent did not answer /healthz:\n{}", std::fs::read_to_string(tmp.join("agent.log")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, listen)
}

fn healthz(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.1 200").then_some(out)
}

/// Private resident memory of `pid` (`RssAnon`), in bytes; `None` once it has exited.
fn rss_anon(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("RssAnon:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(kb * 1024)
}

/// Opens a connection and writes the start of a request head of `pad` header bytes that
/// never ends (as much as the socket takes without blocking).
fn slow_client(addr: &str, pad: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ").unwrap();
    s.set_nonblocking(true).unwrap();
    let chunk = vec![b'a'; 16 << 10];
    let mut sent = 0;
    while sent < pad {
        match s.write(&chunk[..chunk.len().min(pad - sent)]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => break,
        }
    }
    s
}

/// How many of `conns` the agent closed (end of stream or a reset) after `wait`.
fn closed_by_peer(conns: &[TcpStream], wait: Duration) -> usize {
    std::thread::sleep(wait);
    conns
        .iter()
        .filter(|s| {
            let mut s: &TcpStream = s;
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(_) => continue,
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
                    Err(_) => return true,
                }
            }
        })
        .count()
}

fn stop(mut child: Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

#[test]
fn two_hundred_slow_clients_keep_the_agent_under_40_mib_and_are_cut_off() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, addr) = agent(tmp.path());
    let pid = child.id();
    let before = rss_anon(pid).expect("the agent runs");
    let clients: Vec<TcpStream> = (0..200).map(|_| slow_client(&addr, 400_000)).collect();
    std::thread::sleep(Duration::from_secs(2));
    let log = || std::fs::read_to_string(tmp.path().join("agent.log")).unwrap_or_default();
    let during = rss_anon(pid).unwrap_or_else(|| panic!("the agent died under 200 slow clients:\n{}", log()));
    eprintln!("agent private memory: {} KiB idle, {} KiB with 200 slow clients", before / 1024, during / 1024);
    assert!(during < 40 * MIB, "private memory {} MiB with 200 slow clients holding on (was {} MiB)", during / MIB, before / MIB);
    // The agent hangs up on every one of them (header timeout), and serves again.
    let cut = closed_by_peer(&clients, Duration::from_secs(8));
    assert_eq!(cut, 200, "the agent must close slow clients itself");
    assert!(healthz(&addr).is_some(), "the agent answers /healthz once they are gone:\n{}", log());
    stop(child);
}

#[test]
fn idle_connections_are_closed_and_cannot_exhaust_descriptors() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, addr) = agent(tmp.path());
    let idle: Vec<TcpStream> = (0..400).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
    assert_eq!(idle.len(), 400);
    let cut = closed_by_peer(&idle, Duration::from_secs(8));
    assert_eq!(cut, 400, "the agent must close connections that send nothing");
    assert!(healthz(&addr).is_some(), "/healthz answers after the idle connections");
    stop(child);
}
