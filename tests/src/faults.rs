//! A seeded fault-injecting HTTP proxy on loopback in front of a plain HTTP server (the
//! registry). Each request is forwarded on its own upstream connection; at a rate (per
//! mille) chosen by a seeded random generator, the proxy instead answers 500/502/503, 429
//! with `Retry-After`, resets the connection mid-body, truncates the body (with a
//! matching, shorter `Content-Length`), flips bytes of a blob or manifest body (so it no
//! longer matches its digest), or trickles the body slowly (bounded). Every injected
//! fault is recorded with its request line. The seed is printed by tests in their failure
//! messages so a run can be repeated. Stops accepting when dropped. Test support only.
//!
//! In front of an API server ([`FaultProxy::start_api`]) only PATCHes are hit: 409
//! Conflict or 500 as a Kubernetes `Status`, or no answer at all ([`Fault::Hang`]). A
//! test can also script what happens between the upstream answer and the client
//! ([`FaultProxy::on_answer`]), e.g. move a tag after a `HEAD` resolved it.

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
    /// Only on GETs whose bytes the client can check, like [`Fault::Corrupt`]: blobs and
    /// manifests by digest, and manifests by tag answered with `Docker-Content-Digest`.
    Truncate,
    /// Bytes of a blob or manifest body are flipped: same length, other digest.
    Corrupt,
    /// The body trickles in 8 pieces 25 ms apart (bounded: 200 ms per response).
    Slow,
    /// API server: 409 Conflict as a Kubernetes `Status` (the PATCH is not forwarded).
    Conflict,
    /// API server: the PATCH is forwarded (it takes effect) but no answer ever comes
    /// back; the connection is held open until the client gives up (at most 10 minutes).
    Hang,
}

/// Which requests the proxy hits, and with what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    /// Every request: the registry faults.
    Registry,
    /// PATCHes only: 409, 500, no answer.
    ApiServer,
}

/// Called with the request line after the upstream answered, before the client sees it.
type Hook = Box<dyn Fn(&str) + Send + Sync>;

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
    lines: Arc<Mutex<Vec<String>>>,
    hook: Arc<Mutex<Option<Hook>>>,
    scripted: Arc<Mutex<Vec<(String, Fault)>>>,
    stop: Arc<AtomicBool>,
}

struct Shared {
    upstream: String,
    profile: Profile,
    rate: Arc<AtomicU32>,
    rng: Mutex<StdRng>,
    injected: Arc<Mutex<Vec<Injected>>>,
    lines: Arc<Mutex<Vec<String>>>,
    hook: Arc<Mutex<Option<Hook>>>,
    scripted: Arc<Mutex<Vec<(String, Fault)>>>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`HOST:PORT`) on a free loopback port, injecting a
    /// fault into `rate_per_mille` of the requests, chosen by a generator seeded with `seed`.
    pub fn start(upstream: &str, seed: u64, rate_per_mille: u32) -> FaultProxy {
        Self::start_profile(upstream, seed, rate_per_mille, Profile::Registry)
    }

    /// Starts a proxy to a Kubernetes API server (`HOST:PORT`, plain HTTP): a share
    /// `rate_per_mille` of the PATCHes is answered 409 Conflict or 500, or not at all
    /// (forwarded, answer withheld), one third each; every other request passes.
    pub fn start_api(upstream: &str, seed: u64, rate_per_mille: u32) -> FaultProxy {
        Self::start_profile(upstream, seed, rate_per_mille, Profile::ApiServer)
    }

    fn start_profile(upstream: &str, seed: u64, rate_per_mille: u32, profile: Profile) -> FaultProxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let rate = Arc::new(AtomicU32::new(rate_per_mille));
        let injected = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let hook: Arc<Mutex<Option<Hook>>> = Arc::new(Mutex::new(None));
        let scripted = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            profile,
            rate: rate.clone(),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            injected: injected.clone(),
            lines: lines.clone(),
            hook: hook.clone(),
            scripted: scripted.clone(),
            stop: stop.clone(),
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
        FaultProxy { addr, seed, rate, injected, lines, hook, scripted, stop }
    }

    /// Scripts `fault` for the next request whose request line contains `pattern`, on
    /// top of the seeded ones (a `Truncate` or `Corrupt` that meets no body passes the
    /// answer unchanged and is not recorded).
    pub fn script(&self, pattern: &str, fault: Fault) {
        self.scripted.lock().unwrap().push((pattern.to_string(), fault));
    }

    /// Runs `hook` with the request line of every request after the upstream answered
    /// it and before the client gets the answer (replaces an earlier hook).
    pub fn on_answer(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    /// Every request line seen so far, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
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
    sh.lines.lock().unwrap().push(line.clone());
    let eligible = sh.profile == Profile::Registry || line.starts_with("PATCH ");
    let scripted = {
        let mut q = sh.scripted.lock().unwrap();
        q.iter().position(|(p, _)| line.contains(p.as_str())).map(|i| q.remove(i).1)
    };
    let roll = match scripted {
        Some(_) => (false, 0),
        None => {
            let mut rng = sh.rng.lock().unwrap();
            let hit = eligible && rng.random_range(0..1000) < sh.rate.load(Ordering::SeqCst);
            (hit, rng.random_range(0..8u32))
        }
    };
    let record = |fault: Fault| sh.injected.lock().unwrap().push(Injected { line: line.clone(), fault });
    let early = match (sh.profile, roll) {
        _ if scripted.is_some() => scripted.filter(|f| matches!(f, Fault::Status(_) | Fault::TooMany | Fault::Conflict)),
        (_, (false, _)) => None,
        (Profile::Registry, (true, 0)) => Some(Fault::Status(500)),
        (Profile::Registry, (true, 1)) => Some(Fault::Status(502)),
        (Profile::Registry, (true, 2)) => Some(Fault::Status(503)),
        (Profile::Registry, (true, 3)) => Some(Fault::TooMany),
        (Profile::ApiServer, (true, n)) if n % 3 == 0 => Some(Fault::Conflict),
        (Profile::ApiServer, (true, n)) if n % 3 == 1 => Some(Fault::Status(500)),
        _ => None,
    };
    if let Some(fault) = early {
        record(fault);
        let _ = refuse(&mut conn, fault, sh.profile);
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
    if let Some(hook) = sh.hook.lock().unwrap().as_ref() {
        hook(&line);
    }
    let ok = resp.head[0].split(' ').nth(1).is_some_and(|c| c.starts_with('2'));
    let has_body = line.starts_with("GET ") && ok && !resp.chunked && resp.body.len() > 1;
    // Bytes the client can check: a blob or manifest by digest, or a manifest by tag
    // that comes with the digest the registry holds under that tag.
    let digested = line.contains("/blobs/sha256:")
        || line.contains("/manifests/sha256:")
        || (line.contains("/manifests/") && resp.header("docker-content-digest").is_some());
    let fault = match (sh.profile, roll.0, roll.1) {
        (_, false, _) => None,
        (Profile::ApiServer, true, _) => Some(Fault::Hang),
        (_, true, 4) => Some(Fault::Reset),
        (_, true, 5 | 6) if has_body && digested && roll.1 == 5 => Some(Fault::Truncate),
        (_, true, 5 | 6) if has_body && digested => Some(Fault::Corrupt),
        (_, true, _) if has_body => Some(Fault::Slow),
        (_, true, _) => Some(Fault::Reset),
    };
    let fault = match scripted {
        Some(Fault::Truncate | Fault::Corrupt) if !(has_body && digested) => None,
        Some(Fault::Slow) if !has_body => None,
        Some(f) => Some(f),
        None => fault,
    };
    if let Some(f) = fault {
        record(f);
    }
    if fault == Some(Fault::Hang) {
        hang(&mut conn, &sh.stop);
        return;
    }
    let _ = answer(&mut conn, resp, fault);
}

/// Answers `fault` (an error status) without asking the upstream.
fn refuse(conn: &mut TcpStream, fault: Fault, profile: Profile) -> std::io::Result<()> {
    let (code, reason) = match fault {
        Fault::Status(500) => (500, "Internal Server Error"),
        Fault::Status(502) => (502, "Bad Gateway"),
        Fault::Status(503) => (503, "Service Unavailable"),
        Fault::Conflict => (409, "Conflict"),
        _ => (429, "Too Many Requests"),
    };
    let body = match profile {
        Profile::Registry => format!("{{\"errors\":[{{\"code\":\"UNAVAILABLE\",\"message\":\"injected {code}\"}}]}}"),
        Profile::ApiServer => {
            let why = if code == 409 { "Conflict" } else { "InternalError" };
            format!(
                "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":\"injected {code}: the object has been modified; please apply your changes to the latest version and try again\",\"reason\":\"{why}\",\"code\":{code}}}"
            )
        }
    };
    let retry = if code == 429 { "Retry-After: 1\r\n" } else { "" };
    write!(
        conn,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Holds `conn` open without answering until the client closes it, the proxy stops, or
/// 10 minutes pass (so nothing outlives a test).
fn hang(conn: &mut TcpStream, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let mut buf = [0u8; 1024];
    while std::time::Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
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
