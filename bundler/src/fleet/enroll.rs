//! What `drover fleet enroll` changes (docs/fleet.md, "Declared membership"), decided from
//! who is enrolled now — the clusters a Fleet file declares (`--fleet`), or the registry
//! roster — and the reports as read. Pure, so every rule is tested without a registry:
//!
//! - a cluster is enrolled with the key its signed report carries now, with the
//!   environment and channel that report says; `--cluster TYPE.NAME=FINGERPRINT` (all 64
//!   hex digits, as its agent logs it) additionally pins it: a report a registry writer
//!   forged under that tag carries another key;
//! - `--all-pending` enrolls every cluster that is not enrolled yet and whose report is
//!   signed; a cluster enrolled with ANOTHER key is never re-enrolled by it (that is
//!   exactly what a forged report looks like): it is listed, to be confirmed one by one
//!   with `--cluster TYPE.NAME=FINGERPRINT`;
//! - `--remove` takes the named clusters out (their reports stop counting).

use std::collections::BTreeMap;

use drover_proto::report::store::{Received, Signer};
use serde::Serialize;

/// Length of a full report key fingerprint (hex SHA-256).
pub const FINGERPRINT_HEX: usize = 64;

/// What to enroll or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Nothing: list the pending clusters only.
    List,
    /// These clusters (`TYPE.NAME`, optionally pinned to a full fingerprint).
    Clusters(Vec<(String, Option<String>)>),
    /// Every cluster not enrolled whose report is signed.
    AllPending,
}

/// What happens to one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Action {
    /// Enrolled (declared) with the key its report carries.
    #[serde(rename = "enrolled")]
    Enrolled,
    /// Its new key confirmed by name (`--cluster TYPE.NAME=FINGERPRINT`).
    #[serde(rename = "re-enrolled")]
    ReEnrolled,
    /// Taken out.
    #[serde(rename = "removed")]
    Removed,
    /// Already enrolled with that key.
    #[serde(rename = "unchanged")]
    Unchanged,
    /// Listed: signed, not enrolled.
    #[serde(rename = "pending")]
    Pending,
    /// Listed: enrolled with another key than its report carries (confirm by name).
    #[serde(rename = "key changed")]
    KeyChanged,
}

impl Action {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Enrolled => "enrolled",
            Action::ReEnrolled => "re-enrolled",
            Action::Removed => "removed",
            Action::Unchanged => "unchanged",
            Action::Pending => "pending",
            Action::KeyChanged => "key changed",
        }
    }
}

/// One cluster in the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `TYPE.NAME`.
    pub cluster: String,
    /// The key fingerprint concerned (all 64 hex digits).
    pub key: String,
    /// What happened (or is listed).
    pub action: Action,
    /// The key it was enrolled with before (re-enrolled, removed, key changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The environment its report says (enrolled, pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The channel its report says (enrolled, pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

/// Parses `--cluster TYPE.NAME[=FINGERPRINT]` (the fingerprint all 64 hex digits).
pub fn parse_cluster(text: &str) -> Result<(String, Option<String>), String> {
    let (tag, fp) = match text.split_once('=') {
        Some((t, f)) => (t, Some(f.trim().to_ascii_lowercase())),
        None => (text, None),
    };
    let (ty, name) = tag.split_once('.').ok_or_else(|| format!("--cluster {text:?}: name a cluster as TYPE.NAME (its report tag), e.g. edge.factory-lyon-1"))?;
    drover_proto::report::check_cluster_type(ty)?;
    drover_proto::report::check_cluster_name(name)?;
    if let Some(f) = &fp {
        if f.len() != FINGERPRINT_HEX || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "--cluster {text:?}: give all {FINGERPRINT_HEX} hex digits of the report key's fingerprint, as its agent logs it at start (fingerprint=…); a shorter prefix is not accepted"
            ));
        }
    }
    Ok((tag.to_string(), fp))
}

/// What a signed report says about its cluster.
struct Seen<'a> {
    key: Option<&'a str>,
    environment: &'a str,
    channel: &'a str,
}

/// The key each cluster's report carries (`None` for an unsigned or badly signed one).
fn seen(received: &[Received]) -> BTreeMap<String, Seen<'_>> {
    received
        .iter()
        .map(|r| {
            let key = match &r.signer {
                Signer::Key(k) => Some(k.fingerprint()),
                _ => None,
            };
            (r.report.tag(), Seen { key, environment: &r.report.environment, channel: &r.report.channel })
        })
        .collect()
}

/// Decides `selection` (enroll, or with `remove` take out) against `enrolled` (tag → key
/// fingerprint), given the reports `received`; `enrolled` is changed as decided. Returns
/// every change and listing. Refused, naming the cluster, when a named cluster cannot be
/// enrolled as asked (then nothing is changed).
pub fn plan(enrolled: &mut BTreeMap<String, String>, received: &[Received], selection: &Selection, remove: bool) -> Result<Vec<Change>, String> {
    let seen = seen(received);
    let mut out = Vec::new();
    let change = |cluster: &str, key: &str, action, previous: Option<&String>, s: Option<&Seen>| Change {
        cluster: cluster.into(),
        key: key.into(),
        action,
        previous: previous.cloned(),
        environment: s.map(|s| s.environment.to_string()),
        channel: s.map(|s| s.channel.to_string()),
    };
    let mut next = enrolled.clone();
    match (selection, remove) {
        (Selection::Clusters(named), true) => {
            for (tag, _) in named {
                match next.remove(tag) {
                    Some(fp) => out.push(change(tag, &fp, Action::Removed, Some(&fp), None)),
                    None => return Err(format!("{tag} is not enrolled; nothing removed")),
                }
            }
        }
        (_, true) => return Err("--remove needs the clusters to remove: --cluster TYPE.NAME".into()),
        (Selection::Clusters(named), false) => {
            for (tag, pin) in named {
                let s = match seen.get(tag) {
                    Some(s) if s.key.is_some() => s,
                    Some(_) => return Err(format!("the report of {tag} is not signed with a report key (is its agent older than report keys, or did someone else write it?); nothing enrolled")),
                    None => return Err(format!("no report of {tag} in the reports repository; its agent must have reported once (it signs with its report key); nothing enrolled")),
                };
                let key = s.key.expect("checked above");
                if pin.as_deref().is_some_and(|p| p != key) {
                    return Err(format!(
                        "the report of {tag} is signed with key {key}, not {}: the report may not be its agent's; nothing enrolled",
                        pin.as_deref().unwrap_or_default()
                    ));
                }
                match next.get(tag).cloned() {
                    Some(fp) if fp == key => out.push(change(tag, key, Action::Unchanged, None, Some(s))),
                    Some(fp) if pin.is_none() => {
                        return Err(format!(
                            "{tag} is enrolled with key {fp}, its report now carries {key}: if its agent's key really changed, confirm with --cluster {tag}={key}; nothing enrolled"
                        ))
                    }
                    Some(fp) => {
                        next.insert(tag.clone(), key.to_string());
                        out.push(change(tag, key, Action::ReEnrolled, Some(&fp), Some(s)));
                    }
                    None => {
                        next.insert(tag.clone(), key.to_string());
                        out.push(change(tag, key, Action::Enrolled, None, Some(s)));
                    }
                }
            }
        }
        (Selection::AllPending | Selection::List, false) => {
            let enroll = *selection == Selection::AllPending;
            for (tag, s) in &seen {
                let Some(key) = s.key else { continue };
                match next.get(tag).cloned() {
                    Some(fp) if fp == key => {}
                    Some(fp) => out.push(change(tag, key, Action::KeyChanged, Some(&fp), Some(s))),
                    None if enroll => {
                        next.insert(tag.clone(), key.to_string());
                        out.push(change(tag, key, Action::Enrolled, None, Some(s)));
                    }
                    None => out.push(change(tag, key, Action::Pending, None, Some(s))),
                }
            }
        }
    }
    *enrolled = next;
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

    fn fp(k: &PrivateKey) -> String {
        k.public_key().fingerprint().to_string()
    }

    #[test]
    fn all_pending_never_replaces_an_enrolled_key() {
        let (a, b, forged) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let mut enrolled = BTreeMap::from([("edge.a".to_string(), fp(&a))]);
        let seen = vec![received("a", Some(&forged)), received("b", Some(&b)), received("u", None)];
        let listed = plan(&mut enrolled.clone(), &seen, &Selection::List, false).unwrap();
        let actions: Vec<(&str, Action)> = listed.iter().map(|c| (c.cluster.as_str(), c.action)).collect();
        assert_eq!(actions, [("edge.a", Action::KeyChanged), ("edge.b", Action::Pending)]);
        let done = plan(&mut enrolled, &seen, &Selection::AllPending, false).unwrap();
        assert_eq!(done.iter().filter(|c| c.action == Action::Enrolled).count(), 1);
        assert_eq!(done[1].environment.as_deref(), Some("prod"), "the report's environment and channel come along");
        assert_eq!(enrolled["edge.a"], fp(&a), "the forged key is not enrolled");
        assert_eq!(enrolled["edge.b"], fp(&b));
    }

    #[test]
    fn named_clusters_are_checked_and_pinned_with_full_fingerprints() {
        let (a, forged) = (PrivateKey::generate().unwrap(), PrivateKey::generate().unwrap());
        let mut enrolled = BTreeMap::new();
        let seen = vec![received("a", Some(&a)), received("u", None)];
        let pin = |k: &PrivateKey| Some(fp(k));
        assert!(plan(&mut enrolled, &seen, &Selection::Clusters(vec![("edge.a".into(), pin(&forged))]), false).unwrap_err().contains("not"));
        assert!(plan(&mut enrolled, &seen, &Selection::Clusters(vec![("edge.u".into(), None)]), false).unwrap_err().contains("not signed"));
        assert!(plan(&mut enrolled, &seen, &Selection::Clusters(vec![("edge.x".into(), None)]), false).unwrap_err().contains("no report"));
        assert!(enrolled.is_empty(), "refusals change nothing");
        plan(&mut enrolled, &seen, &Selection::Clusters(vec![("edge.a".into(), pin(&a))]), false).unwrap();
        assert_eq!(enrolled.len(), 1);
        let forged_seen = vec![received("a", Some(&forged))];
        let e = plan(&mut enrolled, &forged_seen, &Selection::Clusters(vec![("edge.a".into(), None)]), false).unwrap_err();
        assert!(e.contains("confirm") && e.contains(&fp(&forged)), "{e}");
        let rekeyed = plan(&mut enrolled.clone(), &forged_seen, &Selection::Clusters(vec![("edge.a".into(), pin(&forged))]), false).unwrap();
        assert_eq!((rekeyed[0].action, rekeyed[0].previous.clone()), (Action::ReEnrolled, Some(fp(&a))));
        let removed = plan(&mut enrolled, &[], &Selection::Clusters(vec![("edge.a".into(), None)]), true).unwrap();
        assert_eq!(removed[0].action, Action::Removed);
        assert!(enrolled.is_empty());
        let full = "ABCDEF0123456789".repeat(4);
        assert_eq!(parse_cluster(&format!("edge.c1={full}")).unwrap().1, Some(full.to_ascii_lowercase()));
        assert!(parse_cluster("edge.c1=abcdef012345").unwrap_err().contains("all 64 hex digits"), "12 digits are not enough");
        assert!(parse_cluster("edge").is_err() && parse_cluster("edge.c1=xyz").is_err());
    }
}
