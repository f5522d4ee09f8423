//! Label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`) and
//! the field selectors `metadata.name` / `metadata.namespace` (`=`, `==`, `!=`).

use serde_json::Value;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector: all requirements must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(s: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected (values) in {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl Selector {
    /// Parses selector text; an error names the bad requirement.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for part in split_top(text) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let req = if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::Ne(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once("==") {
                Req::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once('=') {
                Req::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once(" notin ") {
                Req::NotIn(k.trim().to_string(), set_values(v)?)
            } else if let Some((k, v)) = p.split_once(" in ") {
                Req::In(k.trim().to_string(), set_values(v)?)
            } else if p.contains(' ') || p.contains('(') {
                return Err(format!("unable to parse requirement: {p:?}"));
            } else {
                Req::Exists(p.to_string())
            };
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    /// Whether `get(key)` (a label or field lookup) satisfies every requirement.
    pub fn matches_with(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k).as_deref() == Some(v),
            Req::Ne(k, v) => get(k).as_deref() != Some(v),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(&x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(&x)),
        })
    }

    /// Whether the object's labels match.
    pub fn matches_labels(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.matches_with(&|k| labels.get(k).and_then(Value::as_str).map(str::to_string))
    }

    /// Whether the object's fields (`metadata.name`, `metadata.namespace`) match.
    pub fn matches_fields(&self, obj: &Value) -> bool {
        self.matches_with(&|k| {
            let path: Vec<&str> = k.split('.').collect();
            path.iter()
                .try_fold(obj, |v, p| v.get(*p))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| (k == "metadata.namespace").then(String::new))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata":{"name":"a","labels":{"app":"web","tier":"fe"}}});
        for (s, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app", true),
            ("!app", false),
            ("!x", true),
            ("tier in (fe,be)", true),
            ("tier notin (fe)", false),
            ("app=web,tier in (be)", false),
            ("", true),
        ] {
            assert_eq!(Selector::parse(s).unwrap().matches_labels(&o), want, "{s}");
        }
        assert!(Selector::parse("metadata.name=a")
            .unwrap()
            .matches_fields(&o));
        assert!(Selector::parse("a b").is_err());
    }
}
