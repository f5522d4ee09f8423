//! `drover import FILE --to REGISTRY[/PREFIX] [--trust-key PUB]...`: the receiving side of
//! the air gap (docs/design.md §7). Checks every blob of the OCI archive, then, through the
//! channel rules (`drover_proto::channel::import`), screens every signature layer, verifies
//! every bundle against the trusted keys when given and checks every destination tag
//! (immutable history, never lower) — all before anything is written — and then pushes
//! blobs, manifests, signature layers and tags in that order. Idempotent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use drover_proto::channel::import::{self, Decision, Item, Uploads};
use drover_proto::digest::is_valid_digest;
use drover_proto::layout::Layout;
use drover_proto::manifest::{Descriptor, Manifest};
use drover_proto::{media, RegistryRef, Repo};
use futures::StreamExt;
use serde::Serialize;

use crate::output::{progress_bar, warn, Report, Text};
use crate::regargs::RegistryArgs;
use crate::trustargs::TrustArgs;

const MAX_MANIFEST: u64 = 4 << 20;
/// Blobs larger than this are held in memory one at a time (across all repositories).
const BIG_BLOB: u64 = 8 << 20;

/// Arguments of `drover import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The OCI archive written by `drover export`.
    file: PathBuf,
    /// Where to import: REGISTRY (HOST[:PORT]) keeps every repository path as exported
    /// (fleet/edge -> HOST/fleet/edge); REGISTRY/PREFIX replaces each repository's parent
    /// path, as `drover publish --registry PREFIX` names them (fleet/edge -> HOST/PREFIX/edge).
    #[arg(long, value_name = "REGISTRY[/PREFIX]")]
    to: String,
    /// Trusted keys: every bundle must verify or nothing is pushed; only signature layers
    /// signed by these keys are imported. Without them, bundles are imported unverified.
    #[command(flatten)]
    trust: TrustArgs,
    /// Allow moving a destination channel tag to a LOWER sequence (a deliberate restore
    /// of older content). History tags stay immutable regardless.
    #[arg(long)]
    allow_downgrade: bool,
    /// Repositories checked or pushed at once: enough to hide registry round trips, few
    /// enough to stay polite to one registry.
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// One manifest named in the archive's index, with its repository.
struct Entry {
    repository: String,
    item: Item,
}

/// One manifest of the archive and what was done with it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    /// Its destination, `DEST:TAG`.
    pub reference: String,
    /// What was done.
    #[serde(flatten)]
    pub decision: Decision,
}

/// What `import` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// `--to` as given (without a trailing `/`).
    pub to: String,
    /// True when every bundle was verified against `--trust-key`.
    pub verified: bool,
    /// Every manifest of the archive.
    pub manifests: Vec<Imported>,
    /// Blobs pushed.
    pub blobs_uploaded: usize,
    /// Blobs the registry already had.
    pub blobs_present: usize,
}

impl Report for ImportReport {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self
            .manifests
            .iter()
            .map(|m| {
                let action = serde_json::to_value(m.decision.action).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                vec![m.reference.clone(), m.decision.digest.clone(), action, if m.decision.verified { "yes".into() } else { "-".into() }]
            })
            .collect();
        out.table(&["REFERENCE", "DIGEST", "ACTION", "VERIFIED"], &rows);
        out.line(format!("blobs: {} uploaded, {} already present", self.blobs_uploaded, self.blobs_present));
    }
}

/// Maps an archive repository (`fleet/edge`) to its destination under `to`.
pub fn destination(to: &str, repository: &str) -> String {
    match to.split_once('/') {
        None => format!("{to}/{repository}"),
        Some(_) => format!("{to}/{}", repository.rsplit('/').next().unwrap_or(repository)),
    }
}

/// Runs `drover import`.
pub async fn run(args: Args) -> anyhow::Result<ImportReport> {
    anyhow::ensure!(args.parallel > 0, "--parallel must be at least 1");
    let policy = args.trust.optional_policy()?;
    let to = args.to.trim_end_matches('/').to_string();
    RegistryRef::parse(&format!("{to}/x")).with_context(|| format!("--to {:?} must be HOST[:PORT][/PREFIX]", args.to))?;
    if policy.is_none() {
        warn("no --trust-key: bundles are imported WITHOUT verifying who signed them (malformed signature layers are still dropped); pass --trust-key drover.pub");
    }
    let client = args.registry.client_for(&[&args.to])?;

    // 1. Read and check everything locally.
    let tmp = drover_proto::ocitar::extract(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let layout = Layout::open(tmp.path()).with_context(|| format!("{} is not an OCI archive", args.file.display()))?;
    let mut groups: BTreeMap<String, (String, Vec<Item>)> = BTreeMap::new();
    for e in read_entries(&layout, &args.file, &to)? {
        let dest = destination(&to, &e.repository);
        let group = groups.entry(dest.clone()).or_insert_with(|| (e.repository.clone(), Vec::new()));
        anyhow::ensure!(
            group.0 == e.repository,
            "{}: repositories {} and {} would both be imported to {dest}; import with --to REGISTRY (keeping repository paths) instead",
            args.file.display(),
            group.0,
            e.repository
        );
        group.1.push(e.item);
    }
    let tmp = Arc::new(tmp);
    let open = |dest: &str, repository: &str| -> anyhow::Result<(Repo, Repo)> {
        let src = Repo::Layout { layout: layout.clone(), prefix: format!("{repository}:"), _tmp: Some(tmp.clone()) };
        let dst = Repo::Registry { client: client.clone(), repo: RegistryRef::parse(dest)? };
        Ok((src, dst))
    };

    // 2. Check every repository (signatures, verification, destination tags); nothing written.
    let checks = futures::stream::iter(groups.into_iter().map(|(dest, (repository, items))| {
        let policy = policy.as_ref();
        let opened = open(&dest, &repository);
        async move {
            let (src, dst) = opened?;
            let checked = import::check(&src, &dst, items, policy, args.allow_downgrade).await.with_context(|| format!("{repository} -> {dest}"))?;
            anyhow::Ok((dest, repository, src, dst, checked))
        }
    }))
    .buffer_unordered(args.parallel)
    .collect::<Vec<_>>()
    .await;
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for c in checks {
        match c {
            Ok(c) => checked.push(c),
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    failures.sort();
    anyhow::ensure!(failures.is_empty(), "nothing imported:\n  {}", failures.join("\n  "));

    // 3. Write, up to `--parallel` repositories at once.
    let big_blob = tokio::sync::Semaphore::new(1);
    let bar = progress_bar(checked.len());
    let written: Vec<anyhow::Result<(String, Vec<Decision>, Uploads)>> = futures::stream::iter(checked.into_iter().map(|(dest, repository, src, dst, mut c)| {
        let (bar, big_blob) = (&bar, &big_blob);
        async move {
            let up = import::write(&src, &dst, &mut c, big_blob, BIG_BLOB).await.with_context(|| format!("pushing {repository} to {dest}"))?;
            bar.set_message(repository);
            bar.inc(1);
            anyhow::Ok((dest, c.decisions().to_vec(), up))
        }
    }))
    .buffer_unordered(args.parallel)
    .collect()
    .await;
    bar.finish_and_clear();
    drop(tmp);
    let mut report = ImportReport { to: to.clone(), verified: policy.is_some(), manifests: vec![], blobs_uploaded: 0, blobs_present: 0 };
    for w in written {
        let (dest, decisions, up) = w?;
        report.blobs_uploaded += up.uploaded;
        report.blobs_present += up.present;
        report.manifests.extend(decisions.into_iter().map(|d| Imported { reference: format!("{dest}:{}", d.tag), decision: d }));
    }
    report.manifests.sort_by(|a, b| a.reference.cmp(&b.reference));
    for m in report.manifests.iter().filter(|m| !m.decision.dropped_layers.is_empty()) {
        warn(format_args!("{}: signature layers left out: {}", m.reference, m.decision.dropped_layers.join("; ")));
    }
    Ok(report)
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
        let item = Item { tag: tag.to_string(), digest: desc.digest.clone(), media_type: desc.media_type.clone(), bytes, manifest, signs };
        entries.push(Entry { repository: repository.to_string(), item });
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
