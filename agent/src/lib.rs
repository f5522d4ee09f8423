//! drover-agent: the cluster side of drover. One poll runs the pipeline
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`
//! (one module per stage, each returning a [`stage::StageError`] when it stops; wired in
//! [`pipeline`]; fetch and verify interleave in [`admit`] so that nothing unverified is
//! downloaded) against a [`targets::Target`];
//! [`run`] loops it, [`serve`] exposes it over HTTP, [`query`] reads it back.

pub mod admit;
pub mod apply;
pub mod backlog;
pub mod cli;
pub mod config;
pub mod diff;
pub mod drift;
pub mod events;
pub mod fetch;
pub mod fleetsim;
pub mod fsat;
pub mod hold;
pub mod identity;
pub mod leader;
pub mod local;
pub mod memory;
pub mod metrics;
pub mod order;
pub mod owned;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod private;
pub mod prune;
pub mod query;
pub mod recall;
pub mod record;
pub mod refused;
pub mod report;
pub mod resolve;
pub mod run;
pub mod serve;
pub mod shared;
pub mod stage;
pub mod statedir;
pub mod status;
pub mod targets;
pub mod unpack;
pub mod verify;
pub mod wait;
pub mod window;

use std::io::Write;

use clap::Parser;

use crate::cli::{Cli, Command, RunArgs};
use crate::config::{ConfigLayer, LogFormat, Settings};

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "info".into());
    // Log lines carry registry and cluster text: cleaned on the way out, so no colours.
    let json = format == LogFormat::Json;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || drover_proto::text::clean::Writer::new(std::io::stderr(), json))
        .with_ansi(false);
    match format {
        LogFormat::Json => b.json().init(),
        LogFormat::Text => b.init(),
    }
}

/// What `release` did: the hold file's hold it removed (`None`: there was none).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    /// The state directory.
    pub state_dir: String,
    /// The hold that was released.
    pub released: Option<hold::Hold>,
}

/// `drover-agent plan`: prints the plan (or why it was refused); exit 0 nothing would
/// change, 3 something would, 1 refused or would fail.
async fn plan(args: cli::PlanArgs) -> anyhow::Result<i32> {
    let cli::PlanArgs { config, settings, output } = args;
    let file = match &config {
        Some(p) => ConfigLayer::load(p)?,
        None => ConfigLayer::default(),
    };
    let settings = Settings::merge(settings, file)?;
    init_logs(settings.log_format);
    // Interrupted: the plan (and with it the private copy of the state database) is
    // dropped, which removes the copy.
    let stop = run::terminated();
    let planned = tokio::select! {
        p = preview::plan(&settings) => p?,
        _ = stop => {
            let _ = writeln!(std::io::stderr(), "interrupted: nothing was changed; the private copy of the state database was removed");
            return Ok(130);
        }
    };
    Ok(match planned {
        preview::Planned::Refused { stage, message } => {
            let _ = writeln!(std::io::stderr(), "error: {stage}: {}", drover_proto::text::clean::lines(&message));
            1
        }
        preview::Planned::Plan(p) => {
            cli::emit(output, &p, || p.to_text())?;
            if p.fails() {
                1
            } else if p.changes {
                3
            } else {
                0
            }
        }
    })
}

/// The whole program: parses the command line and runs it. Returns the exit code.
pub fn main_entry() -> i32 {
    memory::limit_arenas();
    private::restrict_umask();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: cannot start the runtime: {e}");
            return 1;
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
            Command::Plan(args) => plan(*args).await,
            Command::Status(q) => {
                let st = query::status(&q).await?;
                cli::emit(q.output, &st, || st.to_text())?;
                Ok(0)
            }
            Command::History(q) => {
                let h = query::history(&q).await?;
                if let Some(n) = &h.notice {
                    let _ = writeln!(std::io::stderr(), "note: {}", drover_proto::text::clean::lines(n));
                }
                cli::emit(q.output, &h.attempts, || query::history_text(&h.attempts))?;
                Ok(0)
            }
            Command::Hold(a) => {
                let h = hold::hold(&a.state_dir, &a.reason)?;
                cli::emit(a.output, &h, || {
                    let dir = a.state_dir.display();
                    format!(
                        "held since {}: {}\nthe agent on {dir} applies nothing from its next poll on (it still polls, verifies and reports); `drover-agent release --state-dir {dir}` ends the hold\n",
                        h.since, h.reason
                    )
                })?;
                Ok(0)
            }
            Command::Release(a) => {
                let r = Released { state_dir: a.state_dir.display().to_string(), released: hold::release(&a.state_dir)? };
                cli::emit(a.output, &r, || match &r.released {
                    Some(_) => format!("released: the agent on {} applies the newest verified bundle on its next poll\n", r.state_dir),
                    None => format!("{} was not held by a hold file (a drover.dev/hold annotation is removed with kubectl)\n", r.state_dir),
                })?;
                Ok(0)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", drover_proto::text::clean::lines(&format!("{e:#}")));
            // Usage and configuration errors are 2; everything else failed (1).
            let usage = e.downcast_ref::<config::ConfigError>().is_some()
                || matches!(e.downcast_ref::<hold::HoldError>(), Some(hold::HoldError::NoStateDir(_) | hold::HoldError::NotStateDir { .. } | hold::HoldError::Reason(_)));
            if usage { 2 } else { 1 }
        }
    }
}
