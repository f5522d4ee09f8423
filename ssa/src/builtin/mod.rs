//! The schema of the built-in kinds per Kubernetes minor, generated (`ssa/gen/builtin.py`,
//! see docs/kubernetes.md) from the published OpenAPI v3 of every supported minor (what
//! structured-merge-diff uses: list kinds and keys, map and struct atomicity, untyped
//! values, key defaults; `ssa/gen/openapi-smd.json`) and the Go API types (Go shapes,
//! `omitempty`, `+default`s): for every struct, its fields with their JSON names, value
//! types and the minors they hold in.

mod model;
mod types;

pub use model::{F, G, M, R, S, T, Ty};
pub use types::{ELEMS, FIELDS, KEYS, KINDS, NEWEST, OLDEST, STRINGS, TYPES};

impl S {
    /// The string.
    pub fn get(self) -> &'static str {
        &STRINGS[self.0 as usize..self.0 as usize + self.1 as usize]
    }
}

impl T {
    /// Schema name.
    pub fn name(&self) -> &'static str {
        self.name.get()
    }

    /// Its fields.
    pub fn fields(&self) -> &'static [F] {
        &FIELDS[self.fields.0 as usize..][..self.fields.1 as usize]
    }
}

impl F {
    /// JSON name.
    pub fn name(&self) -> &'static str {
        self.name.get()
    }

    /// The default as JSON text.
    pub fn def(&self) -> Option<&'static str> {
        self.def.map(S::get)
    }
}

impl Ty {
    /// The element type of the list or map whose [`ELEMS`] index is `i`.
    pub fn elem(i: u16) -> &'static Ty {
        &ELEMS[i as usize]
    }
}

impl R {
    /// The key fields of a keyed list (none for the other kinds).
    pub fn keys(&self) -> impl Iterator<Item = &'static str> {
        let (start, count) = match self {
            R::Keys(start, count) => (*start as usize, *count as usize),
            _ => (0, 0),
        };
        KEYS[start..start + count].iter().map(|s| s.get())
    }
}

/// The minor standing for every minor after [`NEWEST`]: the Go API types decide.
pub const NEWER: u8 = 255;

/// The minor the table answers for a server of 1.`minor`: before [`OLDEST`] as
/// [`OLDEST`] (unsupported, best effort), after [`NEWEST`] as [`NEWER`].
pub const fn known_minor(minor: u8) -> u8 {
    if minor > NEWEST {
        NEWER
    } else if minor < OLDEST {
        OLDEST
    } else {
        minor
    }
}

/// The struct type named `name`.
pub fn find(name: &str) -> Option<&'static T> {
    TYPES.binary_search_by(|t| t.name().cmp(name)).ok().map(|i| &TYPES[i])
}

/// The type name of a built-in kind that a server of 1.`minor` serves.
pub fn kind_type(minor: u8, api_version: &str, kind: &str) -> Option<&'static str> {
    let minor = known_minor(minor);
    KINDS.iter().find(|(av, k, _, m)| av.get() == api_version && k.get() == kind && m.holds(minor)).map(|(_, _, t, _)| t.get())
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
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "DeviceTaintRule"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_names_resolve() {
        assert!(TYPES.windows(2).all(|w| w[0].name() < w[1].name()), "binary search needs the order");
        fn check(ty: &Ty) {
            match ty {
                Ty::Named(n) | Ty::NamedAs(n, _) => assert!(find(n.get()).is_some(), "{}", n.get()),
                Ty::List(e, r) => {
                    assert!(r.keys().all(|k| !k.is_empty()));
                    check(Ty::elem(*e))
                }
                Ty::Map(e, _) => check(Ty::elem(*e)),
                _ => {}
            }
        }
        let mut fields = 0;
        for t in TYPES {
            assert_eq!(t.fields.0 as usize, fields, "{}: the fields of the types follow one another", t.name());
            fields += t.fields().len();
            for f in t.fields() {
                assert!(!f.name().is_empty() && f.def().is_none_or(|d| serde_json::from_str::<serde_json::Value>(d).is_ok()), "{}.{}", t.name(), f.name());
                check(&f.ty);
            }
        }
        assert_eq!(fields, FIELDS.len());
        let pvspec = find("io.k8s.api.core.v1.PersistentVolumeSpec").unwrap();
        let claim = pvspec.fields().iter().find(|f| f.name() == "claimRef").unwrap();
        assert!(matches!(claim.ty, Ty::NamedAs(n, false) if n.get() == "io.k8s.api.core.v1.ObjectReference"), "{claim:?}");
        let containers = find("io.k8s.api.core.v1.PodSpec").unwrap().fields().iter().find(|f| f.name() == "containers").unwrap();
        assert!(matches!(&containers.ty, Ty::List(_, r) if r.keys().collect::<Vec<_>>() == ["name"]), "{containers:?}");
        assert_eq!(kind_type(30, "apps/v1", "Deployment"), Some("io.k8s.api.apps.v1.Deployment"));
        assert_eq!(kind_type(33, "resource.k8s.io/v1", "DeviceClass"), None, "GA in 1.34");
        assert_eq!(kind_type(34, "resource.k8s.io/v1", "DeviceClass"), Some("io.k8s.api.resource.v1.DeviceClass"));
    }
}
