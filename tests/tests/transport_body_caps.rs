//! Every body read from a registry or its token service has a cap, and tag lists a bound
//! on pages and tags: a hostile registry (raw HTTP on loopback, [`ScriptedServer`]) that
//! answers a token request with an endless body, or a tag list with endless pages, gets an
//! error that names the limit, under a memory cap (`prlimit --data`) so that a missing
//! limit shows as an abort instead of taking the machine down. A tag list's `Link` is
//! followed only on the registry's own host.

mod transport_support;

use std::time::Duration;

use drover_tests::misbehave::{Reply, ScriptedServer};
use drover_tests::spawn::run_capped;
use drover_tests::run;
use transport_support::*;

const MIB: u64 = 1 << 20;
/// The hostile servers stop by themselves after this many bytes per answer.
const ENDLESS: u64 = 2 << 30;

fn json_head() -> String {
    "HTTP/1.1 200 OK\r\nContent-Type: application/json".to_string()
}

/// A registry that wants a bearer token from itself, and a token service that never
/// finishes its answer.
fn endless_token_registry() -> ScriptedServer {
    ScriptedServer::start(|line, own| {
        if line.contains(" /token") {
            return Reply::Endless { head: json_head(), prefix: b"{\"token\":\"".to_vec(), filler: b"a".repeat(64), limit: ENDLESS };
        }
        Reply::Fixed {
            head: format!("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"http://{own}/token\",service=\"hostile\""),
            body: b"{}".to_vec(),
        }
    })
}

#[test]
fn an_endless_token_answer_keeps_the_agent_under_64_mib() {
    let srv = endless_token_registry();
    let tmp = tempfile::tempdir().unwrap();
    let (args, state) = agent_once(tmp.path(), &srv.addr);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = run_capped(64 * MIB, Duration::from_secs(120), "drover-agent", &args, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.code, 1, "a clear failure, not an abort:\n{}", out.stderr);
    assert!(srv.requests().iter().any(|l| l.starts_with("GET /token")), "{:?}", srv.requests());
    let st = run("drover-agent", &["status", "-o", "json", "--endpoint", "http://127.0.0.1:9", "--state-dir", &state], &[]).json();
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("token") && reason.contains("over the limit"), "{st}");
    assert!(srv.sent() < 16 * MIB, "the agent must hang up at the cap, but the token service wrote {} bytes", srv.sent());
}

/// `drover fleet status` on `srv`'s reports repository, under a 256 MiB data cap.
fn fleet_status(srv: &ScriptedServer) -> drover_tests::Out {
    let reports = format!("{}/fleet/drover-reports", srv.addr);
    // fleet status judges reports against a roster signed by a trusted key (issue 26).
    let keys = tempfile::tempdir().unwrap();
    let out = drover_tests::run("drover", &["keygen", "--out-dir", keys.path().to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "")]);
    assert_eq!(out.code, 0, "keygen: {}", out.stderr);
    let key = keys.path().join("drover.pub");
    let args = ["fleet", "status", "--reports", &reports, "--plain-http", "--trust-key", key.to_str().unwrap()];
    run_capped(256 * MIB, Duration::from_secs(180), "drover", &args, &[]).unwrap_or_else(|e| panic!("{e}")).0
}

#[test]
fn an_endless_tag_list_page_ends_fleet_status_with_an_error() {
    let srv = ScriptedServer::start(|_, _| Reply::Endless {
        head: json_head(),
        prefix: b"{\"name\":\"fleet/drover-reports\",\"tags\":[\"".to_vec(),
        filler: b"a\",\"".to_vec(),
        limit: ENDLESS,
    });
    let out = fleet_status(&srv);
    assert_eq!(out.code, 1, "a clear failure, not an abort:\n{}", out.stderr);
    assert!(out.stderr.contains("tags of") && out.stderr.contains("limit"), "{}", out.stderr);
    assert!(srv.sent() < 64 * MIB, "the page must be cut at its cap, but the registry wrote {} bytes", srv.sent());
}

#[test]
fn endless_tag_list_pages_end_fleet_status_with_an_error_naming_the_bound() {
    // Every page: 1,000 tags and a link to the next page, forever.
    let srv = ScriptedServer::start(|line, _| {
        let page: u64 = line.split("last=p").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        let tags: Vec<String> = (0..1000).map(|i| format!("\"edge.c{page}-{i}\"")).collect();
        let body = format!("{{\"name\":\"fleet/drover-reports\",\"tags\":[{}]}}", tags.join(","));
        let next = page + 1;
        Reply::Fixed { head: format!("{}\r\nLink: </v2/fleet/drover-reports/tags/list?last=p{next}&n=1000>; rel=\"next\"", json_head()), body: body.into_bytes() }
    });
    let out = fleet_status(&srv);
    assert_eq!(out.code, 1, "a clear failure, not an abort:\n{}", out.stderr);
    assert!(out.stderr.contains("more than 100000 tags"), "{}", out.stderr);
    let pages = srv.requests().iter().filter(|l| l.contains("/tags/list")).count();
    assert!(pages <= 101, "{pages} pages read");
}

#[test]
fn a_tag_list_link_to_another_host_is_not_followed() {
    let elsewhere = ScriptedServer::start(|_, _| Reply::Fixed { head: json_head(), body: b"{\"tags\":[]}".to_vec() });
    let other = elsewhere.addr.clone();
    let srv = ScriptedServer::start(move |_, _| Reply::Fixed {
        head: format!("{}\r\nLink: <http://{other}/v2/fleet/drover-reports/tags/list?last=a>; rel=\"next\"", json_head()),
        body: b"{\"name\":\"fleet/drover-reports\",\"tags\":[\"edge.a\"]}".to_vec(),
    });
    let out = fleet_status(&srv);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("another host") && out.stderr.contains(&elsewhere.addr), "{}", out.stderr);
    assert!(elsewhere.requests().is_empty(), "the link was followed: {:?}", elsewhere.requests());
}
