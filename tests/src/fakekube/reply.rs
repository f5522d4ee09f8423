//! HTTP answers of the FAKE API server: a JSON body with a status code, and an
//! [`ApiError`] as the `kind: Status` object the real server sends.

use super::status::ApiError;
use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::Value;

/// A JSON answer with HTTP status `code`.
pub(crate) fn json_response(code: u16, v: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .expect("response")
}

/// The `kind: Status` answer of an API error.
pub(crate) fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}
