//! The `drover` command line: parses arguments, runs one command module and prints the
//! value it returns (table or `-o json`) through [`crate::output::emit`].

use clap::{Parser, Subcommand};

use crate::cmd;
use crate::cmd::fleet::FleetCommand;
use crate::output::{emit, LogFormat, OutputFormat};

/// drover: build, sign and ship desired-state bundles to fleets of clusters.
///
/// Exit codes: 0 ok, 1 refused or failed (`diff`: 1 when the sides differ, 2 on error),
/// 2 usage. Logs go to stderr (DROVER_LOG, default info); results to stdout.
#[derive(Debug, Parser)]
#[command(name = "drover", version)]
pub struct Cli {
    /// Output format: a short table, or one JSON document (camelCase fields).
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// Log format on stderr (level: DROVER_LOG, default info).
    #[arg(long, global = true, value_enum, default_value = "text", env = "DROVER_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every `drover` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate a signing key pair (drover.key, drover.pub).
    Keygen(cmd::keygen::Args),
    /// Render a platform definition per cluster type for one environment.
    Render(cmd::render::Args),
    /// Build a bundle from a directory of YAML into an OCI layout.
    Build(cmd::build::Args),
    /// Build a bundle from a directory of YAML and push it to a registry.
    Push(cmd::push::Args),
    /// Render, build, sign and push every changed cluster type of an environment.
    Publish(cmd::publish::Args),
    /// Show what revision each environment is at (the release records of `publish`).
    Releases(cmd::releases::Args),
    /// Add a signature to an existing bundle.
    Sign(cmd::sign::Args),
    /// Verify a bundle's signatures against trusted keys.
    Verify(cmd::verify::Args),
    /// Show what a bundle (or a release record) is and what it holds.
    Inspect(cmd::inspect::Args),
    /// Download a bundle's objects into a directory.
    Pull(cmd::pull::Args),
    /// Compare two bundles or directories object by object (exit 1 when they differ).
    Diff(cmd::diff::Args),
    /// Point a channel tag at an already verified bundle.
    Promote(cmd::promote::Args),
    /// Re-publish an older bundle's content with a new, higher sequence.
    Rollback(cmd::rollback::Args),
    /// Write bundles and their signatures into an OCI archive (air gap).
    Export(cmd::export::Args),
    /// Verify and push the contents of an OCI archive into a registry.
    Import(cmd::import::Args),
    /// The fleet as the agents' reports show it: status, wait for a ring, the fleet page.
    Fleet(cmd::fleet::Args),
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "info".into());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || drover_proto::text::clean::Writer::new(std::io::stderr(), format == LogFormat::Json))
        .with_ansi(false);
    match format {
        LogFormat::Json => b.json().init(),
        LogFormat::Text => b.init(),
    }
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            crate::output::error_line(&format!("cannot start the runtime: {e}"));
            return std::process::ExitCode::FAILURE;
        }
    };
    std::process::ExitCode::from(rt.block_on(run(cli)))
}

/// Runs one parsed command and prints its result; returns the exit code.
pub async fn run(cli: Cli) -> u8 {
    let out = cli.output;
    match cli.command {
        Command::Keygen(a) => emit(cmd::keygen::run(a).await, out),
        Command::Render(a) => emit(cmd::render::run(a).await, out),
        Command::Build(a) => emit(cmd::build::run(a).await, out),
        Command::Push(a) => emit(cmd::push::run(a).await, out),
        Command::Publish(a) => emit(cmd::publish::run(a).await, out),
        Command::Releases(a) => emit(cmd::releases::run(a).await, out),
        Command::Sign(a) => emit(cmd::sign::run(a).await, out),
        Command::Verify(a) => emit(cmd::verify::run(a).await, out),
        Command::Inspect(a) => emit(cmd::inspect::run(a).await, out),
        Command::Pull(a) => emit(cmd::pull::run(a).await, out),
        Command::Diff(a) => emit(cmd::diff::run(a).await, out),
        Command::Promote(a) => emit(cmd::promote::run(a).await, out),
        Command::Rollback(a) => emit(cmd::rollback::run(a).await, out),
        Command::Export(a) => emit(cmd::export::run(a).await, out),
        Command::Import(a) => emit(cmd::import::run(a).await, out),
        Command::Fleet(a) => match a.command {
            FleetCommand::Status(a) => emit(cmd::fleet::status::run(a).await, out),
            FleetCommand::Wait(a) => emit(cmd::fleet::wait::run(a).await, out),
            FleetCommand::View(a) => emit(cmd::fleet::view::run(a).await, out),
            FleetCommand::Enroll(a) => emit(cmd::fleet::enroll::run(a).await, out),
        },
    }
}
