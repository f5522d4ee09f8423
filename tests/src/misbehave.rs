//! Registries that misbehave the way a broken network or a hostile server does, on a
//! free loopback port: one that accepts connections and never answers, and one that
//! answers a manifest GET with an endless body. Both stop when dropped and bound what
//! they do by themselves. Test support only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Accepts TCP connections and never sends a byte (a stalled registry).
pub struct SilentServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl SilentServer {
    /// Starts listening.
    pub fn start() -> SilentServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, st) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !st.load(Ordering::Relaxed) {
                if let Ok((c, _)) = l.accept() {
                    a.fetch_add(1, Ordering::SeqCst);
                    held.push(c);
                } else {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        SilentServer { addr, accepted, stop }
    }

    /// Connections accepted so far (each a request that never got an answer).
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Answers `HEAD` with a manifest digest and `GET` with a manifest body that never
/// ends (no `Content-Length`, bytes until the client hangs up, at most `limit` bytes).
pub struct EndlessManifestServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    sent: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl EndlessManifestServer {
    /// Starts the server; each GET sends at most `limit` body bytes.
    pub fn start(limit: u64) -> EndlessManifestServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, r, st) = (sent.clone(), requests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Ok((c, _)) = l.accept() {
                    c.set_nonblocking(false).unwrap();
                    let (s, r) = (s.clone(), r.clone());
                    std::thread::spawn(move || serve_endless(c, limit, &s, &r));
                } else {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        EndlessManifestServer { addr, sent, requests, stop }
    }

    /// Body bytes written to clients so far (what they read, plus socket buffers).
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Request lines seen.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for EndlessManifestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_endless(mut c: TcpStream, limit: u64, sent: &AtomicU64, requests: &Mutex<Vec<String>>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
    requests.lock().unwrap().push(line.clone());
    let media = "application/vnd.oci.image.manifest.v1+json";
    if line.starts_with("HEAD ") {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nDocker-Content-Digest: {digest}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
        return;
    }
    if write!(c, "HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nConnection: close\r\n\r\n{{\"padding\":\"").is_err() {
        return;
    }
    let chunk = vec![b' '; 64 * 1024];
    let mut total = 0u64;
    while total < limit {
        match c.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                sent.fetch_add(n as u64, Ordering::SeqCst);
            }
        }
    }
}
