//! Registry access on `oci-client`: manifests and blobs with size limits and digest
//! checks, pushes, and the one-request `HEAD` the agent polls with.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;

use crate::auth::{docker_config_credentials, Credentials};
use crate::digest::{sha256_digest, verify_digest};
use crate::media;
use crate::error::StoreError;
use crate::reference::RegistryRef;

/// Media types accepted when fetching manifests.
pub const MANIFEST_ACCEPT: &[&str] = &[media::OCI_MANIFEST, media::DOCKER_MANIFEST, media::OCI_INDEX];

/// How to reach registries: the flags shared by every command (docs/design.md §2).
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Use plain HTTP instead of HTTPS.
    pub plain_http: bool,
    /// Extra CA certificate (PEM) to trust.
    pub ca_file: Option<PathBuf>,
    /// Explicit credentials; otherwise the Docker config is consulted.
    pub credentials: Option<Credentials>,
}

/// A registry client: one per process, shared by all operations.
#[derive(Clone)]
pub struct RegistryClient {
    oci: oci_client::Client,
    http: reqwest::Client,
    opts: RegistryOptions,
    token_auth: Arc<AtomicBool>,
}

fn transport(what: impl Into<String>, e: impl std::fmt::Display) -> StoreError {
    StoreError::Transport { what: what.into(), message: e.to_string() }
}

fn is_not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown | OciErrorCode::BlobUnknown
            )
        }),
        _ => false,
    }
}

impl RegistryClient {
    /// Builds a client from the shared flags.
    pub fn new(opts: RegistryOptions) -> Result<Self, StoreError> {
        let mut cfg = ClientConfig {
            protocol: if opts.plain_http { ClientProtocol::Http } else { ClientProtocol::Https },
            use_monolithic_push: true,
            ..Default::default()
        };
        let mut http = reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(10));
        if let Some(ca) = &opts.ca_file {
            let pem = std::fs::read(ca).map_err(|e| StoreError::Config(format!("cannot read --ca-file {}: {e}", ca.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| StoreError::Config(format!("--ca-file {} is not a PEM certificate: {e}", ca.display())))?;
            http = http.tls_certs_merge([cert]);
            cfg.extra_root_certificates.push(Certificate { encoding: CertificateEncoding::Pem, data: pem });
        }
        cfg.connect_timeout = Some(std::time::Duration::from_secs(10));
        cfg.read_timeout = Some(std::time::Duration::from_secs(120));
        let oci = oci_client::Client::try_from(cfg).map_err(|e| StoreError::Config(format!("registry client: {e}")))?;
        let http = http.build().map_err(|e| StoreError::Config(format!("HTTP client: {e}")))?;
        Ok(RegistryClient { oci, http, opts, token_auth: Arc::new(AtomicBool::new(false)) })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &RegistryOptions {
        &self.opts
    }

    fn credentials(&self, registry: &str) -> Result<Option<Credentials>, StoreError> {
        match &self.opts.credentials {
            Some(c) => Ok(Some(c.clone())),
            None => docker_config_credentials(registry).map_err(StoreError::Config),
        }
    }

    fn auth(&self, registry: &str) -> Result<RegistryAuth, StoreError> {
        Ok(match self.credentials(registry)? {
            Some(c) => RegistryAuth::Basic(c.username, c.password),
            None => RegistryAuth::Anonymous,
        })
    }

    async fn prime(&self, r: &RegistryRef) -> Result<oci_client::Reference, StoreError> {
        let oci = r.to_oci();
        self.oci.store_auth_if_needed(oci.resolve_registry(), &self.auth(&r.registry)?).await;
        Ok(oci)
    }

    /// Resolves a tag (or digest) to the manifest digest with one `HEAD` request.
    /// Returns `None` when the manifest does not exist.
    pub async fn head(&self, r: &RegistryRef) -> Result<Option<String>, StoreError> {
        let what = format!("HEAD {r}");
        if !self.token_auth.load(Ordering::Relaxed) {
            let scheme = if self.opts.plain_http { "http" } else { "https" };
            let lookup = r.lookup().unwrap_or("latest");
            let url = format!("{scheme}://{}/v2/{}/manifests/{lookup}", r.registry, r.repository);
            let mut req = self.http.head(&url).header("Accept", MANIFEST_ACCEPT.join(", "));
            if let Some(c) = self.credentials(&r.registry)? {
                req = req.basic_auth(c.username, Some(c.password));
            }
            let res = req.send().await.map_err(|e| transport(&what, e))?;
            match res.status().as_u16() {
                200 => {
                    if let Some(d) = res.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()) {
                        return Ok(Some(d.to_string()));
                    }
                }
                404 => return Ok(None),
                401 => self.token_auth.store(true, Ordering::Relaxed),
                s if s >= 500 => return Err(transport(&what, format!("registry answered HTTP {s}"))),
                s => return Err(transport(&what, format!("registry answered HTTP {s}"))),
            }
        }
        let oci = self.prime(r).await?;
        match self.oci.fetch_manifest_digest(&oci, &self.auth(&r.registry)?).await {
            Ok(d) => Ok(Some(d)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(transport(what, e)),
        }
    }

    /// Fetches a manifest by tag or digest, refusing more than `max` bytes and checking
    /// its digest against the reference's digest when it has one. Returns bytes and digest.
    pub async fn manifest(&self, r: &RegistryRef, max: u64) -> Result<(Vec<u8>, String), StoreError> {
        let oci = self.prime(r).await?;
        let what = format!("manifest {r}");
        let (body, _) = match self.oci.pull_manifest_raw(&oci, &self.auth(&r.registry)?, MANIFEST_ACCEPT).await {
            Ok(x) => x,
            Err(e) if is_not_found(&e) => return Err(StoreError::NotFound(what)),
            Err(OciDistributionError::DigestError(e)) => {
                return Err(StoreError::DigestMismatch { what, expected: r.lookup().unwrap_or("").into(), actual: e.to_string() })
            }
            Err(e) => return Err(transport(what, e)),
        };
        if body.len() as u64 > max {
            return Err(StoreError::TooLarge { what, size: body.len() as u64, limit: max });
        }
        let digest = sha256_digest(&body);
        if let Some(expected) = &r.digest {
            if &digest != expected {
                return Err(StoreError::DigestMismatch { what, expected: expected.clone(), actual: digest });
            }
        }
        Ok((body.to_vec(), digest))
    }

    /// Fetches a blob, streaming with a size cap, and checks its digest.
    pub async fn blob(&self, r: &RegistryRef, digest: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        let oci = self.prime(r).await?;
        let what = format!("blob {digest} in {}", r.repository_url());
        let desc = oci_client::manifest::OciDescriptor { digest: digest.to_string(), ..Default::default() };
        let mut stream = match self.oci.pull_blob_stream(&oci, &desc).await {
            Ok(s) => s,
            Err(e) if is_not_found(&e) => return Err(StoreError::NotFound(what)),
            Err(e) => return Err(transport(what, e)),
        };
        if let Some(len) = stream.content_length {
            if len > max {
                return Err(StoreError::TooLarge { what, size: len, limit: max });
            }
        }
        let mut data = Vec::with_capacity(stream.content_length.unwrap_or(0).min(max) as usize);
        while let Some(chunk) = stream.stream.next().await {
            let chunk = chunk.map_err(|e| transport(&what, e))?;
            if (data.len() + chunk.len()) as u64 > max {
                return Err(StoreError::TooLarge { what, size: (data.len() + chunk.len()) as u64, limit: max });
            }
            data.extend_from_slice(&chunk);
        }
        verify_digest(&data, digest).map_err(|actual| StoreError::DigestMismatch { what, expected: digest.into(), actual })?;
        Ok(data)
    }

    /// True when the repository already holds the blob.
    pub async fn blob_exists(&self, r: &RegistryRef, digest: &str) -> Result<bool, StoreError> {
        let oci = self.prime(r).await?;
        self.oci.blob_exists(&oci, digest).await.map_err(|e| transport(format!("HEAD blob {digest} in {}", r.repository_url()), e))
    }

    /// Uploads a blob unless the repository already has it. Returns true when uploaded.
    pub async fn push_blob(&self, r: &RegistryRef, digest: &str, data: Vec<u8>) -> Result<bool, StoreError> {
        if self.blob_exists(r, digest).await? {
            return Ok(false);
        }
        let oci = self.prime(r).await?;
        self.oci
            .push_blob(&oci, data, digest)
            .await
            .map_err(|e| transport(format!("push blob {digest} to {}", r.repository_url()), e))?;
        Ok(true)
    }

    /// Pushes manifest bytes under `r`'s tag (or digest). Returns the manifest digest.
    pub async fn push_manifest(&self, r: &RegistryRef, bytes: Vec<u8>, media_type: &str) -> Result<String, StoreError> {
        let oci = self.prime(r).await?;
        let digest = sha256_digest(&bytes);
        let ct = reqwest::header::HeaderValue::from_str(media_type).map_err(|e| StoreError::Config(e.to_string()))?;
        self.oci.push_manifest_raw(&oci, bytes, ct).await.map_err(|e| transport(format!("push manifest {r}"), e))?;
        Ok(digest)
    }

    /// Lists the repository's tags.
    pub async fn list_tags(&self, r: &RegistryRef) -> Result<Vec<String>, StoreError> {
        let oci = self.prime(r).await?;
        match self.oci.list_tags(&oci, &self.auth(&r.registry)?, None, None).await {
            Ok(t) => Ok(t.tags),
            Err(e) if is_not_found(&e) => Ok(vec![]),
            Err(e) => Err(transport(format!("list tags of {}", r.repository_url()), e)),
        }
    }
}
