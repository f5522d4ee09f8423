//! `fake-apiserver`: the FAKE Kubernetes API server of drover's tests as a process.
//! Listens on 127.0.0.1, writes a kubeconfig to `--kubeconfig-out`, prints `ready` on
//! stdout when it serves, and runs until killed. Test support only, never shipped.

use anyhow::Context;
use clap::Parser;
use drover_tests::fakekube::{FakeApiServer, FakeOptions, RolloutMode};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// FAKE Kubernetes API server for tests (plain HTTP on 127.0.0.1; not a real apiserver).
#[derive(Parser)]
#[command(name = "fake-apiserver", version)]
struct Args {
    /// Where to write a kubeconfig pointing at this server.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// What the fake controller does with workload status: ready, stuck or none.
    #[arg(long, default_value = "ready")]
    rollout: String,
    /// Time a ready rollout shows Progressing first, e.g. 500ms.
    #[arg(long, value_parser = humantime_like, default_value = "0ms")]
    rollout_delay: Duration,
    /// Time before a new CRD is Established, e.g. 1s.
    #[arg(long, value_parser = humantime_like, default_value = "0ms")]
    crd_delay: Duration,
    /// The Kubernetes minor to play (1.MINOR): its built-in kinds and their schemas.
    #[arg(long, default_value_t = drover_tests::fakekube::DEFAULT_MINOR)]
    minor: u8,
}

/// Parses `250ms`, `2s` or a plain number of milliseconds.
fn humantime_like(s: &str) -> Result<Duration, String> {
    let err = || format!("{s:?} is not a duration like 500ms or 2s");
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse().map(Duration::from_millis).map_err(|_| err());
    }
    if let Some(secs) = s.strip_suffix('s') {
        return secs
            .parse::<f64>()
            .map(Duration::from_secs_f64)
            .map_err(|_| err());
    }
    s.parse().map(Duration::from_millis).map_err(|_| err())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rollout = RolloutMode::parse(&args.rollout)
        .with_context(|| format!("--rollout {:?}: use ready, stuck or none", args.rollout))?;
    let server = FakeApiServer::start_with(FakeOptions {
        port: args.port,
        rollout,
        rollout_delay: args.rollout_delay,
        crd_delay: args.crd_delay,
        minor: args.minor,
    })
    .with_context(|| format!("starting the fake API server on 127.0.0.1:{}", args.port))?;
    server
        .write_kubeconfig(&args.kubeconfig_out)
        .with_context(|| {
            format!(
                "writing the kubeconfig to {}",
                args.kubeconfig_out.display()
            )
        })?;
    eprintln!(
        "fake-apiserver (FAKE Kubernetes API, tests only) serving {}",
        server.url()
    );
    let mut out = std::io::stdout();
    writeln!(out, "ready")?;
    out.flush()?;
    loop {
        std::thread::park();
    }
}
