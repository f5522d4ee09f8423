//! `drover releases --registry PREFIX [--env E] [--trust-key PUB]...`: what revision each
//! environment is at, from the release records `drover publish` leaves in
//! `PREFIX/drover-releases` (tag `E`: the latest record of environment E). With
//! `--trust-key` every record is verified; a record that does not verify, or that sits
//! under another environment's tag, is shown as such and fails the command (exit 1).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use drover_proto::trust::TrustPolicy;
use drover_proto::{RegistryRef, Repo, StoreError};
use serde::Serialize;

use crate::output::{Report, Text};
use crate::regargs::RegistryArgs;
use crate::release::{self, ReleaseError, ReleasedBundle, RELEASES_REPOSITORY};
use crate::trustargs::TrustArgs;

/// Arguments of `drover releases`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Repository prefix given to `drover publish --registry` (records are in PREFIX/drover-releases).
    #[arg(long, value_name = "PREFIX")]
    pub registry: String,
    /// Show only this environment.
    #[arg(long, visible_alias = "environment")]
    pub env: Option<String>,
    /// Keys every record must be signed with (without them, records are shown unverified).
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Registry connection flags.
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

/// One environment's latest release record.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentRelease {
    /// The environment (the record's tag).
    pub environment: String,
    /// `PREFIX/drover-releases:<env>`.
    pub reference: String,
    /// The record's manifest digest.
    pub digest: String,
    /// The platform revision published.
    pub revision: String,
    /// When it was published (RFC 3339).
    pub time: String,
    /// True when it was published with `--skip-promotion-gate`.
    pub gate_skipped: bool,
    /// Every cluster type's bundle.
    pub cluster_types: BTreeMap<String, ReleasedBundle>,
    /// True when the record verified with `--trust-key` (false without keys).
    pub verified: bool,
    /// Why it does not count, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// What `releases` found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasesReport {
    /// `PREFIX/drover-releases`.
    pub repository: String,
    /// True when `--trust-key` was given (every record was verified).
    pub verify: bool,
    /// One entry per environment, in publish order.
    pub environments: Vec<EnvironmentRelease>,
}

impl Report for ReleasesReport {
    fn write_text(&self, out: &mut Text) {
        let mut rows = Vec::new();
        for e in &self.environments {
            let verified = match (self.verify, e.verified) {
                (false, _) => "not verified",
                (true, true) => "yes",
                (true, false) => "NO",
            };
            let mut types = e.cluster_types.iter().map(|(t, b)| (t.clone(), b.digest.clone())).collect::<Vec<_>>();
            if types.is_empty() {
                types.push(("-".into(), "-".into()));
            }
            for (i, (t, d)) in types.into_iter().enumerate() {
                let head = if i == 0 {
                    vec![e.environment.clone(), e.revision.clone(), e.time.clone(), verified.to_string()]
                } else {
                    vec![String::new(); 4]
                };
                rows.push(head.into_iter().chain([t, d]).collect());
            }
        }
        out.table(&["ENVIRONMENT", "REVISION", "PUBLISHED", "VERIFIED", "CLUSTER TYPE", "DIGEST"], &rows);
        for e in self.environments.iter().filter(|e| e.gate_skipped) {
            out.line(format!("{}: published with `drover publish --skip-promotion-gate`", e.environment));
        }
    }

    fn failure(&self) -> Option<String> {
        let bad: Vec<String> = self
            .environments
            .iter()
            .filter_map(|e| e.problem.as_ref().map(|p| format!("{}: {p}", e.environment)))
            .collect();
        (!bad.is_empty()).then(|| format!("release records that do not count:\n  {}", bad.join("\n  ")))
    }
}

/// The tags that name an environment: every tag that is not `<other tag>-<revision>` nor
/// a cosign tag (`sha256-<hex>.sig`, signatures of the records).
fn environment_tags(tags: &[String]) -> Vec<String> {
    let cosign = |t: &str| t.starts_with("sha256-") && [".sig", ".att", ".sbom"].iter().any(|s| t.ends_with(s));
    let all: BTreeSet<&str> = tags.iter().map(String::as_str).filter(|t| !cosign(t)).collect();
    let is_revision_tag = |t: &str| t.match_indices('-').any(|(i, _)| all.contains(&t[..i]));
    all.iter().filter(|t| !is_revision_tag(t)).map(|t| t.to_string()).collect()
}

/// Runs `drover releases`.
pub async fn run(args: Args) -> anyhow::Result<ReleasesReport> {
    let policy = args.trust.optional_policy()?;
    let prefix = args.registry.trim_end_matches('/');
    let rref = RegistryRef::parse(&format!("{prefix}/{RELEASES_REPOSITORY}"))
        .with_context(|| format!("--registry {prefix:?} must be HOST[:PORT]/PATH, as given to drover publish"))?;
    let repository = rref.to_string();
    let repo = Repo::Registry { client: args.registry_args.client_for(&[prefix])?, repo: rref };
    let tags = match &args.env {
        Some(e) => vec![e.clone()],
        None => match repo.tags().await {
            Ok(t) => environment_tags(&t),
            Err(StoreError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("listing the tags of {repository}")),
        },
    };
    let mut environments = Vec::new();
    for tag in tags {
        if let Some(e) = read_one(&repo, &tag, policy.as_ref(), args.env.is_some()).await? {
            environments.push(e);
        }
    }
    anyhow::ensure!(
        !environments.is_empty() || args.env.is_some(),
        "{repository} holds no release records; `drover publish --registry {prefix}` writes them"
    );
    environments.sort_by(|a, b| (&a.time, &a.environment).cmp(&(&b.time, &b.environment)));
    Ok(ReleasesReport { repository, verify: policy.is_some(), environments })
}

/// Reads (and with `policy`, verifies) the record under `tag`. `None`: not an environment
/// tag after all (a revision tag whose environment tag is gone). `asked`: the user named
/// this environment, so its absence is an error.
async fn read_one(repo: &Repo, tag: &str, policy: Option<&TrustPolicy>, asked: bool) -> anyhow::Result<Option<EnvironmentRelease>> {
    let reference = repo.describe(tag);
    let mut entry = EnvironmentRelease {
        environment: tag.to_string(),
        reference: reference.clone(),
        digest: String::new(),
        revision: String::new(),
        time: String::new(),
        gate_skipped: false,
        cluster_types: BTreeMap::new(),
        verified: false,
        problem: None,
    };
    let (digest, record) = match release::fetch(repo, tag).await {
        Ok(Some(found)) => found,
        Ok(None) if asked => anyhow::bail!("{reference} does not exist: environment {tag} was never published under this prefix"),
        Ok(None) => return Ok(None),
        Err(ReleaseError::Malformed { reason, .. }) => {
            entry.problem = Some(format!("not a release record: {reason}"));
            return Ok(Some(entry));
        }
        Err(e) => return Err(e).with_context(|| format!("reading {reference}")),
    };
    if record.environment != tag {
        if release::record_tag(&record.environment, &record.revision) == tag && !asked {
            return Ok(None);
        }
        entry.problem = Some(format!("the record under tag {tag} is for environment {} at {}", record.environment, record.revision));
    }
    if let Some(policy) = policy {
        match drover_proto::trust::verify(repo, &digest, policy).await {
            Ok(_) => entry.verified = entry.problem.is_none(),
            Err(e) => entry.problem = Some(entry.problem.unwrap_or_else(|| format!("not verified with the trusted key(s): {e}"))),
        }
    }
    entry.digest = digest;
    entry.revision = record.revision;
    entry.time = record.time;
    entry.gate_skipped = record.gate_skipped;
    entry.cluster_types = record.cluster_types;
    Ok(Some(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_tags_leave_out_revision_tags() {
        let tags: Vec<String> = ["dev", "dev-abc", "staging", "staging-abc", "staging-1.2-rc", "prod", "sha256-0123.sig"].iter().map(|s| s.to_string()).collect();
        assert_eq!(environment_tags(&tags), ["dev", "prod", "staging"]);
    }
}
