//! `drover pull REF --out DIR`: fetches a bundle (every digest and every object hash
//! checked against the config index) and writes its `manifests/` tree into DIR.
//! Also the shared "fetch a bundle's verified objects" step of `drover diff`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use drover_proto::archive::UnpackLimits;
use drover_proto::bundle::{open_content, BundleObject};
use drover_proto::{FetchLimits, FetchedBundle, Reference, RegistryClient, Repo};
use serde::Serialize;

use crate::output::{write_dir_atomically, Report, Text};
use crate::regargs::RegistryArgs;

/// Arguments of `drover pull`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle: HOST/REPO:TAG, HOST/REPO@sha256:..., oci:DIR:TAG or oci-archive:FILE:TAG.
    reference: String,
    /// Directory to write `manifests/...` into; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// A fetched bundle with its objects, every hash checked (signatures NOT verified).
pub struct Fetched {
    /// Manifest, config and layer.
    pub bundle: FetchedBundle,
    /// The objects, in config index order.
    pub objects: Vec<BundleObject>,
    /// The reference as given.
    pub reference: String,
}

/// Fetches a bundle and opens its content (digests, sizes and per-object hashes checked).
pub async fn fetch_objects(reference: &str, client: &RegistryClient) -> anyhow::Result<Fetched> {
    let parsed = Reference::parse(reference)?;
    let (repo, lookup) = Repo::open(&parsed, client, false).with_context(|| format!("opening {reference}"))?;
    let lookup = lookup.ok_or_else(|| anyhow::anyhow!("{reference} names no tag or digest (add :TAG or @sha256:...)"))?;
    let bundle = repo.fetch_bundle(&lookup, &FetchLimits::default()).await.with_context(|| format!("fetching {reference}"))?;
    let objects = open_content(&bundle.config, &bundle.layer, &UnpackLimits::default())
        .with_context(|| format!("{reference} ({}): content does not match its config index", bundle.digest))?;
    Ok(Fetched { bundle, objects, reference: reference.to_string() })
}

/// What `pull` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullSummary {
    /// The manifest digest pulled.
    pub digest: String,
    /// The reference as given.
    pub reference: String,
    /// The directory written.
    pub out: String,
    /// Number of objects.
    pub objects: usize,
    /// Every file written, relative to `out`.
    pub files: Vec<String>,
}

impl Report for PullSummary {
    fn write_text(&self, out: &mut Text) {
        out.table(
            &["REFERENCE", "DIGEST", "OBJECTS", "OUT"],
            &[vec![self.reference.clone(), self.digest.clone(), self.objects.to_string(), self.out.clone()]],
        );
    }
}

/// Runs `drover pull`.
pub async fn run(args: Args) -> anyhow::Result<PullSummary> {
    check_out_dir(&args.out)?;
    let client = args.registry.client_for(&[&args.reference])?;
    let fetched = fetch_objects(&args.reference, &client).await?;
    write_tree(&args.out, &fetched.objects)?;
    Ok(PullSummary {
        digest: fetched.bundle.digest.clone(),
        reference: args.reference.clone(),
        out: args.out.display().to_string(),
        objects: fetched.objects.len(),
        files: fetched.objects.iter().map(|o| o.path.clone()).collect(),
    })
}

fn check_out_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut rd) => {
            anyhow::ensure!(rd.next().is_none(), "{}: not empty; pull writes only into a new or empty directory", dir.display());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{}: cannot use as output directory", dir.display())),
    }
}

/// Writes the objects under `dir/manifests/...`, so DIR appears complete or not at all.
fn write_tree(dir: &Path, objects: &[BundleObject]) -> anyhow::Result<()> {
    write_dir_atomically(dir, |tmp| {
        for o in objects {
            // Paths were checked by open_content (manifests/..., no '..', no absolute paths).
            let p = tmp.join(&o.path);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            std::fs::write(&p, &o.yaml).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    })
}
