//! drover-agent end to end on the dir: target: first apply, unchanged, update, prune,
//! the prune safety valve, status/history, and the config surface.

mod agent_support;

use agent_support::*;
use drover_tests::run;

fn file(fx: &Fx, rel: &str) -> Option<String> {
    std::fs::read_to_string(fx.target().join(rel)).ok()
}

#[test]
fn apply_update_prune_and_safety_valve() {
    let fx = Fx::new();
    let v1: Vec<_> = (0..4).map(|i| cm("app", &format!("c{i}"), "one")).collect();
    let d1 = fx.push(&objs(&v1), 10, Some("k1"), &[]);

    // First apply.
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "first apply failed:\n{}", out.stderr);
    let c0 = file(&fx, "manifests/app/ConfigMap.core.c0.yaml").unwrap();
    assert!(c0.contains("kind: ConfigMap") && c0.contains("one"), "{c0}");
    assert_eq!(snapshot(&fx.target().join("manifests")).len(), 4);
    let st = fx.status();
    assert_eq!(st["source"], fx.tag_ref.as_str());
    assert_eq!(st["appliedDigest"], d1.as_str());
    assert_eq!(st["appliedSequence"], 10);
    assert_eq!(st["health"], "Healthy");
    assert_eq!(st["inventory"], 4);
    assert_eq!(st["role"], "single");
    assert!(st["appliedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(st["lastAttempt"]["result"], "Applied");
    assert_eq!(st["lastAttempt"]["digest"], d1.as_str());
    assert_eq!(st["lastAttempt"]["sequence"], 10);

    // Unchanged: exit 0, nothing rewritten.
    let before = snapshot(fx.target().as_path());
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(fx.target().as_path()), before);

    // Update: one changed, one removed (1 of 4 = 25% <= 50%: pruned), one added.
    let mut v2 = v1.clone();
    v2[0] = cm("app", "c0", "two");
    v2.remove(3);
    v2.push(cm("app", "c9", "new"));
    let d2 = fx.push(&objs(&v2), 11, Some("k1"), &[]);
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(file(&fx, "manifests/app/ConfigMap.core.c0.yaml").unwrap().contains("two"));
    assert!(file(&fx, "manifests/app/ConfigMap.core.c9.yaml").is_some());
    assert!(file(&fx, "manifests/app/ConfigMap.core.c3.yaml").is_none(), "c3 must be pruned");
    let st = fx.status();
    assert_eq!(st["appliedDigest"], d2.as_str());
    assert_eq!(st["inventory"], 4);
    let h = fx.history();
    assert_eq!(h[0]["result"], "Applied");
    assert_eq!(h[0]["pruned"], 1);
    let actions: Vec<_> = h[0]["objects"].as_array().unwrap().iter().map(|o| o["action"].as_str().unwrap().to_string()).collect();
    assert!(actions.contains(&"configured".to_string()) && actions.contains(&"created".to_string()) && actions.contains(&"deleted".to_string()), "{actions:?}");

    // Safety valve: 3 of 4 to delete (75% > 50%): applied, prune refused and reported, files kept.
    let v3 = vec![v2[0].clone()];
    let d3 = fx.push(&objs(&v3), 12, Some("k1"), &[]);
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("prune refused"), "{}", out.stderr);
    assert_eq!(snapshot(&fx.target().join("manifests")).len(), 4, "nothing may be pruned over the ratio");
    let st = fx.status();
    assert_eq!(st["appliedDigest"], d3.as_str());
    assert_eq!(st["inventory"], 4, "refused prunes stay in the inventory");
    assert!(st["lastAttempt"]["reason"].as_str().unwrap().contains("prune refused"), "{st}");
    assert_eq!(fx.history()[0]["pruneRefused"], true);

    // The bundle opts in: the mass prune goes through.
    fx.push(&objs(&v3), 13, Some("k1"), &["--allow-mass-prune"]);
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(snapshot(&fx.target().join("manifests")).len(), 1);
    assert_eq!(fx.status()["inventory"], 1);
}

#[test]
fn prune_keeps_annotated_objects() {
    let fx = Fx::new();
    let keep = (
        "keep".to_string(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  namespace: app\n  annotations:\n    drover.dev/prune: disabled\n".to_string(),
    );
    let v1 = vec![cm("app", "a", "1"), cm("app", "b", "1"), keep.clone()];
    fx.push(&objs(&v1), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    fx.push(&objs(&v1[..2]), 2, Some("k1"), &[]);
    let out = fx.once(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(file(&fx, "manifests/app/ConfigMap.core.keep.yaml").is_some(), "drover.dev/prune: disabled must be kept");
    let h = fx.history();
    let kept = h[0]["objects"].as_array().unwrap().iter().find(|o| o["object"]["name"] == "keep").unwrap().clone();
    assert_eq!(kept["action"], "kept", "{kept}");
}

#[test]
fn config_file_flags_and_refusals() {
    let fx = Fx::new();
    let v1 = vec![cm("app", "a", "1")];
    let d1 = fx.push(&objs(&v1), 1, Some("k1"), &[]);

    // Unknown field: error names the file and the field; nothing is created.
    let cfg = fx.p("agent.yaml");
    std::fs::write(&cfg, format!("source: {}\nplainHttp: true\ntrustKey: x\n", fx.tag_ref)).unwrap();
    let out = run("drover-agent", &["run", "--config", cfg.to_str().unwrap(), "--once"], &[]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("agent.yaml") && out.stderr.contains("trustKey"), "{}", out.stderr);

    // No trust key and no explicit opt-out: refuses to start.
    let out = run(
        "drover-agent",
        &["run", "--source", &fx.tag_ref, "--plain-http", "--target", &format!("dir:{}", fx.target().display()), "--state-dir", &fx.state(), "--once"],
        &[],
    );
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("--trust-key") && out.stderr.contains("--insecure-skip-verify"), "{}", out.stderr);
    assert!(!fx.target().exists());

    // A full config file; a flag overrides the file's interval, file gives everything else.
    std::fs::write(
        &cfg,
        format!(
            "source: {}\nplainHttp: true\ntrustKeys: [{}]\nexpectClusterType: edge\nexpectEnvironment: prod\ntarget: dir:{}\nstateDir: {}\ninterval: 1h\nmaxPruneRatio: 0.5\nlisten: 127.0.0.1:{}\nlogFormat: json\n",
            fx.tag_ref,
            fx.pubkey("k1"),
            fx.target().display(),
            fx.state(),
            drover_tests::free_port()
        ),
    )
    .unwrap();
    let out = run("drover-agent", &["run", "--config", cfg.to_str().unwrap(), "--once", "--interval", "5s"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.lines().any(|l| l.starts_with('{')), "json logs expected:\n{}", out.stderr);
    assert_eq!(fx.status()["appliedDigest"], d1.as_str());

    // Wrong expectations from a flag beat the file: refused, non-zero.
    let out = run("drover-agent", &["run", "--config", cfg.to_str().unwrap(), "--once", "--expect-environment", "dev"], &[]);
    assert_ne!(out.code, 0);
}

#[test]
fn settings_from_the_environment() {
    let fx = Fx::new();
    let v1 = vec![cm("app", "a", "1")];
    let d1 = fx.push(&objs(&v1), 1, Some("k1"), &[]);
    let keys = format!("{},{}", fx.pubkey("k2"), fx.pubkey("k1"));
    let target = format!("dir:{}", fx.target().display());
    let state = fx.state();
    let listen = format!("127.0.0.1:{}", drover_tests::free_port());
    let env = |expect_env: &'static str| {
        vec![
            ("DROVER_SOURCE", fx.tag_ref.clone()),
            ("DROVER_PLAIN_HTTP", "true".to_string()),
            ("DROVER_TRUST_KEY", keys.clone()),
            ("DROVER_EXPECT_ENVIRONMENT", expect_env.to_string()),
            ("DROVER_TARGET", target.clone()),
            ("DROVER_STATE_DIR", state.clone()),
            ("DROVER_LISTEN", listen.clone()),
        ]
    };
    let run_with = |args: &[&str], env: &[(&str, String)]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run("drover-agent", args, &env)
    };
    // The config file expects another environment: the environment variable wins over it.
    let cfg = fx.p("agent.yaml");
    std::fs::write(&cfg, "expectEnvironment: dev\nexpectClusterType: edge\n").unwrap();
    let cfg_s = cfg.to_str().unwrap();

    // A flag wins over its environment variable: the wrong environment is refused.
    let out = run_with(&["run", "--once", "--config", cfg_s, "--expect-environment", "staging"], &env("prod"));
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("staging"), "{}", out.stderr);
    assert!(fx.status()["appliedDigest"].is_null());

    // Every setting from DROVER_* variables (two trust keys comma-separated, a boolean):
    // applied.
    let out = run_with(&["run", "--once", "--config", cfg_s], &env("prod"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(fx.status()["appliedDigest"], d1.as_str());

    // A bad value from the environment is named like the flag.
    let mut bad = env("prod");
    bad.push(("DROVER_APPLY_CONCURRENCY", "0".into()));
    let out = run_with(&["run", "--once"], &bad);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("--apply-concurrency"), "{}", out.stderr);
}

#[test]
fn applies_from_an_oci_layout_and_archive_source() {
    let fx = Fx::new();
    let input = fx.p("in-layout");
    std::fs::create_dir_all(&input).unwrap();
    let (_, yaml) = cm("app", "a", "from-layout");
    std::fs::write(input.join("a.yaml"), yaml).unwrap();
    let layout = format!("oci:{}:prod", fx.s("layout"));
    drover_tests::run_ok(
        "drover",
        &["build", input.to_str().unwrap(), "--out", &layout, "--sequence", "3", "--cluster-type", "edge", "--environment", "prod"],
        ENV,
    );
    // Unsigned first: refused.
    let out = fx.once_from(&layout, &[]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(!fx.target().join("manifests").exists());
    let digest = drover_tests::run_ok("drover", &["-o", "json", "inspect", &layout], ENV).json()["digest"].as_str().unwrap().to_string();
    drover_tests::run_ok("drover", &["sign", &format!("oci:{}@{digest}", fx.s("layout")), "--key", &fx.key("k1")], ENV);
    // Signed, but not placed on the channel: a signed statement says it belongs on `prod`.
    let out = fx.once_from(&layout, &[]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("without a signed channel statement"), "{}", out.stderr);
    let by_digest = format!("oci:{}@{digest}", fx.s("layout"));
    drover_tests::run_ok("drover", &["promote", &by_digest, &layout, "--key", &fx.key("k1"), "--trust-key", &fx.pubkey("k1")], ENV);
    let out = fx.once_from(&layout, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let f = std::fs::read_to_string(fx.target().join("manifests/app/ConfigMap.core.a.yaml")).unwrap();
    assert!(f.contains("from-layout"), "{f}");
    assert_eq!(fx.status()["source"], layout.as_str());

    // The same layout as an oci-archive (tar), signatures included.
    let tar = fx.p("layout.tar");
    let st = std::process::Command::new("tar").args(["-cf", tar.to_str().unwrap(), "-C", &fx.s("layout"), "."]).status().unwrap();
    assert!(st.success());
    let archive = format!("oci-archive:{}:prod", tar.display());
    let out = fx.once_from(&archive, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(fx.status()["source"], archive.as_str());
    assert_eq!(fx.status()["lastAttempt"]["result"], "Applied");
}

#[test]
fn resync_corrects_drift_on_the_target() {
    let fx = Fx::new();
    let d = fx.push(&objs(&[cm("app", "a", "1"), cm("app", "b", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let f = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    let good = std::fs::read(&f).unwrap();
    std::fs::write(&f, "tampered by hand\n").unwrap();
    // The first poll of a new process re-applies the applied bundle (from the cache).
    let out = fx.once(&["--resync", "10m"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read(&f).unwrap(), good, "drift must be corrected");
    let h = fx.history();
    assert_eq!(h[0]["digest"], d.as_str());
    assert_eq!(h[0]["resync"], true);
    assert_eq!(h[0]["drift"], 1, "{}", h[0]);
}

/// Every directory and file under `root` (itself included) with its permission bits.
fn modes(root: &std::path::Path) -> Vec<(String, bool, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        out.push((p.display().to_string(), md.is_dir(), md.permissions().mode() & 0o777));
        if md.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

#[test]
fn state_and_target_are_private_whatever_the_umask() {
    let fx = Fx::new();
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: app\nstringData:\n  password: hunter2\n".to_string();
    let run_permissive = |fx: &Fx| {
        // umask 0: whatever the agent creates without an explicit mode is world-readable.
        let mut args = fx.agent_args(&fx.tag_ref);
        args.push("--once".into());
        let out: drover_tests::Out = std::process::Command::new("sh")
            .arg("-c")
            .arg("umask 0 && exec \"$0\" \"$@\"")
            .arg(drover_tests::bin("drover-agent"))
            .args(&args)
            .output()
            .unwrap()
            .into();
        assert_eq!(out.code, 0, "{}", out.stderr);
    };
    fx.push(&[("secret", secret.clone()), ("cm", cm("app", "a", "1").1)], 1, Some("k1"), &[]);
    run_permissive(&fx);
    // An update (stage, swap, prune) and a new sled snapshot on the second run.
    fx.push(&[("secret", secret.replace("hunter2", "hunter3")), ("cm2", cm("other", "b", "2").1)], 2, Some("k1"), &["--allow-mass-prune"]);
    run_permissive(&fx);
    assert!(std::fs::read_to_string(fx.target().join("manifests/app/Secret.core.db.yaml")).unwrap().contains("hunter3"));
    for root in [fx.target(), fx.p("state")] {
        let all = modes(&root);
        assert!(all.iter().filter(|(_, dir, _)| !dir).count() >= 2, "{all:?}");
        let open: Vec<_> = all.iter().filter(|(_, dir, mode)| *mode != if *dir { 0o700 } else { 0o600 }).collect();
        assert!(open.is_empty(), "directories must be 0700 and files 0600 under {}: {open:#?}", root.display());
    }
}
