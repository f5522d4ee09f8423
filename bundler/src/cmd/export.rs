//! `drover export` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover export`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover export`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover export is not implemented yet")
}
