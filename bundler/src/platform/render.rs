//! Rendering one (environment, cluster type): every assigned workload's templates and
//! the namespace templates stamped for it, collected into bundle objects with the
//! bundle input rules plus the platform's own (objects stay in their workload's namespace).

use std::collections::{BTreeMap, HashMap};

use drover_proto::object::ObjectRef;
use serde_json::json;

use super::load::{ClusterType, Platform};
use super::template::template_error;
use super::error::PlatformError;
use crate::input::Collector;
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
        par_map(&types, |t| self.render_type(env, t)).into_iter().collect()
    }

    /// Renders one cluster type for `env`.
    pub fn render_type(&self, env: &str, t: &ClusterType) -> Result<RenderedType, PlatformError> {
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
        let mut collector = Collector::new(&self.cluster_scoped_kinds);
        let mut owners: HashMap<String, (&str, &str)> = HashMap::new();
        for w in &assigned {
            let values = self.values(env, t, w);
            let ctx = minijinja::Value::from(minijinja::value::Serde(json!({
                "values": values,
                "workload": {"name": w.name, "namespace": w.namespace},
                "namespace": w.namespace,
                "clusterType": {"name": t.name, "labels": t.labels},
                "environment": {"name": env},
            })));
            let shown = |n: &str| self.root.join(n).display().to_string();
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
        Ok(RenderedType { name: t.name.clone(), workloads: assigned.iter().map(|w| w.name.clone()).collect(), objects, warnings })
    }
}
