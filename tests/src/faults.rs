//! A seeded fault-injecting HTTP proxy on loopback in front of a plain HTTP server (the
//! registry). Each request is forwarded on its own upstream connection; at a rate (per
//! mille) chosen by a seeded random generator, the proxy instead answers 500/502/503, 429
//! with `Retry-After`, resets the connection mid-body, truncates the body (with a
//! matching, shorter `Content-Length`), flips bytes of a blob or manifest body (so it no
//! longer matches its digest), or trickles the body slowly (bounded). Every injected
//! fault is recorded with its request line. The seed is printed by tests in their failure
//! messages so a run can be repeated. Stops accepting when dropped. Test support only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// An HTTP error status (500, 502 or 503) instead of the upstream answer.
    Status(u16),
    /// 429 Too Many Requests with `Retry-After: 1`.
    TooMany,
    /// The connection is reset (RST) after part of the response body, or before any
    /// response when there is no body.
    Reset,
    /// The body is cut in half and `Content-Length` says so: HTTP sees a whole response.
    /// Only on GETs by digest (blobs, manifests by digest), like [`Fault::Corrupt`].
    Truncate,
    /// Bytes of a blob or manifest body are flipped: same length, other digest.
    Corrupt,
    /// The body trickles in 8 pieces 25 ms apart (bounded: 200 ms per response).
    Slow,
}

/// One injected fault and the request it hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// `METHOD PATH HTTP/1.1`.
    pub line: String,
    /// What the proxy did.
    pub fault: Fault,
}

/// A running fault proxy.
pub struct FaultProxy {
    /// `127.0.0.1:PORT`: point clients here.
    pub addr: String,
    /// The seed of the fault generator.
    pub seed: u64,
    rate: Arc<AtomicU32>,
    injected: Arc<Mutex<Vec<Injected>>>,
    stop: Arc<AtomicBool>,
}

struct Shared {
    upstream: String,
    rate: Arc<AtomicU32>,
    rng: Mutex<StdRng>,
    injected: Arc<Mutex<Vec<Injected>>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`HOST:PORT`) on a free loopback port, injecting a
    /// fault into `rate_per_mille` of the requests, chosen by a generator seeded with `seed`.
    pub fn start(upstream: &str, seed: u64, rate_per_mille: u32) -> FaultProxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let rate = Arc::new(AtomicU32::new(rate_per_mille));
        let injected = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            rate: rate.clone(),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            injected: injected.clone(),
        });
        let st = stop.clone();
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((conn, _)) => {
                        let sh = shared.clone();
                        std::thread::spawn(move || {
                            let _ = conn.set_nonblocking(false);
                            let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                            serve(conn, &sh);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FaultProxy { addr, seed, rate, injected, stop }
    }

    /// Changes the fault rate (per mille); 0 turns injection off.
    pub fn set_rate(&self, rate_per_mille: u32) {
        self.rate.store(rate_per_mille, Ordering::SeqCst);
    }

    /// Every fault injected so far.
    pub fn injected(&self) -> Vec<Injected> {
        self.injected.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A parsed HTTP message: the head (start line and headers, without the blank line) and body.
struct Message {
    head: Vec<String>,
    body: Vec<u8>,
    chunked: bool,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.iter().skip(1).find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn set_header(&mut self, name: &str, value: &str) {
        self.head.retain(|h| !h.split_once(':').is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(name)));
        self.head.push(format!("{name}: {value}"));
    }

    fn head_bytes(&self) -> Vec<u8> {
        let mut out = self.head.join("\r\n").into_bytes();
        out.extend_from_slice(b"\r\n\r\n");
        out
    }
}

/// Reads one message head and, for requests, a `Content-Length` body; for responses
/// (`to_eof`) everything up to the end of the stream.
fn read_message(s: &mut TcpStream, to_eof: bool) -> Option<Message> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head: Vec<String> = String::from_utf8_lossy(&buf[..end]).split("\r\n").map(str::to_string).collect();
    let mut body = buf[end + 4..].to_vec();
    let mut m = Message { head, body: Vec::new(), chunked: false };
    m.chunked = m.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if to_eof {
        s.read_to_end(&mut body).ok()?;
    } else {
        let len: usize = m.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while body.len() < len {
            let n = s.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    m.body = body;
    Some(m)
}

/// Serves one request on `conn` (the answer always closes the connection).
fn serve(mut conn: TcpStream, sh: &Shared) {
    let Some(mut req) = read_message(&mut conn, false) else { return };
    let line = req.head[0].clone();
    let roll = {
        let mut rng = sh.rng.lock().unwrap();
        let hit = rng.random_range(0..1000) < sh.rate.load(Ordering::SeqCst);
        (hit, rng.random_range(0..8u32))
    };
    let record = |fault: Fault| sh.injected.lock().unwrap().push(Injected { line: line.clone(), fault });
    if roll.0 && roll.1 < 4 {
        let (code, reason, fault) = match roll.1 {
            0 => (500, "Internal Server Error", Fault::Status(500)),
            1 => (502, "Bad Gateway", Fault::Status(502)),
            2 => (503, "Service Unavailable", Fault::Status(503)),
            _ => (429, "Too Many Requests", Fault::TooMany),
        };
        record(fault);
        let body = format!("{{\"errors\":[{{\"code\":\"UNAVAILABLE\",\"message\":\"injected {code}\"}}]}}");
        let retry = if code == 429 { "Retry-After: 1\r\n" } else { "" };
        let _ = write!(
            conn,
            "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    req.set_header("Connection", "close");
    let Ok(mut up) = TcpStream::connect(&sh.upstream) else { return };
    let _ = up.set_read_timeout(Some(Duration::from_secs(30)));
    if up.write_all(&req.head_bytes()).and_then(|_| up.write_all(&req.body)).is_err() {
        return;
    }
    let Some(mut resp) = read_message(&mut up, true) else { return };
    resp.set_header("Connection", "close");
    let ok = resp.head[0].split(' ').nth(1).is_some_and(|c| c.starts_with('2'));
    let has_body = line.starts_with("GET ") && ok && !resp.chunked && resp.body.len() > 1;
    let digested = line.contains("/blobs/sha256:") || line.contains("/manifests/sha256:");
    let fault = match (roll.0, roll.1) {
        (false, _) => None,
        (true, 4) => Some(Fault::Reset),
        (true, 5 | 6) if has_body && digested && roll.1 == 5 => Some(Fault::Truncate),
        (true, 5 | 6) if has_body && digested => Some(Fault::Corrupt),
        (true, _) if has_body => Some(Fault::Slow),
        (true, _) => Some(Fault::Reset),
    };
    if let Some(f) = fault {
        record(f);
    }
    let _ = answer(&mut conn, resp, fault);
}

/// Writes `resp` to the client with `fault` applied.
fn answer(conn: &mut TcpStream, mut resp: Message, fault: Option<Fault>) -> std::io::Result<()> {
    match fault {
        Some(Fault::Reset) => {
            let half = resp.body.len() / 2;
            if half > 0 {
                conn.write_all(&resp.head_bytes())?;
                conn.write_all(&resp.body[..half])?;
                conn.flush()?;
            }
            // Linger 0: closing sends a TCP reset instead of an orderly end.
            socket2::SockRef::from(&*conn).set_linger(Some(Duration::ZERO))?;
            Ok(())
        }
        Some(Fault::Truncate) => {
            resp.body.truncate(resp.body.len() / 2);
            resp.set_header("Content-Length", &resp.body.len().to_string());
            conn.write_all(&resp.head_bytes())?;
            conn.write_all(&resp.body)
        }
        Some(Fault::Corrupt) => {
            let n = resp.body.len();
            for i in [0, n / 2, n - 1] {
                resp.body[i] ^= 0x20;
            }
            conn.write_all(&resp.head_bytes())?;
            conn.write_all(&resp.body)
        }
        Some(Fault::Slow) => {
            conn.write_all(&resp.head_bytes())?;
            let piece = resp.body.len().div_ceil(8);
            for c in resp.body.chunks(piece) {
                conn.write_all(c)?;
                conn.flush()?;
                std::thread::sleep(Duration::from_millis(25));
            }
            Ok(())
        }
        _ => {
            conn.write_all(&resp.head_bytes())?;
            conn.write_all(&resp.body)
        }
    }
}
