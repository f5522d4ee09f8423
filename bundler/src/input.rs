//! Reading rendered YAML into bundle objects: multi-document text in, one canonical
//! YAML file per object out (identity → bytes), ready for `drover_proto::bundle::assemble`.
//!
//! [`Collector`] is the reusable core (any caller with text and a label for error
//! messages: files, templates); [`load_dir`] feeds it every `*.yaml`/`*.yml` of a directory.
//! Rules (see `docs/bundle.md`):
//! - documents are numbered from 1 in messages; empty documents are skipped;
//!   `kind: List` documents are flattened (items numbered from 1);
//! - every object needs `apiVersion`, `kind` and `metadata.name`;
//! - cluster-scoped kinds: the built-in table, CRDs in the same input (by `spec.scope`,
//!   for their group and kind), plus the caller's extra kinds;
//! - a namespaced object without a namespace is an error; a cluster-scoped object WITH a
//!   namespace has it removed (as the API server does) and a warning is recorded;
//! - the same object twice (same group, kind, namespace, name; any version) is an error
//!   naming both sources;
//! - the bytes of each object are canonical: keys sorted at every level, one document,
//!   so formatting and key order of the input do not change the bundle digest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use drover_proto::object::{ObjectRef, BUILTIN_CLUSTER_SCOPED};
use serde_json::Value;

mod canonical;
pub mod fights;
pub use canonical::canonical_yaml;

/// Size and count limits on input (defaults fit what an agent accepts by default).
#[derive(Debug, Clone, Copy)]
pub struct InputLimits {
    /// Maximum size of one input file or text.
    pub max_file_bytes: u64,
    /// Maximum total size of all input texts.
    pub max_total_bytes: u64,
    /// Maximum number of objects.
    pub max_objects: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits { max_file_bytes: 32 << 20, max_total_bytes: 256 << 20, max_objects: 50_000 }
    }
}

/// Why input was refused. Every variant names the file (source label) involved.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A file or directory could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What failed.
        message: String,
    },
    /// The input directory holds no YAML file.
    #[error("{0}: no *.yaml or *.yml files found (is this the rendered output directory?)")]
    NoFiles(String),
    /// A file is not UTF-8.
    #[error("{path}: not UTF-8 text (invalid byte at offset {offset}); save the file as UTF-8")]
    NotUtf8 {
        /// The file.
        path: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// A file is over the per-file size limit.
    #[error("{path}: {size} bytes, over the limit of {limit} bytes per file; split it into smaller files")]
    FileTooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// All input together is over the total size limit.
    #[error("{path}: the input reaches {size} bytes in total with this file, over the limit of {limit} bytes; split the bundle")]
    TotalTooLarge {
        /// The file that crossed the limit.
        path: String,
        /// Total size so far.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Too many objects.
    #[error("{at}: more than {limit} objects in the input; split the bundle")]
    TooManyObjects {
        /// Where the limit was crossed.
        at: String,
        /// The limit.
        limit: usize,
    },
    /// A document is not valid YAML.
    #[error("{at}: invalid YAML: {message}")]
    Yaml {
        /// `FILE (document N)`.
        at: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A document is not an acceptable object (not a mapping, missing or bad field).
    #[error("{at}: {message}")]
    Invalid {
        /// `FILE (document N[, item M])`.
        at: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A namespaced object has no namespace.
    #[error("{at}: {object} has no metadata.namespace, and {kind} is namespaced; set metadata.namespace, or {} if {kind} is cluster-scoped", .scopes.declare(.kind))]
    MissingNamespace {
        /// Where the object is.
        at: String,
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
        /// Where the command reading the input is told that a kind is cluster-scoped.
        scopes: ScopeSource,
    },
    /// The same object appears twice.
    #[error("{object} is defined twice: in {first} and in {second}; remove one of them")]
    Duplicate {
        /// The object.
        object: String,
        /// Where it appeared first.
        first: String,
        /// Where it appeared again.
        second: String,
    },
    /// Two different objects map to the same file path in the bundle.
    #[error("{first_object} ({first}) and {second_object} ({second}) would both be stored at {path}; rename one of them")]
    PathCollision {
        /// The bundle path.
        path: String,
        /// The first object.
        first_object: String,
        /// Where it is.
        first: String,
        /// The second object.
        second_object: String,
        /// Where it is.
        second: String,
    },
}

/// Where the command reading the input takes the extra kinds it treats as cluster-scoped:
/// what its missing-namespace error tells the operator to change (each command suggests
/// only what it accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeSource {
    /// `--cluster-scoped-kind KIND` (`drover build`, `push`, `diff`).
    Flag,
    /// `spec.clusterScopedKinds` in the platform's `fleet.yaml` (`drover render`, `publish`).
    Platform,
}

impl ScopeSource {
    /// The change that declares `kind` cluster-scoped.
    pub fn declare(self, kind: &str) -> String {
        match self {
            ScopeSource::Flag => format!("pass --cluster-scoped-kind {kind}"),
            ScopeSource::Platform => format!("add {kind} to spec.clusterScopedKinds in fleet.yaml"),
        }
    }
}

/// One collected object: canonical YAML bytes and where it came from.
#[derive(Debug, Clone)]
pub struct Collected {
    /// Canonical YAML of exactly this object.
    pub yaml: Vec<u8>,
    /// The parsed (canonical) object.
    pub value: Value,
    /// Where it came from: `LABEL (document N[, item M])`.
    pub source: String,
}

/// The result of [`Collector::finish_with_sources`].
#[derive(Debug, Clone)]
pub struct Finished {
    /// Every object by identity.
    pub objects: BTreeMap<ObjectRef, Collected>,
    /// Non-fatal findings (print them on stderr).
    pub warnings: Vec<String>,
}

struct Pending {
    at: String,
    id: ObjectRef,
    value: Value,
}

/// Collects objects from multi-document YAML texts; [`Collector::finish`] resolves
/// scopes and duplicates once everything (including CRDs) has been seen.
pub struct Collector {
    extra_cluster_scoped: BTreeSet<String>,
    scopes: ScopeSource,
    crd_scopes: BTreeMap<(String, String), bool>,
    pending: Vec<Pending>,
    limits: InputLimits,
    total_bytes: u64,
    warnings: Vec<String>,
}

impl Collector {
    /// A collector with default limits; `extra_cluster_scoped_kinds` are kinds to treat as
    /// cluster-scoped, given by `scopes` (`--cluster-scoped-kind` or `fleet.yaml`).
    pub fn new(extra_cluster_scoped_kinds: &[String], scopes: ScopeSource) -> Self {
        Self::with_limits(extra_cluster_scoped_kinds, scopes, InputLimits::default())
    }

    /// A collector with explicit limits.
    pub fn with_limits(extra_cluster_scoped_kinds: &[String], scopes: ScopeSource, limits: InputLimits) -> Self {
        Collector {
            extra_cluster_scoped: extra_cluster_scoped_kinds.iter().cloned().collect(),
            scopes,
            crd_scopes: BTreeMap::new(),
            pending: Vec::new(),
            limits,
            total_bytes: 0,
            warnings: Vec::new(),
        }
    }

    /// Number of objects collected so far.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no object was collected yet.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Non-fatal findings so far (e.g. a namespace removed from a cluster-scoped object).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Adds every object of a (multi-document) YAML text. `source_label` names the text in
    /// error messages (a file path, a template path). Errors name the label and the
    /// document number (from 1).
    pub fn add_document_text(&mut self, source_label: &str, text: &str) -> Result<(), InputError> {
        self.charge(source_label, text.len() as u64)?;
        let docs = parse_text(source_label, text);
        self.add_parsed(docs)
    }

    /// Counts `size` bytes of `source_label` against the per-file and total limits.
    fn charge(&mut self, source_label: &str, size: u64) -> Result<(), InputError> {
        if size > self.limits.max_file_bytes {
            return Err(InputError::FileTooLarge { path: source_label.into(), size, limit: self.limits.max_file_bytes });
        }
        self.total_bytes += size;
        if self.total_bytes > self.limits.max_total_bytes {
            return Err(InputError::TotalTooLarge {
                path: source_label.into(),
                size: self.total_bytes,
                limit: self.limits.max_total_bytes,
            });
        }
        Ok(())
    }

    /// Adds the documents [`parse_text`] returned, in order.
    fn add_parsed(&mut self, docs: Vec<Result<(String, Value), InputError>>) -> Result<(), InputError> {
        for doc in docs {
            let (at, v) = doc?;
            self.add_value(&at, v, true)?;
        }
        Ok(())
    }

    fn add_value(&mut self, at: &str, v: Value, top: bool) -> Result<(), InputError> {
        let invalid = |message: String| InputError::Invalid { at: at.to_string(), message };
        if top && v.get("kind").and_then(Value::as_str) == Some("List") {
            let items = match v.get("items") {
                None | Some(Value::Null) => return Ok(()),
                Some(Value::Array(items)) => items.clone(),
                Some(other) => return Err(invalid(format!("a List's items must be a sequence, found {}", kind_of(other)))),
            };
            for (j, item) in items.into_iter().enumerate() {
                let at = format!("{}, item {})", at.trim_end_matches(')'), j + 1);
                match item {
                    Value::Object(_) => self.add_value(&at, item, false)?,
                    other => {
                        return Err(InputError::Invalid { at, message: format!("the List item is {}, not an object", kind_of(&other)) })
                    }
                }
            }
            return Ok(());
        }
        if self.pending.len() >= self.limits.max_objects {
            return Err(InputError::TooManyObjects { at: at.into(), limit: self.limits.max_objects });
        }
        let id = identity(&v).map_err(invalid)?;
        if id.kind == "CustomResourceDefinition" && id.group() == "apiextensions.k8s.io" {
            let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
            if let (Some(group), Some(kind), Some(scope)) = (s("/spec/group"), s("/spec/names/kind"), s("/spec/scope")) {
                self.crd_scopes.insert((group, kind), scope == "Cluster");
            }
        }
        self.pending.push(Pending { at: at.to_string(), id, value: v });
        Ok(())
    }

    fn is_cluster_scoped(&self, id: &ObjectRef) -> bool {
        if let Some(cluster) = self.crd_scopes.get(&(id.group().to_string(), id.kind.clone())) {
            return *cluster;
        }
        BUILTIN_CLUSTER_SCOPED.contains(&id.kind.as_str()) || self.extra_cluster_scoped.contains(&id.kind)
    }

    /// Resolves scopes and duplicates; returns every object with its canonical YAML
    /// and source, plus all warnings.
    pub fn finish_with_sources(mut self) -> Result<Finished, InputError> {
        let pending = std::mem::take(&mut self.pending);
        let mut by_key: BTreeMap<(String, String, Option<String>, String), String> = BTreeMap::new();
        let mut by_path: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for Pending { at, mut id, mut value } in pending {
            if self.is_cluster_scoped(&id) {
                if let Some(ns) = id.namespace.take() {
                    if let Some(Value::Object(meta)) = value.get_mut("metadata") {
                        meta.remove("namespace");
                    }
                    self.warnings.push(format!("{at}: removed metadata.namespace {ns:?} from cluster-scoped {} {}", id.kind, id.name));
                }
            } else if id.namespace.is_none() {
                return Err(InputError::MissingNamespace { at, object: id.to_string(), kind: id.kind.clone(), scopes: self.scopes });
            }
            if let Some(first) = by_key.insert(id.key(), at.clone()) {
                return Err(InputError::Duplicate { object: id.to_string(), first, second: at });
            }
            let path = id.bundle_path();
            if let Some((first_object, first)) = by_path.insert(path.clone(), (id.to_string(), at.clone())) {
                return Err(InputError::PathCollision { path, first_object, first, second_object: id.to_string(), second: at });
            }
            let yaml = canonical_yaml(&value);
            out.insert(id, Collected { yaml, value, source: at });
        }
        let seen = out.iter().map(|(id, c): (&ObjectRef, &Collected)| (id, fights::Seen { value: &c.value, source: &c.source })).collect();
        self.warnings.extend(fights::check(&seen));
        Ok(Finished { objects: out, warnings: self.warnings })
    }

    /// Resolves scopes and duplicates; returns identity → canonical YAML bytes (the
    /// input of `drover_proto::bundle::assemble`).
    pub fn finish(self) -> Result<BTreeMap<ObjectRef, Vec<u8>>, InputError> {
        Ok(self.finish_with_sources()?.objects.into_iter().map(|(k, c)| (k, c.yaml)).collect())
    }
}

/// Parses one (multi-document) YAML text into its objects' values, each with its place
/// (`LABEL (document N)`); empty documents are skipped, a document that is not a mapping
/// is an error. The documents come back in order, a parse error as the last one, so that
/// [`Collector::add_parsed`] meets the errors in document order (a document's own
/// validation error before a later document's parse error), as a one-by-one read does.
/// Pure (no limits, no collector state): texts can be parsed on several threads and
/// handed to a [`Collector`] in order.
fn parse_text(source_label: &str, text: &str) -> Vec<Result<(String, Value), InputError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    for (i, doc) in drover_proto::yaml::documents(text).enumerate() {
        let at = format!("{source_label} (document {})", i + 1);
        match parse_document(at, doc) {
            Ok(None) => continue,
            Ok(Some(v)) => out.push(Ok(v)),
            Err(e) => {
                out.push(Err(e));
                break;
            }
        }
    }
    out
}

/// One document of [`parse_text`]: `None` when it is empty.
fn parse_document(
    at: String,
    doc: Result<serde_yaml_ng::Value, serde_yaml_ng::Error>,
) -> Result<Option<(String, Value)>, InputError> {
    let mut y = doc.map_err(|e| InputError::Yaml { at: at.clone(), message: e.to_string() })?;
    y.apply_merge().map_err(|e| InputError::Yaml { at: at.clone(), message: e.to_string() })?;
    let v = yaml_to_json(&y).map_err(|message| InputError::Invalid { at: at.clone(), message })?;
    match v {
        Value::Null => Ok(None),
        Value::Object(_) => Ok(Some((at, v))),
        other => Err(InputError::Invalid {
            at,
            message: format!("the document is {}, not an object (a mapping with apiVersion, kind, metadata)", kind_of(&other)),
        }),
    }
}

/// Everything [`load_dir`] read: the objects and the warnings.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Identity → canonical YAML bytes.
    pub objects: BTreeMap<ObjectRef, Vec<u8>>,
    /// Non-fatal findings (print them on stderr).
    pub warnings: Vec<String>,
    /// Number of YAML files read.
    pub files: usize,
}

/// Reads every `*.yaml`/`*.yml` file under `dir` (recursively, sorted by relative path,
/// hidden entries skipped, symlinked directories not followed) into objects.
pub fn load_dir(dir: &Path, extra_cluster_scoped_kinds: &[String]) -> Result<Loaded, InputError> {
    load_dir_with_limits(dir, extra_cluster_scoped_kinds, InputLimits::default())
}

/// [`load_dir`] with explicit limits.
pub fn load_dir_with_limits(dir: &Path, extra: &[String], limits: InputLimits) -> Result<Loaded, InputError> {
    let meta = std::fs::metadata(dir).map_err(|e| io_err(dir, e))?;
    if !meta.is_dir() {
        return Err(InputError::Io { path: dir.display().to_string(), message: "not a directory".into() });
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(InputError::NoFiles(dir.display().to_string()));
    }
    // Sizes first, in order: the files within the limits are read and parsed on every
    // core, then added in path order, so errors and results are those of a sequential read.
    let mut c = Collector::with_limits(extra, ScopeSource::Flag, limits);
    let mut sizes = Vec::with_capacity(files.len());
    for path in &files {
        sizes.push(std::fs::metadata(path).map_err(|e| io_err(path, e))?.len());
    }
    let (mut total, mut within) = (0u64, 0);
    while within < files.len() && sizes[within] <= limits.max_file_bytes && total + sizes[within] <= limits.max_total_bytes {
        total += sizes[within];
        within += 1;
    }
    let parsed = crate::parallel::par_map(&files[..within], |path| {
        let label = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
        let size = bytes.len() as u64;
        let text = String::from_utf8(bytes).map_err(|e| InputError::NotUtf8 { path: label.clone(), offset: e.utf8_error().valid_up_to() })?;
        Ok((size, parse_text(&label, &text)))
    });
    for (path, result) in files.iter().zip(parsed) {
        let (size, docs) = result?;
        c.charge(&path.display().to_string(), size)?;
        c.add_parsed(docs)?;
    }
    if let Some(path) = files.get(within) {
        c.charge(&path.display().to_string(), sizes[within])?;
    }
    let done = c.finish_with_sources()?;
    let objects = done.objects.into_iter().map(|(id, col)| (id, col.yaml)).collect();
    Ok(Loaded { objects, warnings: done.warnings, files: files.len() })
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let rd = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(InputError::Io { path: entry.path().display().to_string(), message: "file name is not UTF-8".into() });
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| io_err(&path, e))?;
        if ft.is_dir() {
            walk(&path, out)?;
        } else if (name.ends_with(".yaml") || name.ends_with(".yml")) && (ft.is_file() || (ft.is_symlink() && path.is_file())) {
            out.push(path);
        }
    }
    Ok(())
}

fn io_err(path: &Path, e: std::io::Error) -> InputError {
    InputError::Io { path: path.display().to_string(), message: e.to_string() }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// Reads and checks an object's identity fields.
fn identity(v: &Value) -> Result<ObjectRef, String> {
    let field = |p: &str, name: &str| -> Result<Option<String>, String> {
        match v.pointer(p) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("{name} must be a string, found {}", kind_of(other))),
        }
    };
    let need = "every object needs apiVersion, kind and metadata.name";
    let kind = field("/kind", "kind")?.ok_or_else(|| format!("missing kind ({need})"))?;
    let api_version = field("/apiVersion", "apiVersion")?.ok_or_else(|| format!("{kind}: missing apiVersion ({need})"))?;
    if !matches!(v.get("metadata"), Some(Value::Object(_))) {
        return Err(format!("{kind}: missing metadata ({need})"));
    }
    let name = field("/metadata/name", "metadata.name")?.ok_or_else(|| {
        if v.pointer("/metadata/generateName").is_some() {
            format!("{kind}: metadata.generateName is not supported, set metadata.name ({need})")
        } else {
            format!("{kind}: missing metadata.name ({need})")
        }
    })?;
    let namespace = field("/metadata/namespace", "metadata.namespace")?;
    let version_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    let api_ok = match api_version.split_once('/') {
        Some((g, ver)) => !g.is_empty() && g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') && version_ok(ver),
        None => version_ok(&api_version),
    };
    if !api_ok {
        return Err(format!("{kind} {name}: apiVersion {api_version:?} is not GROUP/VERSION or VERSION"));
    }
    if !kind.bytes().all(|b| b.is_ascii_alphanumeric()) || !kind.as_bytes()[0].is_ascii_alphabetic() {
        return Err(format!("kind {kind:?} must be letters and digits, starting with a letter"));
    }
    if name.len() > 253 || name == "." || name == ".." || name.chars().any(|c| c == '/' || c == '\\' || c.is_control()) {
        return Err(format!("{kind}: metadata.name {name:?} is not a valid name (at most 253 characters, no '/', not '.' or '..')"));
    }
    if let Some(ns) = &namespace {
        let ok = ns.len() <= 63
            && ns.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !ok {
            return Err(format!(
                "{kind} {name}: metadata.namespace {ns:?} is not a valid namespace (lowercase letters, digits, '-', at most 63)"
            ));
        }
    }
    Ok(ObjectRef { api_version, kind, namespace, name })
}

/// Converts parsed YAML to JSON: scalar keys become strings (as kubectl does), tags are
/// dropped, non-finite floats are refused.
fn yaml_to_json(y: &serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .ok_or_else(|| format!("the number {n} cannot be represented in JSON (Kubernetes objects are JSON)"))?
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(s) => Value::Array(s.iter().map(yaml_to_json).collect::<Result<_, _>>()?),
        Y::Mapping(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s.clone(),
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    Y::Null => "null".to_string(),
                    _ => return Err("a mapping key is not a scalar (Kubernetes objects need string keys)".into()),
                };
                if out.insert(key.clone(), yaml_to_json(v)?).is_some() {
                    return Err(format!("the key {key:?} appears twice in one mapping"));
                }
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(&t.value)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(texts: &[(&str, &str)], extra: &[&str]) -> Result<BTreeMap<ObjectRef, Vec<u8>>, InputError> {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut c = Collector::new(&extra, ScopeSource::Flag);
        for (l, t) in texts {
            c.add_document_text(l, t)?;
        }
        c.finish()
    }

    #[test]
    fn multi_doc_list_and_empty() {
        let t = "---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: x}\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: x}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: x}\n";
        let m = collect(&[("f.yaml", t)], &[]).unwrap();
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn canonical_ignores_key_order() {
        let a = collect(&[("a", "kind: ConfigMap\napiVersion: v1\nmetadata:\n  namespace: x\n  name: a\ndata: {b: '1', a: '2'}\n")], &[])
            .unwrap();
        let b =
            collect(&[("b", "apiVersion: v1\nmetadata: {name: a, namespace: x}\nkind: ConfigMap\ndata: {a: '2', b: '1'}\n")], &[]).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn errors_name_file_and_document() {
        let e = collect(&[("f.yaml", "a: 1\n---\n- x\n")], &[]).unwrap_err().to_string();
        assert!(e.contains("f.yaml (document 1)"), "{e}");
        let e = collect(&[("f.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n---\n- x\n")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.yaml (document 2)") && e.contains("not an object"), "{e}");
        let e = collect(&[("f.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")], &[]).unwrap_err().to_string();
        assert!(e.contains("no metadata.namespace") && e.contains("f.yaml"), "{e}");
        let e = collect(&[("f.yaml", "x: [1\n")], &[]).unwrap_err().to_string();
        assert!(e.contains("invalid YAML"), "{e}");
    }

    #[test]
    fn duplicates_name_both() {
        let o = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n";
        let e = collect(&[("one.yaml", o), ("two.yaml", o)], &[]).unwrap_err().to_string();
        assert!(e.contains("one.yaml") && e.contains("two.yaml"), "{e}");
    }

    #[test]
    fn scopes_from_crds_and_extras() {
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.ex.io}\nspec: {group: ex.io, scope: Cluster, names: {kind: Widget}}\n";
        let w = "apiVersion: ex.io/v1\nkind: Widget\nmetadata: {name: w, namespace: dropped}\n";
        let m = collect(&[("w.yaml", w), ("crd.yaml", crd)], &[]).unwrap();
        let (id, yaml) = m.iter().find(|(k, _)| k.kind == "Widget").unwrap();
        assert_eq!(id.namespace, None);
        assert!(!String::from_utf8_lossy(yaml).contains("dropped"));
        assert!(collect(&[("g.yaml", "apiVersion: ex.io/v1\nkind: Gadget\nmetadata: {name: g}\n")], &["Gadget"]).is_ok());
    }

    #[test]
    fn yaml11_lookalikes_stay_strings() {
        let m = collect(
            &[(
                "f",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {a: 'on', b: 'yes', c: '0123', d: 'null'}\n",
            )],
            &[],
        )
        .unwrap();
        let y = String::from_utf8(m.values().next().unwrap().clone()).unwrap();
        let back = drover_proto::bundle::parse_single_object(y.as_bytes()).unwrap();
        assert_eq!(back["data"]["a"], "on");
        assert_eq!(back["data"]["c"], "0123");
        assert_eq!(back["data"]["d"], "null");
    }
}
