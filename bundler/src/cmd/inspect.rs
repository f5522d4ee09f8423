//! `drover inspect` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover inspect`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover inspect is not implemented yet")
}
