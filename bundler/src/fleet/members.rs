//! Declared membership as the readers use it (docs/fleet.md, "Declared membership"): the
//! clusters a reviewed Fleet file (`fleet.yaml` `spec.clusters`, loaded and checked by
//! `crate::platform::membership`) declares, each with the key its reports must be signed
//! with. With it the set of clusters that must be ready for a channel is the declared
//! set, whatever the registry holds, and a report counts only when it is signed by its
//! cluster's declared key ([`Membership::judge`]).

use std::collections::HashMap;

use drover_proto::report::roster::{prejudge, Standing};
use drover_proto::report::store::{Received, Signer};
use drover_proto::report::Report;
use serde::Serialize;

use super::environment_rank;

/// (environment, cluster type, channel): the clusters one gate is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// Environment.
    pub environment: String,
    /// Cluster type.
    pub cluster_type: String,
    /// Channel.
    pub channel: String,
}

impl Group {
    /// The group a report claims to be in.
    pub fn of(r: &Report) -> Group {
        Group { environment: r.environment.clone(), cluster_type: r.cluster_type.clone(), channel: r.channel.clone() }
    }

    /// Display order: environment in promotion order, cluster type, channel.
    pub fn order(&self) -> ((usize, String), &str, &str) {
        (environment_rank(&self.environment), &self.cluster_type, &self.channel)
    }
}

/// One declared cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `TYPE.NAME`: its report tag.
    pub tag: String,
    /// Cluster name.
    pub cluster_name: String,
    /// Where it belongs.
    pub group: Group,
    /// Its report key's fingerprint (64 lowercase hex digits).
    pub report_key: String,
}

/// The declared clusters of one Fleet file.
#[derive(Debug, Clone)]
pub struct Membership {
    /// The file (for messages).
    pub file: String,
    members: Vec<Member>,
    by_tag: HashMap<String, usize>,
}

impl Membership {
    /// The clusters `members` declared in `file`.
    pub fn new(file: &str, members: Vec<Member>) -> Membership {
        let by_tag = members.iter().enumerate().map(|(i, m)| (m.tag.clone(), i)).collect();
        Membership { file: file.to_string(), members, by_tag }
    }

    /// Every declared cluster, in file order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The declared cluster with report tag `tag`.
    pub fn get(&self, tag: &str) -> Option<&Member> {
        self.by_tag.get(tag).map(|&i| &self.members[i])
    }

    /// Does `received` count, read at `now` (Unix seconds)? Only when its cluster is
    /// declared and it is signed by that cluster's declared key (and within the format's
    /// limits, not dated in the future).
    pub fn judge(&self, received: &Received, now: i64) -> Standing {
        let tag = received.report.tag();
        let Some(member) = self.get(&tag) else {
            return Standing::Untrusted(format!(
                "not declared in {}: a retired cluster's leftover report, or a cluster not declared yet \
                 (`drover fleet enroll --fleet {} --cluster {tag}`, then review the change)",
                self.file, self.file
            ));
        };
        if let Some(why) = prejudge(received, now) {
            return Standing::Untrusted(why);
        }
        let Signer::Key(key) = &received.signer else { unreachable!("prejudge sends every other signer away") };
        if key.fingerprint() == member.report_key {
            return Standing::Trusted;
        }
        Standing::Untrusted(format!(
            "signed with report key {}, but {} declares {} for {tag}: if its agent's key really changed, \
             `drover fleet enroll --fleet {} --cluster {tag}={}` and review the change",
            key.fingerprint(),
            self.file,
            member.report_key,
            self.file,
            key.fingerprint()
        ))
    }
}
