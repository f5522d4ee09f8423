//! Stage 8, prune: which objects of the previous inventory the new bundle lacks; which
//! Namespaces among them are held back (they hold objects outside the inventory, or
//! their contents cannot be listed); the safety valve (never more than
//! `--max-prune-ratio` of the inventory, counting what a Namespace deletion takes with it,
//! unless the bundle opts in with `allowMassPrune`); then the target's delete. The
//! pipeline never calls this after a failed apply.

use std::collections::BTreeSet;

use drover_proto::object::ObjectRef;

use crate::stage::StageError;
use crate::targets::{Action, ApplyRequest, NamespaceContents, ObjectOutcome, PruneReport, PruneRequest, Target};

/// What the prune stage will do.
#[derive(Debug)]
pub enum Decision {
    /// Nothing to delete.
    Nothing,
    /// Over the ratio: nothing is deleted, the objects stay in the inventory.
    Refused {
        /// The objects that would have been deleted.
        candidates: Vec<ObjectRef>,
        /// Why, for the attempt's reason.
        message: String,
    },
    /// Delete these.
    Prune(PruneRequest),
}

/// The decision plus the Namespaces held back (they stay in the inventory).
#[derive(Debug)]
pub struct Plan {
    /// Namespaces not deleted, with the reason ([`Action::Refused`]).
    pub held: Vec<ObjectOutcome>,
    /// What happens to the other candidates.
    pub decision: Decision,
}

type Key = (String, String, Option<String>, String);

/// Inventory objects the new bundle (`req`) no longer holds.
pub fn candidates(previous: &[ObjectRef], req: &ApplyRequest) -> Vec<ObjectRef> {
    let wanted: BTreeSet<Key> = req.objects().map(|o| o.id.key()).collect();
    previous.iter().filter(|o| !wanted.contains(&o.key())).cloned().collect()
}

/// True for a core Namespace (whose deletion takes its contents with it).
pub fn is_namespace(id: &ObjectRef) -> bool {
    id.kind == "Namespace" && id.group().is_empty()
}

fn listing(objects: &[ObjectRef]) -> String {
    let mut s: Vec<String> = objects.iter().take(5).map(ToString::to_string).collect();
    if objects.len() > 5 {
        s.push(format!("and {} more", objects.len() - 5));
    }
    s.join(", ")
}

/// Decides from the previous inventory, the applied request and the contents of the
/// Namespaces among the candidates.
pub fn decide(previous: &[ObjectRef], req: &ApplyRequest, contents: &[NamespaceContents], max_ratio: f64, allow_mass_prune: bool) -> Plan {
    let mut candidates = candidates(previous, req);
    let inventory: BTreeSet<Key> = previous.iter().map(ObjectRef::key).collect();
    let mut held = Vec::new();
    let mut taken_along: Vec<ObjectRef> = Vec::new();
    for c in contents {
        let outside: Vec<ObjectRef> = c.objects.iter().filter(|o| !inventory.contains(&o.key())).cloned().collect();
        let why = match &c.error {
            Some(e) => Some(format!("Namespace kept: cannot tell what deleting it would take with it ({e})")),
            None if !outside.is_empty() => Some(format!(
                "Namespace kept: it holds {} object(s) outside this source's inventory, which deleting it would delete too: {}; move or delete them first",
                outside.len(),
                listing(&outside)
            )),
            None => None,
        };
        match why {
            Some(m) => held.push(ObjectOutcome::with(c.namespace.clone(), Action::Refused, m)),
            None => taken_along.extend(c.objects.iter().cloned()),
        }
    }
    let held_keys: BTreeSet<Key> = held.iter().map(|o| o.object.key()).collect();
    candidates.retain(|c| !held_keys.contains(&c.key()));
    let deleted: BTreeSet<Key> = candidates.iter().map(ObjectRef::key).collect();
    let along: BTreeSet<Key> = taken_along.iter().map(ObjectRef::key).filter(|k| !deleted.contains(k)).collect();
    if candidates.is_empty() {
        return Plan { held, decision: Decision::Nothing };
    }
    let total = candidates.len() + along.len();
    let ratio = total as f64 / previous.len().max(1) as f64;
    if ratio > max_ratio && !allow_mass_prune {
        let inside = if along.is_empty() { String::new() } else { format!(" (including {} inside the Namespaces it would delete)", along.len()) };
        let message = format!(
            "prune refused: it would delete {total}{inside} of {} inventory objects ({:.0}%), over --max-prune-ratio {:.0}%; publish with allowMassPrune to opt in, or raise the ratio",
            previous.len(),
            ratio * 100.0,
            max_ratio * 100.0
        );
        return Plan { held, decision: Decision::Refused { candidates, message } };
    }
    let request = PruneRequest { source: req.source.clone(), digest: req.digest.clone(), delete: candidates, previous: previous.to_vec() };
    Plan { held, decision: Decision::Prune(request) }
}

/// Runs the target's prune.
pub async fn prune(target: &dyn Target, req: &PruneRequest) -> Result<PruneReport, StageError> {
    target.prune(req).await.map_err(|e| StageError::Failed(format!("pruning on {}: {e}", target.describe())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::apply_stage;
    use crate::targets::{OrderGroup, PlannedObject};
    use std::sync::Arc;

    fn id(kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: ns.map(Into::into), name: name.into() }
    }

    fn request(objects: &[ObjectRef]) -> ApplyRequest {
        let objects = objects.iter().map(|o| PlannedObject { id: o.clone(), path: String::new(), yaml: Arc::new(Vec::new()) });
        let groups = objects.map(|o| OrderGroup { stage: apply_stage(&o.id), objects: vec![o] }).collect();
        ApplyRequest { source: "s".into(), digest: "sha256:d".into(), sequence: 2, field_manager: "drover".into(), groups, health: Default::default() }
    }

    #[test]
    fn namespace_with_foreign_objects_is_held_back() {
        let (n, a, keep) = (id("Namespace", None, "n"), id("ConfigMap", Some("n"), "a"), id("ConfigMap", Some("m"), "keep"));
        let previous = vec![n.clone(), a.clone(), keep.clone(), id("ConfigMap", Some("m"), "k2"), id("ConfigMap", Some("m"), "k3")];
        let req = request(&previous[2..]);
        let hand = id("ConfigMap", Some("n"), "hand");
        let contents = [NamespaceContents { namespace: n.clone(), objects: vec![a.clone(), hand], error: None }];
        let plan = decide(&previous, &req, &contents, 0.5, false);
        assert_eq!(plan.held.len(), 1);
        assert!(plan.held[0].message.contains("ConfigMap n/hand"), "{}", plan.held[0].message);
        let Decision::Prune(p) = plan.decision else { panic!("a is pruned") };
        assert_eq!(p.delete, vec![a.clone()]);
        let unknown = [NamespaceContents { namespace: n.clone(), objects: vec![], error: Some("403".into()) }];
        assert!(decide(&previous, &req, &unknown, 0.5, false).held[0].message.contains("cannot tell"));
    }

    #[test]
    fn valve_counts_what_a_namespace_takes_along() {
        let n = id("Namespace", None, "n");
        let inside: Vec<ObjectRef> = ["a", "b", "c"].iter().map(|x| id("ConfigMap", Some("n"), x)).collect();
        let mut previous = vec![n.clone()];
        previous.extend(inside.clone());
        previous.extend(["x", "y"].iter().map(|x| id("ConfigMap", Some("m"), x)));
        // The bundle drops only the Namespace: 1 of 6, but deleting it takes 3 more.
        let req = request(&previous[1..]);
        let contents = [NamespaceContents { namespace: n.clone(), objects: inside, error: None }];
        let plan = decide(&previous, &req, &contents, 0.5, false);
        let Decision::Refused { message, .. } = plan.decision else { panic!("over the ratio") };
        assert!(message.contains("delete 4 (including 3 inside"), "{message}");
        assert!(matches!(decide(&previous, &req, &contents, 0.5, true).decision, Decision::Prune(_)));
        assert!(matches!(decide(&previous, &req, &[], 0.5, false).decision, Decision::Prune(_)), "without contents: 1 of 6");
    }
}
