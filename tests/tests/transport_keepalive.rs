//! A kept-alive connection that the server closes just as the next request goes out (an
//! idle timeout, a load balancer draining) must not fail a command: the request is sent
//! again on a new connection, as Go's and curl's clients do. The peer here answers the
//! first request of every connection (relayed to the real docker-registry) and closes the
//! connection, unanswered, when a second request arrives on it — every reuse of a pooled
//! connection meets the race. A push keeps several connections in the pool, each of which
//! the peer closes on its second request, so the retry must open a new connection rather
//! than take another pooled one (taking a pooled one failed 15 runs in 40 with four runs
//! side by side).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use drover_tests::{run, run_ok, Registry};

/// Reads one HTTP/1.1 message head (up to the blank line) and its `Content-Length` body.
/// Returns the raw bytes and the first line; `None` at end of stream.
fn read_message(r: &mut BufReader<TcpStream>, head_only_body: bool) -> Option<(Vec<u8>, String)> {
    let mut raw = Vec::new();
    let mut first = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if first.is_empty() {
            first = line.trim_end().to_string();
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        raw.extend_from_slice(line.as_bytes());
        if line == "\r\n" {
            break;
        }
    }
    if !head_only_body {
        let mut body = vec![0u8; length];
        r.read_exact(&mut body).ok()?;
        raw.extend_from_slice(&body);
    }
    Some((raw, first))
}

/// Starts the peer in front of `upstream`; returns its address and a count of the
/// connections it closed unanswered.
fn closing_peer(upstream: String) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let closed = Arc::new(AtomicUsize::new(0));
    let c = closed.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let (up, c) = (upstream.clone(), c.clone());
            std::thread::spawn(move || {
                let mut client = BufReader::new(conn);
                let Some((request, line)) = read_message(&mut client, false) else { return };
                let mut server = TcpStream::connect(&up).unwrap();
                server.write_all(&request).unwrap();
                let mut sr = BufReader::new(server);
                let Some((response, _)) = read_message(&mut sr, line.starts_with("HEAD ")) else { return };
                client.get_mut().write_all(&response).unwrap();
                // The next request on this connection is read and left unanswered.
                if read_message(&mut client, false).is_some() {
                    c.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, closed)
}

#[test]
fn a_kept_alive_connection_closed_before_the_answer_is_retried_on_a_new_one() {
    let reg = Registry::start();
    let (peer, closed) = closing_peer(reg.addr.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: web}\ndata: {k: v}\n").unwrap();
    run_ok("drover", &["keygen", "--out-dir", tmp.path().join("k").to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "")]);
    let key = tmp.path().join("k/drover.key");

    // A signed push (blob uploads, manifests, signature, tags) and reads back through the peer.
    let reference = format!("{peer}/fleet/app:prod");
    let out = run(
        "drover",
        &["push", dir.to_str().unwrap(), &reference, "--plain-http", "--sequence", "1", "--environment", "prod", "--key", key.to_str().unwrap()],
        &[("DROVER_KEY_PASSWORD", "")],
    );
    assert_eq!(out.code, 0, "push through a peer that closes kept-alive connections: {}", out.stderr);
    let inspect = run("drover", &["-o", "json", "inspect", &reference, "--plain-http"], &[]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    let verify = run("drover", &["verify", &reference, "--trust-key", tmp.path().join("k/drover.pub").to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(verify.code, 0, "{}", verify.stderr);
    assert!(closed.load(Ordering::SeqCst) > 0, "the peer never closed a reused connection: the test proves nothing");

    // What the registry holds is what a direct push holds.
    let direct = run_ok("drover", &["-o", "json", "inspect", &reg.reference("fleet/app:prod"), "--plain-http"], &[]).json();
    assert_eq!(direct["digest"], inspect.json()["digest"]);
}
