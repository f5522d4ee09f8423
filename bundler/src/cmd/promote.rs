//! `drover promote` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover promote`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover promote`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover promote is not implemented yet")
}
