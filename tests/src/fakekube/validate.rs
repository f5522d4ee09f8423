//! The few validations the FAKE API server makes, with the real server's 422 messages:
//! object names (RFC 1123 subdomain; label for Namespaces and Services) and label
//! values. Everything else (schemas, field types) is accepted as sent.

use super::resources::ResourceInfo;
use super::status::ApiError;
use serde_json::Value;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_NAME_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

fn label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Checks the name and the label values of an object about to be written.
pub fn object(res: &ResourceInfo, name: &str, body: &Value) -> Result<(), ApiError> {
    let label_only =
        res.group.is_empty() && matches!(res.plural.as_str(), "namespaces" | "services");
    let (ok, msg) = if label_only {
        (dns_label(name), LABEL_NAME_MSG)
    } else {
        (dns_subdomain(name), SUBDOMAIN_MSG)
    };
    if !ok {
        return Err(ApiError::invalid(
            res,
            name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": {msg}"),
        ));
    }
    if res.group.is_empty() && res.plural == "services" {
        for (i, p) in body["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(port) = p["port"].as_i64().filter(|n| !(1..=65535).contains(n)) {
                return Err(ApiError::invalid(
                    res,
                    name,
                    &format!("spec.ports[{i}].port"),
                    &format!("Invalid value: {port}: must be between 1 and 65535, inclusive"),
                ));
            }
        }
    }
    if let Some(labels) = body["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            match v.as_str() {
                Some(s) if label_value(s) => {}
                Some(s) => return Err(ApiError::invalid(res, name, "metadata.labels", &format!("Invalid value: \"{s}\": {LABEL_VALUE_MSG}"))),
                None => return Err(ApiError::bad_request(format!("{} in version \"{}\" cannot be handled as a {}: json: cannot unmarshal {v} into Go struct field ObjectMeta.metadata.labels of type string (label {k:?})", res.kind, res.version, res.kind))),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels() {
        assert!(
            dns_subdomain("a.b-c.d1")
                && !dns_subdomain("Bad_Name")
                && !dns_subdomain("-a")
                && !dns_subdomain("")
        );
        assert!(dns_label("web-1") && !dns_label("a.b"));
        assert!(
            label_value("")
                && label_value("My_Value.1")
                && !label_value("bad value")
                && !label_value("-x")
        );
    }
}
