//! `sigmanifest::check_payload` (the simple-signing payload a signature layer points at).
//! Never panics; it accepts a payload only when it names the digest it is checked against,
//! and the payload drover writes always passes.
#![no_main]

use drover_proto::trust::sigmanifest;
use libfuzzer_sys::fuzz_target;

const DIGEST: &str = "sha256:7d865e959b2466918c9863afca942d0fb89d7c9ac0c99bafc3749504ded97730";

fuzz_target!(|data: &[u8]| {
    if let Ok(reference) = sigmanifest::check_payload(data, DIGEST) {
        let v: serde_json::Value = serde_json::from_slice(data).expect("an accepted payload is JSON");
        assert_eq!(v["critical"]["image"]["docker-manifest-digest"], DIGEST);
        assert!(sigmanifest::check_payload(data, "sha256:0000").is_err());
        let ours = sigmanifest::payload(&reference, DIGEST);
        assert_eq!(sigmanifest::check_payload(&ours, DIGEST).as_deref(), Ok(reference.as_str()));
    }
});
