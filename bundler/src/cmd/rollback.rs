//! `drover rollback` (not implemented yet).

use crate::output::OutputFormat;

/// Arguments of `drover rollback`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `drover rollback`.
pub async fn run(_args: Args, _out: OutputFormat) -> anyhow::Result<()> {
    anyhow::bail!("drover rollback is not implemented yet")
}
