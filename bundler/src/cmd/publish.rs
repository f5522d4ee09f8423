//! `drover publish` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover publish`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover publish`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover publish is not implemented yet")
}
