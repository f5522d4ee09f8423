//! Registries that misbehave the way a broken network or a hostile server does, on a
//! free loopback port: one that accepts connections and never answers, and one that
//! answers each request as a script says (endless bodies, endless tag-list pages, links
//! to other hosts). Both stop when dropped and bound what they do by themselves. Test
//! support only.

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

/// What a [`ScriptedServer`] sends for one request.
pub enum Reply {
    /// A complete answer: the status line and headers (no blank line), then `body` with a
    /// `Content-Length`.
    Fixed {
        /// `HTTP/1.1 200 OK\r\nContent-Type: ...` (lines joined with CRLF).
        head: String,
        /// The body.
        body: Vec<u8>,
    },
    /// A head without a length, `prefix`, then `filler` over and over until the client
    /// hangs up or `limit` body bytes were written.
    Endless {
        /// Status line and headers.
        head: String,
        /// The start of the body.
        prefix: Vec<u8>,
        /// What is repeated.
        filler: Vec<u8>,
        /// At most this many body bytes.
        limit: u64,
    },
}

/// A server that answers each request (on its own connection, `Connection: close`) with
/// what its script says for the request line: a hostile registry, token service or
/// anything else speaking just enough HTTP/1.1. Records request lines and counts the body
/// bytes it wrote. Stops accepting when dropped.
pub struct ScriptedServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    sent: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

type Script = dyn Fn(&str, &str) -> Reply + Send + Sync;

impl ScriptedServer {
    /// Starts the server; `script(request_line, own_addr)` decides each answer.
    pub fn start(script: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> ScriptedServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, r, st, own) = (sent.clone(), requests.clone(), stop.clone(), addr.clone());
        let script: Arc<Script> = Arc::new(script);
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Ok((c, _)) = l.accept() {
                    c.set_nonblocking(false).unwrap();
                    let (s, r, script, own) = (s.clone(), r.clone(), script.clone(), own.clone());
                    std::thread::spawn(move || serve_one(c, &*script, &own, &s, &r));
                } else {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        ScriptedServer { addr, sent, requests, stop }
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

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_one(mut c: TcpStream, script: &Script, own: &str, sent: &AtomicU64, requests: &Mutex<Vec<String>>) {
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
    match script(&line, own) {
        Reply::Fixed { head, body } => {
            let _ = write!(c, "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            if !line.starts_with("HEAD ") && c.write_all(&body).is_ok() {
                sent.fetch_add(body.len() as u64, Ordering::SeqCst);
            }
        }
        Reply::Endless { head, prefix, filler, limit } => {
            if write!(c, "{head}\r\nConnection: close\r\n\r\n").is_err() || c.write_all(&prefix).is_err() {
                return;
            }
            let chunk: Vec<u8> = filler.iter().copied().cycle().take(filler.len() * (64 * 1024 / filler.len().max(1)).max(1)).collect();
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
    }
}

/// Answers `HEAD` with a manifest digest and `GET` with a manifest body that never
/// ends (no `Content-Length`, bytes until the client hangs up, at most `limit` bytes).
pub struct EndlessManifestServer;

impl EndlessManifestServer {
    /// Starts the server; each GET sends at most `limit` body bytes.
    pub fn start(limit: u64) -> ScriptedServer {
        let media = "application/vnd.oci.image.manifest.v1+json";
        ScriptedServer::start(move |line, _| {
            if line.starts_with("HEAD ") {
                let digest = format!("sha256:{}", "ab".repeat(32));
                return Reply::Fixed { head: format!("HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nDocker-Content-Digest: {digest}"), body: b"{}".to_vec() };
            }
            Reply::Endless {
                head: format!("HTTP/1.1 200 OK\r\nContent-Type: {media}"),
                prefix: b"{\"padding\":\"".to_vec(),
                filler: vec![b' '; 64],
                limit,
            }
        })
    }
}
