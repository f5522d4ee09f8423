//! What `drover fleet enroll` changes in the fleet roster (docs/fleet.md, "Who can write
//! a report"), decided from the roster and the reports as read — pure, so every rule is
//! tested without a registry:
//!
//! - a cluster is enrolled with the key its signed report carries now; `--cluster
//!   TYPE.NAME=FINGERPRINT` additionally pins it (the operator compared it with the agent's
//!   log: a report a registry writer forged under that tag carries another key);
//! - `--all-pending` enrolls every cluster that is not in the roster yet and whose report
//!   is signed; a cluster enrolled with ANOTHER key is never re-enrolled by it (that is
//!   exactly what a forged report looks like): it is listed, to be confirmed one by one
//!   with `--cluster TYPE.NAME=FINGERPRINT`;
//! - `--remove` takes the named clusters out (revokes their key).

use std::collections::BTreeMap;

use drover_proto::report::roster::Roster;
use drover_proto::report::store::{Received, Signer};
use serde::Serialize;

/// What to enroll or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Nothing: list the pending clusters only.
    List,
    /// These clusters (`TYPE.NAME`, optionally pinned to a fingerprint prefix).
    Clusters(Vec<(String, Option<String>)>),
    /// Every cluster not in the roster whose report is signed.
    AllPending,
}

/// One cluster in the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `TYPE.NAME`.
    pub cluster: String,
    /// The key fingerprint concerned.
    pub key: String,
    /// `enrolled`, `re-enrolled` (a new key confirmed), `removed`, `unchanged`, or
    /// `pending` / `key changed` (listed, not changed).
    pub action: String,
}

/// Parses `--cluster TYPE.NAME[=FINGERPRINT]`.
pub fn parse_cluster(text: &str) -> Result<(String, Option<String>), String> {
    let (tag, fp) = match text.split_once('=') {
        Some((t, f)) => (t, Some(f.trim().to_ascii_lowercase())),
        None => (text, None),
    };
    let (ty, name) = tag.split_once('.').ok_or_else(|| format!("--cluster {text:?}: name a cluster as TYPE.NAME (its report tag), e.g. edge.factory-lyon-1"))?;
    drover_proto::report::check_cluster_type(ty)?;
    drover_proto::report::check_cluster_name(name)?;
    if let Some(f) = &fp {
        if f.len() < 12 || f.len() > 64 || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("--cluster {text:?}: the fingerprint must be at least 12 hex digits of the report key's fingerprint"));
        }
    }
    Ok((tag.to_string(), fp))
}

/// The key each cluster's signed report carries (`None` for an unsigned or badly signed one).
fn keys(received: &[Received]) -> BTreeMap<String, Option<String>> {
    received
        .iter()
        .map(|r| {
            let key = match &r.signer {
                Signer::Key(k) => Some(k.fingerprint().to_string()),
                _ => None,
            };
            (r.report.tag(), key)
        })
        .collect()
}

/// Applies `selection` (enroll, or with `remove` take out) to `roster`, given the reports
/// `received`. Returns every change and listing; `roster` is changed in place. Refused,
/// naming the cluster, when a named cluster cannot be enrolled as asked.
pub fn plan(roster: &mut Roster, received: &[Received], selection: &Selection, remove: bool) -> Result<Vec<Change>, String> {
    let keys = keys(received);
    let mut out = Vec::new();
    let change = |cluster: &str, key: &str, action: &str| Change { cluster: cluster.into(), key: key.into(), action: action.into() };
    match (selection, remove) {
        (Selection::Clusters(named), true) => {
            for (tag, _) in named {
                match roster.clusters.remove(tag) {
                    Some(fp) => out.push(change(tag, &fp, "removed")),
                    None => return Err(format!("{tag} is not in the roster; nothing removed")),
                }
            }
        }
        (_, true) => return Err("--remove needs the clusters to remove: --cluster TYPE.NAME".into()),
        (Selection::Clusters(named), false) => {
            for (tag, pin) in named {
                let key = match keys.get(tag) {
                    Some(Some(k)) => k,
                    Some(None) => return Err(format!("the report of {tag} is not signed with a report key (is its agent older than report keys, or did someone else write it?); nothing enrolled")),
                    None => return Err(format!("no report of {tag} in the reports repository; its agent must have reported once (it signs with its report key); nothing enrolled")),
                };
                if pin.as_ref().is_some_and(|p| !key.starts_with(p.as_str())) {
                    return Err(format!(
                        "the report of {tag} is signed with key {}, not {}: the report may not be its agent's; nothing enrolled",
                        &key[..12],
                        pin.as_deref().unwrap_or_default()
                    ));
                }
                match roster.clusters.get(tag) {
                    Some(fp) if fp == key => out.push(change(tag, key, "unchanged")),
                    Some(fp) if pin.is_none() => {
                        return Err(format!(
                            "{tag} is enrolled with key {}, its report now carries {}: if its agent's key really changed, confirm with --cluster {tag}={}; nothing enrolled",
                            &fp[..12],
                            &key[..12],
                            &key[..12]
                        ))
                    }
                    Some(_) => {
                        roster.clusters.insert(tag.clone(), key.clone());
                        out.push(change(tag, key, "re-enrolled"));
                    }
                    None => {
                        roster.clusters.insert(tag.clone(), key.clone());
                        out.push(change(tag, key, "enrolled"));
                    }
                }
            }
        }
        (Selection::AllPending | Selection::List, false) => {
            let enroll = *selection == Selection::AllPending;
            for (tag, key, enrolled) in roster.pending(received) {
                match enrolled {
                    Some(_) => out.push(change(&tag, &key, "key changed")),
                    None if enroll => {
                        roster.clusters.insert(tag.clone(), key.clone());
                        out.push(change(&tag, &key, "enrolled"));
                    }
                    None => out.push(change(&tag, &key, "pending")),
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::keys::PrivateKey;
    use drover_proto::report::{Report, ReportHealth, SCHEMA_VERSION};

    fn received(name: &str, key: Option<&PrivateKey>) -> Received {
        let report = Report {
            schema_version: SCHEMA_VERSION,
            cluster_name: name.into(),
            cluster_type: "edge".into(),
            environment: "prod".into(),
            channel: "prod".into(),
            applied_digest: None,
            applied_sequence: None,
            health: ReportHealth::Unknown,
            health_since: None,
            last_attempt: None,
            objects: Default::default(),
            failing: vec![],
            held: None,
            drifted_objects: None,
            rolled_back: None,
            agent_version: "t".into(),
            reported_at: "2026-01-01T00:00:00Z".into(),
        };
        let signer = key.map(|k| Signer::Key(k.public_key().clone())).unwrap_or(Signer::Unsigned);
        Received { name: format!("edge.{name}"), report, signer, cut: vec![] }
    }

    #[test]
    fn all_pending_never_replaces_an_enrolled_key() {
        let (a, b, forged) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let mut roster = Roster::default();
        roster.clusters.insert("edge.a".into(), a.public_key().fingerprint().into());
        let seen = vec![received("a", Some(&forged)), received("b", Some(&b)), received("u", None)];
        let listed = plan(&mut roster.clone(), &seen, &Selection::List, false).unwrap();
        let actions: Vec<(&str, &str)> = listed.iter().map(|c| (c.cluster.as_str(), c.action.as_str())).collect();
        assert_eq!(actions, [("edge.a", "key changed"), ("edge.b", "pending")]);
        let done = plan(&mut roster, &seen, &Selection::AllPending, false).unwrap();
        assert_eq!(done.iter().filter(|c| c.action == "enrolled").count(), 1);
        assert_eq!(roster.clusters["edge.a"], a.public_key().fingerprint(), "the forged key is not enrolled");
        assert_eq!(roster.clusters["edge.b"], b.public_key().fingerprint());
    }

    #[test]
    fn named_clusters_are_checked_and_pinned() {
        let (a, forged) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let mut roster = Roster::default();
        let seen = vec![received("a", Some(&a)), received("u", None)];
        let pin = |k: &PrivateKey| Some(k.public_key().fingerprint()[..16].to_string());
        assert!(plan(&mut roster, &seen, &Selection::Clusters(vec![("edge.a".into(), pin(&forged))]), false).unwrap_err().contains("not"));
        assert!(plan(&mut roster, &seen, &Selection::Clusters(vec![("edge.u".into(), None)]), false).unwrap_err().contains("not signed"));
        assert!(plan(&mut roster, &seen, &Selection::Clusters(vec![("edge.x".into(), None)]), false).unwrap_err().contains("no report"));
        assert!(roster.clusters.is_empty(), "refusals change nothing");
        plan(&mut roster, &seen, &Selection::Clusters(vec![("edge.a".into(), pin(&a))]), false).unwrap();
        assert_eq!(roster.clusters.len(), 1);
        let forged_seen = vec![received("a", Some(&forged))];
        assert!(plan(&mut roster, &forged_seen, &Selection::Clusters(vec![("edge.a".into(), None)]), false).unwrap_err().contains("confirm"));
        let removed = plan(&mut roster, &[], &Selection::Clusters(vec![("edge.a".into(), None)]), true).unwrap();
        assert_eq!(removed[0].action, "removed");
        assert!(roster.clusters.is_empty());
        assert!(parse_cluster("edge.c1=ABCDEF012345").unwrap().1.as_deref() == Some("abcdef012345"));
        assert!(parse_cluster("edge").is_err() && parse_cluster("edge.c1=xyz").is_err());
    }
}
