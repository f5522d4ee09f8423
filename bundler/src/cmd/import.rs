//! `drover import` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover import`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover import`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover import is not implemented yet")
}
