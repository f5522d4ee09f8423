//! The string formats the real API server checks, with its messages (apimachinery
//! `util/validation`, `api/validate/content` and `api/validation/path`): DNS-1123
//! subdomains and labels, DNS-1035 labels, URL path segments, label keys (qualified
//! names) and label values. Each check returns the real list of messages; empty = valid.

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `must be no more than N characters`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// apimachinery's `RegexError`: the message, examples and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        shown.join(" or ")
    )
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (any length).
fn label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && inner(&b[0])
        && inner(&b[b.len() - 1])
        && b.iter().all(|c| inner(c) || *c == b'-')
}

/// Matches the DNS-1123 subdomain regex (labels of any length joined by dots).
fn subdomain_shape(s: &str) -> bool {
    s.split('.').all(label_shape)
}

/// `IsDNS1123Label`: at most 63 characters of `[a-z0-9-]`, alphanumeric at both ends.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !label_shape(s) {
        if subdomain_shape(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: at most 253 characters, labels joined by dots.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !subdomain_shape(s) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`: like a DNS-1123 label but starting with a letter.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !(label_shape(s) && s.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `path.IsValidPathSegmentName`: not `.` or `..`, no `/` and no `%`.
pub fn path_segment(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| s.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn key_name_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsLabelKey` (a.k.a. `IsQualifiedName`): `[prefix/]name`, the prefix a DNS-1123
/// subdomain, the name at most 63 characters.
pub fn label_key(s: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = s.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &examples)
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !key_name_shape(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &examples)
        ));
    }
    errs
}

/// `IsLabelValue`: empty, or at most 63 characters shaped like a label key's name.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !(s.is_empty() || key_name_shape(s)) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_apimachinery_checks_them() {
        assert!(dns1123_subdomain("a.b-c.d1").is_empty());
        assert!(
            dns1123_subdomain(&format!("{}.example.com", "a".repeat(70))).is_empty(),
            "subdomain labels are not limited to 63"
        );
        assert_eq!(dns1123_subdomain("Bad_Name").len(), 1);
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec![max_len_error(253)]
        );
        assert!(!dns1123_subdomain("-a").is_empty() && !dns1123_subdomain("").is_empty());
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
        assert!(dns1123_label("a_b")[0].starts_with("a lowercase RFC 1123 label"));
        assert!(dns1123_label("123-abc").is_empty());
        assert!(dns1035_label("web-1").is_empty() && !dns1035_label("1web").is_empty());
        assert!(path_segment("system:aggregate-to-view").is_empty());
        assert_eq!(path_segment(".."), vec!["may not be '..'"]);
        assert_eq!(
            path_segment("a/b%c"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(label_key("app.kubernetes.io/managed-by").is_empty() && label_key("x").is_empty());
        assert_eq!(label_key("/x"), vec!["prefix part must be non-empty"]);
        assert!(label_key("a/b/c")[0].starts_with("a valid label key must consist"));
        assert!(label_key("bad key")[0].starts_with("name part must consist"));
        assert!(label_value("").is_empty() && label_value("My_Value.1").is_empty());
        assert!(!label_value("bad value").is_empty() && !label_value("-x").is_empty());
    }
}
