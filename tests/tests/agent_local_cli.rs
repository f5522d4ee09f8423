//! `drover-agent status` and `history` talk only to their own agent. The attack: the agent
//! of a state directory crashed (killed), and a neighbour (another uid, via `setpriv`)
//! binds the port it served on — which anyone may — answering with a forged status that
//! names that state directory, or with an endless body. `status --state-dir DIR` must not
//! present her answer as the agent's ("no agent answering for DIR", the database read
//! instead) and stays under 64 MiB. While the agent runs, the CLI reaches it.

mod agent_support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use agent_support::{cm, http_get, live_status, objs, unsafe_kill, wait_until, Fx};
use drover_tests::{neighbour, run_ok};

/// The neighbour's server on `port`: every request gets `mode` (`forged`: `body` as the
/// status JSON; `endless`: a JSON string that never ends).
fn squatter(port: u16, mode: &str, body: &str) -> Child {
    const SCRIPT: &str = r#"
import socket, sys
port, mode, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
s.settimeout(120)
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    try:
        c.settimeout(10)
        c.recv(65536)
        if mode == "forged":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        else:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[{\"source\":\"")
            chunk = b"a" * 65536
            for _ in range(32768):
                c.sendall(chunk)
    except Exception:
        pass
    finally:
        c.close()
"#;
    let child = neighbour::command("/usr/bin/python3")
        .args(["-c", SCRIPT, &port.to_string(), mode, body])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "the squatter did not bind");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

struct Stop(Child);
impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_squatter_on_a_crashed_agents_port_is_not_shown_as_the_agent() {
    let fx = Fx::new();
    let v1 = fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let port = drover_tests::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1h"]);
    wait_until(60, "v1 applied", || http_get(&listen, "/status").is_some() && live_status(&listen)["appliedDigest"] == v1.as_str());
    let state = fx.state();
    // While it runs, `status --state-dir` reaches it.
    let st = run_ok("drover-agent", &["status", "-o", "json", "--state-dir", &state], &[]).json();
    assert_eq!((st["agentRunning"].as_bool(), st["appliedDigest"].as_str()), (Some(true), Some(v1.as_str())), "{st:#}");
    let h = run_ok("drover-agent", &["history", "-o", "json", "--state-dir", &state], &[]).json();
    assert_eq!(h[0]["digest"], v1.as_str(), "{h:#}");

    // The agent crashes; the neighbour takes its port with a forged status for this
    // state directory.
    unsafe_kill(agent.id(), "KILL");
    let _ = agent.wait();
    let forged_digest = format!("sha256:{}", "f".repeat(64));
    let forged = serde_json::json!({
        "source": fx.tag_ref, "stateDir": state, "target": "dir:/forged", "role": "single", "agentRunning": true, "ready": true,
        "appliedDigest": forged_digest, "appliedSequence": 99, "health": "Healthy", "inventory": 1,
        "lastAttempt": {"digest": forged_digest, "sequence": 99, "result": "Applied", "reason": "FORGED", "at": "2030-01-01T00:00:00Z"},
    });
    let squat = Stop(squatter(port, "forged", &forged.to_string()));
    let out = drover_tests::run("drover-agent", &["status", "--state-dir", &state], &[]);
    assert!(!out.stdout.contains(&forged_digest) && !out.stdout.contains("FORGED"), "the squatter's status is shown:\n{}", out.stdout);
    assert!(!out.stdout.contains("running at"), "the squatter is presented as the agent:\n{}", out.stdout);
    assert!(out.stdout.contains(&format!("no agent answering for {state}")), "says no agent answers:\n{}\n{}", out.stdout, out.stderr);
    let st = run_ok("drover-agent", &["status", "-o", "json", "--state-dir", &state], &[]).json();
    assert_eq!((st["agentRunning"].as_bool(), st["appliedDigest"].as_str()), (Some(false), Some(v1.as_str())), "read from the database: {st:#}");
    let h = drover_tests::run("drover-agent", &["history", "-o", "json", "--state-dir", &state], &[]);
    assert!(!h.stdout.contains("FORGED") && !h.stdout.contains(&forged_digest), "{}", h.stdout);
    drop(squat);

    // An endless answer: the CLI stays small and answers from the database.
    let _squat = Stop(squatter(port, "endless", ""));
    for cmd in ["status", "history"] {
        let (out, _) = drover_tests::spawn::run_capped(64 << 20, Duration::from_secs(60), "drover-agent", &[cmd, "-o", "json", "--state-dir", &state], &[])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.code, 0, "{cmd} under a 64 MiB cap with an endless answer on the port:\n{}", out.stderr);
    }
}

/// `status` and `history --state-dir` read the database by the rule the agent starts by
/// (`agent/src/statedir.rs`), as `plan` does: a file of another user in it (a database she
/// planted while the agent was down) is refused, naming the file and her uid, and nothing
/// of it is shown; a `db` that is a link to her directory is refused too.
#[test]
fn status_and_history_refuse_a_state_database_holding_another_users_file() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let state = fx.state();
    let db = std::path::Path::new(&state).join("db");
    let conf = db.join("conf");
    neighbour::chown(&conf);
    for cmd in ["status", "history"] {
        let out = drover_tests::run("drover-agent", &[cmd, "-o", "json", "--state-dir", &state], &[]);
        assert_eq!(out.code, 1, "{cmd} read a database holding another user's file:\n{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("conf") && out.stderr.contains(&format!("uid {}", neighbour::UID)), "{cmd}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{cmd} printed: {}", out.stdout);
    }
    std::os::unix::fs::lchown(&conf, Some(0), Some(0)).unwrap();
    let st = run_ok("drover-agent", &["status", "-o", "json", "--state-dir", &state], &[]).json();
    assert_eq!(st["agentRunning"].as_bool(), Some(false), "{st:#}");

    let aside = fx.p("db-aside");
    std::fs::rename(&db, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &db).unwrap();
    for cmd in ["status", "history"] {
        let out = drover_tests::run("drover-agent", &[cmd, "--state-dir", &state], &[]);
        assert_eq!(out.code, 1, "{cmd} followed a db link:\n{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("not a directory") || out.stderr.contains("link"), "{cmd}: {}", out.stderr);
    }
}
