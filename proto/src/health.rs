//! Health rules in CEL (docs/kubernetes.md, "Health rules"): the one rule the bundler
//! (`drover build/push --health FILE`, the platform model) and the agent (the bundle's
//! rules, its own `healthChecks`) share to read, check, compile and evaluate them.
//!
//! A rule names `apiVersion` and `kind` and up to three CEL expressions, `current`
//! (required), `failed` and `inProgress`, evaluated on the live object with its top-level
//! fields as variables (`status.phase == 'Running'`), as Flux's `healthCheckExprs` do.
//! Evaluation, for one object:
//!
//! 1. no top-level `status` yet: in progress (the controller has not written one);
//! 2. `inProgress` true: in progress; 3. `failed` true: failed; 4. `current` true: current;
//! 5. none true: in progress.
//!
//! An expression that cannot be evaluated (a field it reads is missing: `No such key`,
//! a type that does not fit) or that is not a boolean is an [`Verdict::Error`] naming the
//! rule, the expression and the error: never current, never silently unknown. Every
//! expression is compiled once (`cel`, the maintained successor of `cel-interpreter`) when
//! the rules are checked; a rule that does not compile is refused then, naming it.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::{Context, Program, Value as CelValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most rules one list may hold.
pub const MAX_RULES: usize = 256;
/// Longest expression accepted (bytes).
pub const MAX_EXPRESSION: usize = 4096;
/// Expressions are quoted in messages up to this many characters.
const QUOTED: usize = 160;

/// One health rule, as written in a bundle's config, a `--health` file or the agent's
/// `healthChecks`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthRule {
    /// The objects' `apiVersion` (`GROUP/VERSION`), matched exactly.
    pub api_version: String,
    /// The objects' `kind`.
    pub kind: String,
    /// True when the object is ready (required).
    pub current: String,
    /// True when the object failed (Degraded at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// True while the object is still getting there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
}

impl HealthRule {
    /// `Kind (apiVersion)`: how messages name the rule.
    pub fn name(&self) -> String {
        format!("{} ({})", self.kind, self.api_version)
    }

    /// `(field name, expression)` of the expressions present, in evaluation order.
    fn expressions(&self) -> Vec<(&'static str, &str)> {
        let mut v = Vec::with_capacity(3);
        if let Some(e) = &self.in_progress {
            v.push(("inProgress", e.as_str()));
        }
        if let Some(e) = &self.failed {
            v.push(("failed", e.as_str()));
        }
        v.push(("current", self.current.as_str()));
        v
    }
}

/// A rule list that cannot be used, naming the rule (and the expression) at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("health rule {rule}: {message}")]
pub struct RuleError {
    /// `Kind (apiVersion)`, or `#N` when the rule has no usable name.
    pub rule: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// Parses a YAML list of rules (a `--health` file, a `healthChecks` block): every rule
/// field checked, unknown fields refused. `origin` names the text in errors. The rules
/// are not compiled here ([`Rules::compile`] does that).
pub fn parse_yaml(text: &str, origin: &str) -> Result<Vec<HealthRule>, String> {
    let mut docs = crate::yaml::json_documents(text).filter(|d| !matches!(d, Ok(Value::Null)));
    let value = match docs.next() {
        None => return Ok(Vec::new()),
        Some(d) => d.map_err(|e| format!("{origin}: invalid YAML: {e}"))?,
    };
    if docs.next().is_some() {
        return Err(format!("{origin}: one YAML document expected: a list of health rules"));
    }
    from_value(value, origin)
}

/// Reads a list of rules from its JSON form (what [`parse_yaml`] and the agent's
/// configuration parse to).
pub fn from_value(value: Value, origin: &str) -> Result<Vec<HealthRule>, String> {
    let Value::Array(items) = value else {
        return Err(format!("{origin}: a list of health rules expected (- apiVersion: ..., kind: ..., current: ...)"));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| serde_json::from_value(item).map_err(|e| format!("{origin}: health rule #{}: {e}", i + 1)))
        .collect()
}

/// One compiled rule.
#[derive(Debug)]
pub struct CompiledRule {
    rule: HealthRule,
    /// `(field, expression text, program)` in evaluation order.
    programs: Vec<(&'static str, String, Program)>,
    /// The top-level fields the expressions read (only these are converted per object).
    variables: Vec<String>,
}

/// What a rule says about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `current` is true.
    Current,
    /// Not yet (why).
    InProgress(String),
    /// `failed` is true (which rule, which expression).
    Failed(String),
    /// An expression could not be evaluated or is not a boolean (rule, expression, error):
    /// the object is not ready.
    Error(String),
}

fn quoted(expr: &str) -> String {
    crate::text::clean::bounded(expr, QUOTED)
}

impl CompiledRule {
    /// Compiles every expression of `rule`.
    pub fn compile(rule: &HealthRule) -> Result<CompiledRule, RuleError> {
        let err = |message: String| RuleError { rule: rule.name(), message };
        if rule.api_version.trim().is_empty() || rule.kind.trim().is_empty() {
            return Err(err("apiVersion and kind are required".into()));
        }
        let mut programs = Vec::new();
        let mut variables: Vec<String> = Vec::new();
        for (field, expr) in rule.expressions() {
            if expr.trim().is_empty() {
                return Err(err(format!("{field} is empty")));
            }
            if expr.len() > MAX_EXPRESSION {
                return Err(err(format!("{field} is {} bytes, over the limit of {MAX_EXPRESSION}", expr.len())));
            }
            let program = Program::compile(expr).map_err(|e| {
                let first = e.to_string().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
                err(format!("{field} `{}` does not compile: {}", quoted(expr), crate::text::clean::bounded(&first, 400)))
            })?;
            for v in program.references().variables() {
                if !variables.iter().any(|x| x == v) {
                    variables.push(v.to_string());
                }
            }
            programs.push((field, expr.to_string(), program));
        }
        Ok(CompiledRule { rule: rule.clone(), programs, variables })
    }

    /// The rule as written.
    pub fn rule(&self) -> &HealthRule {
        &self.rule
    }

    /// Evaluates the rule on `object` (the live object as the API server returns it).
    pub fn evaluate(&self, object: &Value) -> Verdict {
        let name = self.rule.name();
        let Some(fields) = object.as_object() else {
            return Verdict::Error(format!("health rule {name}: the object is not a mapping"));
        };
        if !fields.contains_key("status") {
            return Verdict::InProgress(format!("no status yet (health rule {name})"));
        }
        let mut ctx = Context::default();
        for v in &self.variables {
            if let Some(value) = fields.get(v) {
                if let Err(e) = ctx.add_variable(v.clone(), value.clone()) {
                    return Verdict::Error(format!("health rule {name}: field {v} cannot be read: {e}"));
                }
            }
        }
        for (field, expr, program) in &self.programs {
            let said = match program.execute(&ctx) {
                Ok(CelValue::Bool(b)) => b,
                Ok(other) => {
                    return Verdict::Error(format!(
                        "health rule {name}: {field} `{}` is {}, not true or false",
                        quoted(expr),
                        crate::text::clean::bounded(&format!("{other:?}"), 80)
                    ))
                }
                Err(e) => {
                    return Verdict::Error(format!(
                        "health rule {name}: {field} `{}` cannot be evaluated: {}",
                        quoted(expr),
                        crate::text::clean::bounded(&e.to_string(), 200)
                    ))
                }
            };
            if said {
                return match *field {
                    "inProgress" => Verdict::InProgress(format!("health rule {name}: inProgress `{}` is true", quoted(expr))),
                    "failed" => Verdict::Failed(format!("health rule {name}: failed `{}` is true", quoted(expr))),
                    _ => Verdict::Current,
                };
            }
        }
        Verdict::InProgress(format!("health rule {name}: current `{}` is false", quoted(&self.rule.current)))
    }
}

/// A compiled rule list, one rule per (apiVersion, kind).
#[derive(Debug, Default, Clone)]
pub struct Rules {
    by_kind: BTreeMap<(String, String), Arc<CompiledRule>>,
}

impl Rules {
    /// Checks and compiles `rules`: at most [`MAX_RULES`], each compiling, no two for the
    /// same apiVersion and kind.
    pub fn compile(rules: &[HealthRule]) -> Result<Rules, RuleError> {
        if rules.len() > MAX_RULES {
            return Err(RuleError { rule: format!("#{}", MAX_RULES + 1), message: format!("{} rules, at most {MAX_RULES} are allowed", rules.len()) });
        }
        let mut by_kind = BTreeMap::new();
        for r in rules {
            let compiled = CompiledRule::compile(r)?;
            let key = (r.api_version.clone(), r.kind.clone());
            if by_kind.insert(key, Arc::new(compiled)).is_some() {
                return Err(RuleError { rule: r.name(), message: "given twice: one rule per apiVersion and kind".into() });
            }
        }
        Ok(Rules { by_kind })
    }

    /// `self` (the bundle's rules) over `lower` (the agent's): for a kind both name, the
    /// bundle's rule wins.
    pub fn over(&self, lower: &Rules) -> Rules {
        let mut by_kind = lower.by_kind.clone();
        by_kind.extend(self.by_kind.iter().map(|(k, v)| (k.clone(), v.clone())));
        Rules { by_kind }
    }

    /// The rule for objects of `api_version` and `kind`.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<&CompiledRule> {
        self.by_kind.get(&(api_version.to_string(), kind.to_string())).map(|r| r.as_ref())
    }

    /// True when there is no rule.
    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.by_kind.len()
    }
}

/// Sorts `rules` (by apiVersion, kind) and checks them ([`Rules::compile`]): the form a
/// bundle's config holds, so that the same rules give the same bytes.
pub fn normalized(mut rules: Vec<HealthRule>) -> Result<Vec<HealthRule>, RuleError> {
    rules.sort();
    Rules::compile(&rules)?;
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(current: &str, failed: Option<&str>) -> HealthRule {
        HealthRule {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            current: current.into(),
            failed: failed.map(Into::into),
            in_progress: None,
        }
    }

    #[test]
    fn phase_rule_progresses_then_is_current_or_failed() {
        let r = CompiledRule::compile(&rule("status.phase == 'Running'", Some("status.phase == 'Failed'"))).unwrap();
        assert!(matches!(r.evaluate(&json!({"spec": {}})), Verdict::InProgress(m) if m.contains("no status")));
        assert!(matches!(r.evaluate(&json!({"status": {"phase": "Pending"}})), Verdict::InProgress(m) if m.contains("current")));
        assert_eq!(r.evaluate(&json!({"status": {"phase": "Running"}})), Verdict::Current);
        let failed = r.evaluate(&json!({"status": {"phase": "Failed"}}));
        assert!(matches!(&failed, Verdict::Failed(m) if m.contains("Widget (example.com/v1)") && m.contains("status.phase == 'Failed'")), "{failed:?}");
    }

    #[test]
    fn a_missing_field_is_an_error_never_current() {
        let r = CompiledRule::compile(&rule("status.ready == true", None)).unwrap();
        let v = r.evaluate(&json!({"status": {"phase": "Running"}}));
        assert!(matches!(&v, Verdict::Error(m) if m.contains("status.ready == true") && m.contains("No such key: ready")), "{v:?}");
        let r = CompiledRule::compile(&rule("status.phase", None)).unwrap();
        assert!(matches!(r.evaluate(&json!({"status": {"phase": "x"}})), Verdict::Error(m) if m.contains("not true or false")));
        let r = CompiledRule::compile(&rule("has(status.ready) && status.ready", None)).unwrap();
        assert!(matches!(r.evaluate(&json!({"status": {}})), Verdict::InProgress(_)), "has() guards a missing field");
    }

    #[test]
    fn conditions_and_generation() {
        let r = CompiledRule::compile(&rule(
            "status.observedGeneration == metadata.generation && status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
            None,
        ))
        .unwrap();
        let mut o = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(r.evaluate(&o), Verdict::Current);
        o["status"]["observedGeneration"] = json!(1);
        assert!(matches!(r.evaluate(&o), Verdict::InProgress(_)));
    }

    #[test]
    fn bad_rules_are_named() {
        let e = Rules::compile(&[rule("status.phase ==", None)]).unwrap_err();
        assert_eq!(e.rule, "Widget (example.com/v1)");
        assert!(e.to_string().contains("current `status.phase ==` does not compile"), "{e}");
        assert!(!e.message.contains('\n'));
        let e = Rules::compile(&[rule("true", None), rule("false", None)]).unwrap_err();
        assert!(e.message.contains("twice"), "{e}");
        let e = Rules::compile(&[rule(" ", None)]).unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = parse_yaml("- apiVersion: a/v1\n  kind: K\n  curent: 'true'\n", "health.yaml").unwrap_err();
        assert!(e.contains("health.yaml") && e.contains("#1") && e.contains("curent"), "{e}");
        assert!(parse_yaml("apiVersion: a/v1\n", "h.yaml").unwrap_err().contains("a list"));
        assert!(parse_yaml("", "h.yaml").unwrap().is_empty());
    }

    #[test]
    fn the_bundle_rule_wins() {
        let bundle = Rules::compile(&[rule("status.phase == 'Running'", None)]).unwrap();
        let mut other = rule("true", None);
        other.kind = "Gadget".into();
        let local = Rules::compile(&[rule("false", None), other]).unwrap();
        let both = bundle.over(&local);
        assert_eq!(both.len(), 2);
        assert_eq!(both.get("example.com/v1", "Widget").unwrap().rule().current, "status.phase == 'Running'");
        assert!(both.get("example.com/v1", "Gadget").is_some());
        assert!(both.get("example.com/v2", "Widget").is_none(), "apiVersion matches exactly");
    }
}
