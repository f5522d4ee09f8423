//! The registry flags shared by every command that talks to a registry (docs/design.md §2), and
//! the rule binding explicit credentials to one registry host.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use drover_proto::auth::{Credentials, HostCredentials};
use drover_proto::registry::parse_timeout;
use drover_proto::{Reference, RegistryClient, RegistryOptions, RegistryRef};

/// `--plain-http`, `--ca-file`, `--username` + `--password-stdin` (+ `--credentials-for`),
/// `--registry-timeout`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RegistryArgs {
    /// Talk plain HTTP to the registry (as oras --plain-http); also DROVER_PLAIN_HTTP=true,
    /// as for drover-agent.
    #[arg(long, env = "DROVER_PLAIN_HTTP")]
    pub plain_http: bool,
    /// Extra CA certificate(s) (PEM) to trust for the registry's TLS, besides the system's.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Registry user name (the password is read from stdin with --password-stdin). Sent
    /// only to the command's registry; other registries use the Docker config.
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the registry password from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// The registry (HOST[:PORT]) --username is for, when the command reaches several.
    #[arg(long, value_name = "HOST[:PORT]", requires = "username")]
    pub credentials_for: Option<String>,
    /// Deadline of one registry request, e.g. 30s or 2m (default 30s, or
    /// DROVER_REGISTRY_TIMEOUT); blob transfers get more by size.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub registry_timeout: Option<Duration>,
}

/// The registry host of a reference or registry prefix (`HOST[:PORT][/PATH]`), if it
/// names a registry (not `oci:`/`oci-archive:`, not a bare tag).
fn registry_host(reference: &str) -> Option<String> {
    match Reference::parse(reference) {
        Ok(Reference::Registry(r)) => Some(r.registry),
        Ok(_) => None,
        Err(_) => RegistryRef::parse(&format!("{}/x", reference.trim_end_matches('/'))).ok().map(|r| r.registry),
    }
}

impl RegistryArgs {
    /// Builds the registry client for a command that reaches the registries of
    /// `references` (references or registry prefixes as the user wrote them). Explicit
    /// credentials are bound to one host: `--credentials-for`, else the only registry
    /// among `references`; with several and no `--credentials-for` this is an error
    /// (before anything is sent).
    pub fn client_for<S: AsRef<str>>(&self, references: &[S]) -> anyhow::Result<RegistryClient> {
        let mut hosts: Vec<String> = references.iter().filter_map(|r| registry_host(r.as_ref())).collect();
        hosts.sort();
        hosts.dedup();
        let credentials = match &self.username {
            Some(user) => Some(HostCredentials { registry: self.credentials_host(&hosts)?, credentials: self.read_password(user)? }),
            None => None,
        };
        Ok(RegistryClient::new(RegistryOptions {
            plain_http: self.plain_http,
            ca_file: self.ca_file.clone(),
            credentials,
            timeout: self.registry_timeout,
            credential_flags: Some("--username/--password-stdin"),
        })?)
    }

    fn credentials_host(&self, hosts: &[String]) -> anyhow::Result<String> {
        if let Some(h) = &self.credentials_for {
            return Ok(h.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/').to_string());
        }
        match hosts {
            [one] => Ok(one.clone()),
            [] => anyhow::bail!("--username is given but this command reaches no registry; drop it"),
            many => anyhow::bail!(
                "--username would be ambiguous: this command reaches the registries {}; name the one it is for with --credentials-for HOST[:PORT] (the others use the Docker config)",
                many.join(" and ")
            ),
        }
    }

    fn read_password(&self, user: &str) -> anyhow::Result<Credentials> {
        anyhow::ensure!(self.password_stdin, "--username needs --password-stdin");
        let mut pw = String::new();
        std::io::stdin().read_to_string(&mut pw).context("reading the password from stdin")?;
        Ok(Credentials { username: user.to_string(), password: pw.trim_end_matches(['\r', '\n']).to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_references_and_prefixes() {
        assert_eq!(registry_host("r.example:5000/fleet/app:prod").as_deref(), Some("r.example:5000"));
        assert_eq!(registry_host("r.example/mirror").as_deref(), Some("r.example"));
        assert_eq!(registry_host("127.0.0.1:5000").as_deref(), Some("127.0.0.1:5000"));
        assert_eq!(registry_host("oci:/tmp/layout:prod"), None);
        assert_eq!(registry_host("prod-ring1"), None);
    }

    #[test]
    fn explicit_credentials_need_one_host() {
        let args = RegistryArgs { username: Some("u".into()), password_stdin: true, ..Default::default() };
        let err = args.credentials_host(&["a.example".into(), "b.example".into()]).unwrap_err().to_string();
        assert!(err.contains("--credentials-for") && err.contains("a.example and b.example"), "{err}");
        assert_eq!(args.credentials_host(&["a.example".into()]).unwrap(), "a.example");
        let named = RegistryArgs { credentials_for: Some("b.example".into()), ..args };
        assert_eq!(named.credentials_host(&["a.example".into(), "b.example".into()]).unwrap(), "b.example");
    }
}
