//! Which clusters belong to a (environment, cluster type, channel), from what was read:
//! with a Fleet file the declared clusters and nothing else (a declared cluster without a
//! report is `missing`, one whose reports do not count `untrusted`; a report of a cluster
//! that is not declared is in no group); without one, the clusters whose report that
//! counts claims the group, and those whose reports that do not count claim it.

use std::collections::BTreeMap;

use drover_proto::report::Report;

use super::classify::{Known, Target};
use super::members::{Group, Membership};
use super::read::Reading;

/// One cluster of a group.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    /// `TYPE.NAME`.
    pub tag: &'a str,
    /// Its cluster name (after the first `.`).
    pub cluster_name: &'a str,
    /// What is known of it.
    pub known: Known<'a>,
}

fn name_of(tag: &str) -> &str {
    tag.split_once('.').map_or(tag, |(_, n)| n)
}

/// The slot of untrusted `tag`, named when its reason was kept.
fn untrusted<'a>(reading: &'a Reading, tag: &'a str) -> Slot<'a> {
    Slot { tag, cluster_name: name_of(tag), known: Known::Untrusted(reading.why.get(tag).map(String::as_str)) }
}

/// The clusters of `group` (every one: a gate counts them all).
pub fn slots<'a>(reading: &'a Reading, membership: Option<&'a Membership>, group: &Group) -> Vec<Slot<'a>> {
    let mut out: Vec<Slot> = match membership {
        Some(m) => m.members().iter().filter(|c| &c.group == group).map(|c| declared(reading, &c.tag, &c.cluster_name)).collect(),
        None => {
            let trusted = reading
                .trusted
                .iter()
                .filter(|(_, r)| Group::of(r) == *group)
                .map(|(tag, r)| Slot { tag, cluster_name: &r.cluster_name, known: Known::Report(r) });
            let untrusted = reading.untrusted.iter().filter(|(_, g)| *g == group).map(|(tag, _)| untrusted(reading, tag));
            trusted.chain(untrusted).collect()
        }
    };
    out.sort_by(|a, b| a.tag.cmp(b.tag));
    out
}

fn declared<'a>(reading: &'a Reading, tag: &'a str, cluster_name: &'a str) -> Slot<'a> {
    let known = match (reading.trusted.get(tag), reading.declared_untrusted.get(tag)) {
        (Some(r), _) => Known::Report(r),
        (None, Some(why)) => Known::Untrusted(Some(why)),
        (None, None) => Known::Missing(reading.declared_unusable.get(tag).map(String::as_str)),
    };
    Slot { tag, cluster_name, known }
}

/// Every group with its clusters, in display order (environment in promotion order,
/// cluster type, channel). Without a Fleet file, a group is there only when a report
/// that counts claims it (clusters whose reports do not count join the groups that
/// exist; the others are only counted): what a registry writer adds cannot make groups.
pub fn all<'a>(reading: &'a Reading, membership: Option<&'a Membership>, env: Option<&str>) -> Vec<(Group, Vec<Slot<'a>>)> {
    let mut groups: BTreeMap<Group, Vec<Slot<'a>>> = BTreeMap::new();
    match membership {
        Some(m) => {
            for c in m.members() {
                groups.entry(c.group.clone()).or_default().push(declared(reading, &c.tag, &c.cluster_name));
            }
        }
        None => {
            for (tag, r) in &reading.trusted {
                groups.entry(Group::of(r)).or_default().push(Slot { tag, cluster_name: &r.cluster_name, known: Known::Report(r) });
            }
            for (tag, g) in &reading.untrusted {
                if let Some(slots) = groups.get_mut(g) {
                    slots.push(untrusted(reading, tag));
                }
            }
        }
    }
    let mut out: Vec<(Group, Vec<Slot>)> = groups.into_iter().filter(|(g, _)| env.is_none_or(|e| g.environment == e)).collect();
    for (_, slots) in &mut out {
        slots.sort_by(|a, b| a.tag.cmp(b.tag));
    }
    out.sort_by(|a, b| a.0.order().cmp(&b.0.order()));
    out
}

/// What the clusters of `group` should run when nothing else says: the newest sequence a
/// report that counts and claims the group runs (`None`: none runs anything yet).
pub fn peer_target(group: &Group, slots: &[Slot]) -> Option<Target> {
    slots
        .iter()
        .filter_map(|s| match s.known {
            Known::Report(r) if Group::of(r) == *group => applied(r),
            _ => None,
        })
        .max_by(|a, b| a.sequence.cmp(&b.sequence).then_with(|| a.digest.cmp(&b.digest)))
}

fn applied(r: &Report) -> Option<Target> {
    Some(Target { digest: r.applied_digest.clone()?, sequence: r.applied_sequence? })
}
