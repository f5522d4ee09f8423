//! `drover keygen` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover keygen`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover keygen`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover keygen is not implemented yet")
}
