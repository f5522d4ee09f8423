//! `drover sign` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover sign`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover sign`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover sign is not implemented yet")
}
