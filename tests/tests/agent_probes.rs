//! Clients of the agent's port cannot fail its probes. The attack, from raw sockets: 68
//! connections each sending a request every 4 s (3.7 KB/s in all, well under any rate
//! limit) hold every connection the agent serves; meanwhile the kubelet's one-second
//! `/healthz` probes must still be answered (at least 9 of 10), or the DaemonSet restarts
//! the agent in a loop.

mod transport_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_tests::{bin, free_port};
use transport_support::keygen;

/// A long-running agent (nothing to apply: its registry is not there) on a free port.
fn agent(tmp: &std::path::Path) -> (Child, String) {
    let (_, public) = keygen(tmp);
    let listen = format!("127.0.0.1:{}", free_port());
    let child = Command::new(bin("drover-agent"))
        .args(["run", "--source", "127.0.0.1:9/fleet/edge:prod", "--plain-http", "--trust-key", &public, "--interval", "1h"])
        .args(["--target", &format!("dir:{}", tmp.join("out").display()), "--state-dir", &tmp.join("state").display().to_string()])
        .args(["--listen", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.join("agent.log")).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !probe(&listen) {
        assert!(Instant::now() < deadline, "the agent did not answer /healthz:\n{}", std::fs::read_to_string(tmp.join("agent.log")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, listen)
}

/// One kubelet probe: a new connection, `GET /healthz`, an answer 200 within 1 s.
fn probe(addr: &str) -> bool {
    let start = Instant::now();
    let Ok(mut s) = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(1)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: kube-probe/1.31\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && &head == b"HTTP/1.1 200" && start.elapsed() < Duration::from_secs(1)
}

/// Reads one HTTP/1.1 answer with a Content-Length body; false when the connection ended.
fn read_answer(s: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: usize = text.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).is_ok() && !text.contains("connection: close")
}

/// One of the attacker's clients: a kept-alive connection sending a request every 4 s,
/// connecting again whenever the agent closes it, until `stop`.
fn slow_client(addr: String, stop: Arc<AtomicBool>, answered: Arc<AtomicUsize>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        loop {
            if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").is_err() {
                break;
            }
            let open = read_answer(&mut s);
            answered.fetch_add(1, Ordering::Relaxed);
            if !open {
                break;
            }
            for _ in 0..40 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sixty_eight_slow_clients_do_not_starve_the_health_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, addr) = agent(tmp.path());
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..68)
        .map(|_| {
            let (addr, stop, answered) = (addr.clone(), stop.clone(), answered.clone());
            std::thread::spawn(move || slow_client(addr, stop, answered))
        })
        .collect();
    // Every client has its connection and its first answer.
    let start = Instant::now();
    while answered.load(Ordering::Relaxed) < 68 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // The kubelet: ten probes, one a second, each within one second.
    let mut ok = 0;
    for _ in 0..10 {
        let t = Instant::now();
        if probe(&addr) {
            ok += 1;
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.join();
    }
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("{ok} of 10 one-second /healthz probes answered; the 68 clients got {} answers", answered.load(Ordering::Relaxed));
    assert!(ok >= 9, "only {ok} of 10 one-second /healthz probes succeeded while 68 clients used the port");
    assert!(answered.load(Ordering::Relaxed) >= 68, "the clients were served too");
}
