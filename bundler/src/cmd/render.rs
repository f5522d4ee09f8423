//! `drover render` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover render`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover render`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover render is not implemented yet")
}
