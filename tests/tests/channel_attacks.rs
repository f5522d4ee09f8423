//! The signing side of the channel, attacked by someone who can write the registry (with
//! skopeo, never through drover) but holds no key: `drover rollback`, `drover publish` and
//! `drover import` must never sign or tag what the attacker wrote, and no channel tag may
//! move backwards.

mod sign_support;

use std::collections::BTreeMap;
use std::path::Path;

use drover_proto::bundle::{assemble, BundleMeta};
use drover_proto::layout::Layout;
use drover_proto::object::ObjectRef;
use drover_proto::repo::FetchLimits;
use drover_tests::{tool_ok, Registry};
use sign_support::*;

/// What an attacker puts into a bundle: a ClusterRoleBinding to cluster-admin.
fn evil_objects() -> BTreeMap<ObjectRef, Vec<u8>> {
    let id = ObjectRef {
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRoleBinding".into(),
        namespace: None,
        name: "pwned".into(),
    };
    let yaml = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwned\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: User\n  name: mallory\n";
    BTreeMap::from([(id, yaml.as_bytes().to_vec())])
}

/// Writes `bundle` into an OCI layout under `tag` with the proto layout code (as any OCI
/// tool could), then copies it into the registry with skopeo: the attacker's write.
fn skopeo_put(reg: &Registry, dir: &Path, bundle: &drover_proto::bundle::Bundle, dest: &str) {
    let layout = Layout::create(dir).unwrap();
    layout.write_blob(&bundle.config).unwrap();
    layout.write_blob(&bundle.layer).unwrap();
    layout.write_blob(&bundle.manifest).unwrap();
    let desc = drover_proto::manifest::Descriptor::of(drover_proto::media::OCI_MANIFEST, &bundle.manifest);
    layout.set_ref(Some("evil"), desc).unwrap();
    tool_ok(
        "skopeo",
        &["copy", "--quiet", "--dest-tls-verify=false", &format!("oci:{}:evil", dir.display()), &format!("docker://{}", reg.reference(dest))],
    );
}

fn digest_of(reg: &Registry, repository: &str, tag: &str) -> Option<String> {
    raw_manifest(reg, repository, tag).map(|(b, _)| drover_proto::digest::sha256_digest(&b))
}

fn sequence_at(reference: &str) -> u64 {
    let r = repo(reference);
    let lookup = drover_proto::Reference::parse(reference).unwrap().as_registry().unwrap().lookup().unwrap().to_string();
    let (bytes, digest) = rt().block_on(r.manifest(&lookup, 4 << 20)).unwrap();
    rt().block_on(r.fetch_bundle_head(bytes, digest, &FetchLimits::default())).unwrap().config.sequence
}

/// Pushes signed bundles with sequences 41 and 42 to fleet/edge:prod (history prod-41, prod-42).
fn two_releases(reg: &Registry, tmp: &Path, key: &Path) -> (String, String) {
    let mut digests = Vec::new();
    for (seq, value) in [(41, "good"), (42, "newer")] {
        let dir = tmp.join(format!("in-{seq}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cm.yaml"), format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: demo}}\ndata: {{v: {value}}}\n")).unwrap();
        let s = seq.to_string();
        let out = drover(&[
            "-o", "json", "push", dir.to_str().unwrap(), &reg.reference("fleet/edge:prod"), "--sequence", &s, "--cluster-type", "edge",
            "--environment", "prod", "--key", key.to_str().unwrap(),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        digests.push(out.json()["digest"].as_str().unwrap().to_string());
    }
    (digests.remove(0), digests.remove(0))
}

#[test]
fn rollback_refuses_an_attacker_repointed_history_tag_and_signs_nothing() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, _public) = keygen(tmp.path());
    let (_d41, d42) = two_releases(&reg, tmp.path(), &key);

    // The attacker repoints prod-41 at an unsigned bundle granting cluster-admin.
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence: 41, ..Default::default() };
    let evil = assemble(&evil_objects(), &meta);
    skopeo_put(&reg, &tmp.path().join("evil"), &evil, "fleet/edge:prod-41");
    assert_eq!(digest_of(&reg, "fleet/edge", "prod-41").as_deref(), Some(evil.digest.as_str()));
    let tags_before = raw_tags(&reg, "fleet/edge");

    let out = drover(&["rollback", &reg.reference("fleet/edge:prod"), "--to", "prod-41", "--key", key.to_str().unwrap()]);
    assert_ne!(out.code, 0, "rollback signed the attacker's bundle:\n{}", out.stdout);
    assert!(out.stderr.contains("prod-41") && out.stderr.contains("not signed"), "{}", out.stderr);
    assert!(sig_manifest(&reg, "fleet/edge", &evil.digest).is_none(), "the attacker's bundle got a signature");
    assert_eq!(digest_of(&reg, "fleet/edge", "prod").as_deref(), Some(d42.as_str()), "prod must not move");
    assert_eq!(raw_tags(&reg, "fleet/edge"), tags_before, "no tag written");
}

#[test]
fn rollback_takes_the_sequence_from_verified_history_not_from_the_channel_tag() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let (d41, _d42) = two_releases(&reg, tmp.path(), &key);

    // The attacker points prod at an unsigned bundle claiming the largest sequence there is.
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence: u64::MAX, ..Default::default() };
    let evil = assemble(&evil_objects(), &meta);
    skopeo_put(&reg, &tmp.path().join("evil"), &evil, "fleet/edge:prod");

    // Rolling back to the genuine prod-41 still works: the floor is the verified 42.
    let out = drover(&["-o", "json", "rollback", &reg.reference("fleet/edge:prod"), "--to", "prod-41", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j = out.json();
    assert_eq!(j["sequence"], 43, "{j}");
    assert_eq!(j["restoredFrom"], d41.as_str(), "{j}");
    assert_eq!(sequence_at(&reg.reference("fleet/edge:prod")), 43);
    assert_eq!(verify(&reg.reference("fleet/edge:prod"), &[&public], 1).code, 0);
    assert!(sig_manifest(&reg, "fleet/edge", &evil.digest).is_none());
}

#[test]
fn rollback_finds_the_verified_floor_under_forty_forged_history_tags() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let (d41, _d42) = two_releases(&reg, tmp.path(), &key);

    // The attacker points prod at an unsigned bundle, then writes 40 history tags above the
    // real ones (prod-100 .. prod-139), each a different manifest (raw HTTP PUTs of the
    // unsigned manifest with one annotation changed): more than any fixed number of probes.
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence: 1000, ..Default::default() };
    let evil = assemble(&evil_objects(), &meta);
    skopeo_put(&reg, &tmp.path().join("evil"), &evil, "fleet/edge:prod");
    let mut forged: serde_json::Value = serde_json::from_slice(&evil.manifest).unwrap();
    for n in 100..140 {
        forged["annotations"]["forged"] = serde_json::Value::String(n.to_string());
        let bytes = serde_json::to_vec(&forged).unwrap();
        drover_tests::rawreg::put_manifest(&reg.addr, "fleet/edge", &format!("prod-{n}"), &bytes, drover_proto::media::OCI_MANIFEST);
    }

    // The floor is still the verified prod-42: rollback to prod-41 publishes sequence 43.
    let out = drover(&["-o", "json", "rollback", &reg.reference("fleet/edge:prod"), "--to", "prod-41", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j = out.json();
    assert_eq!(j["sequence"], 43, "{j}");
    assert_eq!(j["restoredFrom"], d41.as_str(), "{j}");
    assert_eq!(verify(&reg.reference("fleet/edge:prod"), &[&public], 1).code, 0);
}

/// A platform with one cluster type `edge` and one workload.
fn platform(root: &Path) {
    drover_tests::write_files(
        root,
        &[
            ("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, prod]\n"),
            ("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory}\n"),
            ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\n"),
            ("environments/prod.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: prod}\n"),
            ("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\n"),
            ("workloads/app/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: app\ndata:\n  k: v\n"),
        ],
    );
}

#[test]
fn publish_never_signs_an_attacker_manifest_that_reuses_our_layer() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let root = tmp.path().join("platform");
    platform(&root);
    let prefix = reg.reference("fleet");
    let publish = || {
        drover(&["-o", "json", "publish", root.to_str().unwrap(), "--env", "dev", "--registry", &prefix, "--key", key.to_str().unwrap(), "--revision", "r1"])
    };
    let first = publish();
    assert_eq!(first.code, 0, "{}", first.stderr);
    let genuine = sequence_at(&reg.reference("fleet/edge:dev"));

    // The attacker keeps our content layer but writes their own config: the maximal
    // sequence (freezes every agent) and allowMassPrune.
    let lookup = "dev";
    let r = repo(&reg.reference("fleet/edge:dev"));
    let ours = rt().block_on(r.fetch_bundle(lookup, &FetchLimits::default())).unwrap();
    let mut config = ours.config.clone();
    config.sequence = u64::MAX;
    config.allow_mass_prune = true;
    let config_bytes = serde_json::to_vec(&config).unwrap();
    let mut manifest = ours.manifest.clone();
    manifest.config = drover_proto::manifest::Descriptor::of(drover_proto::media::BUNDLE_CONFIG, &config_bytes);
    let manifest_bytes = manifest.to_bytes();
    let evil = drover_proto::bundle::Bundle {
        digest: drover_proto::digest::sha256_digest(&manifest_bytes),
        manifest: manifest_bytes,
        config: config_bytes,
        layer: ours.layer.clone(),
        config_doc: config,
        manifest_doc: manifest,
    };
    skopeo_put(&reg, &tmp.path().join("evil"), &evil, "fleet/edge:dev");

    // Nothing changed in the platform: publish must not bless the attacker's manifest.
    let again = publish();
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(sig_manifest(&reg, "fleet/edge", &evil.digest).is_none(), "publish signed the attacker's manifest");
    let now = digest_of(&reg, "fleet/edge", "dev").unwrap();
    assert_ne!(now, evil.digest, "dev still names the attacker's manifest");
    assert_eq!(verify(&reg.reference("fleet/edge:dev"), &[&public], 1).code, 0, "dev names a bundle we signed");
    let seq = sequence_at(&reg.reference("fleet/edge:dev"));
    assert!(seq > genuine && seq <= 1 << 53, "sequence {seq} must follow the verified {genuine}, not the attacker's");
}

/// Exports `refs` into an OCI archive with drover and unpacks it into `dir`.
fn export_to_dir(refs: &[String], file: &Path, dir: &Path) {
    let mut args = vec!["export".to_string()];
    args.extend(refs.iter().cloned());
    args.extend(["--out".into(), file.display().to_string()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = drover(&a);
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::create_dir_all(dir).unwrap();
    tool_ok("tar", &["-xf", file.to_str().unwrap(), "-C", dir.to_str().unwrap()]);
}

/// Packs `dir` back into an OCI archive (plain tar, as any tool would).
fn pack(dir: &Path, file: &Path) {
    tool_ok("tar", &["-cf", file.to_str().unwrap(), "-C", dir.to_str().unwrap(), "."]);
}

#[test]
fn import_drops_signature_layers_that_do_not_verify_and_keeps_the_destination_verifiable() {
    let src = Registry::start();
    let dst = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let (_d41, d42) = two_releases(&src, tmp.path(), &key);
    let x = tmp.path().join("x");
    export_to_dir(&[src.reference("fleet/edge:prod")], &tmp.path().join("a.tar"), &x);
    // First import: genuine.
    let to = dst.addr.clone();
    let first = drover(&["-o", "json", "import", tmp.path().join("a.tar").to_str().unwrap(), "--to", &to]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(verify(&dst.reference("fleet/edge:prod"), &[&public], 1).code, 0);

    // The attacker adds a foreign layer to the .sig manifest inside the archive.
    let layout = Layout::open(&x).unwrap();
    let index = layout.index().unwrap();
    let sig_desc = index.manifests.iter().find(|d| d.annotations.values().any(|v| v.ends_with(".sig"))).unwrap().clone();
    let sig_bytes = layout.read_blob(&sig_desc.digest, 1 << 20).unwrap();
    let mut sig: drover_proto::manifest::Manifest = serde_json::from_slice(&sig_bytes).unwrap();
    let junk = b"not a signature".to_vec();
    layout.write_blob(&junk).unwrap();
    sig.layers.push(drover_proto::manifest::Descriptor::of("application/vnd.example.junk", &junk));
    let new_sig = sig.to_bytes();
    layout.write_blob(&new_sig).unwrap();
    let mut desc = drover_proto::manifest::Descriptor::of(drover_proto::media::OCI_MANIFEST, &new_sig);
    desc.annotations = sig_desc.annotations.clone();
    let name = desc.annotations.get(drover_proto::media::ANN_REF_NAME).unwrap().clone();
    layout.set_ref(Some(&name), desc).unwrap();
    let tampered = tmp.path().join("tampered.tar");
    pack(&x, &tampered);

    for with_key in [false, true] {
        let mut args = vec!["-o", "json", "import", tampered.to_str().unwrap(), "--to", &to];
        let p = public.to_str().unwrap();
        if with_key {
            args.extend(["--trust-key", p]);
        }
        let out = drover(&args);
        assert_eq!(out.code, 0, "with_key={with_key}: {}", out.stderr);
        let sig = sig_manifest(&dst, "fleet/edge", &d42).unwrap();
        let layers = sig["layers"].as_array().unwrap();
        assert!(
            layers.iter().all(|l| l["mediaType"] == drover_proto::media::COSIGN_SIMPLESIGNING),
            "a foreign layer reached the destination .sig: {sig}"
        );
        assert_eq!(verify(&dst.reference("fleet/edge:prod"), &[&public], 1).code, 0, "the destination must keep verifying");
    }
}

#[test]
fn import_refuses_to_move_a_tag_to_a_lower_sequence_unless_asked() {
    let src = Registry::start();
    let dst = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let (key, public) = keygen(tmp.path());
    let dir = tmp.path().join("in");
    let p = public.to_str().unwrap();
    let mut archives = Vec::new();
    for (seq, value) in [(41, "old"), (42, "new")] {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cm.yaml"), format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: s, namespace: demo}}\ndata: {{v: {value}}}\n")).unwrap();
        let s = seq.to_string();
        let out = drover(&[
            "push", dir.to_str().unwrap(), &src.reference("fleet/edge:prod"), "--sequence", &s, "--cluster-type", "edge", "--environment",
            "prod", "--key", key.to_str().unwrap(),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let file = tmp.path().join(format!("prod-{seq}.tar"));
        let out = drover(&["export", &src.reference("fleet/edge:prod"), "--out", file.to_str().unwrap()]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        archives.push(file);
    }
    let to = dst.addr.clone();
    let import = |file: &Path, extra: &[&str]| {
        let mut args = vec!["-o", "json", "import", file.to_str().unwrap(), "--to", &to, "--trust-key", p];
        args.extend_from_slice(extra);
        drover(&args)
    };
    assert_eq!(import(&archives[1], &[]).code, 0);
    let newer = digest_of(&dst, "fleet/edge", "prod").unwrap();

    // An old archive imported later must not move prod back to sequence 41.
    let out = import(&archives[0], &[]);
    assert_ne!(out.code, 0, "import moved prod backwards:\n{}", out.stdout);
    assert!(out.stderr.contains("fleet/edge:prod") && out.stderr.contains("--allow-downgrade"), "{}", out.stderr);
    assert_eq!(digest_of(&dst, "fleet/edge", "prod").as_deref(), Some(newer.as_str()));

    // A deliberate restore says so.
    let out = import(&archives[0], &["--allow-downgrade"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sequence_at(&dst.reference("fleet/edge:prod")), 41);
}
