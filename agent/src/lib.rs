//! drover-agent: the cluster side of drover. One poll runs the pipeline
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`
//! (one module per stage, each returning a [`stage::StageError`] when it stops; wired in
//! [`pipeline`]; fetch and verify interleave in [`admit`] so that nothing unverified is
//! downloaded) against a [`targets::Target`];
//! [`run`] loops it, [`serve`] exposes it over HTTP, [`query`] reads it back.

pub mod admit;
pub mod apply;
pub mod cli;
pub mod config;
pub mod fetch;
pub mod fleetsim;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod order;
pub mod pipeline;
pub mod plan;
pub mod private;
pub mod prune;
pub mod query;
pub mod recall;
pub mod record;
pub mod report;
pub mod resolve;
pub mod run;
pub mod serve;
pub mod shared;
pub mod stage;
pub mod status;
pub mod targets;
pub mod unpack;
pub mod verify;
pub mod wait;

use clap::Parser;

use crate::cli::{Cli, Command, RunArgs};
use crate::config::{ConfigLayer, LogFormat, Settings};

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "info".into());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Json => b.json().init(),
        LogFormat::Text => b.init(),
    }
}

/// The whole program: parses the command line and runs it. Returns the exit code.
pub fn main_entry() -> i32 {
    memory::limit_arenas();
    private::restrict_umask();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return 2;
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Run(args) => {
                let RunArgs { config, settings, once } = *args;
                let file = match &config {
                    Some(p) => ConfigLayer::load(p)?,
                    None => ConfigLayer::default(),
                };
                let settings = Settings::merge(settings, file)?;
                init_logs(settings.log_format);
                run::run(settings, once).await
            }
            Command::Status(q) => query::status(q).await.map(|_| 0),
            Command::History(q) => query::history(q).await.map(|_| 0),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}
