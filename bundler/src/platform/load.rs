//! Loading a platform directory: every file parsed strictly, names and cross-references
//! checked, every template compiled once (errors name the file and line).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::model::{ClusterTypeDoc, EnvironmentDoc, OverrideDoc, WorkloadDoc, API_VERSION};
use super::command::CommandRenderer;
use super::membership::valid_name;
use super::selector::LabelSelector;
use super::template::{self, template_error};
use super::error::PlatformError;

/// The name no cluster type may have: the repository of release records.
pub const RESERVED_CLUSTER_TYPE: &str = "drover-releases";

/// One level of values (`values` for all workloads, `workloads.<name>` for one).
#[derive(Debug, Clone, Default)]
pub struct Level {
    /// The file it came from (for messages).
    pub file: String,
    /// Values for every workload.
    pub values: Map<String, Value>,
    /// Values for one workload each.
    pub workloads: BTreeMap<String, Map<String, Value>>,
}

/// A cluster type: its capabilities and values.
#[derive(Debug, Clone)]
pub struct ClusterType {
    /// Name (= file name).
    pub name: String,
    /// Capability labels.
    pub labels: BTreeMap<String, String>,
    /// Its values level.
    pub level: Level,
    /// Its health rules (`healthChecks`), checked.
    pub health_checks: Vec<drover_proto::health::HealthRule>,
    /// Its file (for messages).
    pub file: String,
}

/// A workload: where it goes, its defaults and its templates.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name (= directory name).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Environments it is deployed to.
    pub environments: Vec<String>,
    /// Which cluster types get it.
    pub selector: LabelSelector,
    /// Default values (the lowest level).
    pub defaults: Map<String, Value>,
    /// Template names to render (paths relative to the platform root), sorted; empty for
    /// a workload rendered by a command.
    pub templates: Vec<String>,
    /// The command that renders it (`spec.render`), instead of templates.
    pub command: Option<CommandRenderer>,
    /// Its directory (where its command runs).
    pub dir: PathBuf,
    /// `workload.yaml` display path.
    pub file: String,
    /// Its health rules (`spec.healthChecks`), checked.
    pub health_checks: Vec<drover_proto::health::HealthRule>,
}

/// A loaded, validated platform definition.
pub struct Platform {
    /// The platform directory.
    pub root: PathBuf,
    /// Environments in promotion order.
    pub environments: Vec<String>,
    /// Extra cluster-scoped kinds from `fleet.yaml`.
    pub cluster_scoped_kinds: Vec<String>,
    /// `fleet.yaml` `spec.healthChecks`, checked.
    pub health_checks: Vec<drover_proto::health::HealthRule>,
    /// `fleet.yaml` display path.
    pub fleet_file: String,
    /// Cluster types by name.
    pub cluster_types: BTreeMap<String, ClusterType>,
    /// Environment values by environment.
    pub environment_levels: BTreeMap<String, Level>,
    /// Override values by (environment, cluster type).
    pub overrides: BTreeMap<(String, String), Level>,
    /// Namespace template names (paths relative to the platform root), sorted.
    pub namespace_templates: Vec<String>,
    /// Workloads by name.
    pub workloads: BTreeMap<String, Workload>,
    /// Every template, compiled.
    pub(crate) env: minijinja::Environment<'static>,
}

fn err(path: &str, message: impl Into<String>) -> PlatformError {
    PlatformError::File { path: path.to_string(), message: message.into() }
}


fn check_name(path: &str, what: &str, name: &str) -> Result<(), PlatformError> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(err(path, format!("{what} name {name:?} must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit")))
    }
}

fn read_text(root: &Path, rel: &str) -> Result<(String, String), PlatformError> {
    let display = root.join(rel).display().to_string();
    let text = std::fs::read_to_string(root.join(rel)).map_err(|e| err(&display, format!("cannot read: {e}")))?;
    Ok((display, text))
}

fn parse_doc<T: DeserializeOwned>(display: &str, text: &str) -> Result<T, PlatformError> {
    serde_yaml_ng::from_str(text).map_err(|e| err(display, e.to_string()))
}

fn check_header(path: &str, api_version: &str, kind: &str, want: &str) -> Result<(), PlatformError> {
    if api_version != API_VERSION {
        return Err(err(path, format!("apiVersion is {api_version:?}; platform files use {API_VERSION:?}")));
    }
    if kind != want {
        return Err(err(path, format!("kind is {kind:?}; this file must be kind {want:?}")));
    }
    Ok(())
}

fn as_map(path: &str, field: &str, v: Value) -> Result<Map<String, Value>, PlatformError> {
    match v {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(err(path, format!("{field} must be a mapping, found {}", kind_of(&other)))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn level(path: &str, values: Value, workloads: BTreeMap<String, Value>) -> Result<Level, PlatformError> {
    let values = as_map(path, "values", values)?;
    let mut w = BTreeMap::new();
    for (name, v) in workloads {
        w.insert(name.clone(), as_map(path, &format!("workloads.{name}"), v)?);
    }
    Ok(Level { file: path.to_string(), values, workloads: w })
}

/// `*.yaml`/`*.yml` file names directly in `dir` (sorted; none when it does not exist).
fn yaml_files(root: &Path, rel_dir: &str) -> Result<Vec<String>, PlatformError> {
    let dir = root.join(rel_dir);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let rd = std::fs::read_dir(&dir).map_err(|e| err(&dir.display().to_string(), format!("cannot list: {e}")))?;
    for entry in rd {
        let entry = entry.map_err(|e| err(&dir.display().to_string(), format!("cannot list: {e}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

fn stem(file: &str) -> &str {
    file.trim_end_matches(".yaml").trim_end_matches(".yml")
}

fn subdirs(root: &Path, rel_dir: &str) -> Result<Vec<String>, PlatformError> {
    let dir = root.join(rel_dir);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let rd = std::fs::read_dir(&dir).map_err(|e| err(&dir.display().to_string(), format!("cannot list: {e}")))?;
    for entry in rd.flatten() {
        if entry.path().is_dir() {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// Every file under `rel_dir` (recursive), as relative paths with '/' separators, sorted.
fn files_recursive(root: &Path, rel_dir: &str, out: &mut Vec<String>) -> Result<(), PlatformError> {
    let dir = root.join(rel_dir);
    let rd = std::fs::read_dir(&dir).map_err(|e| err(&dir.display().to_string(), format!("cannot list: {e}")))?;
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let rel = format!("{rel_dir}/{}", entry.file_name().to_string_lossy());
        if entry.path().is_dir() {
            files_recursive(root, &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// A template file is rendered when it ends in `.yaml`/`.yml` and does not start with `_`
/// (`_*` files are partials for `include`/`import`).
fn is_rendered(rel: &str) -> bool {
    let base = rel.rsplit('/').next().unwrap_or(rel);
    (base.ends_with(".yaml") || base.ends_with(".yml")) && !base.starts_with('_')
}

impl Platform {
    /// Loads and validates the platform definition in `root`.
    pub fn load(root: &Path) -> Result<Platform, PlatformError> {
        if !root.is_dir() {
            return Err(err(&root.display().to_string(), "not a directory (expected a platform with fleet.yaml)"));
        }
        let (fleet_path, text) = read_text(root, "fleet.yaml")?;
        let fleet = super::membership::parse(&fleet_path, &text)?;
        let environments = fleet.spec.environments.clone();

        let mut env = template::environment().map_err(|e| err(&fleet_path, e.to_string()))?;

        // Cluster types.
        let mut cluster_types = BTreeMap::new();
        for file in yaml_files(root, "cluster-types")? {
            let (path, text) = read_text(root, &format!("cluster-types/{file}"))?;
            let doc: ClusterTypeDoc = parse_doc(&path, &text)?;
            check_header(&path, &doc.api_version, &doc.kind, "ClusterType")?;
            let name = stem(&file).to_string();
            check_name(&path, "cluster type", &name)?;
            if name == RESERVED_CLUSTER_TYPE {
                return Err(err(&path, format!("the cluster type name {RESERVED_CLUSTER_TYPE:?} is reserved for release records; rename the file")));
            }
            if let Some(n) = &doc.metadata.name {
                if n != &name {
                    return Err(err(&path, format!("metadata.name is {n:?} but the file is named {file:?}; they must match")));
                }
            }
            let level = level(&path, doc.values, doc.workloads)?;
            let health_checks = super::health::checked(&path, "healthChecks", doc.health_checks)?;
            cluster_types.insert(name.clone(), ClusterType { name, labels: doc.metadata.labels, level, health_checks, file: path });
        }
        if cluster_types.is_empty() {
            return Err(err(&root.join("cluster-types").display().to_string(), "no cluster types (add cluster-types/<name>.yaml with kind: ClusterType)"));
        }
        let type_names = cluster_types.keys().cloned().collect();
        super::membership::check_clusters(&fleet_path, &fleet.spec.clusters, &environments, &type_names)?;

        // Environments: one file per environment of fleet.yaml, no others.
        let mut environment_levels = BTreeMap::new();
        for file in yaml_files(root, "environments")? {
            let (path, text) = read_text(root, &format!("environments/{file}"))?;
            let doc: EnvironmentDoc = parse_doc(&path, &text)?;
            check_header(&path, &doc.api_version, &doc.kind, "Environment")?;
            let name = stem(&file).to_string();
            if !environments.contains(&name) {
                return Err(err(&path, format!("environment {name:?} is not in {fleet_path} spec.environments {environments:?}; add it there or remove this file")));
            }
            if let Some(n) = &doc.metadata.name {
                if n != &name {
                    return Err(err(&path, format!("metadata.name is {n:?} but the file is named {file:?}; they must match")));
                }
            }
            environment_levels.insert(name, level(&path, doc.values, doc.workloads)?);
        }
        for e in &environments {
            if !environment_levels.contains_key(e) {
                return Err(err(
                    &root.join(format!("environments/{e}.yaml")).display().to_string(),
                    format!("missing: every environment of {fleet_path} needs a file with kind: Environment (values may be empty)"),
                ));
            }
        }

        // Overrides.
        let mut overrides = BTreeMap::new();
        for e in subdirs(root, "overrides")? {
            let dir = root.join(format!("overrides/{e}")).display().to_string();
            if !environments.contains(&e) {
                return Err(err(&dir, format!("{e:?} is not an environment of {fleet_path}")));
            }
            for file in yaml_files(root, &format!("overrides/{e}"))? {
                let (path, text) = read_text(root, &format!("overrides/{e}/{file}"))?;
                let doc: OverrideDoc = parse_doc(&path, &text)?;
                if let Some(a) = &doc.api_version {
                    check_header(&path, a, doc.kind.as_deref().unwrap_or("Override"), "Override")?;
                } else if let Some(k) = &doc.kind {
                    check_header(&path, API_VERSION, k, "Override")?;
                }
                let t = stem(&file).to_string();
                if !cluster_types.contains_key(&t) {
                    return Err(err(&path, format!("there is no cluster type {t:?} (cluster-types/{t}.yaml)")));
                }
                overrides.insert((e.clone(), t), level(&path, doc.values, doc.workloads)?);
            }
        }

        // Namespace templates.
        let mut namespace_templates = Vec::new();
        if root.join("namespace").is_dir() {
            let mut files = Vec::new();
            files_recursive(root, "namespace", &mut files)?;
            for rel in files {
                let (_, text) = read_text(root, &rel)?;
                env.add_template_owned(rel.clone(), text).map_err(|e| PlatformError::Template(template_error(&e, root)))?;
                if is_rendered(&rel) {
                    namespace_templates.push(rel);
                }
            }
        }

        // Workloads.
        let mut workloads = BTreeMap::new();
        for w in subdirs(root, "workloads")? {
            let rel = format!("workloads/{w}/workload.yaml");
            let (path, text) = read_text(root, &rel)?;
            let doc: WorkloadDoc = parse_doc(&path, &text)?;
            check_header(&path, &doc.api_version, &doc.kind, "Workload")?;
            check_name(&path, "workload", &w)?;
            if let Some(n) = &doc.metadata.name {
                if n != &w {
                    return Err(err(&path, format!("metadata.name is {n:?} but the directory is named {w:?}; they must match")));
                }
            }
            check_name(&path, "spec.namespace", &doc.spec.namespace)?;
            doc.spec.selector.validate().map_err(|m| err(&path, m))?;
            let envs = doc.spec.environments.clone().unwrap_or_else(|| environments.clone());
            for e in &envs {
                if !environments.contains(e) {
                    return Err(err(&path, format!("spec.environments: {e:?} is not an environment of {fleet_path} {environments:?}")));
                }
            }
            let defaults = as_map(&path, "values", doc.values)?;
            let health_checks = super::health::checked(&path, "spec.healthChecks", doc.spec.health_checks)?;
            let command = doc.spec.render.map(CommandRenderer::from_spec).transpose().map_err(|m| err(&path, m))?;
            let mut templates = Vec::new();
            let tdir = format!("workloads/{w}/templates");
            if command.is_some() && root.join(&tdir).is_dir() {
                return Err(err(&path, format!(
                    "spec.render and {} are both given; a workload is rendered either by its templates or by a command: remove one",
                    root.join(&tdir).display()
                )));
            }
            if root.join(&tdir).is_dir() {
                let mut files = Vec::new();
                files_recursive(root, &tdir, &mut files)?;
                for rel in files {
                    let (_, text) = read_text(root, &rel)?;
                    env.add_template_owned(rel.clone(), text).map_err(|e| PlatformError::Template(template_error(&e, root)))?;
                    if is_rendered(&rel) {
                        templates.push(rel);
                    }
                }
            }
            workloads.insert(
                w.clone(),
                Workload {
                    dir: std::path::absolute(root.join(format!("workloads/{w}"))).map_err(|e| err(&path, format!("cannot resolve its directory: {e}")))?,
                    name: w,
                    namespace: doc.spec.namespace,
                    environments: envs,
                    selector: doc.spec.selector,
                    defaults,
                    templates,
                    command,
                    file: path,
                    health_checks,
                },
            );
        }

        // Every `workloads.<name>` key at any level must name a workload (typos are errors).
        let levels = cluster_types.values().map(|t| &t.level).chain(environment_levels.values()).chain(overrides.values());
        for l in levels {
            for name in l.workloads.keys() {
                if !workloads.contains_key(name) {
                    return Err(err(&l.file, format!("workloads.{name}: there is no workload {name:?} (workloads/{name}/workload.yaml)")));
                }
            }
        }

        Ok(Platform {
            root: root.to_path_buf(),
            environments,
            cluster_scoped_kinds: fleet.spec.cluster_scoped_kinds,
            health_checks: super::health::checked(&fleet_path, "spec.healthChecks", fleet.spec.health_checks)?,
            fleet_file: fleet_path,
            cluster_types,
            environment_levels,
            overrides,
            namespace_templates,
            workloads,
            env,
        })
    }

    /// Checks `env` is an environment of the fleet.
    pub fn check_environment(&self, env: &str) -> Result<(), PlatformError> {
        if self.environments.iter().any(|e| e == env) {
            Ok(())
        } else {
            Err(PlatformError::Usage(format!(
                "unknown environment {env:?}; {} lists {:?}",
                self.root.join("fleet.yaml").display(),
                self.environments
            )))
        }
    }

    /// The workloads assigned to cluster type `t` in environment `env`, by name.
    pub fn assigned(&self, env: &str, t: &ClusterType) -> Vec<&Workload> {
        self.workloads
            .values()
            .filter(|w| w.environments.iter().any(|e| e == env) && w.selector.matches(&t.labels))
            .collect()
    }

    /// The composed values of workload `w` in environment `env` on cluster type `t`:
    /// defaults, then environment, cluster type, override; each level's `values` then
    /// its `workloads.<w>`.
    pub fn values(&self, env: &str, t: &ClusterType, w: &Workload) -> Map<String, Value> {
        let mut out = Map::new();
        super::values::merge(&mut out, &w.defaults);
        let levels = [self.environment_levels.get(env), Some(&t.level), self.overrides.get(&(env.to_string(), t.name.clone()))];
        for l in levels.into_iter().flatten() {
            super::values::merge(&mut out, &l.values);
            if let Some(m) = l.workloads.get(&w.name) {
                super::values::merge(&mut out, m);
            }
        }
        out
    }
}
