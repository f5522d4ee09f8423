//! Interop of `drover export` archives with skopeo: `skopeo inspect --raw` reads the
//! archive, `skopeo copy oci-archive:FILE:<repository>:<tag>` into a registry keeps the
//! digest, and the copied bundle still verifies once its `.sig` tag is copied too.


use drover_proto::digest::sha256_digest;
use drover_tests::{run_ok, tool_ok, Registry};

#[test]
fn skopeo_reads_and_copies_exported_archive_keeping_digests() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ns.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n").unwrap();
    let env = [("DROVER_KEY_PASSWORD", "")];
    let keys = tmp.path().join("k");
    run_ok("drover", &["keygen", "--out-dir", keys.to_str().unwrap()], &env);
    let pushed = run_ok(
        "drover",
        &[
            "-o",
            "json",
            "push",
            dir.to_str().unwrap(),
            &reg.reference("fleet/edge:prod"),
            "--plain-http",
            "--key",
            keys.join("drover.key").to_str().unwrap(),
        ],
        &env,
    )
    .json();
    let digest = pushed["digest"].as_str().unwrap().to_string();
    let archive = tmp.path().join("bundles.tar");
    run_ok("drover", &["export", &reg.reference("fleet/edge:prod"), "--out", archive.to_str().unwrap(), "--plain-http"], &[]);

    // skopeo reads the archive by <repository>:<tag>
    let src = format!("oci-archive:{}:fleet/edge:prod", archive.display());
    let raw = tool_ok("skopeo", &["inspect", "--raw", &src]);
    assert_eq!(sha256_digest(raw.as_bytes()), digest);

    // skopeo copy archive -> registry keeps the digest; the .sig tag is copied explicitly
    let dest = reg.reference("copied/edge:prod");
    tool_ok("skopeo", &["copy", "--quiet", "--dest-tls-verify=false", &src, &format!("docker://{dest}")]);
    let copied = tool_ok("skopeo", &["inspect", "--raw", "--tls-verify=false", &format!("docker://{dest}")]);
    assert_eq!(sha256_digest(copied.as_bytes()), digest);
    let sig = format!("{}.sig", digest.replace(':', "-"));
    tool_ok(
        "skopeo",
        &[
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            &format!("oci-archive:{}:fleet/edge:{sig}", archive.display()),
            &format!("docker://{}", reg.reference(&format!("copied/edge:{sig}"))),
        ],
    );
    // The bundle's signatures travelled (verified by digest: skopeo copied no channel
    // statement, so agents following copied/edge:prod would not apply it, and
    // `drover verify` of that tag says so).
    let pinned = reg.reference(&format!("copied/edge@{digest}"));
    run_ok("drover", &["verify", &pinned, "--trust-key", keys.join("drover.pub").to_str().unwrap(), "--plain-http"], &[]);
    let by_tag = drover_tests::run("drover", &["verify", &dest, "--trust-key", keys.join("drover.pub").to_str().unwrap(), "--plain-http"], &[]);
    assert_eq!(by_tag.code, 1, "no statement places it on copied/edge:prod: {}", by_tag.stderr);
    // drover reads the archive directly too
    let i = run_ok("drover", &["-o", "json", "inspect", &src], &[]).json();
    assert_eq!(i["digest"], digest.as_str());
}
