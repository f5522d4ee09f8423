//! The bundle unpack: `bundle::open_content` (tar+gzip checked against the signed config
//! index) on a layer from the input, twice: against an index derived from the layer
//! itself (so the deep checks run: hashes, one object per file, identities) and against a
//! fixed index. Never panics, never exceeds the unpack limits; what opens matches its index.
#![no_main]

use drover_proto::archive::{unpack, UnpackLimits};
use drover_proto::bundle::{open_content, parse_single_object};
use drover_proto::config::{BundleConfig, ObjectEntry, SourceInfo, SCHEMA_VERSION};
use drover_proto::digest::sha256_hex;
use drover_proto::object::ObjectRef;
use libfuzzer_sys::fuzz_target;

/// Small limits so that the fuzzer reaches them (the defaults are 256 MiB).
const LIMITS: UnpackLimits =
    UnpackLimits { max_total_bytes: 1 << 20, max_entries: 64, max_depth: 8, max_name_bytes: 512, max_header_bytes: 4096 };

fn config(objects: Vec<ObjectEntry>) -> BundleConfig {
    BundleConfig {
        schema_version: SCHEMA_VERSION,
        cluster_type: String::new(),
        environment: String::new(),
        sequence: 1,
        source: SourceInfo::default(),
        allow_mass_prune: false,
        workloads: Vec::new(),
        health_checks: Vec::new(),
        min_agent_version: None,
        ignorable: Vec::new(),
        objects,
    }
}

/// The index a bundler would have written for these files (identity read from each file).
fn derived(files: &std::collections::BTreeMap<String, Vec<u8>>) -> BundleConfig {
    let entries = files
        .iter()
        .map(|(path, data)| {
            let id = parse_single_object(data).ok().and_then(|v| ObjectRef::from_value(&v).ok()).unwrap_or(ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("x".into()),
                name: path.clone(),
            });
            ObjectEntry {
                api_version: id.api_version,
                kind: id.kind,
                namespace: id.namespace,
                name: id.name,
                path: path.clone(),
                sha256: sha256_hex(data),
            }
        })
        .collect();
    config(entries)
}

fuzz_target!(|data: &[u8]| {
    let Ok(files) = unpack(data, &LIMITS) else {
        assert!(open_content(&config(vec![]), data, &LIMITS).is_err());
        return;
    };
    assert!(files.len() <= LIMITS.max_entries);
    assert!(files.values().map(|d| d.len() as u64).sum::<u64>() <= LIMITS.max_total_bytes);
    let index = derived(&files);
    if let Ok(objects) = open_content(&index, data, &LIMITS) {
        assert_eq!(objects.len(), index.objects.len());
        for (o, e) in objects.iter().zip(&index.objects) {
            assert_eq!(o.path, e.path);
            assert_eq!(sha256_hex(&o.yaml), e.sha256);
            assert_eq!(o.id, e.object_ref());
        }
    }
    let fixed = config(vec![ObjectEntry {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("app".into()),
        name: "a".into(),
        path: "manifests/app/ConfigMap.core.a.yaml".into(),
        sha256: "0".repeat(64),
    }]);
    assert!(open_content(&fixed, data, &LIMITS).is_err(), "no file hashes to zeros");
});
