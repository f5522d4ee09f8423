//! The command line: `drover-agent run | status | history | reconcile | hold | release | plan`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::ConfigLayer;

/// drover-agent: polls bundle references (one, or several named sources), verifies them,
/// applies them to a target and records them.
///
/// Exit codes: 0 ok, 1 refused or failed, 2 usage or configuration. Logs go to stderr
/// (DROVER_LOG, default info; --log-format text|json); results to stdout.
#[derive(Debug, Parser)]
#[command(name = "drover-agent", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent: poll, verify, apply, prune, record, serve status.
    Run(Box<RunArgs>),
    /// Show the agent's status: the agent of --state-dir (through the socket in that
    /// directory, or its database when it does not run), or the one at --endpoint; every
    /// source, or the one --source names.
    Status(QueryArgs),
    /// Show the last attempts with per-object outcomes (same agent as status; every
    /// source, or the one --source names).
    History(QueryArgs),
    /// Ask the running agent to poll now, and wait for that attempt's result (exit 0:
    /// applied, unchanged or held; 1: refused or failed).
    Reconcile(ReconcileArgs),
    /// Hold the agent (or one source with --source): it keeps polling and verifying but
    /// applies nothing until released.
    Hold(HoldArgs),
    /// Release a hold (every hold file, or the one of --source): the next poll applies the
    /// newest verified bundle; or with --rollback the refusal of a bundle this agent rolled
    /// back from (every source's, or the one of --source).
    Release(ReleaseArgs),
    /// Show what applying the newest verified bundle would do, changing nothing
    /// (exit 0: nothing would change, 3: something would, 1: refused or would fail); with
    /// a `sources:` list, of every source or the one --source NAME names.
    Plan(Box<PlanArgs>),
}

/// Flags of `plan`: the same settings as `run` (flags, environment, `--config`).
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// YAML config file (camelCase fields, same names as the flags).
    #[arg(long, env = "DROVER_CONFIG")]
    pub config: Option<PathBuf>,
    /// The settings given on the command line or in the environment.
    #[command(flatten)]
    pub settings: ConfigLayer,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
}

/// Flags of `hold`.
#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The agent's state directory (works while the agent runs).
    #[arg(long, env = "DROVER_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Why (shown in status, metrics' logs and fleet reports).
    #[arg(long)]
    pub reason: String,
    /// Hold only this source (its name); without it every source of the agent is held.
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
}

/// Flags of `release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The agent's state directory.
    #[arg(long, env = "DROVER_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Release only this source's own hold (with --rollback: only its rollback refusal);
    /// without it every hold file is removed (every source's refusal is released).
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// Release the refusal of the bundle rolled back from (`--on-degraded rollback`)
    /// instead of a hold: the agent applies it again on its next poll when the channel
    /// still names it (its anti-rollback floor stays).
    #[arg(long)]
    pub rollback: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
}

/// Output format of `status` and `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable text.
    Table,
    /// JSON.
    Json,
}

/// Flags of `status` and `history`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// An agent's HTTP port, http://HOST:PORT (a remote agent; without it the agent of
    /// --state-dir is asked through the socket in that directory).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The agent's state directory: the answer is about this agent (read directly when
    /// it does not run).
    #[arg(long, value_name = "DIR", env = "DROVER_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Output format: a short table, or JSON (camelCase fields).
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
    /// history: show at most this many attempts (newest first).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Only this source (its name; `default` for a single unnamed one).
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
}

/// Flags of `reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The agent's state directory: the agent asked is the one running on it (through its
    /// local channel, which only the agent's user can reach).
    #[arg(long, value_name = "DIR", env = "DROVER_STATE_DIR")]
    pub state_dir: PathBuf,
    /// The source to poll: its name or reference (default: the agent's only source;
    /// required when it polls several).
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// How long to wait for the attempt's result, e.g. 15m.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub timeout: String,
    /// Output format: a short line, or JSON (camelCase fields).
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
}

/// Flags of `run`: the settings (each also a `--config` file field and a `DROVER_*`
/// environment variable; see [`ConfigLayer`]) plus `--config` and `--once`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// YAML config file (camelCase fields, same names as the flags).
    #[arg(long, env = "DROVER_CONFIG")]
    pub config: Option<PathBuf>,
    /// The settings given on the command line or in the environment.
    #[command(flatten)]
    pub settings: ConfigLayer,
    /// Run one cycle and exit: 0 when applied or unchanged, 1 when refused or failed.
    /// Serves HTTP only when --listen is given.
    #[arg(long)]
    pub once: bool,
}

/// A table as the commands print it: every column as wide as its widest cell (header
/// included), two spaces between columns, the last column not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// Prints a command's result: `value` as JSON, or `text()` as the table.
pub fn emit<T: serde::Serialize>(output: Output, value: &T, text: impl FnOnce() -> String) -> anyhow::Result<()> {
    use anyhow::Context;
    let s = match output {
        Output::Json => drover_proto::text::clean::json(&serde_json::to_string_pretty(value)?).into_owned() + "\n",
        Output::Table => drover_proto::text::clean::lines(&text()).into_owned(),
    };
    print(&s).context("writing to stdout")
}

/// Writes a command's result to stdout. A reader that went away (`| head -1`) is not an
/// error: the output was not wanted any more, and the exit code stays what it was.
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
