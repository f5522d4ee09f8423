//! `Manifest::from_slice` and the signature manifest parser `sigmanifest::parse` (bytes
//! straight from a registry or an archive). Never panics; a parsed manifest re-encodes to
//! bytes that parse to the same manifest.
#![no_main]

use drover_proto::manifest::Manifest;
use drover_proto::trust::sigmanifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::from_slice(data) {
        let _ = (m.is_bundle(), m.bundle_layer());
        let again = Manifest::from_slice(&m.to_bytes()).expect("a re-encoded manifest parses");
        assert_eq!(again, m);
    }
    if let Ok(m) = sigmanifest::parse(data) {
        assert!(m.layers.len() <= sigmanifest::MAX_LAYERS);
        for layer in &m.layers {
            let _ = sigmanifest::layer_signature(layer);
        }
    }
});
