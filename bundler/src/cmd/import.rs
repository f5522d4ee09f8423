//! `drover import FILE --to PREFIX [--key PUB]...`: the receiving side of the air gap
//! (DESIGN §7). Checks every blob of the OCI archive, verifies every bundle against the
//! trusted keys when given (refusing the whole import, pushing nothing, if one fails),
//! then pushes everything to `PREFIX/<repository>` with digests and tags unchanged,
//! signature manifests included. Idempotent: present blobs and tags are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use drover_proto::digest::is_valid_digest;
use drover_proto::layout::Layout;
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::trust;
use drover_proto::{media, RegistryRef, Repo};
use serde::Serialize;

use crate::output::{print_json, print_table, progress_bar, OutputFormat};
use crate::regargs::RegistryArgs;
use crate::trustargs::TrustArgs;

const MAX_MANIFEST: u64 = 4 << 20;
/// Repositories pushed at once.
const CONCURRENCY: usize = 8;
/// Blobs larger than this are held in memory one at a time (across all repositories).
const BIG_BLOB: u64 = 8 << 20;

/// Arguments of `drover import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The OCI archive written by `drover export`.
    file: PathBuf,
    /// Registry prefix to import under: HOST[:PORT][/PATH]; each bundle goes to PREFIX/<repository>.
    #[arg(long, value_name = "PREFIX")]
    to: String,
    /// Trusted keys (optional): every bundle must verify or nothing is pushed.
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// One manifest named in the archive's index.
struct Entry {
    repository: String,
    tag: String,
    desc: Descriptor,
    bytes: Vec<u8>,
    manifest: Manifest,
    /// For `sha256-<hex>.sig` tags: the signed digest.
    signs: Option<String>,
}

#[derive(Serialize)]
struct Imported {
    reference: String,
    digest: String,
    action: &'static str,
    verified: bool,
}

#[derive(Serialize)]
struct Report {
    to: String,
    manifests: Vec<Imported>,
    blobs_uploaded: usize,
    blobs_present: usize,
}

/// Runs `drover import`.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    let policy = args.trust.optional_policy()?;
    let prefix = args.to.trim_end_matches('/').to_string();
    RegistryRef::parse(&format!("{prefix}/x")).with_context(|| format!("--to {:?} must be HOST[:PORT][/PATH]", args.to))?;
    let client = args.registry.client()?;

    // 1. Read and check everything locally.
    let tmp = drover_proto::ocitar::extract(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let layout = Layout::open(tmp.path()).with_context(|| format!("{} is not an OCI archive", args.file.display()))?;
    let entries = read_entries(&layout, &args.file, &prefix)?;
    let tmp = Arc::new(tmp);

    // 2. Verify every bundle first (fail closed, nothing pushed).
    let mut verified = BTreeSet::new();
    if let Some(policy) = &policy {
        let mut failures = Vec::new();
        for e in entries.iter().filter(|e| e.signs.is_none()) {
            let repo = Repo::Layout { layout: layout.clone(), prefix: format!("{}:", e.repository), _tmp: Some(tmp.clone()) };
            match trust::verify(&repo, &e.desc.digest, policy).await {
                Ok(_) => {
                    verified.insert(e.desc.digest.clone());
                }
                Err(err) => failures.push(format!("{}:{} ({}): {err}", e.repository, e.tag, e.desc.digest)),
            }
        }
        anyhow::ensure!(failures.is_empty(), "nothing imported; not every bundle verifies:\n  {}", failures.join("\n  "));
    }

    // 3. Push, one repository after another within a group, up to CONCURRENCY
    //    repositories at once: blobs, bundle manifests by digest, signatures, then tags.
    let mut report = Report { to: prefix.clone(), manifests: vec![], blobs_uploaded: 0, blobs_present: 0 };
    let mut groups: BTreeMap<&str, Vec<(usize, &Entry)>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        groups.entry(e.repository.as_str()).or_default().push((i, e));
    }
    let big_blob = tokio::sync::Semaphore::new(1);
    let bar = progress_bar(groups.len());
    let mut jobs = Vec::new();
    for (repository, group) in groups {
        let repo = Repo::Registry { client: client.clone(), repo: RegistryRef::parse(&format!("{prefix}/{repository}"))? };
        let (bar, big_blob, layout) = (&bar, &big_blob, &layout);
        jobs.push(async move {
            let pushed = push_group(repo, group, layout, big_blob).await;
            bar.set_message(repository.to_string());
            bar.inc(1);
            pushed
        });
    }
    use futures::StreamExt;
    let results: Vec<anyhow::Result<Pushed>> = futures::stream::iter(jobs).buffer_unordered(CONCURRENCY).collect().await;
    bar.finish_and_clear();
    let mut actions: BTreeMap<usize, &'static str> = BTreeMap::new();
    for r in results {
        let p = r?;
        report.blobs_uploaded += p.uploaded;
        report.blobs_present += p.present;
        actions.extend(p.actions);
    }
    for (i, e) in entries.iter().enumerate() {
        report.manifests.push(Imported {
            reference: format!("{prefix}/{}:{}", e.repository, e.tag),
            digest: e.desc.digest.clone(),
            action: actions.get(&i).copied().unwrap_or("pushed"),
            verified: verified.contains(&e.desc.digest),
        });
    }
    drop(tmp);
    match out {
        OutputFormat::Json => print_json(&report),
        OutputFormat::Table => {
            let rows: Vec<Vec<String>> = report
                .manifests
                .iter()
                .map(|m| {
                    vec![m.reference.clone(), m.digest.clone(), m.action.to_string(), if m.verified { "yes".into() } else { "-".into() }]
                })
                .collect();
            print_table(&["REFERENCE", "DIGEST", "ACTION", "VERIFIED"], &rows);
            println!("blobs: {} uploaded, {} already present", report.blobs_uploaded, report.blobs_present);
            Ok(())
        }
    }
}

/// What pushing one repository did.
struct Pushed {
    actions: Vec<(usize, &'static str)>,
    uploaded: usize,
    present: usize,
}

/// Pushes one repository's entries: blobs (blobs over [`BIG_BLOB`] one at a time across
/// all groups), bundle manifests by digest, signature manifests (merged when the
/// destination has other signatures), then the bundle tags.
async fn push_group(repo: Repo, group: Vec<(usize, &Entry)>, layout: &Layout, big_blob: &tokio::sync::Semaphore) -> anyhow::Result<Pushed> {
    let mut out = Pushed { actions: vec![], uploaded: 0, present: 0 };
    let mut seen = BTreeSet::new();
    for (_, e) in &group {
        for d in std::iter::once(&e.manifest.config).chain(&e.manifest.layers) {
            if !seen.insert(d.digest.clone()) {
                continue;
            }
            let _permit = if d.size > BIG_BLOB { Some(big_blob.acquire().await?) } else { None };
            let data = layout.read_blob(&d.digest, d.size)?;
            if repo.put_blob(&d.digest, data).await.with_context(|| format!("pushing blob {} to {}", d.digest, repo.describe(&e.tag)))? {
                out.uploaded += 1;
            } else {
                out.present += 1;
            }
        }
    }
    let mut done = BTreeSet::new();
    for (i, e) in group.iter().filter(|(_, e)| e.signs.is_none()) {
        if repo.resolve(&e.tag).await? == Some(e.desc.digest.clone()) {
            out.actions.push((*i, "unchanged"));
            done.insert(*i);
        } else {
            repo.put_manifest(e.bytes.clone(), &e.desc.media_type, None)
                .await
                .with_context(|| format!("pushing {}", repo.describe(&e.desc.digest)))?;
        }
    }
    for (i, e) in &group {
        let Some(signed) = &e.signs else { continue };
        let action = match repo.resolve(&e.tag).await? {
            Some(d) if d == e.desc.digest => "unchanged",
            None => {
                repo.put_manifest(e.bytes.clone(), &e.desc.media_type, Some(&e.tag))
                    .await
                    .with_context(|| format!("pushing {}", repo.describe(&e.tag)))?;
                "pushed"
            }
            Some(_) => {
                // The destination has other signatures: merge (cosign appends), never drop.
                let mut layers = Vec::new();
                for l in &e.manifest.layers {
                    layers.push((l.clone(), layout.read_blob(&l.digest, l.size)?));
                }
                trust::append_signature_layers(&repo, signed, layers)
                    .await
                    .with_context(|| format!("merging signatures into {}", repo.describe(&e.tag)))?;
                "merged"
            }
        };
        out.actions.push((*i, action));
    }
    for (i, e) in group.iter().filter(|(i, e)| e.signs.is_none() && !done.contains(i)) {
        repo.put_manifest(e.bytes.clone(), &e.desc.media_type, Some(&e.tag))
            .await
            .with_context(|| format!("tagging {}", repo.describe(&e.tag)))?;
        out.actions.push((*i, "pushed"));
    }
    Ok(out)
}

/// Reads the index: every manifest must have a `<repository>:<tag>` ref name, parse, and
/// have every blob present with the right size and digest (hashed streaming).
fn read_entries(layout: &Layout, file: &Path, prefix: &str) -> anyhow::Result<Vec<Entry>> {
    let name = file.display();
    let index = layout.index()?;
    anyhow::ensure!(!index.manifests.is_empty(), "{name}: the archive's index.json lists no manifest");
    let mut entries = Vec::new();
    let mut checked = BTreeSet::new();
    for desc in index.manifests {
        let ref_name = desc.annotations.get(media::ANN_REF_NAME).cloned().ok_or_else(|| {
            anyhow::anyhow!(
                "{name}: index entry {} has no {} annotation; archives written by `drover export` name every manifest <repository>:<tag>",
                desc.digest,
                media::ANN_REF_NAME
            )
        })?;
        let (repository, tag) = ref_name
            .rsplit_once(':')
            .filter(|(r, _)| !r.is_empty())
            .ok_or_else(|| anyhow::anyhow!("{name}: ref name {ref_name:?} is not <repository>:<tag>"))?;
        RegistryRef::parse(&format!("{prefix}/{repository}:{tag}")).with_context(|| format!("{name}: ref name {ref_name:?}"))?;
        anyhow::ensure!(
            desc.media_type == media::OCI_MANIFEST || desc.media_type == media::DOCKER_MANIFEST,
            "{name}: {ref_name} has media type {:?}; only image manifests can be imported",
            desc.media_type
        );
        anyhow::ensure!(desc.size <= MAX_MANIFEST, "{name}: manifest {ref_name} is over {MAX_MANIFEST} bytes");
        let bytes = layout.read_blob(&desc.digest, MAX_MANIFEST).with_context(|| format!("{name}: manifest of {ref_name}"))?;
        anyhow::ensure!(
            bytes.len() as u64 == desc.size,
            "{name}: manifest of {ref_name} is {} bytes, the index says {}",
            bytes.len(),
            desc.size
        );
        let manifest = Manifest::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{name}: manifest of {ref_name}: {e}"))?;
        for d in std::iter::once(&manifest.config).chain(&manifest.layers) {
            if checked.insert(d.digest.clone()) {
                check_blob(layout, d).with_context(|| format!("{name}: {ref_name}"))?;
            }
        }
        let signs =
            tag.strip_prefix("sha256-").and_then(|h| h.strip_suffix(".sig")).map(|h| format!("sha256:{h}")).filter(|d| is_valid_digest(d));
        entries.push(Entry { repository: repository.to_string(), tag: tag.to_string(), desc, bytes, manifest, signs });
    }
    Ok(entries)
}

/// Checks a blob's presence, size and digest without holding it in memory.
fn check_blob(layout: &Layout, d: &Descriptor) -> anyhow::Result<()> {
    use sha2::Digest;
    use std::io::Read;
    let hex = drover_proto::digest::digest_hex(&d.digest).ok_or_else(|| anyhow::anyhow!("invalid digest {:?}", d.digest))?;
    let path = layout.dir().join("blobs/sha256").join(hex);
    let mut f = std::fs::File::open(&path).map_err(|_| anyhow::anyhow!("blob {} is missing from the archive", d.digest))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).with_context(|| format!("reading blob {}", d.digest))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    anyhow::ensure!(size == d.size, "blob {} is {size} bytes, its descriptor says {}", d.digest, d.size);
    let actual = format!("sha256:{}", hex::encode(h.finalize()));
    anyhow::ensure!(actual == d.digest, "blob {} has digest {actual}: the archive is corrupt or was tampered with", d.digest);
    Ok(())
}
