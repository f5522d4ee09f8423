//! `drover verify` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover verify`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover verify`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover verify is not implemented yet")
}
