//! `drover diff` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover diff`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover diff`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover diff is not implemented yet")
}
