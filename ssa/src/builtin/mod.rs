//! The schema of the built-in kinds, generated from the Go API types
//! (`ssa/gen/builtin.py`, see docs/fake-apiserver.md): for every struct, its fields with
//! their JSON names, value types, list and map kinds, Go shapes and `+default`s.

mod model;
mod types;

pub use model::{F, G, R, T, Ty};
pub use types::{KINDS, TYPES};

/// The struct type named `name`.
pub fn find(name: &str) -> Option<&'static T> {
    TYPES.binary_search_by(|t| t.name.cmp(name)).ok().map(|i| &TYPES[i])
}

/// The type name of a built-in kind.
pub fn kind_type(api_version: &str, kind: &str) -> Option<&'static str> {
    KINDS.iter().find(|(av, k, _)| *av == api_version && *k == kind).map(|(_, _, t)| *t)
}

/// Built-in kinds whose `status` is a subresource: an apply or update of the object
/// itself leaves `status` alone (and so it is in no field set).
pub const STATUS_SUBRESOURCE: &[(&str, &str)] = &[
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "ReplicationController"),
    ("v1", "ResourceQuota"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("autoscaling/v1", "HorizontalPodAutoscaler"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "ServiceCIDR"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apiregistration.k8s.io/v1", "APIService"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"),
    ("storage.k8s.io/v1", "VolumeAttachment"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_names_resolve() {
        assert!(TYPES.windows(2).all(|w| w[0].name < w[1].name), "binary search needs the order");
        fn check(ty: &Ty) {
            match ty {
                Ty::Named(n) => assert!(find(n).is_some(), "{n}"),
                Ty::List(e, _) | Ty::Map(e, _) => check(e),
                _ => {}
            }
        }
        for t in TYPES {
            for f in t.fields {
                check(&f.ty);
            }
        }
        assert_eq!(kind_type("apps/v1", "Deployment"), Some("io.k8s.api.apps.v1.Deployment"));
    }
}
