//! The `--config` file and its `sources:` list. Each entry is a mapping with a `name`
//! (1-63 of `[a-z0-9-]`), an optional `dependsOn: [NAME, ...]`, and any per-source field
//! of [`ConfigLayer`]; agent-wide fields ([`AGENT_WIDE`]) belong at the top level only.
//! Whatever an entry does not set comes from the flags and the file's top level.
//! Start-up errors name the file and the entry (`sources[2] (team-b)`): an unknown or
//! agent-wide field, a missing or invalid name, a duplicate name or reference, a
//! `dependsOn` naming no source or making a cycle, two sources writing the same report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::Value as Yaml;

use super::layer::{ConfigError, ConfigLayer};
use super::source::{valid_name, SourceSettings};

/// Fields that hold for the whole agent (one process, one database, one HTTP server, one
/// leader election): set at the top level, refused in a `sources:` entry.
pub const AGENT_WIDE: &[&str] =
    &["target", "stateDir", "sharedStateParent", "listen", "logFormat", "leaderElection", "leaseNamespace", "leaseName", "leaseDuration"];

/// One entry of `sources:`, read but not yet merged with the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEntry {
    /// Position in the list (0-based).
    pub index: usize,
    /// `name:`.
    pub name: String,
    /// `dependsOn:`.
    pub depends_on: Vec<String>,
    /// Its per-source fields.
    pub layer: ConfigLayer,
}

impl SourceEntry {
    /// `sources[INDEX] (NAME)`, as errors name the entry.
    pub fn label(&self) -> String {
        label(self.index, Some(&self.name))
    }
}

fn label(index: usize, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("sources[{index}] ({n})"),
        None => format!("sources[{index}]"),
    }
}

/// A read config file: its top-level layer and, when it has one, its `sources:` list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    /// The file (None: no file, or settings built in code).
    pub path: Option<PathBuf>,
    /// The top-level fields: agent-wide settings and the defaults of every source.
    pub layer: ConfigLayer,
    /// The entries of `sources:`, when the file has the list.
    pub entries: Option<Vec<SourceEntry>>,
}

/// Settings given in code or on the command line: no file, no `sources:` list (a list is
/// read from a file only, [`ConfigFile::parse`]).
impl From<ConfigLayer> for ConfigFile {
    fn from(mut layer: ConfigLayer) -> Self {
        layer.sources = None;
        ConfigFile { path: None, layer, entries: None }
    }
}

impl ConfigFile {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read { path: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text, path)
    }

    /// Parses the text of the config file `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(ConfigFile { path: Some(path.to_path_buf()), ..Default::default() });
        }
        let named = path.display().to_string();
        let mut layer: ConfigLayer = serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Parse { path: named.clone(), message: e.to_string() })?;
        let entries = layer.sources.take().map(|list| read_entries(&named, list)).transpose()?;
        Ok(ConfigFile { path: Some(path.to_path_buf()), layer, entries })
    }

    /// `config file PATH`, or `settings` without a file: how errors name the origin.
    pub fn origin(&self) -> String {
        match &self.path {
            Some(p) => format!("config file {}", p.display()),
            None => "settings".into(),
        }
    }
}

/// Reads the entries of `sources:` (`path` names the file in errors).
fn read_entries(path: &str, list: Vec<Yaml>) -> Result<Vec<SourceEntry>, ConfigError> {
    let parse = |message: String| ConfigError::Parse { path: path.to_string(), message };
    if list.is_empty() {
        return Err(parse("`sources:` is empty: list at least one source (name: and source:), or remove it and give `source:`".into()));
    }
    let mut entries: Vec<SourceEntry> = Vec::with_capacity(list.len());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (index, item) in list.into_iter().enumerate() {
        let entry = read_entry(index, item).map_err(|(name, m)| parse(format!("{}: {m}", label(index, name.as_deref()))))?;
        if let Some(first) = seen.insert(entry.name.clone(), index) {
            return Err(parse(format!("{}: the name {:?} is already used by sources[{first}]; names must be unique", entry.label(), entry.name)));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// One entry; the error carries the entry's name when it has one.
fn read_entry(index: usize, item: Yaml) -> Result<SourceEntry, (Option<String>, String)> {
    let Yaml::Mapping(mut map) = item else {
        return Err((None, "is not a mapping: each entry has `name:`, `source:` and the source's own settings".into()));
    };
    let name = match map.remove("name") {
        Some(Yaml::String(n)) => n,
        Some(other) => return Err((None, format!("`name` must be a string, not {}", kind(&other)))),
        None => return Err((None, "has no `name` (1-63 of a-z, 0-9 and '-')".into())),
    };
    let named = Some(name.clone());
    if !valid_name(&name) {
        return Err((named, format!("the name {name:?} is not 1-63 of a-z, 0-9 and '-' (starting and ending with a letter or digit)")));
    }
    let depends_on = match map.remove("dependsOn") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(v) => Vec::<String>::deserialize(v).map_err(|e| (named.clone(), format!("`dependsOn` must be a list of source names: {e}")))?,
    };
    for key in map.keys() {
        let Some(k) = key.as_str() else { continue };
        if AGENT_WIDE.contains(&k) {
            return Err((named, format!("`{k}` is agent-wide (one per agent): set it at the top level of the file, not in a source")));
        }
        if k == "sources" {
            return Err((named, "`sources` cannot be nested".into()));
        }
    }
    let layer = ConfigLayer::deserialize(Yaml::Mapping(map)).map_err(|e| (named.clone(), e.to_string()))?;
    Ok(SourceEntry { index, name, depends_on, layer })
}

fn kind(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "null",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

/// Checks the sources together: one reference per source (it keys the source's state
/// and ownership), `dependsOn` naming configured sources without cycles, and no two
/// sources writing the same fleet report.
pub(super) fn check_sources(origin: &str, sources: &[SourceSettings]) -> Result<(), ConfigError> {
    let err = |index: usize, message: String| ConfigError::Entry { origin: origin.to_string(), entry: label(index, Some(&sources[index].name)), error: Box::new(ConfigError::Parse { path: origin.to_string(), message }) };
    let by_name: BTreeMap<&str, usize> = sources.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut refs: BTreeMap<&str, usize> = BTreeMap::new();
    let mut reports: BTreeMap<String, usize> = BTreeMap::new();
    for (i, s) in sources.iter().enumerate() {
        if let Some(first) = refs.insert(s.source.as_str(), i) {
            return Err(err(i, format!("polls {} like sources[{first}] ({}): one source per reference (the reference keys its state and owns its objects)", s.source, sources[first].name)));
        }
        for d in &s.depends_on {
            if !by_name.contains_key(d.as_str()) {
                let names: Vec<&str> = by_name.keys().copied().collect();
                return Err(err(i, format!("dependsOn names {d:?}, which is no source here (the sources are: {})", names.join(", "))));
            }
        }
        if let Some(r) = &s.report {
            let key = format!("{}:{}.{}", r.to, r.cluster_type, r.cluster_name);
            if let Some(first) = reports.insert(key.clone(), i) {
                return Err(err(
                    i,
                    format!(
                        "writes its fleet report to {key}, as sources[{first}] ({}) does: give one of them its own reports repository (reportTo:)",
                        sources[first].name
                    ),
                ));
            }
        }
    }
    if let Some(cycle) = cycle(sources, &by_name) {
        let first = by_name[cycle[0].as_str()];
        return Err(err(first, format!("dependsOn makes a cycle: {}; nothing could ever apply", cycle.join(" -> "))));
    }
    Ok(())
}

/// A dependency cycle, as the names along it (first name repeated at the end).
fn cycle(sources: &[SourceSettings], by_name: &BTreeMap<&str, usize>) -> Option<Vec<String>> {
    // Depth-first search with colours: 0 unvisited, 1 on the path, 2 done.
    let mut colour = vec![0u8; sources.len()];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..sources.len() {
        if colour[start] != 0 {
            continue;
        }
        // An explicit stack of (node, next dependency to look at): no recursion.
        let mut stack = vec![(start, 0usize)];
        colour[start] = 1;
        path.push(start);
        while let Some((node, next)) = stack.last_mut() {
            let deps = &sources[*node].depends_on;
            if *next == deps.len() {
                colour[*node] = 2;
                path.pop();
                stack.pop();
                continue;
            }
            let dep = by_name[deps[*next].as_str()];
            *next += 1;
            match colour[dep] {
                0 => {
                    colour[dep] = 1;
                    path.push(dep);
                    stack.push((dep, 0));
                }
                1 => {
                    let from = path.iter().position(|&p| p == dep).expect("on the path");
                    let mut names: Vec<String> = path[from..].iter().map(|&p| sources[p].name.clone()).collect();
                    names.push(sources[dep].name.clone());
                    return Some(names);
                }
                _ => {}
            }
        }
    }
    None
}

/// The names `name` depends on, directly or not.
pub fn dependencies_of<'a>(sources: &'a [SourceSettings], name: &str) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<&str> = sources.iter().filter(|s| s.name == name).flat_map(|s| s.depends_on.iter().map(String::as_str)).collect();
    while let Some(n) = todo.pop() {
        if let Some(s) = sources.iter().find(|s| s.name == n) {
            if out.insert(s.name.as_str()) {
                todo.extend(s.depends_on.iter().map(String::as_str));
            }
        }
    }
    out
}
