//! `drover export REF... --out FILE`: writes an OCI archive (docs/design.md §7, air gap) holding
//! every bundle with its config and layer AND its cosign signature manifest and payloads,
//! and the channel's signed statement (`<tag>.statement`, with its signatures) when there
//! is one. Ref names are `<repository>:<tag>` and `<repository>:sha256-<hex>.sig`. The archive
//! is deterministic: the same references (same digests) give byte-identical files. A
//! repository without a tag exports all its tags (a fleet reports repository, carried out
//! of an air gap for `drover fleet view --reports oci-archive:FILE`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use drover_proto::channel::statement;
use drover_proto::digest::{is_valid_digest, signature_tag};
use drover_proto::layout::Layout;
use drover_proto::manifest::Manifest;
use drover_proto::{media, Reference, Repo};
use serde::Serialize;

use crate::output::{progress_bar, warn, Report, Text};
use crate::regargs::RegistryArgs;

/// Largest blob export copies (bundles are far smaller; this bounds memory).
const MAX_BLOB: u64 = 512 << 20;
/// References fetched at once.
const CONCURRENCY: usize = 8;
/// Largest manifest export copies.
const MAX_MANIFEST: u64 = 4 << 20;

/// Arguments of `drover export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bundles to export, each with a tag: HOST/REPO:TAG (or oci:DIR:<repository>:<tag>); HOST/REPO alone exports every tag (e.g. a reports repository).
    #[arg(required = true, value_name = "REF")]
    references: Vec<String>,
    /// The OCI archive to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// One bundle written into the archive.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exported {
    /// The reference as given.
    pub reference: String,
    /// Its name in the archive, `<repository>:<tag>`.
    pub ref_name: String,
    /// Manifest digest.
    pub digest: String,
    /// True when its signature manifest was copied too.
    pub signed: bool,
    /// Signature layers copied.
    pub signature_layers: usize,
    /// A fleet report (never signed), not a bundle.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub report: bool,
    /// The channel statement carried with it (`<repository>:<tag>.statement`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<String>,
}

/// What `export` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    /// The archive written.
    pub out: String,
    /// Hex sha256 of the archive (carry it across with the file).
    pub sha256: String,
    /// Every bundle in it.
    pub bundles: Vec<Exported>,
    /// Number of blobs in it.
    pub blobs: usize,
}

impl Report for ExportReport {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self
            .bundles
            .iter()
            .map(|b| {
                let sig = match (b.report, b.signed) {
                    (true, _) => "- (fleet report)".into(),
                    (false, true) => format!("{} layer(s)", b.signature_layers),
                    (false, false) => "UNSIGNED".into(),
                };
                vec![b.ref_name.clone(), b.digest.clone(), sig]
            })
            .collect();
        out.table(&["REF NAME", "DIGEST", "SIGNATURE"], &rows);
        out.line(format!("wrote {} ({} blobs, sha256:{})", self.out, self.blobs, self.sha256));
    }
}

/// Runs `drover export`.
pub async fn run(args: Args) -> anyhow::Result<ExportReport> {
    let client = args.registry.client_for(&args.references)?;
    // Parse everything first: a typo in the last reference must not cost a long copy.
    let mut sources = Vec::new();
    for r in &args.references {
        let parsed = Reference::parse(r)?;
        let (repo, lookup) = Repo::open(&parsed, &client, false).with_context(|| format!("opening {r}"))?;
        let tag = match (&parsed, lookup) {
            (Reference::Registry(rr), Some(_)) if rr.tag.is_some() && rr.digest.is_none() => rr.tag.clone().unwrap_or_default(),
            (Reference::Registry(_), None) => {
                // A whole repository (e.g. PREFIX/drover-reports): every tag but signatures,
                // which travel with what they sign.
                for tag in every_tag(&repo, r).await? {
                    sources.push((format!("{r}:{tag}"), repo.clone(), repo.repository_name(), tag));
                }
                continue;
            }
            (Reference::Registry(rr), _) => anyhow::bail!(
                "{r}: export needs a tag (without @digest), e.g. {}:TAG, or the repository alone for all its tags; the tags are kept in the archive",
                rr.repository_url()
            ),
            (_, Some(t)) if is_valid_digest(&t) => anyhow::bail!(
                "{r}: the archive names every bundle <repository>:<tag>, and this one has neither; tag the verified digest first, \
                 e.g. `drover promote {r} oci:DIR:fleet/edge:prod --trust-key drover.pub`, then export oci:DIR:fleet/edge:prod"
            ),
            (_, Some(t)) => t,
            (_, None) => anyhow::bail!("{r}: name the manifest, oci:DIR:<repository>:<tag>"),
        };
        let repository = repo.repository_name();
        anyhow::ensure!(!repository.is_empty(), "{r}: the repository is unknown; use a registry reference or oci:DIR:<repository>:<tag>");
        sources.push((r.clone(), repo, repository, tag));
    }
    let staging = tempfile::Builder::new().prefix("drover-export-").tempdir().context("creating a staging directory")?;
    let layout = Layout::create(staging.path())?;
    let bar = progress_bar(sources.len());
    // Up to CONCURRENCY references at once, all in this task: the layout writes are
    // synchronous (never interleaved) and the index is sorted, so the archive does not
    // depend on completion order.
    use futures::StreamExt;
    let results: Vec<anyhow::Result<Exported>> =
        futures::stream::iter(sources.iter().map(|src| export_one(src, &layout, &bar))).buffered(CONCURRENCY).collect().await;
    let mut exported = Vec::with_capacity(results.len());
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for r in results {
        let e = r?;
        if let Some(prev) = names.insert(e.ref_name.clone(), e.digest.clone()) {
            anyhow::ensure!(prev == e.digest, "{} is given twice and resolved to {prev} and {}", e.ref_name, e.digest);
        }
        exported.push(e);
    }
    bar.finish_and_clear();
    drover_proto::ocitar::write(staging.path(), &args.out).with_context(|| format!("writing {}", args.out.display()))?;
    let blobs = std::fs::read_dir(staging.path().join("blobs/sha256")).map(|d| d.count()).unwrap_or(0);
    let sha256 = file_sha256(&args.out)?;
    Ok(ExportReport { out: args.out.display().to_string(), sha256, bundles: exported, blobs })
}

/// Every tag of a repository except signature and statement tags (they travel with what
/// they sign and the channel they place), sorted; refuses an empty repository.
async fn every_tag(repo: &Repo, r: &str) -> anyhow::Result<Vec<String>> {
    let mut tags: Vec<String> = repo
        .tags()
        .await
        .with_context(|| format!("listing the tags of {r}"))?
        .into_iter()
        .filter(|t| !t.ends_with(".sig") && !statement::is_statement_tag(t))
        .collect();
    tags.sort();
    anyhow::ensure!(!tags.is_empty(), "{r} has no tags to export");
    Ok(tags)
}

/// Copies one reference (bundle and, when present, its signature manifest and its
/// channel's statement) into the layout.
async fn export_one(src: &(String, Repo, String, String), layout: &Layout, bar: &indicatif::ProgressBar) -> anyhow::Result<Exported> {
    let (r, repo, repository, tag) = src;
    let mut exported = export_signed(r, repo, repository, tag, layout).await?;
    let is_bundle = !exported.report && exported.signed;
    if let Some(stmt) = statement::tag(tag).ok().filter(|_| is_bundle) {
        if repo.resolve(&stmt).await.with_context(|| format!("looking up {}", repo.describe(&stmt)))?.is_some() {
            let s = export_signed(&repo.describe(&stmt), repo, repository, &stmt, layout).await?;
            exported.statement = Some(s.ref_name);
        }
    }
    bar.inc(1);
    Ok(exported)
}

/// Copies the manifest `tag` names and, unless it is a fleet report, its signature manifest.
async fn export_signed(r: &str, repo: &Repo, repository: &str, tag: &str, layout: &Layout) -> anyhow::Result<Exported> {
    let ref_name = format!("{repository}:{tag}");
    let (bytes, digest) = repo.manifest(tag, MAX_MANIFEST).await.with_context(|| format!("fetching {r}"))?;
    copy_manifest(repo, layout, &bytes, &ref_name, r).await?;
    // Fleet reports are never signed: they travel as they are (docs/fleet.md).
    if Manifest::from_slice(&bytes).is_ok_and(|m| m.artifact_type.as_deref() == Some(media::REPORT_ARTIFACT_TYPE)) {
        return Ok(Exported { reference: r.to_string(), ref_name, digest, signed: false, signature_layers: 0, report: true, statement: None });
    }
    let sig_tag = signature_tag(&digest);
    let (signed, signature_layers) = match repo.manifest(&sig_tag, MAX_MANIFEST).await {
        Ok((sig_bytes, _)) => {
            let n = copy_manifest(repo, layout, &sig_bytes, &format!("{repository}:{sig_tag}"), &repo.describe(&sig_tag)).await?;
            (true, n)
        }
        Err(drover_proto::StoreError::NotFound(_)) => (false, 0),
        Err(e) => return Err(e).with_context(|| format!("looking up the signature {}", repo.describe(&sig_tag))),
    };
    if !signed {
        warn(format_args!("{r} ({digest}) has no signature; `drover import --trust-key PUB` will refuse it"));
    }
    Ok(Exported { reference: r.to_string(), ref_name, digest, signed, signature_layers, report: false, statement: None })
}

/// Copies a manifest's blobs (config, layers) and the manifest itself into the layout
/// under `ref_name`; every blob is digest-checked on read. Returns the number of layers.
async fn copy_manifest(repo: &Repo, layout: &Layout, bytes: &[u8], ref_name: &str, what: &str) -> anyhow::Result<usize> {
    let m = Manifest::from_slice(bytes).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    for d in std::iter::once(&m.config).chain(&m.layers) {
        anyhow::ensure!(d.size <= MAX_BLOB, "{what}: blob {} is {} bytes, over the export limit of {MAX_BLOB}", d.digest, d.size);
        if layout.has_blob(&d.digest) {
            continue;
        }
        let data = repo.blob(&d.digest, d.size.max(1)).await.with_context(|| format!("{what}: fetching blob {}", d.digest))?;
        anyhow::ensure!(data.len() as u64 == d.size, "{what}: blob {} is {} bytes, its descriptor says {}", d.digest, data.len(), d.size);
        layout.write_blob(&data)?;
    }
    let media_type = m.media_type.clone().unwrap_or_else(|| media::OCI_MANIFEST.to_string());
    let mut desc = drover_proto::manifest::Descriptor::of(&media_type, bytes);
    desc.artifact_type = m.artifact_type.clone();
    layout.write_blob(bytes)?;
    layout.set_ref(Some(ref_name), desc)?;
    Ok(m.layers.len())
}

/// Hex sha256 of a file, streamed.
pub fn file_sha256(path: &std::path::Path) -> anyhow::Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}
