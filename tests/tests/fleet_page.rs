//! The fleet page in a real browser: a small fleet (three environments, three cluster
//! types, four channels) reports — real agents on the dir target, one on the FAKE API
//! server whose Deployment never becomes ready (Degraded), one cluster behind its
//! channel, and one whose agent stopped hours ago (its last report, written by hand with
//! curl, is stale). `drover fleet view` draws the page; headless Chromium renders it; the
//! rendered DOM shows every cluster with its health, marks the stale and the behind ones,
//! names the failing object, and nothing is loaded from outside the file. The screenshot
//! is checked, and saved as docs/fleet-view.png (shown in the README) when
//! `DROVER_UPDATE_SCREENSHOTS` is set.

mod fleet_support;

use std::path::PathBuf;
use std::process::Command;

use drover_tests::fakekube::{FakeApiServer, RolloutMode};
use drover_tests::Registry;
use fleet_support::{workload, Fleet, Target};
use serde_json::json;

fn chromium(args: &[&str]) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .args(args)
        .output()
        .expect("chromium must be installed (tests/run.sh installs it with apt-get)");
    assert!(out.status.success(), "chromium {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The opening tag of the grid element with `data-cluster="tag"` (the attention list's
/// rows have no `data-health`).
fn chip<'a>(dom: &'a str, tag: &str) -> &'a str {
    let start = dom.find(&format!("data-cluster=\"{tag}\" data-health")).unwrap_or_else(|| panic!("{tag} not on the page"));
    let from = dom[..start].rfind('<').unwrap();
    let end = from + dom[from..].find('>').unwrap();
    &dom[from..=end]
}

/// Up to `n` characters of `dom` from byte `at`.
fn window(dom: &str, at: usize, n: usize) -> String {
    dom[at..].chars().take(n).collect()
}

#[test]
fn the_fleet_page_in_headless_chromium_fake_only() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let f = Fleet::new(&reg.addr, tmp.path());
    let kube = FakeApiServer::start();
    kube.set_rollout_for("shop", "web", RolloutMode::Stuck);
    let plain = |v: &str| workload("shop", v, None);
    for (t, env, ch) in [
        ("edge-small", "dev", "dev"),
        ("cloud-standard", "dev", "dev"),
        ("edge-small", "staging", "staging"),
        ("cloud-standard", "staging", "staging"),
        ("cloud-gpu", "staging", "staging"),
        ("edge-small", "prod", "prod-ring0"),
        ("edge-small", "prod", "prod-ring1"),
        ("cloud-standard", "prod", "prod-ring1"),
        ("cloud-gpu", "prod", "prod-ring1"),
    ] {
        f.push(t, env, ch, 41, &plain("41"));
    }
    f.push("cloud-standard", "prod", "prod-ring0", 42, &workload("shop", "42", Some("registry.example/shop/web:2.0")));
    let clusters = [
        ("dev-edge-1", "edge-small", "dev", "dev"),
        ("dev-weu-1", "cloud-standard", "dev", "dev"),
        ("stg-edge-1", "edge-small", "staging", "staging"),
        ("stg-weu-1", "cloud-standard", "staging", "staging"),
        ("stg-gpu-1", "cloud-gpu", "staging", "staging"),
        ("factory-berlin-1", "edge-small", "prod", "prod-ring0"),
        ("factory-lyon-1", "edge-small", "prod", "prod-ring1"),
        ("factory-oslo-1", "edge-small", "prod", "prod-ring1"),
        ("prod-neu-1", "cloud-standard", "prod", "prod-ring1"),
        ("prod-eus-1", "cloud-standard", "prod", "prod-ring1"),
        ("prod-gpu-1", "cloud-gpu", "prod", "prod-ring1"),
        ("factory-madrid-1", "edge-small", "prod", "prod-ring1"),
    ];
    for (name, t, env, ch) in clusters {
        f.agent_ok(name, t, env, ch, Target::Dir, &[]);
    }
    // prod-weu-1 (kube) runs the new sequence 42 of prod-ring0 and is Degraded.
    f.agent_ok("prod-weu-1", "cloud-standard", "prod", "prod-ring0", Target::Kube(kube.kubeconfig_path(), "shop"), &["--health-timeout", "2s"]);
    // prod-ring1 of edge-small moves to 42; factory-oslo-1 has not caught up.
    f.push("edge-small", "prod", "prod-ring1", 42, &plain("42"));
    f.agent_ok("factory-lyon-1", "edge-small", "prod", "prod-ring1", Target::Dir, &[]);
    // Every cluster's report key is enrolled (their reports count).
    f.enroll(&["--all-pending"]);
    // factory-madrid-1's agent stopped three hours ago; its last report stays.
    let hours_ago = |h: u32| drover_tests::tool_ok("date", &["-u", "-d", &format!("{h} hours ago"), "+%Y-%m-%dT%H:%M:%SZ"]).trim().to_string();
    f.rewrite_own_report("edge-small", "factory-madrid-1", |old| {
        old["reportedAt"] = json!(hours_ago(3));
        old["healthSince"] = json!(hours_ago(30));
    });

    let page = tmp.path().join("fleet.html");
    let prefix = format!("{}/fleet", f.reg);
    let out = f.drover(&["-o", "json", "fleet", "view", "--registry", &prefix, "--trust-key", &f.pubkey(), "--out", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["clusters"], 13);

    // Self-contained: nothing to fetch.
    let html = std::fs::read_to_string(&page).unwrap();
    for needle in ["<script", "<link", "<img", "@import", "url(", "src=", "http://", "https://"] {
        assert!(!html.contains(needle), "the page must not load anything ({needle})");
    }

    let url = format!("file://{}", page.display());
    let dom = chromium(&["--dump-dom", &url]);
    for (name, t, _, _) in clusters.iter().filter(|c| c.0 != "factory-madrid-1") {
        let tag = format!("{t}.{name}");
        assert!(chip(&dom, &tag).contains("data-health=\"Healthy\" data-stale=\"false\""), "{}", chip(&dom, &tag));
    }
    let weu = chip(&dom, "cloud-standard.prod-weu-1");
    assert!(weu.contains("data-health=\"Degraded\"") && weu.contains("Deployment shop/web"), "the tooltip names the failing object: {weu}");
    assert!(chip(&dom, "edge-small.factory-madrid-1").contains("data-stale=\"true\""), "stale is marked");
    let whole_chip = |tag: &str| {
        let at = dom.find(&format!("data-cluster=\"{tag}\" data-health")).unwrap();
        let w = window(&dom, at, 1500);
        w[..w.find("</span></span>").expect("chip end")].to_string()
    };
    assert!(whole_chip("edge-small.factory-oslo-1").contains("class=\"behind\">↓41"), "factory-oslo-1 is shown behind, on 41");
    assert!(!whole_chip("edge-small.factory-lyon-1").contains("class=\"behind\""), "factory-lyon-1 runs the newest");
    let attention = &dom[dom.find("id=\"attention\"").expect("the needs-attention list")..];
    assert!(attention.contains("cloud-standard.prod-weu-1") && attention.contains("Deployment shop/web (Degraded)"), "{attention}");
    assert!(attention.contains("edge-small.factory-madrid-1") && attention.contains("no report for 3h"), "{attention}");
    assert!(!attention.contains("edge-small.factory-berlin-1"), "healthy clusters need no attention");
    assert!(dom.contains("<time id=\"generated\" datetime=\"20"), "the generation time is shown");
    for (count, n) in [("healthy", 11), ("degraded", 1), ("stale", 1)] {
        let at = dom.find(&format!("data-count=\"{count}\"")).unwrap();
        let pill = window(&dom, at, 40);
        assert!(pill.contains(&format!(" {n} ")), "{count} = {n}: {pill}");
    }
    for env in ["dev", "staging", "prod"] {
        assert!(dom.contains(&format!("data-environment=\"{env}\"")), "row {env}");
    }

    // The screenshot the README shows.
    let shot = tmp.path().join("fleet-view.png");
    chromium(&[&format!("--screenshot={}", shot.display()), "--window-size=1400,900", &url]);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a real screenshot");
    // Refresh docs/fleet-view.png only when asked, so a test run leaves the checkout clean:
    // DROVER_UPDATE_SCREENSHOTS=1 cargo test -p drover-tests --test fleet_page
    if std::env::var_os("DROVER_UPDATE_SCREENSHOTS").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/fleet-view.png");
        std::fs::write(&docs, &png).unwrap();
    }
}
