//! Workloads rendered by a command instead of templates (`spec.render` in
//! `workload.yaml`; docs/platform.md, "Bring your own renderer"): `helm template`,
//! `kustomize build`, any program. It runs in the workload's directory once per
//! (environment, cluster type) the workload is assigned to, with the composed values as
//! JSON on stdin and `DROVER_ENVIRONMENT`, `DROVER_CLUSTER_TYPE`, `DROVER_WORKLOAD`,
//! `DROVER_NAMESPACE` set ([`super::exec`] for the process rules); its stdout is YAML
//! objects that go through the same rules as template output. How it ran is recorded in
//! the bundle config ([`WorkloadProvenance`]).

use std::path::Path;
use std::time::Duration;

use drover_proto::config::{WorkloadProvenance, RENDERER_COMMAND, RENDERER_TEMPLATES};
use serde_json::{Map, Value};

use super::exec::{self, ExecError, Invocation};
use super::model::RenderSpec;

/// `spec.render.timeout` when absent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Characters of `versionCommand` output recorded.
pub const MAX_VERSION_CHARS: usize = 200;

/// A workload's render command, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRenderer {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Bound of one run.
    pub timeout: Duration,
    /// The command naming the renderer's version (empty: none).
    pub version_command: Vec<String>,
}

/// Where one render runs: the names a renderer sees as `DROVER_*` variables.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// `DROVER_ENVIRONMENT`.
    pub environment: &'a str,
    /// `DROVER_CLUSTER_TYPE`.
    pub cluster_type: &'a str,
    /// `DROVER_WORKLOAD`.
    pub workload: &'a str,
    /// `DROVER_NAMESPACE`.
    pub namespace: &'a str,
}

/// What a render printed: YAML objects, plus the last lines of stderr (for the messages
/// of errors found in the output).
#[derive(Debug, Clone)]
pub struct Output {
    /// stdout, as text.
    pub text: String,
    /// The last lines of stderr.
    pub stderr: String,
}

impl CommandRenderer {
    /// Checks `spec.render`; the message names the field.
    pub fn from_spec(spec: RenderSpec) -> Result<Self, String> {
        if spec.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err("spec.render.command must name a program and its arguments, e.g. [helm, template, my-release, charts/app, -f, -]".into());
        }
        let timeout = match spec.timeout.as_deref() {
            None => DEFAULT_TIMEOUT,
            Some(t) => humantime::parse_duration(t)
                .map_err(|e| format!("spec.render.timeout {t:?}: {e} (write e.g. 90s or 2m)"))
                .and_then(|d| if d.is_zero() { Err(format!("spec.render.timeout {t:?} must be more than zero")) } else { Ok(d) })?,
        };
        let version_command = spec.version_command.unwrap_or_default();
        if version_command.first().is_some_and(|p| p.trim().is_empty()) {
            return Err("spec.render.versionCommand must name a program, e.g. `[helm, version, --short]`".into());
        }
        Ok(CommandRenderer { command: spec.command, timeout, version_command })
    }

    /// The command line as the messages show it (`["./render.sh","--x"]`).
    pub fn shown(&self) -> String {
        serde_json::to_string(&self.command).expect("strings serialize")
    }

    /// Runs the command for one (environment, cluster type) in `dir`.
    pub fn render(&self, dir: &Path, ctx: Context<'_>, values: &Map<String, Value>, max_output: usize) -> Result<Output, String> {
        let vars = [
            ("DROVER_ENVIRONMENT", ctx.environment),
            ("DROVER_CLUSTER_TYPE", ctx.cluster_type),
            ("DROVER_WORKLOAD", ctx.workload),
            ("DROVER_NAMESPACE", ctx.namespace),
        ];
        let stdin = serde_json::to_vec(values).expect("values serialize");
        let inv = Invocation { argv: &self.command, dir, vars: &vars, stdin: &stdin, timeout: self.timeout, max_stdout: max_output };
        let ran = exec::run(&inv).map_err(|e| self.failed(&e))?;
        let text = String::from_utf8(ran.stdout).map_err(|e| {
            format!(
                "renderer {} printed output that is not UTF-8 text (invalid byte at offset {}){}",
                self.shown(),
                e.utf8_error().valid_up_to(),
                exec::stderr_block(&ran.stderr)
            )
        })?;
        Ok(Output { text, stderr: ran.stderr })
    }

    /// Runs `versionCommand` (when given) in `dir`: its output trimmed to one line of at
    /// most [`MAX_VERSION_CHARS`] characters, control characters shown as escapes (the one
    /// rule for untrusted text, `drover_proto::text::clean`).
    pub fn version(&self, dir: &Path, workload: &str, namespace: &str) -> Result<Option<String>, String> {
        if self.version_command.is_empty() {
            return Ok(None);
        }
        let vars = [("DROVER_WORKLOAD", workload), ("DROVER_NAMESPACE", namespace)];
        let inv = Invocation { argv: &self.version_command, dir, vars: &vars, stdin: b"", timeout: self.timeout, max_stdout: 64 << 10 };
        let ran = exec::run(&inv).map_err(|e| {
            let shown = serde_json::to_string(&self.version_command).expect("strings serialize");
            format!("spec.render.versionCommand {shown}: {e}")
        })?;
        let line = exec::tail_lines(&ran.stdout, usize::MAX).split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
        Ok(Some(line.chars().take(MAX_VERSION_CHARS).collect()))
    }

    fn failed(&self, e: &ExecError) -> String {
        format!("renderer {} {e}", self.shown())
    }
}

/// The provenance of workload `name`: templates (`renderer` None) or the command with the
/// version it reported.
pub fn provenance(name: &str, renderer: Option<&CommandRenderer>, version: Option<String>) -> WorkloadProvenance {
    match renderer {
        None => WorkloadProvenance { name: name.to_string(), renderer: RENDERER_TEMPLATES.into(), ..WorkloadProvenance::default() },
        Some(r) => WorkloadProvenance {
            name: name.to_string(),
            renderer: RENDERER_COMMAND.into(),
            command: r.command.clone(),
            version_command: r.version_command.clone(),
            version,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: &[&str], timeout: Option<&str>) -> RenderSpec {
        RenderSpec { command: command.iter().map(|s| s.to_string()).collect(), timeout: timeout.map(str::to_string), version_command: None }
    }

    #[test]
    fn spec_is_checked() {
        assert_eq!(CommandRenderer::from_spec(spec(&["helm"], None)).unwrap().timeout, DEFAULT_TIMEOUT);
        assert_eq!(CommandRenderer::from_spec(spec(&["helm"], Some("2m"))).unwrap().timeout, Duration::from_secs(120));
        assert!(CommandRenderer::from_spec(spec(&[], None)).unwrap_err().contains("spec.render.command"));
        assert!(CommandRenderer::from_spec(spec(&["helm"], Some("soon"))).unwrap_err().contains("spec.render.timeout"));
        assert!(CommandRenderer::from_spec(spec(&["helm"], Some("0s"))).unwrap_err().contains("more than zero"));
    }

    #[test]
    fn version_is_one_bounded_line() {
        let r = CommandRenderer {
            command: vec!["true".into()],
            timeout: Duration::from_secs(10),
            version_command: vec!["sh".into(), "-c".into(), "printf 'v1.2.3\\n\\033[1mbuild\\033[0m 7\\n'".into()],
        };
        assert_eq!(r.version(Path::new("/"), "w", "ns").unwrap().as_deref(), Some("v1.2.3 \\u{1b}[1mbuild\\u{1b}[0m 7"), "controls shown as escapes (proto text::clean)");
    }
}
