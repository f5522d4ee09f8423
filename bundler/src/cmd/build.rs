//! `drover build DIR --out oci:LAYOUT[:TAG]`: reads a directory of rendered YAML and
//! writes a reproducible bundle into an OCI image layout. Also holds the bundle flags
//! and the in-memory build shared with `drover push`.

use std::path::PathBuf;

use anyhow::Context;
use drover_proto::bundle::{assemble, Bundle, BundleMeta};
use drover_proto::{time, Reference, Repo};
use serde::Serialize;

use crate::input::{load_dir, Loaded};
use crate::output::{Report, Text};

/// The flags that describe a bundle (shared by `build` and `push`).
#[derive(Debug, Clone, clap::Args)]
pub struct BundleArgs {
    /// Directory of rendered YAML (every *.yaml/*.yml, recursively).
    pub dir: PathBuf,
    /// Treat every warning as an error: known fights between objects (spec.replicas of a
    /// workload an autoscaler scales, rules of an aggregated ClusterRole), namespaces
    /// removed from cluster-scoped objects.
    #[arg(long)]
    pub strict: bool,
    /// Sequence number (strictly increasing per repository); default: now, in Unix seconds.
    #[arg(long)]
    pub sequence: Option<u64>,
    /// Cluster type this bundle is for (config `clusterType`).
    #[arg(long, default_value = "")]
    pub cluster_type: String,
    /// Environment this bundle is for (config `environment`).
    #[arg(long = "env", visible_alias = "environment", value_name = "ENV", default_value = "")]
    pub environment: String,
    /// Source repository URL (annotation org.opencontainers.image.source).
    #[arg(long, default_value = "")]
    pub source_repository: String,
    /// Source revision (annotation org.opencontainers.image.revision).
    #[arg(long, default_value = "")]
    pub revision: String,
    /// Creation time: RFC 3339 (e.g. 2026-01-02T03:04:05Z) or Unix seconds; default:
    /// SOURCE_DATE_EPOCH when set, else no created annotation (reproducible).
    #[arg(long)]
    pub created: Option<String>,
    /// Treat KIND as cluster-scoped (repeatable), for CRD kinds not in the input.
    #[arg(long = "cluster-scoped-kind", value_name = "KIND")]
    pub cluster_scoped_kinds: Vec<String>,
    /// Let agents prune more than their maxPruneRatio of the inventory for this bundle.
    #[arg(long)]
    pub allow_mass_prune: bool,
    /// Health rules in CEL for the bundle's objects: a YAML list of {apiVersion, kind,
    /// current, failed?, inProgress?} (docs/kubernetes.md, "Health rules"); written into
    /// the signed config. A rule that does not compile is refused, naming it.
    #[arg(long, value_name = "FILE")]
    pub health: Option<PathBuf>,
    /// Raise the bundle's minAgentVersion (default: the lowest agent version that
    /// understands every field the bundle uses; docs/bundle.md, "Compatibility").
    #[arg(long, value_name = "VERSION")]
    pub min_agent_version: Option<String>,
}

/// Reads a `--health` file: a YAML list of health rules, each checked and compiled
/// (errors name the file and the rule), sorted as the config holds them.
pub fn health_file(path: &std::path::Path) -> anyhow::Result<Vec<drover_proto::health::HealthRule>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("--health {shown}: cannot read it"))?;
    let rules = drover_proto::health::parse_yaml(&text, &format!("--health {shown}")).map_err(anyhow::Error::msg)?;
    drover_proto::health::normalized(rules).map_err(|e| anyhow::anyhow!("--health {shown}: {e}"))
}

/// Parses `--min-agent-version`.
pub fn min_agent_version(v: Option<&str>) -> anyhow::Result<Option<drover_proto::compat::Version>> {
    v.map(|v| drover_proto::compat::parse(v, "--min-agent-version").map_err(anyhow::Error::msg)).transpose()
}

/// A bundle built in memory, with what went into it.
pub struct Built {
    /// The assembled bundle.
    pub bundle: Bundle,
    /// The objects and warnings read from the input.
    pub loaded: Loaded,
}

impl BundleArgs {
    /// The bundle metadata from the flags (and SOURCE_DATE_EPOCH).
    pub fn meta(&self) -> anyhow::Result<BundleMeta> {
        let sequence = match self.sequence {
            Some(s) => s,
            None => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).context("system clock before 1970")?.as_secs(),
        };
        let created = match (&self.created, std::env::var("SOURCE_DATE_EPOCH").ok().filter(|s| !s.is_empty())) {
            (Some(c), _) => Some(normalize_created(c).with_context(|| format!("--created {c:?}"))?),
            (None, Some(e)) => {
                let secs: i64 = e.trim().parse().with_context(|| format!("SOURCE_DATE_EPOCH={e:?} is not a number of seconds"))?;
                Some(time::format_rfc3339(secs).with_context(|| format!("SOURCE_DATE_EPOCH={e:?}"))?)
            }
            (None, None) => None,
        };
        if !self.environment.is_empty() && !drover_proto::reference::valid_tag(&self.environment) {
            anyhow::bail!("--env {:?} must be usable as a tag (letters, digits, '_', '.', '-')", self.environment);
        }
        Ok(BundleMeta {
            cluster_type: self.cluster_type.clone(),
            environment: self.environment.clone(),
            sequence,
            source_repository: self.source_repository.clone(),
            revision: self.revision.clone(),
            created,
            allow_mass_prune: self.allow_mass_prune,
            workloads: Vec::new(),
            health_checks: self.health.as_deref().map(health_file).transpose()?.unwrap_or_default(),
            min_agent_version: min_agent_version(self.min_agent_version.as_deref())?,
        })
    }

    /// Reads the input directory (objects and warnings; warnings are printed).
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let start = std::time::Instant::now();
        refuse_render_output(&self.dir)?;
        let loaded = load_dir(&self.dir, &self.cluster_scoped_kinds).context("reading the input")?;
        crate::output::warnings(&loaded.warnings, self.strict)?;
        tracing::debug!(files = loaded.files, objects = loaded.objects.len(), read_ms = start.elapsed().as_millis() as u64, "read the input");
        Ok(loaded)
    }

    /// Reads the input and assembles the bundle in memory (nothing is written).
    pub fn build(&self) -> anyhow::Result<Built> {
        let meta = self.meta()?;
        let loaded = self.load()?;
        let bundle = assemble(&loaded.objects, &meta);
        Ok(Built { bundle, loaded })
    }
}

/// Arguments of `drover build`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    bundle: BundleArgs,
    /// Where to write: oci:LAYOUT[:TAG], an OCI layout directory (created if missing;
    /// TAG becomes the ref name; without it the manifest is stored untagged and named
    /// oci:LAYOUT@sha256:...).
    #[arg(long, value_name = "oci:LAYOUT[:TAG]")]
    out: String,
}

/// What `build` and `push` return.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Manifest digest.
    pub digest: String,
    /// Where the bundle was written, with its digest.
    pub reference: String,
    /// Number of objects.
    pub objects: usize,
    /// Every tag written.
    pub tags: Vec<String>,
    /// Sequence number.
    pub sequence: u64,
    /// Signature written by `push --key`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<drover_proto::trust::sign::SignatureInfo>,
}

impl Report for Summary {
    fn write_text(&self, out: &mut Text) {
        let mut rows = vec![vec![self.reference.clone(), self.digest.clone(), self.objects.to_string(), self.sequence.to_string()]];
        for t in self.tags.iter().skip(1) {
            rows.push(vec![format!("  tag {t}"), String::new(), String::new(), String::new()]);
        }
        out.table(&["REFERENCE", "DIGEST", "OBJECTS", "SEQUENCE"], &rows);
        if let Some(sig) = &self.signature {
            out.line(format!("signed: {} (key {})", sig.signature_reference, &sig.key_fingerprint[..16.min(sig.key_fingerprint.len())]));
        }
    }
}

/// Refuses the output of `drover render` (one directory per cluster type): building it
/// whole would mix every cluster type into one bundle.
fn refuse_render_output(dir: &std::path::Path) -> anyhow::Result<()> {
    if dir.join("manifests").is_dir() {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut types: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("manifests").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    types.sort();
    if types.len() < 2 {
        return Ok(());
    }
    let first = dir.join(&types[0]);
    anyhow::bail!(
        "{} holds `drover render` output for {} cluster types ({}); a bundle is one cluster type: build {} (one directory per cluster type)",
        dir.display(),
        types.len(),
        types.join(", "),
        first.display()
    )
}

/// Runs `drover build`.
pub async fn run(args: Args) -> anyhow::Result<Summary> {
    let reference = parse_out(&args.out)?;
    let Reference::Layout { dir, name } = &reference else {
        anyhow::bail!("--out {}: build writes an OCI layout, oci:DIR[:TAG] (to push to a registry use `drover push DIR REF`)", args.out);
    };
    if let Some(n) = name {
        let tag = n.rsplit_once(':').map(|(_, t)| t).unwrap_or(n);
        anyhow::ensure!(
            drover_proto::reference::valid_tag(tag),
            "--out {}: {tag:?} is not a valid tag; build writes oci:DIR or oci:DIR:TAG",
            args.out
        );
    }
    if let Ok(mut entries) = std::fs::read_dir(dir) {
        anyhow::ensure!(
            dir.join("oci-layout").is_file() || entries.next().is_none(),
            "--out {}: {} is a non-empty directory that is not an OCI layout; choose a new directory",
            args.out,
            dir.display()
        );
    }
    let built = args.bundle.build()?;
    let client = drover_proto::RegistryClient::new(Default::default())?;
    let (repo, tag) = Repo::open(&reference, &client, true).with_context(|| format!("opening {}", dir.display()))?;
    let tags: Vec<&str> = tag.as_deref().into_iter().collect();
    let digest = repo.push_bundle(&built.bundle, &tags).await.with_context(|| format!("writing {}", args.out))?;
    Ok(Summary {
        // Tagged: as given; untagged: the name every command reads it by.
        reference: if tag.is_some() { args.out.clone() } else { repo.describe(&digest) },
        digest,
        objects: built.loaded.objects.len(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        sequence: built.bundle.config_doc.sequence,
        signature: None,
    })
}

/// Parses `--out`, explaining the one accepted form when it is something else.
fn parse_out(out: &str) -> anyhow::Result<Reference> {
    if out.starts_with("oci:") || out.starts_with("oci-archive:") {
        return Ok(Reference::parse(out)?);
    }
    match Reference::parse(out) {
        Ok(_) => anyhow::bail!("--out {out}: build writes an OCI layout, oci:DIR[:TAG]; to push to a registry use `drover push DIR {out}`"),
        Err(_) => anyhow::bail!("--out {out}: build writes an OCI layout directory: write --out oci:{out} (or oci:{out}:TAG to tag it)"),
    }
}

/// Parses RFC 3339 (any offset) or Unix seconds; returns RFC 3339 in UTC, whole seconds
/// kept as given (fractions dropped).
pub fn normalize_created(s: &str) -> anyhow::Result<String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(time::format_rfc3339(secs)?);
    }
    time::normalize_rfc3339(s).map_err(|_| anyhow::anyhow!("not RFC 3339 (e.g. 2026-01-02T03:04:05Z) or Unix seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_forms() {
        assert_eq!(normalize_created("1700000000").unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(normalize_created("2023-11-14T23:13:20+01:00").unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(normalize_created("2024-02-29T00:00:00.5Z").unwrap(), "2024-02-29T00:00:00Z");
        assert!(normalize_created("yesterday").is_err());
    }
}
