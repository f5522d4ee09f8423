//! Declared membership (docs/fleet.md, "Declared membership"): `fleet.yaml` `spec.clusters`
//! lists every cluster of the fleet — `name` (`TYPE.NAME`, its report tag), `environment`,
//! `channel` and `reportKey` (the full SHA-256 fingerprint of its report key). The file is
//! kept in version control and reviewed like the rest of the platform; it, not the
//! registry, says which clusters must be ready for a gate. Loading checks every entry
//! (duplicates, unknown cluster type or environment, a channel that cannot be a tag, a
//! fingerprint that is not 64 hex digits, a key declared twice) with errors naming the file
//! and the entry. [`load`] reads it for `--fleet FILE` (the cluster types from the
//! platform's `cluster-types/` beside it); `Platform::load` checks the same entries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::error::PlatformError;
use super::model::{ClusterEntry, FleetDoc};

/// Length of a full report key fingerprint (hex SHA-256).
pub const FINGERPRINT_HEX: usize = 64;

/// One declared cluster, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredCluster {
    /// `TYPE.NAME` (its report tag).
    pub name: String,
    /// The cluster type (before the first `.`).
    pub cluster_type: String,
    /// The cluster name (after it).
    pub cluster_name: String,
    /// Its environment.
    pub environment: String,
    /// The channel it follows.
    pub channel: String,
    /// Its report key's fingerprint, 64 lowercase hex digits.
    pub report_key: String,
}

/// A Fleet file read for `--fleet FILE`: its text (for a lossless edit) and what it declares.
#[derive(Debug, Clone)]
pub struct FleetFile {
    /// The file, as named (for messages).
    pub path: String,
    /// Its text as read.
    pub text: String,
    /// `spec.environments`.
    pub environments: Vec<String>,
    /// The platform's cluster types (`cluster-types/*.yaml` beside the file).
    pub cluster_types: BTreeSet<String>,
    /// `spec.clusters`, checked, in file order.
    pub clusters: Vec<DeclaredCluster>,
}

fn err(path: &str, message: impl Into<String>) -> PlatformError {
    PlatformError::File { path: path.to_string(), message: message.into() }
}

/// A DNS-1123 label: what cluster type, environment and workload names must be.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A full report key fingerprint: 64 hex digits (any case; kept lowercase).
pub fn parse_fingerprint(text: &str) -> Result<String, String> {
    let fp = text.trim().to_ascii_lowercase();
    if fp.len() != FINGERPRINT_HEX || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{text:?} is not a report key fingerprint: give all {FINGERPRINT_HEX} hex digits of its SHA-256 fingerprint, as the cluster's agent logs it at start \
             (`report key (kept in …)`, fingerprint=…); a shorter prefix is not accepted"
        ));
    }
    Ok(fp)
}

/// Checks `spec.clusters` of the Fleet file `path` against its environments and the
/// platform's cluster types. Every error names the file and the entry.
pub fn check_clusters(path: &str, entries: &[ClusterEntry], environments: &[String], cluster_types: &BTreeSet<String>) -> Result<Vec<DeclaredCluster>, PlatformError> {
    let mut out = Vec::with_capacity(entries.len());
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let at = |m: String| err(path, format!("spec.clusters[{i}] ({}): {m}", e.name));
        let (cluster_type, cluster_name) =
            e.name.split_once('.').ok_or_else(|| at("name must be TYPE.NAME (the cluster's report tag), e.g. edge.factory-lyon-1".into()))?;
        drover_proto::report::check_cluster_type(cluster_type).map_err(at)?;
        drover_proto::report::check_cluster_name(cluster_name).map_err(at)?;
        if !cluster_types.contains(cluster_type) {
            return Err(at(format!("there is no cluster type {cluster_type:?} (cluster-types/{cluster_type}.yaml); the platform has {cluster_types:?}")));
        }
        if !environments.contains(&e.environment) {
            return Err(at(format!("environment {:?} is not in spec.environments {environments:?}", e.environment)));
        }
        if !drover_proto::reference::valid_tag(&e.channel) {
            return Err(at(format!("channel {:?} is not a tag (letters, digits, '_', '.', '-'; at most 128)", e.channel)));
        }
        let report_key = parse_fingerprint(&e.report_key).map_err(|m| at(format!("reportKey {m}")))?;
        if let Some(first) = names.insert(&e.name, i) {
            return Err(at(format!("declared twice (also spec.clusters[{first}]); one entry per cluster")));
        }
        if let Some(first) = keys.insert(report_key.clone(), i) {
            return Err(at(format!(
                "its reportKey is also declared for spec.clusters[{first}] ({}): every cluster signs with a key of its own",
                entries[first].name
            )));
        }
        out.push(DeclaredCluster {
            name: e.name.clone(),
            cluster_type: cluster_type.to_string(),
            cluster_name: cluster_name.to_string(),
            environment: e.environment.clone(),
            channel: e.channel.clone(),
            report_key,
        });
    }
    Ok(out)
}

/// Parses the text of a Fleet file `path`: header and `spec.environments` checked.
pub fn parse(path: &str, text: &str) -> Result<FleetDoc, PlatformError> {
    let fleet: FleetDoc = serde_yaml_ng::from_str(text).map_err(|e| err(path, e.to_string()))?;
    if fleet.api_version != super::model::API_VERSION {
        return Err(err(path, format!("apiVersion is {:?}; platform files use {:?}", fleet.api_version, super::model::API_VERSION)));
    }
    if fleet.kind != "Fleet" {
        return Err(err(path, format!("kind is {:?}; this file must be kind \"Fleet\"", fleet.kind)));
    }
    let environments = &fleet.spec.environments;
    if environments.is_empty() {
        return Err(err(path, "spec.environments is empty; list the environments in promotion order, e.g. [dev, staging, prod]"));
    }
    for (i, e) in environments.iter().enumerate() {
        if !valid_name(e) {
            return Err(err(path, format!("environment name {e:?} must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit")));
        }
        if environments[..i].contains(e) {
            return Err(err(path, format!("spec.environments lists {e:?} twice")));
        }
    }
    Ok(fleet)
}

/// The cluster types of the platform whose Fleet file is `file`: the names of
/// `cluster-types/*.yaml` (or `.yml`) beside it.
pub fn cluster_types_beside(file: &Path) -> Result<BTreeSet<String>, PlatformError> {
    let dir = file.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p }).unwrap_or(Path::new(".")).join("cluster-types");
    let shown = dir.display().to_string();
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        err(
            &file.display().to_string(),
            format!("its cluster types are read from {shown} (the platform's layout: fleet.yaml beside cluster-types/): {e}; carry that directory with the file"),
        )
    })?;
    let mut out = BTreeSet::new();
    for entry in rd.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".yaml").or_else(|| name.strip_suffix(".yml")) {
            out.insert(stem.to_string());
        }
    }
    Ok(out)
}

/// Reads and checks the Fleet file `file` (`--fleet FILE`).
pub fn load(file: &Path) -> Result<FleetFile, PlatformError> {
    let path = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|e| err(&path, format!("cannot read the Fleet file: {e}")))?;
    let cluster_types = cluster_types_beside(file)?;
    from_text(&path, text, cluster_types)
}

/// [`load`] of `text` as the file `path` with the platform's `cluster_types`.
pub fn from_text(path: &str, text: String, cluster_types: BTreeSet<String>) -> Result<FleetFile, PlatformError> {
    let doc = parse(path, &text)?;
    let clusters = check_clusters(path, &doc.spec.clusters, &doc.spec.environments, &cluster_types)?;
    Ok(FleetFile { path: path.to_string(), text, environments: doc.spec.environments, cluster_types, clusters })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP_A: &str = "3f9a0c2d41b7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const FP_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn file(clusters: &str) -> String {
        format!("apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, prod]\n  clusters:\n{clusters}")
    }

    fn types() -> BTreeSet<String> {
        ["edge".to_string()].into()
    }

    fn error(clusters: &str) -> String {
        from_text("fleet.yaml", file(clusters), types()).unwrap_err().to_string()
    }

    #[test]
    fn entries_are_checked_by_name() {
        let ok = from_text(
            "fleet.yaml",
            file(&format!("    - {{name: edge.a, environment: prod, channel: prod-ring0, reportKey: {}}}\n", FP_A.to_uppercase())),
            types(),
        )
        .unwrap();
        assert_eq!(ok.clusters[0].report_key, FP_A, "kept lowercase");
        assert_eq!((ok.clusters[0].cluster_type.as_str(), ok.clusters[0].cluster_name.as_str()), ("edge", "a"));
        let e = error("    - {name: edge.a, environment: prod, channel: prod-ring0, reportKey: 3f9a0c2d41b7}\n");
        assert!(e.contains("fleet.yaml: spec.clusters[0] (edge.a): reportKey") && e.contains("64 hex digits"), "{e}");
        let e = error(&format!("    - {{name: cloud.a, environment: prod, channel: c, reportKey: {FP_A}}}\n"));
        assert!(e.contains("no cluster type \"cloud\""), "{e}");
        let e = error(&format!("    - {{name: edge.a, environment: qa, channel: c, reportKey: {FP_A}}}\n"));
        assert!(e.contains("environment \"qa\" is not in spec.environments"), "{e}");
        let two = format!("    - {{name: edge.a, environment: prod, channel: c, reportKey: {FP_A}}}\n    - {{name: edge.a, environment: prod, channel: c, reportKey: {FP_B}}}\n");
        assert!(error(&two).contains("spec.clusters[1] (edge.a): declared twice (also spec.clusters[0])"), "{}", error(&two));
        let shared = format!("    - {{name: edge.a, environment: prod, channel: c, reportKey: {FP_A}}}\n    - {{name: edge.b, environment: prod, channel: c, reportKey: {FP_A}}}\n");
        assert!(error(&shared).contains("also declared for spec.clusters[0] (edge.a)"), "{}", error(&shared));
        let e = error(&format!("    - {{name: edge, environment: prod, channel: c, reportKey: {FP_A}}}\n"));
        assert!(e.contains("TYPE.NAME"), "{e}");
        let e = error(&format!("    - {{name: edge.a, environment: prod, channel: c, reportKey: {FP_A}, owner: me}}\n"));
        assert!(e.contains("owner"), "unknown fields are errors: {e}");
    }
}
