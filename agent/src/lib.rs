//! drover-agent: the cluster side of drover. One poll runs the pipeline
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`
//! (one module per stage, each returning a [`stage::StageError`] when it stops; wired in
//! [`pipeline`]; fetch and verify interleave in [`admit`] so that nothing unverified is
//! downloaded) against a [`targets::Target`];
//! [`run`] loops it, [`serve`] exposes it over HTTP, [`query`] reads it back.

pub mod admit;
pub mod apply;
pub mod assemble;
pub mod backlog;
pub mod cli;
pub mod commands;
pub mod config;
pub mod configured;
pub mod depends;
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
pub mod offload;
pub mod order;
pub mod owned;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod private;
pub mod prune;
pub mod query;
pub mod recall;
pub mod reconcile;
pub mod record;
pub mod refused;
pub mod report;
pub mod resolve;
pub mod rollback;
pub mod run;
pub mod runner;
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
use crate::config::{ConfigFile, LogFormat, Settings};

/// The kube client's own log lines that quote a whole response body (its decoder failed:
/// the body may be a Secret): never written, whatever `DROVER_LOG` says. drover reads the
/// objects it manages itself ([`targets::kube::read`]) and names what it cannot read.
fn quotes_bodies(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == "kube_client::client" && *meta.level() == tracing::Level::WARN
}

/// Starts logging to stderr in `format` (`DROVER_LOG` filters, default info).
pub fn init_logs(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG").unwrap_or_else(|_| "info".into());
    // Log lines carry registry and cluster text: cleaned on the way out, so no colours.
    let json = format == LogFormat::Json;
    let layer = tracing_subscriber::fmt::layer().with_writer(move || drover_proto::text::clean::Writer::new(std::io::stderr(), json)).with_ansi(false);
    let layer = match format {
        LogFormat::Json => layer.json().boxed(),
        LogFormat::Text => layer.boxed(),
    };
    let quiet = tracing_subscriber::filter::filter_fn(|m| !quotes_bodies(m));
    tracing_subscriber::registry().with(layer.with_filter(filter).with_filter(quiet)).init();
}

/// The whole program: parses the command line and runs it. Returns the exit code.
pub fn main_entry() -> i32 {
    memory::limit_arenas();
    private::restrict_umask();
    let cli = Cli::parse();
    // Off-thread work (offload.rs) runs on the blocking pool; its threads end after 2 s
    // without work instead of tokio's 10 s, so an idle agent keeps no stacks of the last apply.
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().thread_keep_alive(std::time::Duration::from_secs(2)).build() {
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
                    Some(p) => ConfigFile::load(p)?,
                    None => ConfigFile::default(),
                };
                let settings = Settings::merge(settings, file)?;
                init_logs(settings.log_format);
                run::run(settings, once).await
            }
            Command::Plan(args) => commands::plan(*args).await,
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
            Command::Reconcile(a) => {
                let r = reconcile::ask(&a).await?;
                cli::emit(a.output, &r, || r.to_text())?;
                Ok(if r.ok() { 0 } else { 1 })
            }
            Command::Hold(a) => commands::hold(&a),
            Command::Release(a) => commands::release(&a),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", drover_proto::text::clean::lines(&format!("{e:#}")));
            // Usage and configuration errors are 2; everything else failed (1).
            let usage = e.downcast_ref::<config::ConfigError>().is_some()
                || e.downcast_ref::<commands::Usage>().is_some()
                || matches!(e.downcast_ref::<hold::HoldError>(), Some(hold::HoldError::NoStateDir(_) | hold::HoldError::NotStateDir { .. } | hold::HoldError::Reason(_)));
            if usage { 2 } else { 1 }
        }
    }
}
