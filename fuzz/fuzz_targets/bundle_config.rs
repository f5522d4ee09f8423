//! `BundleConfig::from_slice` (the config blob, read before and after its signature is
//! checked). Never panics; a parsed config re-encodes to the same config, and every index
//! entry yields an identity and a bundle path.
#![no_main]

use drover_proto::config::BundleConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = BundleConfig::from_slice(data) {
        let again = BundleConfig::from_slice(&serde_json::to_vec(&c).unwrap()).expect("a re-encoded config parses");
        assert_eq!(again, c);
        for entry in &c.objects {
            let id = entry.object_ref();
            let _ = (id.bundle_path(), id.to_string());
        }
    }
});
