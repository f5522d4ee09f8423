//! Sending one registry request: a total deadline, the authorisation learnt so far
//! (retried once on a `401` challenge, never sent to another host), refusals turned into
//! [`StoreError::Auth`], transport failures into messages that say what to do, and
//! bodies read with a size cap and a deadline while they stream.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Method, Response};
use tokio::time::Instant;

use super::authorize::{Authorizer, Scheme, Scope, TokenFetch};
use super::diagnose;
use crate::error::StoreError;
use crate::text::clean;

/// The slowest transfer rate a blob body is allowed before its deadline passes: the
/// deadline of a body is the registry timeout plus its size at this rate.
pub const MIN_TRANSFER_RATE: u64 = 128 << 10;

/// One request.
pub(crate) struct Call<'a> {
    /// HTTP method.
    pub method: Method,
    /// Full URL.
    pub url: String,
    /// `HOST[:PORT]` of the reference (credentials belong to it).
    pub registry: &'a str,
    /// Repository (token scope).
    pub repository: &'a str,
    /// What the request needs.
    pub scope: Scope,
    /// `Accept` header.
    pub accept: Option<&'a str>,
    /// `Content-Type` header (with a body).
    pub content_type: Option<&'a str>,
    /// Request body.
    pub body: Option<Bytes>,
    /// Operation and reference, for messages.
    pub what: &'a str,
}

/// The HTTP side of a registry client, shared by its clones.
pub(crate) struct Engine {
    /// Connection pool, TLS roots, connect and idle-read timeouts.
    pub http: reqwest::Client,
    /// `--plain-http`.
    pub plain_http: bool,
    /// `--ca-file` (for messages).
    pub ca_file: Option<PathBuf>,
    /// The per-request deadline.
    pub timeout: Duration,
    /// What is known about authenticating to each registry.
    pub auth: Authorizer,
    /// A client that never reuses a connection, built on the first retry of a request
    /// whose kept-alive connection was closed before the answer.
    pub fresh: std::sync::OnceLock<reqwest::Client>,
}

/// The system's trusted roots plus `--ca-file`'s certificates.
fn trust_roots(ca_file: Option<&PathBuf>) -> Result<Vec<reqwest::Certificate>, StoreError> {
    let native = rustls_native_certs::load_native_certs();
    let mut roots: Vec<reqwest::Certificate> = native.certs.iter().filter_map(|c| reqwest::Certificate::from_der(c).ok()).collect();
    if let Some(ca) = ca_file {
        let pem = std::fs::read(ca).map_err(|e| StoreError::Config(format!("cannot read --ca-file {}: {e}", ca.display())))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| StoreError::Config(format!("--ca-file {} holds no PEM certificate", ca.display())))?;
        roots.extend(certs);
    }
    Ok(roots)
}

/// The HTTP client of a registry client: `reuse` keeps idle connections for the next
/// request; without it every request opens its own connection (the retry of a request
/// whose kept-alive connection was closed, [`Engine::send`]).
pub(crate) fn http_client(timeout: Duration, ca_file: Option<&PathBuf>, reuse: bool) -> Result<reqwest::Client, StoreError> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .read_timeout(timeout)
        .tls_certs_only(trust_roots(ca_file)?)
        .user_agent(concat!("drover/", env!("CARGO_PKG_VERSION")));
    if !reuse {
        b = b.pool_max_idle_per_host(0);
    }
    b.build().map_err(|e| StoreError::Config(format!("HTTP client: {e}")))
}

fn transport(what: &str, message: String) -> StoreError {
    StoreError::Transport { what: what.to_string(), message }
}

/// `HOST[:PORT]` of a URL, as references write it.
pub(crate) fn authority(url: &reqwest::Url) -> String {
    match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or("")),
        None => url.host_str().unwrap_or("").to_string(),
    }
}

impl Engine {
    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.plain_http {
            "http"
        } else {
            "https"
        }
    }

    fn diag<'a>(&'a self, host: &'a str) -> diagnose::Context<'a> {
        diagnose::Context { host, ca_file: self.ca_file.as_deref(), timeout: self.timeout }
    }

    /// Sends `call` with the authorisation it needs; a `401` teaches the scheme and the
    /// request is sent once more with fresh authorisation. Returns the response (any
    /// status but 400/401/403) once its headers arrived.
    pub async fn send(&self, call: &Call<'_>) -> Result<Response, StoreError> {
        let mut scheme = self.auth.scheme(call.registry);
        let gate = self.auth.gate(call.registry);
        let mut guard = None;
        if scheme.is_none() {
            let g = gate.lock().await;
            scheme = self.auth.scheme(call.registry);
            if scheme.is_none() {
                guard = Some(g);
            }
        }
        let fetch = TokenFetch { http: &self.http, plain_http: self.plain_http, diag: self.diag(call.registry) };
        let first = match &scheme {
            Some(s) => self.auth.authorization(&fetch, call.registry, call.repository, call.scope, s, false).await?,
            None => None,
        };
        let res = self.once(call, first.as_ref()).await?;
        if res.status().as_u16() != 401 {
            if scheme.is_none() {
                self.auth.learn(call.registry, Scheme::Anonymous);
            }
            drop(guard);
            return self.refused(call, res);
        }
        let challenge = res.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).and_then(Scheme::parse);
        let Some(learnt) = challenge else {
            drop(guard);
            return Err(self.auth_error(call, 401, "without a usable WWW-Authenticate challenge")?);
        };
        self.auth.learn(call.registry, learnt.clone());
        drop(guard);
        let again = self.auth.authorization(&fetch, call.registry, call.repository, call.scope, &learnt, true).await?;
        if again.is_none() || (learnt == Scheme::Basic && again == first) {
            return Err(self.auth_error(call, 401, "")?);
        }
        let res = self.once(call, again.as_ref()).await?;
        self.refused(call, res)
    }

    /// 401 and 403 become [`StoreError::Auth`].
    fn refused(&self, call: &Call<'_>, res: Response) -> Result<Response, StoreError> {
        match res.status().as_u16() {
            401 => Err(self.auth_error(call, 401, "")?),
            403 => Err(self.auth_error(call, 403, &format!("(access to {} denied)", call.repository))?),
            _ => Ok(res),
        }
    }

    fn auth_error(&self, call: &Call<'_>, status: u16, note: &str) -> Result<StoreError, StoreError> {
        let (_, source) = self.auth.credentials(call.registry)?;
        let path = reqwest::Url::parse(&call.url).map(|u| u.path().to_string()).unwrap_or_default();
        let note = if note.is_empty() { String::new() } else { format!(" {note}") };
        Ok(StoreError::Auth {
            what: call.what.to_string(),
            registry: call.registry.to_string(),
            detail: format!("it answered HTTP {status} to {} {path}{note}; {source}", call.method),
        })
    }

    /// One attempt: headers within the deadline (bodies sent within their own).
    async fn once(&self, call: &Call<'_>, authorization: Option<&HeaderValue>) -> Result<Response, StoreError> {
        let url = reqwest::Url::parse(&call.url).map_err(|e| transport(call.what, format!("bad URL {}: {e}", call.url)))?;
        let host = authority(&url);
        let mut req = self.http.request(call.method.clone(), url.clone());
        if let Some(a) = call.accept {
            req = req.header("Accept", a);
        }
        if let Some(ct) = call.content_type {
            req = req.header("Content-Type", ct);
        }
        // Credentials and tokens only ever go to the registry they belong to.
        if let Some(a) = authorization.filter(|_| host == call.registry && url.scheme() == self.scheme()) {
            req = req.header(AUTHORIZATION, a.clone());
        }
        let budget = match &call.body {
            Some(b) => {
                let len = b.len() as u64;
                req = req.header("Content-Length", len).body(b.clone());
                self.timeout + Duration::from_secs(len / MIN_TRANSFER_RATE)
            }
            None => self.timeout,
        };
        // A kept-alive connection the server closed just as the request went out gets the
        // request once more, on a new connection (another pooled one may have been closed
        // as well: an idle timeout closes them all), as Go's and curl's clients do. Every
        // request drover sends may be repeated: reads, manifest PUTs (same bytes, same
        // result), starting an upload; an upload's final PUT that the server did take
        // answers "upload unknown" the second time, and `upload_blob` then finds the blob.
        let request = req.build().map_err(|e| transport(call.what, format!("bad request {}: {e}", call.url)))?;
        let again = request.try_clone();
        let res = match tokio::time::timeout(budget, self.http.execute(request)).await {
            Ok(Err(e)) if diagnose::closed_before_answer(&e) && again.is_some() => {
                tracing::debug!(method = %call.method, url = %url, "connection closed before an answer; sending the request again on a new connection");
                let fresh = self.fresh_client()?;
                tokio::time::timeout(budget, fresh.execute(again.expect("checked"))).await
            }
            first => first,
        };
        let res = match res {
            Err(_) => return Err(transport(call.what, diagnose::timed_out(&host, budget))),
            Ok(Err(e)) => return Err(transport(call.what, diagnose::send_error(&e, &self.diag(&host)))),
            Ok(Ok(r)) => r,
        };
        tracing::debug!(method = %call.method, url = %url, status = res.status().as_u16(), authorized = authorization.is_some(), "registry request");
        if res.status().as_u16() == 400 && self.plain_http {
            let body = self.text(res, 4096).await.unwrap_or_default();
            if body.contains("HTTPS") || call.method == Method::HEAD {
                return Err(transport(call.what, diagnose::plain_http_to_https(&host, &body)));
            }
            return Err(transport(call.what, format!("registry answered HTTP 400: {}", clean::bounded(body.trim(), 300))));
        }
        Ok(res)
    }

    /// The client that opens a new connection for every request (built once, on demand:
    /// most runs never need it).
    fn fresh_client(&self) -> Result<&reqwest::Client, StoreError> {
        if let Some(c) = self.fresh.get() {
            return Ok(c);
        }
        let c = http_client(self.timeout, self.ca_file.as_ref(), false)?;
        Ok(self.fresh.get_or_init(|| c))
    }

    /// Reads at most `limit` bytes of an error body as text (best effort, bounded). The
    /// body is the registry's (untrusted): callers clean what they show of it
    /// ([`crate::text::clean`]).
    pub async fn text(&self, res: Response, limit: usize) -> Option<String> {
        let data = read_capped(res, limit as u64, "error body", self).await.ok()?;
        Some(String::from_utf8_lossy(&data).into_owned())
    }

    /// The error for an unexpected status: the registry's own error message when it sent one.
    pub async fn unexpected(&self, what: &str, res: Response) -> StoreError {
        let status = res.status().as_u16();
        let body = self.text(res, 4096).await.unwrap_or_default();
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["errors"][0]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| body.trim().to_string());
        // The registry's words, untrusted: one clean line of at most 300 characters.
        let detail = clean::bounded(&detail, 300);
        let message = if detail.is_empty() { format!("registry answered HTTP {status}") } else { format!("registry answered HTTP {status}: {detail}") };
        transport(what, message)
    }
}

/// Reads a response body, stopping at `limit` bytes ([`StoreError::OverLimit`]; a
/// declared length over it is refused before reading) or when it takes longer than the
/// registry timeout plus its size at [`MIN_TRANSFER_RATE`].
pub(crate) async fn read_capped(res: Response, limit: u64, what: &str, engine: &Engine) -> Result<Vec<u8>, StoreError> {
    read_body(res, limit, what, engine.ca_file.as_deref(), engine.timeout).await
}

/// [`read_capped`] for a client without an [`Engine`] at hand (the token service):
/// `ca_file` and `timeout` are what messages and the deadline need.
pub(crate) async fn read_body(mut res: Response, limit: u64, what: &str, ca_file: Option<&std::path::Path>, timeout: Duration) -> Result<Vec<u8>, StoreError> {
    let host = authority(res.url());
    if let Some(len) = res.content_length() {
        if len > limit {
            return Err(StoreError::TooLarge { what: what.to_string(), size: len, limit });
        }
    }
    let expected = res.content_length().unwrap_or(limit).min(limit);
    let budget = timeout + Duration::from_secs(expected / MIN_TRANSFER_RATE);
    let deadline = Instant::now() + budget;
    let mut data = Vec::with_capacity(expected.min(1 << 20) as usize);
    let diag = diagnose::Context { host: &host, ca_file, timeout };
    loop {
        let chunk = match tokio::time::timeout_at(deadline, res.chunk()).await {
            Err(_) => return Err(transport(what, format!("{host} did not finish sending {}", diagnose::timeout_hint(budget)))),
            Ok(Err(e)) => return Err(transport(what, diagnose::send_error(&e, &diag))),
            Ok(Ok(None)) => return Ok(data),
            Ok(Ok(Some(c))) => c,
        };
        if (data.len() + chunk.len()) as u64 > limit {
            return Err(StoreError::OverLimit { what: what.to_string(), limit });
        }
        data.extend_from_slice(&chunk);
    }
}
