//! Hostile bundles against a running dir: target: every one is refused with a recorded
//! reason, the agent exits non-zero with `--once`, and the target does not change.

mod agent_support;

use std::collections::BTreeMap;
use std::io::Write;

use agent_support::*;
use drover_proto::bundle::{assemble, Bundle, BundleMeta};
use drover_proto::config::BundleConfig;
use drover_proto::digest::sha256_hex;
use drover_proto::manifest::Descriptor;
use drover_proto::media;
use drover_proto::object::ObjectRef;
use drover_proto::registry::{RegistryClient, RegistryOptions};
use drover_proto::{Reference, Repo};

const PATH_A: &str = "manifests/app/ConfigMap.core.a.yaml";
const YAML_A: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n";

fn id_a() -> ObjectRef {
    ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("app".into()), name: "a".into() }
}

/// A tar.gz with one entry of the given type, name and data (link target for links).
fn raw_layer(name: &str, kind: tar::EntryType, data: &[u8], link: Option<&str>) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(data.len() as u64);
    if let Some(l) = link {
        h.set_link_name(l).unwrap();
    }
    h.set_cksum();
    b.append(&h, data).unwrap();
    let tar = b.into_inner().unwrap();
    let mut e = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::new(6));
    e.write_all(&tar).unwrap();
    e.finish().unwrap()
}

/// A gzip bomb: one entry of 270 MB of zeros (over the 256 MiB unpack limit), ~270 KB compressed.
fn bomb_layer(dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join("bomb.tar.gz");
    let script = format!(
        "import tarfile,io\nclass Z(io.RawIOBase):\n  def readable(self): return True\n  def readinto(self,b):\n    b[:]=bytes(len(b)); return len(b)\nt=tarfile.open('{}','w:gz',compresslevel=1)\ni=tarfile.TarInfo('{PATH_A}'); i.size=270000000\nt.addfile(i,io.BufferedReader(Z()))\nt.close()\n",
        out.display()
    );
    let st = std::process::Command::new("python3").arg("-c").arg(script).status().unwrap();
    assert!(st.success());
    std::fs::read(out).unwrap()
}

/// Builds a bundle from raw parts: `layer` bytes and the config (index) as given.
fn raw_bundle(layer: Vec<u8>, config_doc: BundleConfig, manifest_annotation: Option<String>) -> Bundle {
    let base = assemble(&BTreeMap::from([(id_a(), YAML_A.as_bytes().to_vec())]), &BundleMeta::default());
    let config = serde_json::to_vec(&config_doc).unwrap();
    let mut m = base.manifest_doc.clone();
    m.config = Descriptor::of(media::BUNDLE_CONFIG, &config);
    let mut ld = Descriptor::of(media::BUNDLE_LAYER, &layer);
    ld.annotations = base.manifest_doc.layers[0].annotations.clone();
    m.layers = vec![ld];
    if let Some(a) = manifest_annotation {
        m.annotations.insert("test.drover.dev/padding".into(), a);
    }
    let manifest = m.to_bytes();
    Bundle { digest: drover_proto::digest::sha256_digest(&manifest), manifest, config, layer, config_doc, manifest_doc: m }
}

fn config(seq: u64, sha: &str) -> BundleConfig {
    let meta = BundleMeta { cluster_type: "edge".into(), environment: "prod".into(), sequence: seq, ..Default::default() };
    let mut c = assemble(&BTreeMap::from([(id_a(), YAML_A.as_bytes().to_vec())]), &meta).config_doc;
    c.objects[0].sha256 = sha.to_string();
    c
}

fn push_raw(fx: &Fx, b: &Bundle) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap();
        let (repo, _) = Repo::open(&Reference::parse(&fx.tag_ref).unwrap(), &client, true).unwrap();
        repo.push_bundle(b, &["prod"]).await.expect("push hostile bundle")
    })
}

#[test]
fn hostile_bundles_are_refused_without_touching_the_target() {
    let fx = Fx::new();
    let good = vec![cm("app", "a", "good"), cm("app", "b", "good")];
    let d_good = fx.push(&objs(&good), 50, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let before = snapshot(fx.tmp.path().join("out").as_path());
    assert_eq!(before.len(), 2);

    // (name, expected text in the recorded reason, how to publish it)
    let two_docs = format!("{YAML_A}---\n{YAML_A}");
    type Publish = Box<dyn Fn(&Fx) -> String>;
    let mut cases: Vec<(&str, &str, Publish)> = vec![
        ("path traversal", "unsafe path", Box::new(|fx| {
            push_raw(fx, &raw_bundle(raw_layer("manifests/../../evil.yaml", tar::EntryType::Regular, YAML_A.as_bytes(), None), config(60, &sha256_hex(YAML_A.as_bytes())), None))
        })),
        ("absolute path", "absolute path", Box::new(|fx| {
            push_raw(fx, &raw_bundle(raw_layer("/tmp/evil-drover.yaml", tar::EntryType::Regular, YAML_A.as_bytes(), None), config(60, &sha256_hex(YAML_A.as_bytes())), None))
        })),
        ("symlink", "symbolic link", Box::new(|fx| {
            push_raw(fx, &raw_bundle(raw_layer(PATH_A, tar::EntryType::Symlink, b"", Some("/etc/passwd")), config(60, &sha256_hex(b"")), None))
        })),
        ("hard link", "hard link", Box::new(|fx| {
            push_raw(fx, &raw_bundle(raw_layer(PATH_A, tar::EntryType::Link, b"", Some("/etc/passwd")), config(60, &sha256_hex(b"")), None))
        })),
        ("gzip bomb", "total uncompressed bytes", Box::new(|fx| push_raw(fx, &raw_bundle(bomb_layer(fx.tmp.path()), config(60, &"0".repeat(64)), None)))),
        ("index/content mismatch", "signed config index says", Box::new(|fx| {
            push_raw(fx, &raw_bundle(raw_layer(PATH_A, tar::EntryType::Regular, YAML_A.as_bytes(), None), config(60, &"1".repeat(64)), None))
        })),
        ("two objects in one file", "2 objects in one file", Box::new(move |fx| {
            push_raw(fx, &raw_bundle(raw_layer(PATH_A, tar::EntryType::Regular, two_docs.as_bytes(), None), config(60, &sha256_hex(two_docs.as_bytes())), None))
        })),
    ];
    // These publish through `drover push`; the signature step is part of the case.
    let evil = vec![cm("app", "a", "evil")];
    let e1 = evil.clone();
    cases.push(("unsigned", "not signed", Box::new(move |fx| fx.push(&objs(&e1), 70, None, &[]))));
    let e2 = evil.clone();
    cases.push(("wrong key", "required trusted key", Box::new(move |fx| fx.push(&objs(&e2), 71, Some("k2"), &[]))));
    let e3 = evil.clone();
    cases.push(("lower sequence", "lower than the applied 50", Box::new(move |fx| fx.push(&objs(&e3), 49, Some("k1"), &[]))));
    let e4 = evil.clone();
    cases.push(("wrong cluster type", "expects \"edge\"", Box::new(move |fx| fx.push_for("core", &objs(&e4), 72, Some("k1"), &[]))));

    for (name, expect, publish) in &cases {
        let t0 = std::time::Instant::now();
        let digest = publish(&fx);
        eprintln!("{name}: published in {:?}", t0.elapsed());
        let signed_by_push = matches!(*name, "unsigned" | "wrong key" | "lower sequence" | "wrong cluster type");
        if !signed_by_push {
            // The release key signed hostile content (and placed it): the agent's own
            // checks must still refuse it.
            fx.sign(&digest, "k1");
            fx.place(&digest, "k1");
        }
        let t1 = std::time::Instant::now();
        let out = fx.once(&[]);
        eprintln!("{name}: agent ran in {:?}", t1.elapsed());
        assert_ne!(out.code, 0, "{name}: the agent must refuse\n{}", out.stderr);
        assert_eq!(snapshot(fx.tmp.path().join("out").as_path()), before, "{name}: the target changed");
        assert!(!fx.tmp.path().join("evil.yaml").exists() && !std::path::Path::new("/tmp/evil-drover.yaml").exists(), "{name}: wrote outside the target");
        let st = fx.status();
        assert_eq!(st["appliedDigest"], d_good.as_str(), "{name}");
        assert_eq!(st["lastAttempt"]["result"], "Rejected", "{name}: {st}");
        let reason = st["lastAttempt"]["reason"].as_str().unwrap();
        assert!(reason.contains(expect), "{name}: reason {reason:?} lacks {expect:?}");
        let h = fx.history();
        assert_eq!(h[0]["result"], "Rejected", "{name}");
        assert_eq!(h[0]["reason"].as_str().unwrap(), reason, "{name}");
    }
    // Oversized manifest: the registry itself refuses > 4 MiB manifests, so this one comes
    // from an OCI layout source (oci:DIR:TAG), read through the same fetch limits.
    let layout = fx.p("layout");
    let pad = "x".repeat(4 * 1024 * 1024 + 10);
    let big = raw_bundle(raw_layer(PATH_A, tar::EntryType::Regular, YAML_A.as_bytes(), None), config(60, &sha256_hex(YAML_A.as_bytes())), Some(pad));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = RegistryClient::new(RegistryOptions::default()).unwrap();
        let r = Reference::parse(&format!("oci:{}:prod", layout.display())).unwrap();
        let (repo, _) = Repo::open(&r, &client, true).unwrap();
        repo.push_bundle(&big, &["prod"]).await.unwrap();
    });
    let out = fx.once_from(&format!("oci:{}:prod", layout.display()), &[]);
    assert_ne!(out.code, 0, "oversized manifest must be refused\n{}", out.stderr);
    assert_eq!(snapshot(fx.tmp.path().join("out").as_path()), before, "oversized manifest: the target changed");
    let h = fx.history();
    assert_eq!(h[0]["result"], "Rejected");
    assert!(h[0]["reason"].as_str().unwrap().contains("over the limit"), "{}", h[0]);

    // The good bundle is still what runs; re-publishing it is accepted again.
    let d = fx.push(&objs(&good), 80, Some("k1"), &[]);
    assert_ne!(d, d_good);
    assert_eq!(fx.once(&[]).code, 0);
}
