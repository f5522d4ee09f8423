//! A recording TCP proxy on loopback in front of a plain HTTP server (a registry, a
//! token server): it forwards bytes unchanged and records each request's request line
//! and `Authorization` header (request bodies with a `Content-Length` are skipped), so tests can count requests and see which credentials
//! reached which host. Stops accepting when dropped. Test support only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request seen by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `METHOD PATH HTTP/1.1`.
    pub line: String,
    /// The `Authorization` header value, if any.
    pub authorization: Option<String>,
}

/// A running proxy.
pub struct RecordingProxy {
    /// `127.0.0.1:PORT`: point clients here.
    pub addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl RecordingProxy {
    /// Starts a proxy to `upstream` (`HOST:PORT`) on a free loopback port.
    pub fn start(upstream: &str) -> RecordingProxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st, up) = (seen.clone(), stop.clone(), upstream.to_string());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((conn, _)) => {
                        conn.set_nonblocking(false).unwrap();
                        if let Ok(server) = TcpStream::connect(&up) {
                            relay(conn, server, s.clone());
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        RecordingProxy { addr, seen, stop }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Request lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.line).collect()
    }

    /// How many request lines start with `prefix` (e.g. `"GET /v2/ "`).
    pub fn count(&self, prefix: &str) -> usize {
        self.seen().iter().filter(|s| s.line.starts_with(prefix)).count()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies client → server (parsing request heads on the way) and server → client.
fn relay(client: TcpStream, server: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
    let (mut cr, mut sw) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        let mut pending: Vec<u8> = Vec::new();
        let mut current: Option<usize> = None;
        // Request bodies (Content-Length) are skipped, so a body never reads as a request line.
        let (mut length, mut body_left) = (0usize, 0usize);
        while let Ok(n) = cr.read(&mut buf) {
            if n == 0 {
                break;
            }
            pending.extend_from_slice(&buf[..n]);
            loop {
                if body_left > 0 {
                    let k = body_left.min(pending.len());
                    pending.drain(..k);
                    body_left -= k;
                    if body_left > 0 {
                        break;
                    }
                }
                let Some(i) = pending.windows(2).position(|w| w == b"\r\n") else { break };
                let line = String::from_utf8_lossy(&pending[..i]).into_owned();
                let mut s = seen.lock().unwrap();
                if line.ends_with(" HTTP/1.1") || line.ends_with(" HTTP/1.0") {
                    s.push(Seen { line, authorization: None });
                    current = Some(s.len() - 1);
                } else if let (Some(c), Some((k, v))) = (current, line.split_once(':')) {
                    if k.eq_ignore_ascii_case("authorization") {
                        s[c].authorization = Some(v.trim().to_string());
                    } else if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                } else if line.is_empty() {
                    current = None;
                    body_left = std::mem::take(&mut length);
                }
                pending.drain(..i + 2);
            }
            // A body without a length (not sent by the clients under test): keep the scan
            // buffer small.
            if pending.len() > 64 * 1024 {
                pending.clear();
            }
            if sw.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = sw.shutdown(std::net::Shutdown::Write);
    });
    let (mut sr, mut cw) = (server, client);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut sr, &mut cw);
        let _ = cw.shutdown(std::net::Shutdown::Write);
    });
}
