//! The registry flags shared by every command that talks to a registry (DESIGN §2).

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use drover_proto::auth::Credentials;
use drover_proto::{RegistryClient, RegistryOptions};

/// `--plain-http`, `--ca-file`, `--username` + `--password-stdin`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RegistryArgs {
    /// Talk plain HTTP to the registry (as oras --plain-http); also DROVER_PLAIN_HTTP=true,
    /// as for drover-agent.
    #[arg(long, env = "DROVER_PLAIN_HTTP")]
    pub plain_http: bool,
    /// Extra CA certificate (PEM) to trust for the registry's TLS.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Registry user name (the password is read from stdin with --password-stdin).
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the registry password from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
}

impl RegistryArgs {
    /// Builds the registry client (reading the password from stdin when asked).
    pub fn client(&self) -> anyhow::Result<RegistryClient> {
        let credentials = match (&self.username, self.password_stdin) {
            (Some(u), true) => {
                let mut pw = String::new();
                std::io::stdin().read_to_string(&mut pw).context("reading the password from stdin")?;
                Some(Credentials { username: u.clone(), password: pw.trim_end_matches(['\r', '\n']).to_string() })
            }
            _ => None,
        };
        Ok(RegistryClient::new(RegistryOptions { plain_http: self.plain_http, ca_file: self.ca_file.clone(), credentials })?)
    }
}
