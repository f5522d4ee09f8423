//! Rendering one (environment, cluster type): every assigned workload's templates and
//! the namespace templates stamped for it, collected into bundle objects with the
//! bundle input rules plus the platform's own (objects stay in their workload's namespace).

use std::collections::{BTreeMap, HashMap};

use drover_proto::object::ObjectRef;
use serde_json::json;

use drover_proto::config::WorkloadProvenance;

use super::command::{provenance, CommandRenderer, Context, Output};
use super::error::PlatformError;
use super::exec::stderr_block;
use super::load::{ClusterType, Platform, Workload};
use super::template::template_error;
use crate::input::{Collector, InputLimits, ScopeSource};
pub use crate::parallel::par_map;

/// The rendered objects of one cluster type.
#[derive(Debug, Clone)]
pub struct RenderedType {
    /// Cluster type name.
    pub name: String,
    /// Workloads assigned to it in this environment.
    pub workloads: Vec<String>,
    /// Identity → canonical YAML (the input of `bundle::assemble`).
    pub objects: BTreeMap<ObjectRef, Vec<u8>>,
    /// Non-fatal findings.
    pub warnings: Vec<String>,
    /// How each assigned workload was rendered, when a command rendered any of them (empty
    /// otherwise: see `BundleConfig::workloads`).
    pub provenance: Vec<WorkloadProvenance>,
    /// Health rules for its bundle (fleet, cluster type, assigned workloads; see
    /// [`super::health::compose`]).
    pub health_checks: Vec<drover_proto::health::HealthRule>,
}

/// An input error, plus (for YAML errors) the rendered line it points at.
fn with_rendered_line(e: &crate::input::InputError, text: &str) -> String {
    let mut msg = e.to_string();
    if let crate::input::InputError::Yaml { message, .. } = e {
        let line = message.split("at line ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok());
        if let Some(l) = line {
            if let Some(src) = text.lines().nth(l.saturating_sub(1)) {
                msg.push_str(&format!("\n  rendered line {l} | {}", src.trim_end()));
            }
        }
    }
    msg
}

/// What the renderer commands of one render printed, by (cluster type, workload), and the
/// version each command-rendered workload reported, by workload.
#[derive(Debug, Default)]
struct CommandOutputs {
    outputs: HashMap<(String, String), Output>,
    versions: HashMap<String, Option<String>>,
}

impl Platform {
    /// Renders every cluster type (or only `only`) for `env`, in parallel. All or nothing:
    /// the first error (in cluster-type order) is returned.
    pub fn render(&self, env: &str, only: Option<&str>) -> Result<Vec<RenderedType>, PlatformError> {
        self.check_environment(env)?;
        let types: Vec<&ClusterType> = match only {
            Some(name) => vec![self.cluster_types.get(name).ok_or_else(|| {
                PlatformError::Usage(format!(
                    "unknown cluster type {name:?}; {} has {:?}",
                    self.root.join("cluster-types").display(),
                    self.cluster_types.keys().collect::<Vec<_>>()
                ))
            })?],
            None => self.cluster_types.values().collect(),
        };
        let commands = self.run_commands(env, &types)?;
        par_map(&types, |t| self.render_type_with(env, t, &commands)).into_iter().collect()
    }

    /// Renders one cluster type for `env`.
    pub fn render_type(&self, env: &str, t: &ClusterType) -> Result<RenderedType, PlatformError> {
        let commands = self.run_commands(env, &[t])?;
        self.render_type_with(env, t, &commands)
    }

    /// Runs the renderer command of every command-rendered workload once per cluster type
    /// of `types` it is assigned to in `env` (and each one's `versionCommand` once), on up
    /// to one thread per core: at most that many renderers run at once. All or nothing:
    /// the first failure in (cluster type, workload) order is returned.
    fn run_commands(&self, env: &str, types: &[&ClusterType]) -> Result<CommandOutputs, PlatformError> {
        let jobs: Vec<(&ClusterType, &Workload, &CommandRenderer)> = types
            .iter()
            .flat_map(|t| self.assigned(env, t).into_iter().filter_map(move |w| w.command.as_ref().map(|c| (*t, w, c))))
            .collect();
        let mut used: Vec<&Workload> = jobs.iter().map(|j| j.1).collect();
        used.sort_by(|a, b| a.name.cmp(&b.name));
        used.dedup_by(|a, b| a.name == b.name);
        let versions = par_map(&used, |w| {
            let c = w.command.as_ref().expect("only command-rendered workloads");
            c.version(&w.dir, &w.name, &w.namespace).map_err(|m| PlatformError::Render(format!("workload {}: {m}", w.name)))
        });
        let mut out = CommandOutputs::default();
        for (w, v) in used.iter().zip(versions) {
            out.versions.insert(w.name.clone(), v?);
        }
        let limit = usize::try_from(InputLimits::default().max_file_bytes).unwrap_or(usize::MAX);
        let outputs = par_map(&jobs, |(t, w, c)| {
            let ctx = Context { environment: env, cluster_type: &t.name, workload: &w.name, namespace: &w.namespace };
            c.render(&w.dir, ctx, &self.values(env, t, w), limit)
                .map_err(|m| PlatformError::Render(format!("cluster type {} in environment {env}: workload {}: {m}", t.name, w.name)))
        });
        for ((t, w, _), o) in jobs.iter().zip(outputs) {
            out.outputs.insert((t.name.clone(), w.name.clone()), o?);
        }
        Ok(out)
    }

    /// Renders one cluster type for `env` with the renderer commands' outputs.
    fn render_type_with(&self, env: &str, t: &ClusterType, commands: &CommandOutputs) -> Result<RenderedType, PlatformError> {
        let within = |m: String| PlatformError::Render(format!("cluster type {} in environment {env}: {m}", t.name));
        let assigned = self.assigned(env, t);
        if !self.namespace_templates.is_empty() {
            let mut owner: HashMap<&str, &str> = HashMap::new();
            for w in &assigned {
                if let Some(other) = owner.insert(&w.namespace, &w.name) {
                    return Err(within(format!(
                        "workloads {other} and {} both use namespace {}; namespace templates are stamped once per workload, so each workload needs its own namespace",
                        w.name, w.namespace
                    )));
                }
            }
        }
        let mut collector = Collector::new(&self.cluster_scoped_kinds, ScopeSource::Platform);
        let mut owners: HashMap<String, (&str, &str)> = HashMap::new();
        for w in &assigned {
            let values = self.values(env, t, w);
            let shown = |n: &str| self.root.join(n).display().to_string();
            if let Some(out) = commands.outputs.get(&(t.name.clone(), w.name.clone())) {
                let label = format!("{} [output of spec.render.command]", shown(&format!("workloads/{}", w.name)));
                collector
                    .add_document_text(&label, &out.text)
                    .map_err(|e| within(format!("{}{}", with_rendered_line(&e, &out.text), stderr_block(&out.stderr))))?;
                owners.insert(label, (&w.name, &w.namespace));
            }
            let ctx = minijinja::Value::from(minijinja::value::Serde(json!({
                "values": values,
                "workload": {"name": w.name, "namespace": w.namespace},
                "namespace": w.namespace,
                "clusterType": {"name": t.name, "labels": t.labels},
                "environment": {"name": env},
            })));
            let stamped = self.namespace_templates.iter().map(|n| (n, format!("{} [workload {}]", shown(n), w.name)));
            let own = w.templates.iter().map(|n| (n, shown(n)));
            for (name, label) in own.chain(stamped) {
                let tmpl = self.env.get_template(name).map_err(|e| within(template_error(&e, &self.root)))?;
                let text = tmpl.render(&ctx).map_err(|e| within(template_error(&e, &self.root)))?;
                collector.add_document_text(&label, &text).map_err(|e| within(with_rendered_line(&e, &text)))?;
                owners.insert(label, (&w.name, &w.namespace));
            }
        }
        let finished = collector.finish_with_sources().map_err(|e| within(e.to_string()))?;
        let mut objects = BTreeMap::new();
        for (id, c) in finished.objects {
            if let Some(ns) = &id.namespace {
                let label = c.source.rsplit_once(" (document ").map(|(l, _)| l).unwrap_or(&c.source);
                if let Some((w, wns)) = owners.get(label) {
                    if ns != wns {
                        return Err(within(format!(
                            "{}: {id} is in namespace {ns}, but workload {w} deploys into namespace {wns} (its spec.namespace); objects must stay in their workload's namespace",
                            c.source
                        )));
                    }
                }
            }
            objects.insert(id, c.yaml);
        }
        let warnings = finished.warnings.into_iter().map(|w| format!("cluster type {}: {w}", t.name)).collect();
        // Recorded only when a command rendered something: bundles of template-only
        // platforms keep their config (and digest) as before.
        let provenance = if assigned.iter().any(|w| w.command.is_some()) {
            assigned.iter().map(|w| provenance(&w.name, w.command.as_ref(), commands.versions.get(&w.name).cloned().flatten())).collect()
        } else {
            Vec::new()
        };
        use super::health::{compose, Layer};
        let layers: Vec<Layer<'_>> = assigned.iter().map(|w| Layer { file: &w.file, rules: &w.health_checks }).collect();
        let health_checks = compose(Layer { file: &self.fleet_file, rules: &self.health_checks }, Layer { file: &t.file, rules: &t.health_checks }, &layers).map_err(within)?;
        Ok(RenderedType { name: t.name.clone(), workloads: assigned.iter().map(|w| w.name.clone()).collect(), objects, warnings, provenance, health_checks })
    }
}
