//! `drover build` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover build`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover build`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover build is not implemented yet")
}
