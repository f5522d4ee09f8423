//! Turns transport failures into messages that say what is wrong and what to do: a
//! plain HTTP registry reached over HTTPS (`--plain-http`), an untrusted or mismatched
//! certificate (`--ca-file`), an HTTPS registry reached with `--plain-http`, a refused
//! connection, a timeout (the registry deadline).

use std::error::Error as StdError;
use std::path::Path;
use std::time::Duration;

use rustls::{CertificateError, InvalidMessage};

/// What a message needs to know about the connection.
pub(crate) struct Context<'a> {
    /// `HOST[:PORT]` contacted.
    pub host: &'a str,
    /// `--ca-file`, if given.
    pub ca_file: Option<&'a Path>,
    /// The per-request deadline.
    pub timeout: Duration,
}

/// How the deadline is named in messages (the one place that says how to change it).
pub(crate) fn timeout_hint(d: Duration) -> String {
    format!("within {} (the registry timeout; set DROVER_REGISTRY_TIMEOUT, e.g. 2m)", humantime::format_duration(d))
}

/// The message for a request that got no complete answer within `d`.
pub(crate) fn timed_out(host: &str, d: Duration) -> String {
    format!("no answer from {host} {}", timeout_hint(d))
}

/// True when the connection was closed before any answer came (hyper's "connection closed
/// before message completed"): on a kept-alive connection that the server closed while the
/// request was on its way, the request was not processed; it may be sent again.
pub(crate) fn closed_before_answer(e: &reqwest::Error) -> bool {
    find::<hyper::Error>(e).is_some_and(hyper::Error::is_incomplete_message)
}

/// The message for a request that failed before any HTTP answer.
pub(crate) fn send_error(e: &reqwest::Error, ctx: &Context<'_>) -> String {
    let host = ctx.host;
    if let Some(tls) = find::<rustls::Error>(e) {
        return tls_message(tls, ctx);
    }
    if e.is_timeout() {
        return timed_out(host, ctx.timeout);
    }
    let cause = chain(e);
    if e.is_connect() {
        return format!("cannot connect to {host}: {cause}");
    }
    format!("request to {host} failed: {cause}")
}

fn tls_message(e: &rustls::Error, ctx: &Context<'_>) -> String {
    let host = ctx.host;
    let name = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
    match e {
        rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType) => format!(
            "{host} answered plain HTTP to an HTTPS request; if the registry really serves plain HTTP (a local or test registry), pass --plain-http"
        ),
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => match ctx.ca_file {
            Some(ca) => format!(
                "the TLS certificate of {host} is not trusted: it is signed neither by a system CA nor by --ca-file {}; pass the CA certificate that signed it with --ca-file",
                ca.display()
            ),
            None => format!("the TLS certificate of {host} is not trusted (unknown issuer); pass the CA certificate (PEM) that signed it with --ca-file"),
        },
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }) => {
            format!("the TLS certificate of {host} is not valid for {name}: reach the registry by a name its certificate was issued for")
        }
        rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
            format!("the TLS certificate of {host} has expired")
        }
        rustls::Error::InvalidCertificate(other) => format!("the TLS certificate of {host} was rejected: {other:?}"),
        other => format!("TLS handshake with {host} failed: {other}"),
    }
}

/// The message for an HTTP 400 answer to a plain HTTP request (`body` is what it said):
/// a TLS port answers plain HTTP that way.
pub(crate) fn plain_http_to_https(host: &str, body: &str) -> String {
    format!(
        "{host} answered HTTP 400 to a plain HTTP request{}: it speaks HTTPS; run without --plain-http (with --ca-file if its CA is private)",
        if body.trim().is_empty() { String::new() } else { format!(" ({})", crate::text::clean::bounded(body.trim(), 300)) }
    )
}

/// The first error of type `T` in the chain, looking inside `std::io::Error`s (whose
/// `source()` skips the error they wrap).
fn find<'a, T: StdError + 'static>(e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(t);
        }
        if let Some(inner) = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            if let Some(t) = find::<T>(inner) {
                return Some(t);
            }
        }
        cur = err.source();
    }
    None
}

/// Every message of the chain, each once (`a: b: c`).
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}
