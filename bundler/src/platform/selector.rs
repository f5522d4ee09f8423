//! Kubernetes-style label selectors over cluster-type labels (`matchLabels`,
//! `matchExpressions` with In, NotIn, Exists, DoesNotExist; `{}` selects all).

use std::collections::BTreeMap;

use serde::Deserialize;

/// A label selector; all terms must hold (AND).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// Values for `In` / `NotIn` (must be empty for `Exists` / `DoesNotExist`).
    #[serde(default)]
    pub values: Vec<String>,
}

/// A `matchExpressions` operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Operator {
    /// The label is present and its value is one of `values`.
    In,
    /// The label is absent, or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl LabelSelector {
    /// Checks the selector is well formed (In/NotIn need values, Exists/DoesNotExist none).
    pub fn validate(&self) -> Result<(), String> {
        for (i, r) in self.match_expressions.iter().enumerate() {
            match r.operator {
                Operator::In | Operator::NotIn if r.values.is_empty() => {
                    return Err(format!(
                        "spec.selector.matchExpressions[{i}] (key {:?}): operator {:?} needs at least one value",
                        r.key, r.operator
                    ))
                }
                Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
                    return Err(format!(
                        "spec.selector.matchExpressions[{i}] (key {:?}): operator {:?} takes no values; remove `values`",
                        r.key, r.operator
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// True when `labels` satisfy every term.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let got = labels.get(&r.key);
                match r.operator {
                    Operator::In => got.is_some_and(|v| r.values.contains(v)),
                    Operator::NotIn => got.is_none_or(|v| !r.values.contains(v)),
                    Operator::Exists => got.is_some(),
                    Operator::DoesNotExist => got.is_none(),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selector_terms() {
        let s: LabelSelector = serde_yaml_ng::from_str(
            "matchLabels: {gpu: 'true'}\nmatchExpressions:\n- {key: site, operator: In, values: [edge, cloud]}\n- {key: tier, operator: NotIn, values: [lab]}\n- {key: legacy, operator: DoesNotExist}\n- {key: region, operator: Exists}\n",
        )
        .unwrap();
        s.validate().unwrap();
        assert!(s.matches(&labels(&[("gpu", "true"), ("site", "edge"), ("region", "eu")])));
        assert!(!s.matches(&labels(&[("gpu", "true"), ("site", "edge"), ("region", "eu"), ("tier", "lab")])));
        assert!(!s.matches(&labels(&[("gpu", "true"), ("site", "edge")])));
        assert!(!s.matches(&labels(&[("gpu", "true"), ("site", "edge"), ("region", "eu"), ("legacy", "x")])));
        assert!(LabelSelector::default().matches(&labels(&[])));
    }
}
