//! `drover pull` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover pull`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover pull`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover pull is not implemented yet")
}
