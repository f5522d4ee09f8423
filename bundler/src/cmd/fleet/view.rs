//! `drover fleet view --registry PREFIX --out fleet.html`: the fleet page, one
//! self-contained HTML file (`crate::fleet::page`), written atomically.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use crate::fleet::{load, page};
use crate::output::{warn, Report, Text};
use crate::regargs::RegistryArgs;

use super::args::ReportsArgs;

/// Arguments of `drover fleet view`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the reports are.
    #[command(flatten)]
    pub reports: ReportsArgs,
    /// The HTML file to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// What `fleet view` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The file.
    pub out: String,
    /// Clusters on the page.
    pub clusters: usize,
    /// Reports skipped as unreadable.
    pub skipped: usize,
}

/// Reads the reports and writes the page.
pub async fn view(args: &Args) -> anyhow::Result<Written> {
    let sources = args.reports.sources()?;
    let stale = args.reports.stale_secs()?;
    let client = args.registry.client_for(&sources)?;
    let policy = args.reports.trust.policy()?;
    let (reports, unreadable) = load(&sources, &client, &policy).await?;
    let skipped: Vec<String> = unreadable.iter().map(|u| format!("{}: {}", u.name, u.reason)).collect();
    for s in &skipped {
        warn(format_args!("skipped {s}"));
    }
    let html = page::render(&reports, &sources, &skipped, drover_proto::time::now_unix(), stale)?;
    drover_proto::layout::write_atomic(&args.out, html.as_bytes()).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(Written { out: args.out.display().to_string(), clusters: reports.len(), skipped: skipped.len() })
}

/// Runs `drover fleet view`.
pub async fn run(args: Args) -> anyhow::Result<Written> {
    view(&args).await
}

impl Report for Written {
    fn write_text(&self, out: &mut Text) {
        out.line(format!("wrote {} ({} clusters)", self.out, self.clusters));
    }
}
