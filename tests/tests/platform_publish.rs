//! `drover publish` against a real registry: only changed cluster types are pushed and
//! signed, an unchanged republish writes nothing, release records are left and the
//! promotion gate refuses an environment before the previous one.

mod platform_support;

use std::path::Path;

use drover_tests::{run, Out, Registry};
use platform_support::*;

fn publish(root: &Path, reg: &Registry, env: &str, key: &Path, extra: &[&str]) -> Out {
    let prefix = reg.reference("fleet");
    let mut args = vec![
        "publish",
        root.to_str().unwrap(),
        "--env",
        env,
        "--registry",
        &prefix,
        "--key",
        key.to_str().unwrap(),
        "--plain-http",
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    run("drover", &args, &[("DROVER_KEY_PASSWORD", "")])
}

fn publish_ok(root: &Path, reg: &Registry, env: &str, key: &Path, extra: &[&str]) -> serde_json::Value {
    let o = publish(root, reg, env, key, extra);
    assert_eq!(o.code, 0, "publish {env} failed:\n{}\n{}", o.stdout, o.stderr);
    o.json()
}

fn changed(v: &serde_json::Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().filter(|r| r["changed"] == true).map(|r| r["clusterType"].as_str().unwrap().to_string()).collect()
}

/// Every tag of every repository under `fleet/`.
fn all_tags(reg: &Registry) -> Vec<(String, Vec<String>)> {
    ["edge", "cloud", "lab", "drover-releases"].iter().map(|r| (r.to_string(), tags(&reg.addr, &format!("fleet/{r}")))).collect()
}

/// Digest each tag of a repository points at (sha256 of the manifest bytes served).
fn tag_digests(reg: &Registry, repo: &str) -> Vec<(String, String)> {
    use sha2::Digest;
    tags(&reg.addr, &format!("fleet/{repo}"))
        .into_iter()
        .map(|t| {
            let (status, body) = http_get(&reg.addr, &format!("/v2/fleet/{repo}/manifests/{t}"), "application/vnd.oci.image.manifest.v1+json");
            assert_eq!(status, 200, "{repo}:{t}");
            (t, hex::encode(sha2::Sha256::digest(body.as_bytes())))
        })
        .collect()
}

#[test]
fn only_changed_cluster_types_are_pushed_and_unchanged_republish_writes_nothing() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (key, public) = keygen(t.path());
    let root = t.path().join("p");
    base(&root);

    let first = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert_eq!(changed(&first), ["cloud", "edge", "lab"]);
    assert_eq!(first["revision"], "r1");
    let r0 = &first["results"][0];
    assert_eq!(r0["clusterType"], "cloud");
    assert_eq!(r0["reference"], format!("{}:dev", reg.reference("fleet/cloud")));
    assert_eq!(r0["objects"], 1);
    // The published bundle verifies with the public key.
    let v = run("drover", &["verify", &reg.reference("fleet/edge:dev"), "--trust-key", public.to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(v.code, 0, "verify: {}", v.stderr);
    let tags_before = all_tags(&reg);
    let edge_tags = &tags_before[0].1;
    assert_eq!(edge_tags.len(), 5, "dev, dev-<sequence>, dev.statement and the two signatures: {edge_tags:?}");
    assert!(edge_tags.iter().any(|t| t.starts_with("dev-")) && edge_tags.iter().any(|t| t.ends_with(".sig")));
    assert!(edge_tags.iter().any(|t| t == "dev.statement"), "the channel's signed statement: {edge_tags:?}");
    assert_eq!(tags_before[3].1, ["dev", "dev-r1", &format!("sha256-{}.sig", &first["releaseRecord"]["digest"].as_str().unwrap()[7..])]);

    // Unchanged republish at the same revision: nothing changed, no tag added or moved.
    let digests_before: Vec<_> = ["edge", "cloud", "lab"].iter().map(|r| tag_digests(&reg, r)).collect();
    let again = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert!(changed(&again).is_empty(), "{again}");
    assert_eq!(again["releaseRecord"]["pushed"], false);
    assert_eq!(again["releaseRecord"]["digest"], first["releaseRecord"]["digest"]);
    assert_eq!(all_tags(&reg), tags_before);
    let digests_after: Vec<_> = ["edge", "cloud", "lab"].iter().map(|r| tag_digests(&reg, r)).collect();
    assert_eq!(digests_after, digests_before);
    for (a, b) in first["results"].as_array().unwrap().iter().zip(again["results"].as_array().unwrap()) {
        assert_eq!(a["digest"], b["digest"]);
    }

    // One edit (values of one cluster type) pushes exactly that cluster type.
    write(
        &root,
        &[("cluster-types/lab.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: cloud, legacy: \"yes\"}\nvalues: {x: lab-only}\n")],
    );
    let third = publish_ok(&root, &reg, "dev", &key, &["--revision", "r2"]);
    assert_eq!(changed(&third), ["lab"]);
    let tags_now = all_tags(&reg);
    assert_eq!(tags_now[0], tags_before[0], "edge untouched");
    assert_eq!(tags_now[1], tags_before[1], "cloud untouched");
    assert_eq!(
        tags_now[2].1.len(),
        tags_before[2].1.len() + 3,
        "lab: one new history tag, the new bundle's signature and its new statement's signature: {:?}",
        tags_now[2]
    );
    let lab = &third["results"][2];
    assert!(lab["sequence"].as_u64().unwrap() > first["results"][2]["sequence"].as_u64().unwrap());
    let rec = record(&reg.addr, "fleet", "dev-r2").expect("release record dev-r2");
    assert_eq!(rec["environment"], "dev");
    assert_eq!(rec["revision"], "r2");
    assert_eq!(rec["gateSkipped"], false);
    assert_eq!(rec["clusterTypes"]["lab"]["digest"], lab["digest"]);
    assert_eq!(rec["clusterTypes"]["edge"]["digest"], first["results"][1]["digest"]);
    assert_eq!(record(&reg.addr, "fleet", "dev").unwrap(), rec, "the dev tag points at the latest record");
}

#[test]
fn promotion_gate_orders_environments() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (key, _) = keygen(t.path());
    let other_dir = t.path().join("other");
    let (other_key, other_pub) = keygen(&other_dir);
    let root = t.path().join("p");
    base(&root);

    // prod before staging: refused, naming the environment to publish first; nothing pushed.
    publish_ok(&root, &reg, "dev", &key, &["--revision", "r1"]);
    let o = publish(&root, &reg, "prod", &key, &["--revision", "r1"]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("publish staging at this revision first"), "{}", o.stderr);
    let o = publish(&root, &reg, "staging", &key, &["--revision", "r2"]);
    assert!(o.code != 0 && o.stderr.contains("publish dev at this revision first"), "revision matters: {}", o.stderr);
    assert!(all_tags(&reg).iter().all(|(_, tags)| tags.iter().all(|t| !t.starts_with("prod") && !t.starts_with("staging"))));

    // A record signed by a key we do not trust does not open the gate.
    publish_ok(&root, &reg, "staging", &other_key, &["--revision", "r1", "--trust-key", public_of(&key).to_str().unwrap()]);
    let o = publish(&root, &reg, "prod", &key, &["--revision", "r1"]);
    assert!(o.code != 0 && o.stderr.contains("not verified"), "{}", o.stderr);
    // ...unless that key is trusted explicitly.
    let v = publish_ok(&root, &reg, "prod", &key, &["--revision", "r1", "--trust-key", other_pub.to_str().unwrap()]);
    assert_eq!(changed(&v), ["cloud", "edge", "lab"]);
    assert_eq!(record(&reg.addr, "fleet", "prod-r1").unwrap()["gateSkipped"], false);

    // Emergency: skip the gate; the record says so.
    let v = publish_ok(&root, &reg, "prod", &key, &["--revision", "hotfix-1", "--skip-promotion-gate"]);
    assert_eq!(v["gateSkipped"], true);
    assert_eq!(record(&reg.addr, "fleet", "prod-hotfix-1").unwrap()["gateSkipped"], true);
}

fn public_of(private: &Path) -> std::path::PathBuf {
    private.with_file_name("drover.pub")
}

#[test]
fn empty_cluster_types_and_missing_revision_are_errors() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (key, _) = keygen(t.path());
    let root = t.path().join("p");
    base(&root);
    write(&root, &[("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector:\n    matchLabels: {site: cloud}\n")]);
    let o = publish(&root, &reg, "dev", &key, &["--revision", "r1"]);
    assert!(o.code != 0 && o.stderr.contains("edge") && o.stderr.contains("--allow-empty"), "{}", o.stderr);
    assert!(all_tags(&reg).iter().all(|(_, t)| t.is_empty()), "nothing pushed");
    let v = publish_ok(&root, &reg, "dev", &key, &["--revision", "r1", "--allow-empty"]);
    let edge = v["results"].as_array().unwrap().iter().find(|r| r["clusterType"] == "edge").unwrap().clone();
    assert_eq!(edge["objects"], 0);

    // No --revision and not a git checkout.
    let o = publish(&root, &reg, "dev", &key, &[]);
    assert!(o.code != 0 && o.stderr.contains("--revision"), "{}", o.stderr);
    // A revision that cannot be part of a tag.
    let o = publish(&root, &reg, "dev", &key, &["--revision", "feature/x"]);
    assert!(o.code != 0 && o.stderr.contains("feature/x"), "{}", o.stderr);
    // In a git checkout the revision is HEAD.
    let git = |args: &[&str]| {
        let s = std::process::Command::new("git").arg("-C").arg(&root).args(args).output().unwrap();
        assert!(s.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&s.stderr));
        String::from_utf8(s.stdout).unwrap().trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "platform"]);
    let head = git(&["rev-parse", "HEAD"]);
    let v = publish_ok(&root, &reg, "dev", &key, &["--allow-empty"]);
    assert_eq!(v["revision"], head.as_str());
    assert!(record(&reg.addr, "fleet", &format!("dev-{head}")).is_some());
}

/// Per repository under `fleet/`, the request lines the proxy saw from `from` on.
fn per_repo(lines: &[String], repo: &str) -> Vec<String> {
    let needle = format!("/v2/fleet/{repo}/");
    lines.iter().filter(|l| l.contains(&needle)).cloned().collect()
}

#[test]
fn unchanged_publish_reads_no_layer_and_writes_nothing_and_changed_ones_keep_the_write_order() {
    let reg = Registry::start();
    let proxy = drover_tests::proxy::RecordingProxy::start(&reg.addr);
    let t = tempfile::tempdir().unwrap();
    let (key, _) = keygen(t.path());
    let root = t.path().join("p");
    base(&root);
    // 12 more cluster types (15 in all: more than the 8 publishes in flight).
    let types: Vec<String> = (0..12).map(|i| format!("t{i:02}")).chain(["cloud", "edge", "lab"].map(String::from)).collect();
    for ty in types.iter().take(12) {
        write(&root, &[(&format!("cluster-types/{ty}.yaml"), "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: store}\n")]);
    }
    let publish_via_proxy = |revision: &str| {
        let prefix = format!("{}/fleet", proxy.addr);
        let o = run(
            "drover",
            &["publish", root.to_str().unwrap(), "--env", "dev", "--registry", &prefix, "--key", key.to_str().unwrap(), "--plain-http", "-o", "json", "--revision", revision],
            &[("DROVER_KEY_PASSWORD", "")],
        );
        assert_eq!(o.code, 0, "publish failed:\n{}\n{}", o.stdout, o.stderr);
        o.json()
    };

    let first = publish_via_proxy("r1");
    assert_eq!(changed(&first).len(), types.len());
    let lines = proxy.lines();
    // Concurrency is across cluster types; within one, the channel write order holds:
    // blobs, signature, history tag (which stores the manifest), the channel's signed
    // statement (its blob, its signature, its tag), channel tag.
    for ty in &types {
        let puts: Vec<String> = per_repo(&lines, ty).into_iter().filter(|l| l.starts_with("PUT ")).collect();
        let pos = |what: &dyn Fn(&str) -> bool| puts.iter().position(|l| what(l)).unwrap_or_else(|| panic!("{ty}: no such write in {puts:#?}"));
        let last_blob = puts.iter().rposition(|l| l.contains("/blobs/uploads/")).unwrap();
        let signature = pos(&|l| l.contains("/manifests/sha256-") && l.contains(".sig "));
        let history = pos(&|l| l.contains("/manifests/dev-"));
        let channel = pos(&|l| l.contains("/manifests/dev "));
        let statement = pos(&|l| l.contains("/manifests/dev.statement "));
        assert!(signature < history && history < statement && statement < channel, "{ty}: write order {puts:#?}");
        assert_eq!(channel, puts.len() - 1, "{ty}: the channel tag is the last write: {puts:#?}");
        assert!(!puts.iter().any(|l| l.contains("/manifests/sha256:")), "{ty}: the manifest is stored by its tags, not also by digest: {puts:#?}");
        assert!(puts[..signature].iter().filter(|l| l.contains("/blobs/uploads/")).count() == 4, "{ty}: config, layer and the signature's two blobs before the signature: {puts:#?}");
        let blobs_after = puts[signature..].iter().filter(|l| l.contains("/blobs/uploads/")).count();
        assert!(blobs_after == 3 && history < last_blob && last_blob < statement, "{ty}: after the bundle's signature, only the statement's three blobs (document, signature payload and config), before its tag: {puts:#?}");
        // The repository was empty (its tag list said so): nothing else is read before
        // writing — no HEAD of the history tag or of a blob, no GET of a signature manifest.
        let reads: Vec<String> = per_repo(&lines, ty).into_iter().filter(|l| l.starts_with("GET ") || l.starts_with("HEAD ")).collect();
        assert!(
            reads.len() == 2 && reads.iter().any(|l| l.contains("/manifests/dev ")) && reads.iter().any(|l| l.contains("/tags/list")),
            "{ty}: a first publish into an empty repository reads only the channel tag and the tag list: {reads:#?}"
        );
    }

    // Nothing changed: per cluster type the channel manifest and its `.sig` manifest are
    // read — no layer, no config (the signed manifest's annotations name cluster type,
    // environment and sequence), no payload (drover's own payload is known by its digest),
    // no write, no tag list.
    let layers: Vec<String> = types
        .iter()
        .map(|ty| {
            let (status, body) = http_get(&reg.addr, &format!("/v2/fleet/{ty}/manifests/dev"), "application/vnd.oci.image.manifest.v1+json");
            assert_eq!(status, 200);
            let m: serde_json::Value = serde_json::from_str(&body).unwrap();
            m["layers"][0]["digest"].as_str().unwrap().to_string()
        })
        .collect();
    let before = proxy.lines().len();
    let again = publish_via_proxy("r1");
    assert!(changed(&again).is_empty(), "{again}");
    let lines = proxy.lines()[before..].to_vec();
    let writes: Vec<&String> = lines.iter().filter(|l| !(l.starts_with("GET ") || l.starts_with("HEAD "))).collect();
    assert!(writes.is_empty(), "an unchanged publish wrote: {writes:#?}");
    for (ty, layer) in types.iter().zip(&layers) {
        let seen = per_repo(&lines, ty);
        assert!(!seen.iter().any(|l| l.contains(layer.as_str())), "{ty}: the content layer {layer} was downloaded: {seen:#?}");
        assert!(seen.len() == 2, "{ty}: {} requests for an unchanged cluster type (manifest, signature manifest): {seen:#?}", seen.len());
        assert!(!seen.iter().any(|l| l.contains("/blobs/")), "{ty}: no blob is read for an unchanged cluster type: {seen:#?}");
        assert!(!seen.iter().any(|l| l.contains("/tags/list")), "{ty}: {seen:#?}");
    }
    eprintln!("unchanged publish of {} cluster types: {} requests", types.len(), lines.len());
}
