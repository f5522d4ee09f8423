//! `drover diff A B`: compares two bundles or directories of YAML object by object
//! (identity = group, kind, namespace, name) and prints a unified diff of each changed
//! object. Exit code: 0 equal, 1 different, 2 error (as diff(1)); the report carries it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use drover_proto::object::ObjectRef;
use drover_proto::text::redact;
use serde::Serialize;

use crate::input::{canonical_yaml, load_dir};
use crate::output::{warn, Report, Text};
use crate::regargs::RegistryArgs;

/// Arguments of `drover diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Old side: a directory of YAML, or a bundle reference (HOST/REPO:TAG, oci:DIR:TAG, ...).
    a: String,
    /// New side: a directory of YAML, or a bundle reference.
    b: String,
    /// Treat KIND as cluster-scoped when reading a directory (repeatable).
    #[arg(long = "cluster-scoped-kind", value_name = "KIND")]
    cluster_scoped_kinds: Vec<String>,
    /// Lines of context in the unified diff.
    #[arg(long, default_value_t = 3)]
    context: usize,
    #[command(flatten)]
    registry: RegistryArgs,
}

type Key = (String, String, Option<String>, String);

/// One side: objects by version-independent identity, with canonical YAML.
struct Side {
    label: String,
    objects: BTreeMap<Key, (ObjectRef, String)>,
}

/// The texts a changed object is shown with: its canonical YAML, or for an object that
/// holds Secret values (a Secret, an annotation carrying one's manifest such as
/// `last-applied-configuration`) the canonical YAML of both sides redacted as `kubectl
/// diff` does (keys kept, values `***`, a changed one `*** (before)` / `*** (after)`).
fn shown(ya: &str, yb: &str) -> anyhow::Result<(String, String)> {
    let parse = |y: &str| serde_yaml_ng::from_str::<serde_json::Value>(y).context("canonical YAML parses");
    let (va, vb) = (parse(ya)?, parse(yb)?);
    if !redact::holds_secret(&va) && !redact::holds_secret(&vb) {
        return Ok((ya.to_string(), yb.to_string()));
    }
    let (ra, rb) = redact::redact_pair(&va, &vb);
    let text = |v: &serde_json::Value| String::from_utf8(canonical_yaml(v)).context("canonical YAML is UTF-8");
    Ok((text(&ra)?, text(&rb)?))
}

/// One object present on both sides with different content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    /// The object (as on the new side).
    pub object: ObjectRef,
    /// Unified diff of the canonical YAML.
    pub diff: String,
}

/// What `diff` found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffReport {
    /// Old side as given.
    pub a: String,
    /// New side as given.
    pub b: String,
    /// True when both sides hold the same objects with the same content.
    pub equal: bool,
    /// Objects only on the new side.
    pub added: Vec<ObjectRef>,
    /// Objects only on the old side.
    pub removed: Vec<ObjectRef>,
    /// Objects on both sides with different content.
    pub changed: Vec<Changed>,
    /// Number of objects on both sides with the same content.
    pub unchanged: usize,
}

impl Report for DiffReport {
    fn write_text(&self, out: &mut Text) {
        for id in &self.added {
            out.line(format!("added    {id}"));
        }
        for id in &self.removed {
            out.line(format!("removed  {id}"));
        }
        for c in &self.changed {
            out.line(format!("changed  {}", c.object));
        }
        out.line(format!(
            "{} added, {} removed, {} changed, {} unchanged",
            self.added.len(),
            self.removed.len(),
            self.changed.len(),
            self.unchanged
        ));
        for c in &self.changed {
            out.line("");
            out.0.push_str(&c.diff);
        }
    }

    /// As diff(1): 0 equal, 1 different.
    fn exit_code(&self) -> u8 {
        u8::from(!self.equal)
    }

    /// As diff(1): 2 when the comparison could not be made.
    const ERROR_EXIT: u8 = 2;
}

/// Runs `drover diff`: the report (exit 1 when the sides differ, 2 on error).
pub async fn run(args: Args) -> anyhow::Result<DiffReport> {
    compare(&args).await
}

async fn compare(args: &Args) -> anyhow::Result<DiffReport> {
    let client = args.registry.client_for(&[&args.a, &args.b])?;
    let a = load_side(&args.a, args, &client).await?;
    let b = load_side(&args.b, args, &client).await?;
    let mut report =
        DiffReport { a: a.label.clone(), b: b.label.clone(), equal: true, added: vec![], removed: vec![], changed: vec![], unchanged: 0 };
    for (k, (id, ya)) in &a.objects {
        match b.objects.get(k) {
            None => report.removed.push(id.clone()),
            Some((idb, yb)) if ya == yb && id == idb => report.unchanged += 1,
            Some((idb, yb)) => {
                let (ya, yb) = shown(ya, yb)?;
                let diff = similar::TextDiff::from_lines(&ya, &yb)
                    .unified_diff()
                    .context_radius(args.context)
                    .header(&format!("a/{}", id.bundle_path()), &format!("b/{}", idb.bundle_path()))
                    .to_string();
                report.changed.push(Changed { object: idb.clone(), diff });
            }
        }
    }
    for (k, (id, _)) in &b.objects {
        if !a.objects.contains_key(k) {
            report.added.push(id.clone());
        }
    }
    report.equal = report.added.is_empty() && report.removed.is_empty() && report.changed.is_empty();
    Ok(report)
}

/// A directory when the argument names an existing directory (and is not `oci:`/`oci-archive:`),
/// else a bundle reference.
async fn load_side(arg: &str, args: &Args, client: &drover_proto::RegistryClient) -> anyhow::Result<Side> {
    let is_ref = arg.starts_with("oci:") || arg.starts_with("oci-archive:");
    let mut objects = BTreeMap::new();
    if !is_ref && Path::new(arg).is_dir() {
        let loaded = load_dir(Path::new(arg), &args.cluster_scoped_kinds).with_context(|| format!("reading {arg}"))?;
        for w in &loaded.warnings {
            warn(w);
        }
        for (id, yaml) in loaded.objects {
            let text = String::from_utf8(yaml).context("canonical YAML is UTF-8")?;
            objects.insert(id.key(), (id, text));
        }
    } else {
        if !is_ref {
            drover_proto::Reference::parse(arg).with_context(|| format!("{arg} is neither an existing directory nor a bundle reference"))?;
        }
        let fetched = crate::cmd::pull::fetch_objects(arg, client).await?;
        for o in fetched.objects {
            // Re-canonicalize, so bundles written by other tools or versions compare by content.
            let text = String::from_utf8(canonical_yaml(&o.value)).context("canonical YAML is UTF-8")?;
            objects.insert(o.id.key(), (o.id, text));
        }
    }
    Ok(Side { label: arg.to_string(), objects })
}
