//! `drover diff A B`: compares two bundles or directories of YAML object by object
//! (identity = group, kind, namespace, name) and prints a unified diff of each changed
//! object. Exit code: 0 equal, 1 different, 2 error (as diff(1)).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use drover_proto::object::ObjectRef;
use serde::Serialize;

use crate::input::{canonical_yaml, load_dir};
use crate::output::{print_json, OutputFormat};
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

#[derive(Serialize)]
struct Changed {
    object: ObjectRef,
    diff: String,
}

#[derive(Serialize)]
struct Report {
    a: String,
    b: String,
    equal: bool,
    added: Vec<ObjectRef>,
    removed: Vec<ObjectRef>,
    changed: Vec<Changed>,
    unchanged: usize,
}

/// Runs `drover diff`; exits 1 when the sides differ, 2 on error.
pub async fn run(args: Args, out: OutputFormat) -> anyhow::Result<()> {
    match compare(&args).await {
        Ok(report) => {
            let printed = print(&report, out);
            let _ = std::io::stdout().flush();
            if let Err(e) = printed {
                eprintln!("error: {e:#}");
                std::process::exit(2);
            }
            std::process::exit(if report.equal { 0 } else { 1 });
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

async fn compare(args: &Args) -> anyhow::Result<Report> {
    let client = args.registry.client_for(&[&args.a, &args.b])?;
    let a = load_side(&args.a, args, &client).await?;
    let b = load_side(&args.b, args, &client).await?;
    let mut report =
        Report { a: a.label.clone(), b: b.label.clone(), equal: true, added: vec![], removed: vec![], changed: vec![], unchanged: 0 };
    for (k, (id, ya)) in &a.objects {
        match b.objects.get(k) {
            None => report.removed.push(id.clone()),
            Some((idb, yb)) if ya == yb && id == idb => report.unchanged += 1,
            Some((idb, yb)) => {
                let diff = similar::TextDiff::from_lines(ya, yb)
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
            eprintln!("warning: {w}");
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

fn print(r: &Report, out: OutputFormat) -> anyhow::Result<()> {
    if out == OutputFormat::Json {
        return print_json(r);
    }
    let mut s = std::io::stdout().lock();
    for id in &r.added {
        writeln!(s, "added    {id}")?;
    }
    for id in &r.removed {
        writeln!(s, "removed  {id}")?;
    }
    for c in &r.changed {
        writeln!(s, "changed  {}", c.object)?;
    }
    writeln!(s, "{} added, {} removed, {} changed, {} unchanged", r.added.len(), r.removed.len(), r.changed.len(), r.unchanged)?;
    for c in &r.changed {
        writeln!(s)?;
        write!(s, "{}", c.diff)?;
    }
    Ok(())
}
