//! Errors as the real API server returns them: `kind: Status` objects with `reason`,
//! `code`, `message` and `details`, and the field errors a 422 collects.

use super::resources::ResourceInfo;
use serde_json::{json, Value};
use std::fmt;

/// An API error: HTTP code, Kubernetes reason and message, plus optional details.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `details` object, if any.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error with the given code, reason and message and no details.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// The reason the real server uses for an HTTP code.
    pub fn reason_for(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        }
    }

    fn with_details(mut self, res: &ResourceInfo, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": res.group, "kind": res.plural}));
        self
    }

    /// `configmaps "x" not found`.
    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified()),
        )
        .with_details(res, name)
    }

    /// `configmaps "x" already exists`.
    pub fn already_exists(res: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.qualified()),
        )
        .with_details(res, name)
    }

    /// The optimistic-concurrency conflict of an update with a stale resourceVersion.
    pub fn stale(res: &ResourceInfo, name: &str) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again", res.qualified())).with_details(res, name)
    }

    /// A 422 Invalid naming the object and the field (`why` is the error body, e.g.
    /// `Invalid value: "x": ...`).
    pub fn invalid(res: &ResourceInfo, name: &str, field: &str, why: &str) -> Self {
        let reason = if why.starts_with("Required value") {
            "FieldValueRequired"
        } else {
            "FieldValueInvalid"
        };
        Self::invalid_list(
            res,
            name,
            &[FieldError {
                field: field.to_string(),
                reason,
                body: why.to_string(),
            }],
        )
    }

    /// The real server's `NewInvalid`: `Kind.group "name" is invalid: ERR` with one
    /// error, `[ERR1, ERR2]` with several (repeated messages shown once), and one cause
    /// per error.
    pub fn invalid_list(res: &ResourceInfo, name: &str, errs: &[FieldError]) -> Self {
        let mut shown: Vec<String> = Vec::new();
        for e in errs {
            let s = e.to_string();
            if !shown.contains(&s) {
                shown.push(s);
            }
        }
        let agg = match shown.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {agg}", res.group_kind()),
        );
        let causes: Vec<Value> = errs
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.body, "field": c.field}))
            .collect();
        e.details =
            Some(json!({"name": name, "group": res.group, "kind": res.kind, "causes": causes}));
        e
    }

    /// A 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// The 404 for a path no resource serves.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// The `kind: Status` body.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// One entry of the real server's `field.ErrorList`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// Cause type, e.g. `FieldValueInvalid`.
    pub reason: &'static str,
    /// `ErrorBody()`, e.g. `Invalid value: "x": must not contain dots`.
    pub body: String,
}

impl FieldError {
    /// `field.Invalid` with a value already printed as Go prints it.
    pub fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
        FieldError {
            field: field.to_string(),
            reason: "FieldValueInvalid",
            body: format!("Invalid value: {value}: {detail}"),
        }
    }

    /// `field.Invalid` with a string value (quoted, as Go's `%q`).
    pub fn invalid_str(field: &str, value: &str, detail: &str) -> FieldError {
        Self::invalid(field, &format!("{value:?}"), detail)
    }

    /// `field.Required`, with an optional detail.
    pub fn required(field: &str, detail: &str) -> FieldError {
        let body = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        FieldError {
            field: field.to_string(),
            reason: "FieldValueRequired",
            body,
        }
    }

    /// `field.NotSupported`: the value and the supported ones.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.to_string(),
            reason: "FieldValueNotSupported",
            body: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body)
    }
}
