//! The schema of the built-in kinds, generated from the Go API types
//! (`ssa/gen/builtin.py`, see docs/fake-apiserver.md): for every struct, its fields with
//! their JSON names, value types, list and map kinds, Go shapes and `+default`s.

mod types;

pub use types::{KINDS, TYPES};

/// A struct type.
#[derive(Debug)]
pub struct T {
    /// Schema name (`io.k8s.api.apps.v1.Deployment`).
    pub name: &'static str,
    /// `+structType=atomic`: owned and replaced as one value.
    pub atomic: bool,
    /// Its fields, inlined ones flattened.
    pub fields: &'static [F],
}

/// A struct field.
#[derive(Debug)]
pub struct F {
    /// JSON name.
    pub name: &'static str,
    /// Value type.
    pub ty: Ty,
    /// Go shape (what the JSON encoder does with a zero value).
    pub go: G,
    /// `omitempty`.
    pub omit: bool,
    /// `+default=` as JSON.
    pub def: Option<&'static str>,
}

/// A value type.
#[derive(Debug)]
pub enum Ty {
    /// string
    Str,
    /// integer
    Int,
    /// float
    Float,
    /// boolean
    Bool,
    /// `[]byte`: a base64 string
    Bytes,
    /// `resource.Quantity`: a string the server writes in canonical form
    Quantity,
    /// `intstr.IntOrString`
    IntOrStr,
    /// `metav1.Time`: an RFC 3339 string, `null` when zero
    Time,
    /// any scalar (`JSON`, `FieldsV1`): atomic
    Untyped,
    /// anything, its shape deduced from the value (`RawExtension`)
    Deduced,
    /// a struct type by name
    Named(&'static str),
    /// a list
    List(&'static Ty, R),
    /// `map[string]X`; true when `+mapType=atomic`
    Map(&'static Ty, bool),
}

/// How a list's items are owned.
#[derive(Debug)]
pub enum R {
    /// the list is one value
    Atomic,
    /// a set of scalars
    Set,
    /// items keyed by these fields
    Keys(&'static [&'static str]),
}

/// The Go shape of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum G {
    /// a pointer: `null`/absent when nil
    Ptr,
    /// a value: a struct is always written; a scalar unless `omitempty` and zero
    Val,
    /// a slice
    Slice,
    /// a map
    Map,
}

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
