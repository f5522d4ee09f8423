//! The `drover` command line: parses arguments and dispatches to one module per command.

use clap::{Parser, Subcommand};

use crate::cmd;
use crate::output::OutputFormat;

/// drover: build, sign and ship desired-state bundles to fleets of clusters.
#[derive(Debug, Parser)]
#[command(name = "drover", version, about, long_about = None)]
pub struct Cli {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value = "table")]
    pub output: OutputFormat,
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
    /// Add a signature to an existing bundle.
    Sign(cmd::sign::Args),
    /// Verify a bundle's signatures against trusted keys.
    Verify(cmd::verify::Args),
    /// Show what a bundle is and what it holds.
    Inspect(cmd::inspect::Args),
    /// Download a bundle's objects into a directory.
    Pull(cmd::pull::Args),
    /// Compare two bundles or directories object by object.
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

/// Runs the CLI; returns the process exit code.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let out = cli.output;
    match cli.command {
        Command::Keygen(a) => cmd::keygen::run(a, out).await,
        Command::Render(a) => cmd::render::run(a, out).await,
        Command::Build(a) => cmd::build::run(a, out).await,
        Command::Push(a) => cmd::push::run(a, out).await,
        Command::Publish(a) => cmd::publish::run(a, out).await,
        Command::Sign(a) => cmd::sign::run(a, out).await,
        Command::Verify(a) => cmd::verify::run(a, out).await,
        Command::Inspect(a) => cmd::inspect::run(a, out).await,
        Command::Pull(a) => cmd::pull::run(a, out).await,
        Command::Diff(a) => cmd::diff::run(a, out).await,
        Command::Promote(a) => cmd::promote::run(a, out).await,
        Command::Rollback(a) => cmd::rollback::run(a, out).await,
        Command::Export(a) => cmd::export::run(a, out).await,
        Command::Import(a) => cmd::import::run(a, out).await,
        Command::Fleet(a) => cmd::fleet::run(a, out).await,
    }
}
