//! `drover fleet view --registry PREFIX --out fleet.html`: the fleet page, one
//! self-contained HTML file (`crate::fleet::page`), written atomically.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use crate::fleet::page;
use crate::fleet::status::build;
use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;

use super::args::{fleet_error, ReportsArgs};

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
    /// Reports never counted (listed apart on the page).
    pub not_counted: usize,
    /// True when the page says all is well (every channel's clusters ready).
    pub all_well: bool,
}

/// Reads the reports and writes the page.
pub async fn view(args: &Args) -> anyhow::Result<Written> {
    let sources = args.reports.sources()?;
    let bar = args.reports.bar()?;
    let membership = args.reports.membership()?;
    let client = args.registry.client_for(&sources)?;
    let (reading, heads) = args.reports.read(&sources, membership.as_ref(), None, &client).await?;
    let now = drover_proto::time::now_unix();
    let st = build(&reading, membership.as_ref(), None, &bar, &heads, now);
    let html = page::render(&st, &reading, &sources, now, bar.stale.as_secs() as i64).map_err(fleet_error)?;
    drover_proto::layout::write_atomic(&args.out, html.as_bytes()).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(Written {
        out: args.out.display().to_string(),
        clusters: st.summary.iter().map(|s| s.clusters).sum(),
        skipped: reading.unreadable,
        not_counted: st.untrusted.reports,
        all_well: st.all_well(),
    })
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
