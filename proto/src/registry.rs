//! Registry access (OCI distribution API over `reqwest`, rustls): manifests and blobs
//! with size caps enforced while streaming and digest checks, pushes, tag lists, and
//! the one-request `HEAD` the agent polls with. Every request has a total deadline;
//! explicit credentials go only to their registry; authorisation is learnt from the
//! registry's challenges and reused (see `docs/registries.md`).

mod authorize;
mod diagnose;
mod request;
mod tags;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::Method;

use crate::auth::HostCredentials;
use crate::digest::{sha256_digest, verify_digest};
use crate::error::StoreError;
use crate::media;
use crate::reference::RegistryRef;
use authorize::{Authorizer, Scope};
use request::{read_capped, Call, Engine};

pub use request::MIN_TRANSFER_RATE;

/// Media types accepted when fetching manifests.
pub const MANIFEST_ACCEPT: &[&str] = &[media::OCI_MANIFEST, media::DOCKER_MANIFEST, media::OCI_INDEX];

/// The per-request deadline when neither [`RegistryOptions::timeout`] nor
/// `DROVER_REGISTRY_TIMEOUT` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variable that sets the registry timeout (e.g. `2s`, `1m`).
pub const TIMEOUT_ENV: &str = "DROVER_REGISTRY_TIMEOUT";

/// Largest tag list page read.
const MAX_TAG_PAGE: u64 = 4 << 20;
/// Most tags read from one repository: far above a channel's history or a fleet's reports
/// (one tag per cluster), far below what fills memory. Past it the listing is an error.
pub const MAX_TAGS: usize = 100_000;
/// Most tag list pages followed (`Link`) for one listing.
pub const MAX_TAG_PAGES: usize = 1_000;
/// Manifest size cap when a `HEAD` answer lacks a digest and the manifest is hashed.
const MAX_HEAD_MANIFEST: u64 = 4 << 20;

/// How to reach registries: the flags shared by every command (docs/design.md §2).
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Use plain HTTP instead of HTTPS.
    pub plain_http: bool,
    /// Extra CA certificate(s) (PEM) to trust besides the system ones.
    pub ca_file: Option<PathBuf>,
    /// Explicit credentials, bound to one registry host; every other host gets what the
    /// Docker config holds for it.
    pub credentials: Option<HostCredentials>,
    /// Total deadline of one request (headers; bodies get this plus their size at
    /// [`MIN_TRANSFER_RATE`]). `None`: `DROVER_REGISTRY_TIMEOUT`, else [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// How the program takes explicit credentials (e.g. `drover`'s flags), named when a
    /// registry wants some; `None` for a program that reads the Docker config only.
    pub credential_flags: Option<&'static str>,
}

impl RegistryOptions {
    /// The effective per-request deadline: the option, else `DROVER_REGISTRY_TIMEOUT`,
    /// else [`DEFAULT_TIMEOUT`]. The one place the variable is read.
    pub fn effective_timeout(&self) -> Result<Duration, StoreError> {
        if let Some(t) = self.timeout {
            return Ok(t);
        }
        match std::env::var(TIMEOUT_ENV) {
            Ok(v) => parse_timeout(&v).map_err(|e| StoreError::Config(format!("{TIMEOUT_ENV}={v:?}: {e}"))),
            Err(_) => Ok(DEFAULT_TIMEOUT),
        }
    }
}

/// Parses a registry timeout (`30s`, `2m`, `1500ms`); zero is refused.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("not a duration ({e}); write e.g. 30s or 2m"))?;
    if d.is_zero() {
        return Err("the registry timeout must be more than zero".into());
    }
    Ok(d)
}

/// A registry client: one per process, shared by all operations (clones share the
/// connection pool and what was learnt about authentication).
#[derive(Clone)]
pub struct RegistryClient {
    engine: Arc<Engine>,
    opts: RegistryOptions,
}

impl RegistryClient {
    /// Builds a client from the shared flags.
    pub fn new(opts: RegistryOptions) -> Result<Self, StoreError> {
        let timeout = opts.effective_timeout()?;
        let http = request::http_client(timeout, opts.ca_file.as_ref(), true)?;
        let engine = Engine {
            http,
            plain_http: opts.plain_http,
            ca_file: opts.ca_file.clone(),
            timeout,
            auth: Authorizer::new(opts.credentials.clone(), opts.credential_flags),
            fresh: std::sync::OnceLock::new(),
        };
        Ok(RegistryClient { engine: Arc::new(engine), opts })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &RegistryOptions {
        &self.opts
    }

    /// The per-request deadline in force.
    pub fn timeout(&self) -> Duration {
        self.engine.timeout
    }

    fn url(&self, r: &RegistryRef, tail: &str) -> String {
        format!("{}://{}/v2/{}/{tail}", self.engine.scheme(), r.registry, r.repository)
    }

    fn call<'a>(&self, r: &'a RegistryRef, method: Method, tail: &str, scope: Scope, what: &'a str) -> Call<'a> {
        Call {
            method,
            url: self.url(r, tail),
            registry: &r.registry,
            repository: &r.repository,
            scope,
            accept: None,
            content_type: None,
            body: None,
            what,
        }
    }

    /// Resolves a tag (or digest) to the manifest digest with one `HEAD` request.
    /// Returns `None` when the manifest does not exist.
    pub async fn head(&self, r: &RegistryRef) -> Result<Option<String>, StoreError> {
        let what = format!("HEAD {r}");
        let accept = MANIFEST_ACCEPT.join(", ");
        let lookup = r.lookup().unwrap_or("latest");
        let call = Call { accept: Some(&accept), ..self.call(r, Method::HEAD, &format!("manifests/{lookup}"), Scope::Pull, &what) };
        let res = self.engine.send(&call).await?;
        match res.status().as_u16() {
            200 => match res.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()) {
                Some(d) if crate::digest::is_valid_digest(d) => Ok(Some(d.to_string())),
                // No (usable) digest header: hash the manifest itself.
                _ => Ok(Some(self.manifest(r, MAX_HEAD_MANIFEST).await?.1)),
            },
            404 => Ok(None),
            _ => Err(self.engine.unexpected(&what, res).await),
        }
    }

    /// Fetches a manifest by tag or digest, refusing more than `max` bytes (stops
    /// reading there) and checking its digest against the reference's digest when it has
    /// one, or else against the `Docker-Content-Digest` the registry answered with (the
    /// manifest it holds under the tag: bytes that differ were damaged on the way).
    /// Returns bytes and digest.
    pub async fn manifest(&self, r: &RegistryRef, max: u64) -> Result<(Vec<u8>, String), StoreError> {
        let what = format!("manifest {r}");
        let accept = MANIFEST_ACCEPT.join(", ");
        let lookup = r.lookup().unwrap_or("latest");
        let call = Call { accept: Some(&accept), ..self.call(r, Method::GET, &format!("manifests/{lookup}"), Scope::Pull, &what) };
        let res = self.engine.send(&call).await?;
        match res.status().as_u16() {
            200 => {}
            404 => return Err(StoreError::NotFound(what)),
            _ => return Err(self.engine.unexpected(&what, res).await),
        }
        let named = res
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| crate::digest::is_valid_digest(d))
            .map(str::to_string);
        let body = read_capped(res, max, &what, &self.engine).await?;
        let digest = sha256_digest(&body);
        if let Some(expected) = r.digest.as_ref().or(named.as_ref()) {
            if &digest != expected {
                return Err(StoreError::DigestMismatch { what, expected: expected.clone(), actual: digest });
            }
        }
        Ok((body, digest))
    }

    /// Fetches a blob, streaming with a size cap, and checks its digest.
    pub async fn blob(&self, r: &RegistryRef, digest: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        let what = format!("blob {digest} in {}", r.repository_url());
        let call = self.call(r, Method::GET, &format!("blobs/{digest}"), Scope::Pull, &what);
        let res = self.engine.send(&call).await?;
        match res.status().as_u16() {
            200 => {}
            404 => return Err(StoreError::NotFound(what)),
            _ => return Err(self.engine.unexpected(&what, res).await),
        }
        let data = read_capped(res, max, &what, &self.engine).await?;
        verify_digest(&data, digest).map_err(|actual| StoreError::DigestMismatch { what, expected: digest.into(), actual })?;
        Ok(data)
    }

    /// True when the repository already holds the blob.
    pub async fn blob_exists(&self, r: &RegistryRef, digest: &str) -> Result<bool, StoreError> {
        let what = format!("HEAD blob {digest} in {}", r.repository_url());
        let call = self.call(r, Method::HEAD, &format!("blobs/{digest}"), Scope::Pull, &what);
        let res = self.engine.send(&call).await?;
        match res.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(self.engine.unexpected(&what, res).await),
        }
    }

    /// Uploads a blob unless the repository already has it. Returns true when uploaded.
    pub async fn push_blob(&self, r: &RegistryRef, digest: &str, data: Vec<u8>) -> Result<bool, StoreError> {
        if self.blob_exists(r, digest).await? {
            return Ok(false);
        }
        self.upload_blob(r, digest, data).await?;
        Ok(true)
    }

    /// Uploads a blob without asking first whether the repository has it (`POST`, then
    /// `PUT` with the digest): for blobs that are new by construction, such as a fleet
    /// report's config, where the `HEAD` would be one wasted request per write.
    pub async fn upload_blob(&self, r: &RegistryRef, digest: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let what = format!("push blob {digest} to {}", r.repository_url());
        let start = self.call(r, Method::POST, "blobs/uploads/", Scope::Push, &what);
        let res = self.engine.send(&start).await?;
        if res.status().as_u16() != 202 {
            return Err(self.engine.unexpected(&what, res).await);
        }
        let location = res
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| StoreError::Transport { what: what.clone(), message: "upload started without a Location".into() })?;
        let base = reqwest::Url::parse(&start.url).expect("valid URL");
        let mut url = base
            .join(location)
            .map_err(|e| StoreError::Transport { what: what.clone(), message: format!("bad upload Location {location:?}: {e}") })?;
        url.query_pairs_mut().append_pair("digest", digest);
        let put = Call {
            url: url.to_string(),
            content_type: Some("application/octet-stream"),
            body: Some(Bytes::from(data)),
            ..self.call(r, Method::PUT, "", Scope::Push, &what)
        };
        let res = self.engine.send(&put).await?;
        match res.status().as_u16() {
            201 | 204 => Ok(()),
            // The PUT was sent again after its connection closed without an answer: the
            // first one may have completed the upload.
            404 if self.blob_exists(r, digest).await? => Ok(()),
            _ => Err(self.engine.unexpected(&what, res).await),
        }
    }

    /// Pushes manifest bytes under `r`'s tag (or digest). Returns the manifest digest.
    pub async fn push_manifest(&self, r: &RegistryRef, bytes: Vec<u8>, media_type: &str) -> Result<String, StoreError> {
        let what = format!("push manifest {r}");
        let digest = sha256_digest(&bytes);
        let lookup = r.lookup().unwrap_or(&digest).to_string();
        let call = Call {
            content_type: Some(media_type),
            body: Some(Bytes::from(bytes)),
            ..self.call(r, Method::PUT, &format!("manifests/{lookup}"), Scope::Push, &what)
        };
        let res = self.engine.send(&call).await?;
        match res.status().as_u16() {
            201 | 200 | 204 => Ok(digest),
            _ => Err(self.engine.unexpected(&what, res).await),
        }
    }

    /// Lists the repository's tags, following `Link` pagination on the registry's own
    /// host only, with a bound on pages ([`MAX_TAG_PAGES`], each at most 4 MiB) and on tags
    /// ([`MAX_TAGS`]): a listing past either is an error that names the bound.
    pub async fn list_tags(&self, r: &RegistryRef) -> Result<Vec<String>, StoreError> {
        let what = format!("list tags of {}", r.repository_url());
        let bound = |m: String| StoreError::Transport { what: what.clone(), message: m };
        let mut tags = Vec::new();
        let mut next = Some(self.url(r, "tags/list"));
        let mut pages = 0usize;
        while let Some(url) = next.take() {
            pages += 1;
            if pages > MAX_TAG_PAGES {
                return Err(bound(format!("the registry links more than {MAX_TAG_PAGES} pages of tags (the limit of pages read for one listing)")));
            }
            let call = Call { url, ..self.call(r, Method::GET, "", Scope::Pull, &what) };
            let res = self.engine.send(&call).await?;
            match res.status().as_u16() {
                200 => {}
                404 => return Ok(tags),
                _ => return Err(self.engine.unexpected(&what, res).await),
            }
            next = next_page(&call.url, res.headers().get("link").and_then(|v| v.to_str().ok())).map_err(bound)?;
            let body = read_capped(res, MAX_TAG_PAGE, &what, &self.engine).await?;
            tags::read_page(&body, &mut tags, MAX_TAGS).map_err(bound)?;
        }
        Ok(tags)
    }
}

/// The `rel="next"` URL of a `Link` header, resolved against `current`; an error when it
/// leaves the registry (another host, port or scheme): credentials and the listing stay there.
fn next_page(current: &str, link: Option<&str>) -> Result<Option<String>, String> {
    let Some(link) = link else { return Ok(None) };
    let Some(part) = link.split(',').find(|p| p.contains("rel=\"next\"") || p.contains("rel=next")) else { return Ok(None) };
    let Some(target) = part.split_once('<').and_then(|(_, t)| t.split_once('>')).map(|(t, _)| t) else { return Ok(None) };
    let base = reqwest::Url::parse(current).map_err(|e| format!("bad URL {current}: {e}"))?;
    let url = base.join(target).map_err(|e| format!("the registry's Link {target:?} is not a URL: {e}"))?;
    if url.scheme() != base.scheme() || request::authority(&url) != request::authority(&base) {
        return Err(format!(
            "the registry's next page is on another host ({}://{}); a tag list is only followed on the registry's own host",
            url.scheme(),
            request::authority(&url)
        ));
    }
    Ok(Some(url.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse() {
        assert_eq!(parse_timeout("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_timeout(" 1m ").unwrap(), Duration::from_secs(60));
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("soon").unwrap_err().contains("30s"));
    }

    #[test]
    fn link_pagination() {
        let cur = "https://r.example/v2/a/tags/list";
        assert_eq!(
            next_page(cur, Some("</v2/a/tags/list?last=x&n=100>; rel=\"next\"")).unwrap().as_deref(),
            Some("https://r.example/v2/a/tags/list?last=x&n=100")
        );
        assert_eq!(next_page(cur, None), Ok(None));
        assert!(next_page(cur, Some("<https://evil.example/v2/a/tags/list>; rel=\"next\"")).unwrap_err().contains("evil.example"));
        assert!(next_page(cur, Some("<http://r.example/v2/a/tags/list>; rel=\"next\"")).is_err(), "no downgrade to http");
        assert!(next_page(cur, Some("<https://r.example:444/x>; rel=\"next\"")).is_err(), "no other port");
    }
}
