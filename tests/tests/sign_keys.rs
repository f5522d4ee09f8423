//! Keys: `drover keygen` (modes, no overwrite), cosign-format and PKCS#8 keys accepted,
//! and every kind of bad key input refused with the file named and nothing pushed.

mod sign_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use drover_tests::{run, Registry};
use sign_support::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/keys").join(name)
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn keygen_modes_and_no_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("keys");
    let out = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap(), "-o", "json"], &[("DROVER_KEY_PASSWORD", "pw")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = out.json()["fingerprint"].as_str().unwrap().to_string();
    let key = dir.join("drover.key");
    let public = dir.join("drover.pub");
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&public), 0o644);
    assert!(std::fs::read_to_string(&key).unwrap().starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
    assert!(std::fs::read_to_string(&public).unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));
    let envelope = std::fs::read_to_string(&key).unwrap();

    // Refuses to overwrite, names the file, leaves it unchanged.
    let out = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap()], &[("DROVER_KEY_PASSWORD", "pw")]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("drover.key already exists") && out.stderr.contains("--force"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&key).unwrap(), envelope);

    // --force replaces both.
    let out = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap(), "--force", "-o", "json"], &[("COSIGN_PASSWORD", "cpw")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_ne!(out.json()["fingerprint"].as_str().unwrap(), first);
    assert_eq!(mode(&key), 0o600);

    // COSIGN_PASSWORD is the fallback; DROVER_KEY_PASSWORD wins when both are set.
    let reg = Registry::start();
    let d = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "a");
    let r = format!("{}@{d}", reg.reference("fleet/edge"));
    let k = key.to_str().unwrap();
    let ok = run("drover", &["sign", &r, "--key", k, "--plain-http"], &[("COSIGN_PASSWORD", "cpw")]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let bad = run("drover", &["sign", &r, "--key", k, "--plain-http"], &[("COSIGN_PASSWORD", "cpw"), ("DROVER_KEY_PASSWORD", "x")]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("wrong password") && bad.stderr.contains(k), "{}", bad.stderr);
}

#[test]
fn cosign_format_and_pkcs8_keys_sign_and_verify() {
    let reg = Registry::start();
    let d = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "a");
    let r = reg.reference(&format!("fleet/edge@{d}"));
    // cosign v2 `generate-key-pair` output, empty password.
    let out = run("drover", &["sign", &r, "--key", fixture("cosign-generated.key").to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Older cosign label, password via COSIGN_PASSWORD.
    let out = run(
        "drover",
        &["sign", &r, "--key", fixture("cosign-legacy.key").to_str().unwrap(), "--plain-http"],
        &[("COSIGN_PASSWORD", "123")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Plain PKCS#8 PEM.
    let out = run("drover", &["sign", &r, "--key", fixture("pkcs8.key").to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pubs = [fixture("cosign-generated.pub"), fixture("cosign-legacy.pub"), fixture("pkcs8.pub")];
    let out = verify(&r, &[&pubs[0], &pubs[1], &pubs[2]], 3);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["matched"].as_array().unwrap().len(), 3);
}

#[test]
fn bad_key_input_is_refused_naming_the_file_and_nothing_is_pushed() {
    let reg = Registry::start();
    let d = push_bundle(&reg, "fleet/edge", "prod", "prod", 1, "a");
    let r = reg.reference("fleet/edge:prod");
    let tmp = tempfile::tempdir().unwrap();
    let (_, public) = keygen(tmp.path());
    let tags_before = raw_tags(&reg, "fleet/edge");

    let sign_fails = |key: &Path, env: &[(&str, &str)], needle: &str| {
        let k = key.to_str().unwrap();
        let out = run("drover", &["sign", &r, "--key", k, "--plain-http"], env);
        assert_ne!(out.code, 0, "sign with {k} must fail");
        assert!(out.stderr.contains(needle), "expected {needle:?} in:\n{}", out.stderr);
        assert!(out.stderr.contains(k), "the error must name {k}:\n{}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    };
    sign_fails(&tmp.path().join("absent.key"), &[], "does not exist");
    sign_fails(&fixture("cosign-legacy.key"), &[("DROVER_KEY_PASSWORD", "wrong")], "wrong password");
    sign_fails(&public, &[], "is a public key");
    sign_fails(&fixture("sec1.key"), &[], "openssl pkcs8 -topk8");
    sign_fails(tmp.path(), &[], "cannot be read");
    let junk = tmp.path().join("junk.key");
    std::fs::write(&junk, "not a key\n").unwrap();
    sign_fails(&junk, &[], "no PEM block");

    let verify_fails = |key: &Path, needle: &str| {
        let k = key.to_str().unwrap();
        let out = run("drover", &["verify", &r, "--trust-key", k, "--plain-http"], &[]);
        assert_ne!(out.code, 0);
        assert!(out.stderr.contains(needle) && out.stderr.contains(k), "expected {needle:?} naming {k}:\n{}", out.stderr);
    };
    verify_fails(&fixture("cosign-generated.key"), "is a private key");
    verify_fails(&fixture("pkcs8.key"), "is a private key");
    verify_fails(&fixture("p384.pub"), "P-256");
    verify_fails(&tmp.path().join("nope.pub"), "does not exist");

    // A reference without a .sig manifest: clear error naming the .sig reference.
    let out = run("drover", &["verify", &r, "--trust-key", public.to_str().unwrap(), "--plain-http"], &[]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("is not signed") && out.stderr.contains(&sig_tag(&d)), "{}", out.stderr);
    // A reference that does not exist.
    let missing = reg.reference("fleet/edge:nope");
    let (key, _) = (tmp.path().join("drover.key"), ());
    let out = drover(&["sign", &missing, "--key", key.to_str().unwrap()]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("fleet/edge:nope does not exist"), "{}", out.stderr);

    assert_eq!(raw_tags(&reg, "fleet/edge"), tags_before, "nothing may be pushed by failed commands");
    assert!(sig_manifest(&reg, "fleet/edge", &d).is_none());
}
