//! `drover fleet status | wait | view`: the fleet as the agents' reports show it
//! (docs/fleet.md). The rules live in the library (`crate::fleet`); these modules parse
//! flags, call it and return a report; `crate::cli` prints it.

pub mod args;
pub mod enroll;
pub mod status;
pub mod view;
pub mod wait;

/// Arguments of `drover fleet`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: FleetCommand,
}

/// The `drover fleet` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum FleetCommand {
    /// One row per cluster and a summary per environment, cluster type and channel.
    Status(status::Args),
    /// Wait until the clusters following a channel are ready (the gate of promote --require-healthy).
    Wait(wait::Args),
    /// Write the fleet page: one self-contained HTML file.
    View(view::Args),
    /// Approve clusters' report keys into the signed fleet roster (or list those pending).
    Enroll(enroll::Args),
}
