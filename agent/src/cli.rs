//! The command line: `drover-agent run | status | history`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::FileConfig;

/// drover-agent: polls one bundle reference, verifies it, applies it to a target and records it.
#[derive(Debug, Parser)]
#[command(name = "drover-agent", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent: poll, verify, apply, prune, record, serve status.
    Run(Box<RunArgs>),
    /// Show the agent's status (asks the running agent, else reads the state directory).
    Status(QueryArgs),
    /// Show the last attempts with per-object outcomes.
    History(QueryArgs),
}

/// Output format of `status` and `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable text.
    Table,
    /// JSON.
    Json,
}

/// Flags of `status` and `history`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The running agent's HTTP endpoint.
    #[arg(long, default_value = "http://127.0.0.1:9464")]
    pub endpoint: String,
    /// State directory, read directly when no agent answers.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
    /// history: show at most this many attempts (newest first).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

/// Flags of `run`; each also settable in the `--config` file (flags win).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// YAML config file (camelCase fields, same names as the flags).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bundle reference to poll: HOST/REPO:TAG, oci:DIR:REF or oci-archive:FILE:REF.
    #[arg(long)]
    pub source: Option<String>,
    /// Talk plain HTTP to the registry.
    #[arg(long)]
    pub plain_http: bool,
    /// Extra CA certificate (PEM) for the registry.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Trusted public key (PEM); repeat for several keys (rotation, two-party release).
    #[arg(long = "trust-key")]
    pub trust_key: Vec<PathBuf>,
    /// Distinct trusted keys that must have signed (default 1).
    #[arg(long)]
    pub threshold: Option<usize>,
    /// Apply bundles WITHOUT checking signatures. Only for trying drover out.
    #[arg(long)]
    pub insecure_skip_verify: bool,
    /// Refuse bundles whose signed config has another clusterType.
    #[arg(long)]
    pub expect_cluster_type: Option<String>,
    /// Refuse bundles whose signed config has another environment.
    #[arg(long)]
    pub expect_environment: Option<String>,
    /// Where to apply: kube or dir:PATH.
    #[arg(long)]
    pub target: Option<String>,
    /// Directory of the agent's database.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Poll interval (jittered), e.g. 30s.
    #[arg(long)]
    pub interval: Option<String>,
    /// Re-apply an unchanged bundle this often (drift correction), e.g. 10m.
    #[arg(long)]
    pub resync: Option<String>,
    /// Server-side apply field manager.
    #[arg(long)]
    pub field_manager: Option<String>,
    /// Refuse to prune more than this fraction of the inventory (unless the bundle opts in).
    #[arg(long)]
    pub max_prune_ratio: Option<f64>,
    /// Address of the HTTP server (/healthz /readyz /status /metrics).
    #[arg(long)]
    pub listen: Option<String>,
    /// Log format: text or json.
    #[arg(long)]
    pub log_format: Option<String>,
    /// Allowed namespace for namespaced objects; repeatable (default: all).
    #[arg(long = "allow-namespace")]
    pub allow_namespace: Vec<String>,
    /// Kind that bundles may not contain; repeatable.
    #[arg(long = "deny-kind")]
    pub deny_kind: Vec<String>,
    /// Bound of the health wait after an apply, e.g. 2m.
    #[arg(long)]
    pub health_timeout: Option<String>,
    /// kube target: do not force-take fields owned by other managers.
    #[arg(long)]
    pub no_force: bool,
    /// kube target: objects applied at once inside an order group (default 8).
    #[arg(long)]
    pub apply_concurrency: Option<usize>,
    /// Elect one agent per cluster with a coordination.k8s.io Lease; the others stand by.
    #[arg(long)]
    pub leader_election: bool,
    /// Namespace of the Lease (default: POD_NAMESPACE, else drover-system).
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// Name of the Lease (default drover-agent).
    #[arg(long)]
    pub lease_name: Option<String>,
    /// Lease duration, e.g. 15s (the leader renews every third of it).
    #[arg(long)]
    pub lease_duration: Option<String>,
    /// Run one cycle and exit: 0 when applied or unchanged, 1 when refused or failed.
    #[arg(long)]
    pub once: bool,
}

impl RunArgs {
    /// The flag values as a [`FileConfig`] layer (unset flags are `None`).
    pub fn as_layer(&self) -> FileConfig {
        let vec_or_none = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        FileConfig {
            source: self.source.clone(),
            plain_http: self.plain_http.then_some(true),
            ca_file: self.ca_file.clone(),
            trust_keys: (!self.trust_key.is_empty()).then(|| self.trust_key.clone()),
            threshold: self.threshold,
            insecure_skip_verify: self.insecure_skip_verify.then_some(true),
            expect_cluster_type: self.expect_cluster_type.clone(),
            expect_environment: self.expect_environment.clone(),
            target: self.target.clone(),
            state_dir: self.state_dir.clone(),
            interval: self.interval.clone(),
            resync: self.resync.clone(),
            field_manager: self.field_manager.clone(),
            max_prune_ratio: self.max_prune_ratio,
            listen: self.listen.clone(),
            log_format: self.log_format.clone(),
            allowed_namespaces: vec_or_none(&self.allow_namespace),
            denied_kinds: vec_or_none(&self.deny_kind),
            health_timeout: self.health_timeout.clone(),
            no_force: self.no_force.then_some(true),
            apply_concurrency: self.apply_concurrency,
            leader_election: self.leader_election.then_some(true),
            lease_namespace: self.lease_namespace.clone(),
            lease_name: self.lease_name.clone(),
            lease_duration: self.lease_duration.clone(),
        }
    }
}
