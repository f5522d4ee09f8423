//! `drover render PLATFORM --env E [--cluster-type T] --out DIR`: renders the platform
//! for one environment and writes `DIR/<cluster-type>/manifests/...` (the bundle layout).
//! All or nothing: everything is rendered in memory and written into a temporary
//! directory that is renamed into place; nothing is written on error.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use crate::output::{write_dir_atomically, Report, Text};
use crate::platform::{Platform, RenderedType};

/// Arguments of `drover render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The platform directory (with fleet.yaml).
    pub platform: PathBuf,
    /// The environment to render (one of fleet.yaml spec.environments).
    #[arg(long, visible_alias = "environment")]
    pub env: String,
    /// Render only this cluster type.
    #[arg(long)]
    pub cluster_type: Option<String>,
    /// Output directory (must not exist or be empty, unless --force).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace a non-empty output directory.
    #[arg(long)]
    pub force: bool,
    /// Treat every warning as an error: known fights between objects (spec.replicas of a
    /// workload an autoscaler scales, rules of an aggregated ClusterRole), namespaces
    /// removed from cluster-scoped objects.
    #[arg(long)]
    pub strict: bool,
}

/// One cluster type written by `render`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeResult {
    /// The cluster type.
    pub cluster_type: String,
    /// Workloads assigned to it in this environment.
    pub workloads: Vec<String>,
    /// Objects rendered.
    pub objects: usize,
    /// `OUT/<cluster-type>`: the directory to give `drover build` or `drover push`.
    pub path: String,
}

/// What `render` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderReport {
    /// The environment rendered.
    pub environment: String,
    /// One entry per cluster type.
    pub cluster_types: Vec<TypeResult>,
}

impl Report for RenderReport {
    fn write_text(&self, out: &mut Text) {
        let rows: Vec<Vec<String>> = self
            .cluster_types
            .iter()
            .map(|r| vec![r.cluster_type.clone(), r.objects.to_string(), r.workloads.join(","), r.path.clone()])
            .collect();
        out.table(&["CLUSTER TYPE", "OBJECTS", "WORKLOADS", "PATH"], &rows);
    }
}

/// Runs `drover render`.
pub async fn run(args: Args) -> anyhow::Result<RenderReport> {
    let non_empty = args.out.is_dir() && std::fs::read_dir(&args.out).map(|mut d| d.next().is_some()).unwrap_or(false);
    if args.out.exists() && !args.out.is_dir() {
        anyhow::bail!("{} exists and is not a directory; choose another --out", args.out.display());
    }
    if non_empty && !args.force {
        anyhow::bail!("{} exists and is not empty; pass --force to replace it or choose another --out", args.out.display());
    }
    let platform = Platform::load(&args.platform)?;
    let rendered = platform.render(&args.env, args.cluster_type.as_deref())?;
    crate::output::warnings(rendered.iter().flat_map(|t| &t.warnings), args.strict)?;
    write_all(&args.out, &rendered)?;
    let results: Vec<TypeResult> = rendered
        .iter()
        .map(|t| TypeResult {
            cluster_type: t.name.clone(),
            workloads: t.workloads.clone(),
            objects: t.objects.len(),
            path: args.out.join(&t.name).display().to_string(),
        })
        .collect();
    Ok(RenderReport { environment: args.env, cluster_types: results })
}

/// Writes every cluster type into a temporary sibling of `out`, then renames it into place.
fn write_all(out: &Path, rendered: &[RenderedType]) -> anyhow::Result<()> {
    write_dir_atomically(out, |tmp| {
        // One thread per core; each cluster type creates its directories once.
        let written = crate::platform::par_map(rendered, |t| -> anyhow::Result<()> {
            let dir = tmp.join(&t.name);
            std::fs::create_dir_all(dir.join("manifests")).with_context(|| format!("creating {}", dir.display()))?;
            let mut made = std::collections::HashSet::new();
            for (id, yaml) in &t.objects {
                let path = dir.join(id.bundle_path());
                if let Some(p) = path.parent() {
                    if made.insert(p.to_path_buf()) {
                        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
                    }
                }
                std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(())
        });
        written.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        Ok(())
    })
}
