//! Health rules in the platform model (docs/platform.md, "Health rules"): `fleet.yaml`
//! `spec.healthChecks` (every cluster type), a cluster type's `healthChecks` (its
//! clusters), a workload's `spec.healthChecks` (the clusters it is assigned to). Each list
//! is checked and compiled when the platform is loaded (errors name the file and the rule);
//! per (environment, cluster type) they are composed into the bundle's rules: for one
//! apiVersion and kind a workload's rule wins over the cluster type's, which wins over the
//! fleet's; two assigned workloads with different rules for the same kind are an error.

use std::collections::BTreeMap;

use drover_proto::health::{normalized, HealthRule, Rules};

use super::error::PlatformError;

/// Checks (compiles) the rules of `field` in the file `path`.
pub fn checked(path: &str, field: &str, rules: Vec<HealthRule>) -> Result<Vec<HealthRule>, PlatformError> {
    Rules::compile(&rules).map_err(|e| PlatformError::File { path: path.to_string(), message: format!("{field}: {e}") })?;
    Ok(rules)
}

/// One layer of rules and the file it came from.
pub struct Layer<'a> {
    /// The file (for messages).
    pub file: &'a str,
    /// Its rules.
    pub rules: &'a [HealthRule],
}

/// The bundle's rules from the fleet's, the cluster type's and the assigned workloads'
/// layers (lowest first; `workloads` are peers). Sorted, as the config holds them.
pub fn compose(fleet: Layer<'_>, cluster_type: Layer<'_>, workloads: &[Layer<'_>]) -> Result<Vec<HealthRule>, String> {
    let key = |r: &HealthRule| (r.api_version.clone(), r.kind.clone());
    let mut out: BTreeMap<(String, String), HealthRule> = BTreeMap::new();
    for r in fleet.rules.iter().chain(cluster_type.rules) {
        out.insert(key(r), r.clone());
    }
    let mut from_workload: BTreeMap<(String, String), (&str, &HealthRule)> = BTreeMap::new();
    for w in workloads {
        for r in w.rules {
            if let Some((other, before)) = from_workload.insert(key(r), (w.file, r)) {
                if before != r {
                    return Err(format!(
                        "{} and {} give different health rules for {}; one rule per kind: keep one (or move it to the cluster type or fleet.yaml)",
                        other,
                        w.file,
                        r.name()
                    ));
                }
            }
        }
    }
    out.extend(from_workload.into_iter().map(|(k, (_, r))| (k, r.clone())));
    normalized(out.into_values().collect()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: &str, current: &str) -> HealthRule {
        HealthRule { api_version: "x.dev/v1".into(), kind: kind.into(), current: current.into(), failed: None, in_progress: None }
    }

    #[test]
    fn the_most_specific_rule_wins_and_peers_must_agree() {
        let fleet = [rule("A", "false"), rule("B", "false")];
        let ct = [rule("B", "true")];
        let w1 = [rule("A", "status.ok"), rule("C", "true")];
        let w2 = [rule("C", "true")];
        let got = compose(Layer { file: "f", rules: &fleet }, Layer { file: "c", rules: &ct }, &[Layer { file: "w1", rules: &w1 }, Layer { file: "w2", rules: &w2 }]).unwrap();
        let currents: Vec<(&str, &str)> = got.iter().map(|r| (r.kind.as_str(), r.current.as_str())).collect();
        assert_eq!(currents, [("A", "status.ok"), ("B", "true"), ("C", "true")]);
        let w3 = [rule("C", "false")];
        let e = compose(Layer { file: "f", rules: &[] }, Layer { file: "c", rules: &[] }, &[Layer { file: "w1", rules: &w1 }, Layer { file: "w3", rules: &w3 }]).unwrap_err();
        assert!(e.contains("w1") && e.contains("w3") && e.contains("C (x.dev/v1)"), "{e}");
    }
}
