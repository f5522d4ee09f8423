//! Fleet reports and the health gate end to end: three clusters of cluster type `edge`
//! follow `prod-ring0` — two agents on the dir target and one on the kube target (the
//! FAKE API server, or a real cluster) whose Deployment never becomes ready, so it is
//! Degraded. `drover fleet status -o json` shows each exactly; `drover promote
//! --require-healthy 100%` refuses and names the Degraded cluster, then the clusters still
//! behind, then the ones still soaking; `drover fleet wait` waits out the soak; then the
//! promote moves prod-ring1 to exactly the digest the clusters run.

mod fleet_support;
mod kube_support;

use drover_tests::fakekube::RolloutMode;
use fleet_support::{workload, Fleet, Target};
use kube_support::Env;
use serde_json::json;

scenarios!(gate_follows_the_reports);

fn utc_now() -> String {
    drover_tests::tool_ok("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).trim().to_string()
}

fn gate_follows_the_reports(env: &Env) {
    let f = Fleet::new(&env.reg.addr, env.dir.path());
    let kube = env.cluster.kubeconfig().to_path_buf();
    if let Some(fake) = env.cluster.fake_server() {
        fake.set_rollout_for(&env.ns, "web", RolloutMode::Stuck);
    }
    // On a real cluster the image cannot be pulled, so the Deployment never becomes ready.
    let d1 = f.push("edge", "prod", "prod-ring0", 1, &workload(&env.ns, "1", Some("registry.invalid/drover-e2e/never:1")));
    let before = utc_now();
    f.agent_ok("e1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.agent_ok("e2", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.agent_ok("k1", "edge", "prod", "prod-ring0", Target::Kube(&kube, &env.ns), &["--health-timeout", "3s"]);
    // Their report keys (made at each agent's first start) are approved into the roster.
    let enrolled = f.enroll(&["--all-pending"]);
    assert_eq!(enrolled["enrolled"], 3, "{enrolled:#}");

    // 1. fleet status shows each cluster exactly.
    let st = f.status();
    let after = utc_now();
    for (name, health) in [("e1", "Healthy"), ("e2", "Healthy"), ("k1", "Degraded")] {
        let mut row = Fleet::row(&st, "edge", name);
        let at = row.as_object_mut().unwrap().remove("reportedAt").unwrap();
        let at = at.as_str().unwrap();
        assert!(before.as_str() <= at && at <= after.as_str(), "reportedAt {at} is between {before} and {after}");
        let reason = row.as_object_mut().unwrap().remove("reason").unwrap();
        let class = if health == "Healthy" { "ready" } else { "unhealthy" };
        assert!(reason.as_str().unwrap().starts_with(health), "{reason}");
        let last = row.as_object_mut().unwrap().remove("lastReason").unwrap();
        assert!(if health == "Healthy" { last == "" } else { last.as_str().unwrap().contains("not ready after 3s") }, "the last attempt's reason: {last}");
        assert_eq!(
            row,
            json!({"clusterName": name, "clusterType": "edge", "environment": "prod", "channel": "prod-ring0", "class": class,
                   "appliedDigest": d1, "appliedSequence": 1, "health": health, "lastResult": "Applied", "stale": false})
        );
    }
    assert_eq!(
        st["summary"],
        json!([{"environment": "prod", "clusterType": "edge", "channel": "prod-ring0", "clusters": 3,
                "sequences": [{"sequence": 1, "digest": d1, "clusters": 3}],
                "healthy": 2, "progressing": 0, "degraded": 1, "unknown": 0, "stale": 0, "untrusted": 0, "missing": 0,
                "ready": 2, "classes": {"ready": 2, "unhealthy": 1}, "target": {"digest": d1, "sequence": 1, "from": "channel"}, "allReady": false}])
    );
    let prefix = format!("{}/fleet", f.reg);
    let none = f.drover(&["-o", "json", "fleet", "status", "--registry", &prefix, "--env", "staging", "--trust-key", &f.pubkey()]).json();
    assert_eq!(none, json!({"clusters": [], "summary": [], "untrusted": {"reports": 0, "named": []}, "unreadable": {"tags": 0, "named": []}}));

    // 2. The gate refuses while one cluster is Degraded, and names it and why.
    let src = f.channel("edge", "prod-ring0");
    let ring1 = f.channel("edge", "prod-ring1");
    let pubkey = f.pubkey();
    let key = f.key();
    let promote = |extra: &[&str]| {
        let mut a = vec!["promote", src.as_str(), "prod-ring1", "--key", key.as_str(), "--trust-key", pubkey.as_str(), "--require-healthy", "100%"];
        a.extend_from_slice(extra);
        f.drover(&a)
    };
    let out = promote(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("2 of 3 cluster(s) of edge/prod following prod-ring0 are ready"), "{}", out.stderr);
    let k1 = out.stderr.lines().find(|l| l.contains("edge.k1:")).unwrap_or_else(|| panic!("k1 named: {}", out.stderr));
    assert!(k1.contains("Degraded") && k1.contains("Deployment") && k1.contains("web"), "{k1}");
    assert!(!out.stderr.contains("edge.e1:"), "ready clusters are not listed as holding back: {}", out.stderr);
    assert_eq!(f.digest_of(&ring1), None, "nothing moved");

    // 3. A new bundle: the clusters that have not applied it yet are behind.
    let d2 = f.push("edge", "prod", "prod-ring0", 2, &workload(&env.ns, "2", None));
    f.agent_ok("e1", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    let out = promote(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for c in ["edge.e2", "edge.k1"] {
        let line = out.stderr.lines().find(|l| l.contains(&format!("{c}:"))).unwrap_or_else(|| panic!("{c} named: {}", out.stderr));
        assert!(line.contains("behind: runs sequence 1"), "{line}");
    }
    // fleet status says the same, by the same rule: e1 ready, the others behind.
    let st = f.status();
    let classes: Vec<&str> = ["e1", "e2", "k1"].iter().map(|n| st["clusters"].as_array().unwrap().iter().find(|c| c["clusterName"] == *n).unwrap()["class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["ready", "behind", "behind"], "{st:#}");
    assert_eq!(f.digest_of(&ring1), None, "nothing moved");

    // 4. All on sequence 2 and Healthy (the stuck Deployment is pruned): soaking holds back.
    f.agent_ok("e2", "edge", "prod", "prod-ring0", Target::Dir, &[]);
    f.agent_ok("k1", "edge", "prod", "prod-ring0", Target::Kube(&kube, &env.ns), &["--health-timeout", "30s"]);
    let st = f.status();
    assert_eq!(st["summary"][0]["healthy"], 3, "{st:#}");
    assert_eq!(st["summary"][0]["sequences"], json!([{"sequence": 2, "digest": d2, "clusters": 3}]));
    let out = promote(&["--soak", "1h"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for c in ["edge.e1", "edge.e2", "edge.k1"] {
        let line = out.stderr.lines().find(|l| l.contains(&format!("{c}:"))).unwrap_or_else(|| panic!("{c} named: {}", out.stderr));
        assert!(line.contains("soaking: Healthy for") && line.contains("1h soak"), "{line}");
    }
    let out = promote(&["--min-clusters", "4"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("3 of 3 cluster(s)") && out.stderr.contains("4 required"), "{}", out.stderr);
    let by_digest = format!("{}/fleet/edge@{d2}", f.reg);
    let out = f.drover(&["promote", &by_digest, "prod-ring1", "--key", &key, "--trust-key", &pubkey, "--require-healthy", "100%"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("needs the channel tag"), "{}", out.stderr);
    let out = f.drover(&["promote", &src, "prod-ring1", "--key", &key, "--trust-key", &pubkey, "--soak", "1m"]);
    assert_eq!(out.code, 2, "a gate flag without --require-healthy is a usage error: {}", out.stderr);
    assert!(out.stderr.contains("--require-healthy"), "{}", out.stderr);
    let out = f.drover(&["promote", &src, "prod-ring1", "--key", &key, "--trust-key", &pubkey, "--require-healthy", "100%", "--soak", "ten minutes"]);
    assert_eq!(out.code, 2, "a value that does not parse is a usage error: {}", out.stderr);
    assert!(out.stderr.contains("--soak \"ten minutes\" is not a duration"), "{}", out.stderr);
    assert_eq!(f.digest_of(&ring1), None, "nothing moved");

    // 5. fleet wait: gives up (exit 1, naming why) while soaking, returns once soaked.
    let out = f.drover(&["fleet", "wait", &src, "--trust-key", &pubkey, "--soak", "1h", "--timeout", "1s", "--interval", "1s"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("timed out") && out.stderr.contains("soaking"), "{}", out.stderr);
    let out = f.drover(&["-o", "json", "fleet", "wait", &src, "--trust-key", &pubkey, "--soak", "3s", "--timeout", "2m", "--interval", "1s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!((v["passed"].as_bool(), v["ready"].as_u64(), v["candidate"]["digest"].as_str()), (Some(true), Some(3), Some(d2.as_str())));

    // 6. The gate passes: prod-ring1 moves to exactly the digest the clusters run.
    let out = f.drover(&["-o", "json", "promote", &src, "prod-ring1", "--key", &key, "--trust-key", &pubkey, "--require-healthy", "100%", "--soak", "3s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    assert_eq!(doc["digest"], d2.as_str());
    assert_eq!(doc["gate"]["passed"], true);
    assert_eq!(f.digest_of(&ring1).as_deref(), Some(d2.as_str()));
}
