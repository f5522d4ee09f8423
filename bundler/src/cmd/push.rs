//! `drover push` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover push`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover push`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover push is not implemented yet")
}
