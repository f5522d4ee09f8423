//! Apply windows, the operator's view with the built binaries and a real registry (dir
//! target): the schedules are made from the current time, so the tests are deterministic —
//! a daily window that opened a minute ago for an hour, and one that opens in an hour.
//!
//! - inside a window (config file `applyWindows`, time zone Asia/Kolkata) the agent applies;
//! - outside its window the agent verifies the newer bundle and does not apply it; it shows
//!   it waiting with the next window's start in `/status`, `drover-agent status`,
//!   `drover_held` and its fleet report; meanwhile a hand edit is still corrected (drift
//!   correction is not restricted by windows); inside a window the bundle is applied;
//! - bad schedules, durations and zones are refused at start, naming the field.

mod agent_support;

use agent_support::{cm, http_get, live_status, metric, objs, snapshot, terminate, wait_until, Fx};
use drover_proto::time::{format_rfc3339, now_unix};
use drover_tests::run;
use serde_json::Value;

/// Asia/Kolkata: UTC+05:30 all year (no daylight saving time).
const KOLKATA: i64 = 5 * 3600 + 1800;

/// A daily schedule `M H * * *` at the wall clock of `unix` in a zone `offset` seconds
/// east of UTC.
fn daily_at(unix: i64, offset: i64) -> String {
    let local = unix + offset;
    format!("{} {} * * *", (local / 60).rem_euclid(60), (local / 3600).rem_euclid(24))
}

#[test]
fn outside_its_window_an_agent_waits_and_shows_the_next_window() {
    let fx = Fx::new();
    let now = now_unix();
    // Opened a minute ago (Kolkata wall clock), open for an hour: given in the config file.
    let open = daily_at(now - 60, KOLKATA);
    let config = fx.p("agent.yaml");
    std::fs::write(&config, format!("applyWindows:\n- schedule: \"{open}\"\n  duration: 1h\n  timeZone: Asia/Kolkata\n")).unwrap();
    let v1 = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    let out = fx.once(&["--config", config.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(fx.status()["appliedDigest"], v1.as_str(), "inside its window the agent applies");

    // Opens in an hour (Kolkata wall clock), for 30 minutes: the agent is outside it.
    let opens_at = (now + 3600) / 60 * 60;
    let next = format_rfc3339(opens_at).unwrap();
    let closed = format!("{};30m;Asia/Kolkata", daily_at(now + 3600, KOLKATA));
    let v2 = fx.push(&objs(&[cm("app", "a", "2"), cm("app", "c", "2")]), 2, Some("k1"), &[]);
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let mut agent = fx.spawn(&fx.tag_ref, &listen, &["--interval", "1s", "--resync", "0s", "--cluster-name", "weu-1", "--apply-window", &closed]);
    wait_until(60, "v2 verified and waiting for the window", || {
        http_get(&listen, "/status").is_some() && live_status(&listen)["held"]["waitingDigest"] == v2.as_str()
    });
    let st = live_status(&listen);
    assert_eq!(st["appliedDigest"], v1.as_str(), "{st:#}");
    assert_eq!(st["held"]["by"], "window", "{st:#}");
    assert_eq!(st["held"]["nextWindow"], next.as_str(), "{st:#}");
    assert_eq!(st["held"]["waitingSequence"], 2, "{st:#}");
    assert_eq!(metric(&listen, "drover_held "), 1.0);
    let history = run("drover-agent", &["history", "-o", "json", "--endpoint", &format!("http://{listen}")], &[]).json();
    let held: Vec<&Value> = history.as_array().unwrap().iter().filter(|a| a["result"] == "Held" && a["digest"] == v2.as_str()).collect();
    assert_eq!(held.len(), 1, "one Held attempt for v2: {history:#}");
    assert!(held[0]["reason"].as_str().unwrap().contains("waits for the next apply window"), "{history:#}");

    // Drift correction goes on outside the window: a hand edit is put back (v1's content)
    // while v2 keeps waiting.
    let a_file = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    let v1_a = std::fs::read(&a_file).unwrap();
    std::fs::write(&a_file, "edited by hand\n").unwrap();
    wait_until(30, "the hand edit corrected", || std::fs::read(&a_file).unwrap() == v1_a);
    let st = live_status(&listen);
    assert_eq!((st["appliedDigest"].as_str(), st["held"]["waitingDigest"].as_str()), (Some(v1.as_str()), Some(v2.as_str())), "{st:#}");
    assert!(!fx.target().join("manifests/app/ConfigMap.core.c.yaml").exists(), "v2 not applied outside the window");

    let text = run("drover-agent", &["status", "--endpoint", &format!("http://{listen}")], &[]).stdout;
    assert!(text.contains(&format!("next window:   {next}")) && text.contains("by apply window") && text.contains(&v2), "{text}");
    wait_until(30, "the fleet report shows the next window", || {
        fx.report("weu-1").is_some_and(|r| r["held"]["nextWindow"] == next.as_str() && r["held"]["waitingDigest"] == v2.as_str())
    });
    assert_eq!(terminate(&mut agent), Some(0));

    // Inside a window (the config file's) the waiting bundle is applied.
    let out = fx.once(&["--config", config.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let st = fx.status();
    assert_eq!(st["appliedDigest"], v2.as_str(), "{st:#}");
    let names: Vec<String> = snapshot(&fx.target()).into_keys().collect();
    assert_eq!(names, ["manifests/app/ConfigMap.core.a.yaml", "manifests/app/ConfigMap.core.c.yaml"]);
}

#[test]
fn bad_windows_are_refused_naming_the_field() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    for (window, says) in [
        ("0 25 * * *;1h", "schedule \"0 25 * * *\""),
        ("0 22 * * 1-5;6 hours please;UTC", "duration \"6 hours please\""),
        ("0 22 * * 1-5;6h;Europe/Berln", "timeZone \"Europe/Berln\""),
        ("0 22 * * 1-5", "SCHEDULE;DURATION"),
        // A window that can never open (there is no 30 February): held forever otherwise.
        ("0 0 30 2 *;1h", "schedule \"0 0 30 2 *\" never opens"),
        ("0 0 31 4,6 *;1h;Europe/Berlin", "never opens"),
    ] {
        let out = fx.once(&["--apply-window", window]);
        assert_eq!(out.code, 2, "{window}: {}", out.stderr);
        assert!(out.stderr.contains(says) && out.stderr.contains("apply-window"), "{window}: {}", out.stderr);
    }
    let config = fx.p("bad.yaml");
    std::fs::write(&config, "applyWindows:\n- schedule: \"0 22 * * *\"\n  duration: 0s\n").unwrap();
    let out = fx.once(&["--config", config.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("applyWindows") && out.stderr.contains("greater than zero"), "{}", out.stderr);
    assert!(snapshot(&fx.target()).is_empty(), "nothing applied");
    assert!(!fx.p("state/db").exists(), "nothing recorded");
}

#[test]
fn a_window_shorter_than_twice_the_poll_interval_is_refused_naming_both() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    // A 30 s poll rarely lands in a one-second window: the operator would wait forever.
    let out = fx.once(&["--apply-window", "*/5 * * * *;1s"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("apply-window") && out.stderr.contains("duration 1s") && out.stderr.contains("interval 30s"), "{}", out.stderr);
    let config = fx.p("short.yaml");
    std::fs::write(&config, "interval: 5m\napplyWindows:\n- schedule: \"0 22 * * *\"\n  duration: 9m\n").unwrap();
    let out = fx.once(&["--config", config.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("applyWindows") && out.stderr.contains("interval 5m"), "{}", out.stderr);
    assert!(snapshot(&fx.target()).is_empty() && !fx.p("state/db").exists(), "nothing applied or recorded");
    // Twice the interval is enough: at least one poll lands in every window.
    let out = fx.once(&["--interval", "30s", "--apply-window", "0 22 * * *;1m"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}
