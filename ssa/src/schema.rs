//! The schema an object is managed with: its type tree (structs with declared fields,
//! `map[string]X`, lists that are atomic, sets or keyed, scalars, values whose shape is
//! deduced) and whether its `status` is a subresource. Built-in kinds come from the
//! generated table ([`crate::builtin`]), custom resources from their CRD ([`crate::crd`]).

use crate::builtin::{self, G, R, Ty};
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// A scalar's kind. The server validates strings, numbers and booleans; the others are
/// written by the Go types in their own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// string
    Str,
    /// integer
    Int,
    /// float
    Float,
    /// boolean
    Bool,
    /// base64 string of bytes
    Bytes,
    /// a resource quantity (canonical form when stored)
    Quantity,
    /// an int or a string
    IntOrStr,
    /// a time (`null` when zero)
    Time,
    /// any scalar
    Untyped,
}

/// How a list's items are owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// One value.
    Atomic,
    /// A set of scalars (`v:` elements).
    Set,
    /// Items keyed by these fields (`k:` elements).
    Keys(Arc<[String]>),
}

/// How the Go types write a field's zero value.
pub type GoShape = G;

/// A value type.
#[derive(Clone, Debug)]
pub enum Type {
    /// A scalar.
    Scalar(Scalar),
    /// A list of the element type.
    List(Arc<Type>, ListKind),
    /// A map from any key to the element type; atomic when owned as one value.
    Map(Arc<Type>, bool),
    /// A struct with declared fields.
    Struct(Arc<Struct>),
    /// A built-in struct type as one server minor has it, resolved on use.
    Builtin(Named),
    /// Shape deduced from the value: maps granular, lists atomic.
    Deduced,
}

/// A built-in struct type of the table ([`crate::builtin`]) as the server of one minor
/// has it, with the field-level atomicity override of the field that holds it, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    /// Schema name (`io.k8s.api.apps.v1.Deployment`).
    pub name: &'static str,
    /// The server's minor, as [`builtin::known_minor`] gives it.
    pub minor: u8,
    /// Atomic (true) or granular (false) whatever the type itself says
    /// (`x-kubernetes-map-type` on the field: `PersistentVolumeSpec.claimRef`).
    pub atomic: Option<bool>,
}

impl Named {
    /// `name` as the newest Go API types have it.
    pub const fn newest(name: &'static str) -> Named {
        Named { name, minor: builtin::NEWER, atomic: None }
    }
}

/// A struct type.
#[derive(Clone, Debug, Default)]
pub struct Struct {
    /// Declared fields.
    pub fields: Vec<Field>,
    /// Owned and replaced as one value.
    pub atomic: bool,
    /// The type of undeclared keys (`x-kubernetes-preserve-unknown-fields`), if allowed.
    pub rest: Option<Type>,
}

/// A declared field.
#[derive(Clone, Debug)]
pub struct Field {
    /// JSON name.
    pub name: String,
    /// Value type.
    pub ty: Type,
    /// Go shape (built-in types; custom resources are `Ptr`: kept as sent).
    pub go: GoShape,
    /// Go `omitempty`.
    pub omit: bool,
    /// The schema default.
    pub default: Option<Value>,
}

impl Struct {
    /// The declared field `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// What a value of a type is, once resolved against the value itself.
#[derive(Clone, Debug)]
pub enum Atom {
    /// A scalar.
    Scalar(Scalar),
    /// A list.
    List(Arc<Type>, ListKind),
    /// A map: a struct's declared fields and/or the type of other keys.
    Map(MapAtom),
}

/// A map as a walker sees it.
#[derive(Clone, Debug)]
pub struct MapAtom {
    /// The struct, when the map has declared fields.
    pub strukt: Option<Arc<Struct>>,
    /// The type of undeclared keys (None: not allowed).
    pub elem: Option<Arc<Type>>,
    /// Owned as one value.
    pub atomic: bool,
}

impl MapAtom {
    /// The type of the value at `key`, and whether `key` is a declared field.
    pub fn child(&self, key: &str) -> (Type, bool) {
        if let Some(f) = self.strukt.as_ref().and_then(|s| s.field(key)) {
            return (f.ty.clone(), true);
        }
        match &self.elem {
            Some(e) => ((**e).clone(), false),
            None => (Type::Deduced, false),
        }
    }

    /// Whether `key` may appear (a declared field or any key of a map).
    pub fn allows(&self, key: &str) -> bool {
        self.elem.is_some() || self.strukt.as_ref().is_some_and(|s| s.field(key).is_some())
    }
}

impl Type {
    /// What this type is for `value` (a deduced or untyped type takes the value's shape).
    pub fn atom(&self, value: Option<&Value>) -> Atom {
        match self {
            Type::Scalar(s) => Atom::Scalar(*s),
            Type::List(e, k) => Atom::List(e.clone(), k.clone()),
            Type::Map(e, atomic) => Atom::Map(MapAtom { strukt: None, elem: Some(e.clone()), atomic: *atomic }),
            Type::Struct(s) => Atom::Map(MapAtom {
                strukt: Some(s.clone()),
                elem: s.rest.clone().map(Arc::new),
                atomic: s.atomic,
            }),
            Type::Builtin(n) => {
                let s = builtin_struct(*n);
                let atomic = n.atomic.unwrap_or(s.atomic);
                Atom::Map(MapAtom { strukt: Some(s), elem: None, atomic })
            }
            Type::Deduced => match value {
                Some(Value::Object(_)) => Atom::Map(MapAtom { strukt: None, elem: Some(Arc::new(Type::Deduced)), atomic: false }),
                Some(Value::Array(_)) => Atom::List(Arc::new(Type::Deduced), ListKind::Atomic),
                _ => Atom::Scalar(Scalar::Untyped),
            },
        }
    }

    /// The struct behind this type, if it is one.
    pub fn strukt(&self) -> Option<Arc<Struct>> {
        match self {
            Type::Struct(s) => Some(s.clone()),
            Type::Builtin(n) => Some(builtin_struct(*n)),
            _ => None,
        }
    }
}

/// The runtime form of a built-in struct type on a server of `n.minor` (converted once
/// per minor, then shared; a lookup is a binary search and a lock-free read). The
/// field-level override `n.atomic` is not in it: [`Type::atom`] applies it.
pub fn builtin_struct(n: Named) -> Arc<Struct> {
    const SLOTS: usize = (builtin::NEWEST - builtin::OLDEST) as usize + 2;
    static CACHE: [OnceLock<Vec<OnceLock<Arc<Struct>>>>; SLOTS] = [const { OnceLock::new() }; SLOTS];
    let minor = builtin::known_minor(n.minor);
    let slot = if minor == builtin::NEWER { SLOTS - 1 } else { (minor - builtin::OLDEST) as usize };
    let cache = CACHE[slot].get_or_init(|| (0..builtin::TYPES.len()).map(|_| OnceLock::new()).collect());
    let i = builtin::TYPES.binary_search_by(|t| t.name().cmp(n.name)).unwrap_or_else(|_| panic!("built-in type {} is in the table", n.name));
    cache[i]
        .get_or_init(|| {
            let t = &builtin::TYPES[i];
            Arc::new(Struct {
                fields: t
                    .fields()
                    .iter()
                    .filter(|f| f.m.holds(minor))
                    .map(|f| Field {
                        name: f.name().to_string(),
                        ty: from_static(&f.ty, minor),
                        go: f.go,
                        omit: f.omit,
                        default: f.def().and_then(|d| serde_json::from_str(d).ok()),
                    })
                    .collect(),
                atomic: t.atomic.holds(minor),
                rest: None,
            })
        })
        .clone()
}

fn from_static(t: &'static Ty, minor: u8) -> Type {
    match t {
        Ty::Str => Type::Scalar(Scalar::Str),
        Ty::Int => Type::Scalar(Scalar::Int),
        Ty::Float => Type::Scalar(Scalar::Float),
        Ty::Bool => Type::Scalar(Scalar::Bool),
        Ty::Bytes => Type::Scalar(Scalar::Bytes),
        Ty::Quantity => Type::Scalar(Scalar::Quantity),
        Ty::IntOrStr => Type::Scalar(Scalar::IntOrStr),
        Ty::Time => Type::Scalar(Scalar::Time),
        Ty::Untyped => Type::Scalar(Scalar::Untyped),
        Ty::Deduced => Type::Deduced,
        Ty::Named(name) => Type::Builtin(Named { name: name.get(), minor, atomic: None }),
        Ty::NamedAs(name, atomic) => Type::Builtin(Named { name: name.get(), minor, atomic: Some(*atomic) }),
        Ty::List(e, r) => Type::List(
            Arc::new(from_static(Ty::elem(*e), minor)),
            match r {
                R::Atomic => ListKind::Atomic,
                R::Set => ListKind::Set,
                R::Keys(..) => ListKind::Keys(r.keys().map(str::to_string).collect()),
            },
        ),
        Ty::Map(e, atomic) => Type::Map(Arc::new(from_static(Ty::elem(*e), minor)), *atomic),
    }
}

/// The schema of one kind of object.
#[derive(Clone, Debug)]
pub struct Schema {
    /// The object's type.
    pub root: Type,
    /// `status` is a subresource: the object's own writes leave it alone.
    pub status_subresource: bool,
    /// Built-in (the Go types' round trip applies) or a custom resource.
    pub builtin: bool,
}

impl Schema {
    /// The schema of a built-in kind as the newest Go API types have it, if
    /// `apiVersion`/`kind` is one ([`Schema::builtin_at`] for a given server).
    pub fn builtin(api_version: &str, kind: &str) -> Option<Schema> {
        Schema::builtin_at(builtin::NEWER, api_version, kind)
    }

    /// The schema of a built-in kind on a server of Kubernetes 1.`minor`, if that server
    /// serves `apiVersion`/`kind` (a kind newer than the server is not in its table).
    pub fn builtin_at(minor: u8, api_version: &str, kind: &str) -> Option<Schema> {
        let minor = builtin::known_minor(minor);
        let name = builtin::kind_type(minor, api_version, kind)?;
        Some(Schema {
            root: Type::Builtin(Named { name, minor, atomic: None }),
            status_subresource: builtin::STATUS_SUBRESOURCE.contains(&(api_version, kind)),
            builtin: true,
        })
    }

    /// A schema that knows nothing: every map granular, every list atomic (how the
    /// server manages a custom resource whose CRD has no structural schema).
    pub fn deduced() -> Schema {
        let meta = Field {
            name: "metadata".into(),
            ty: Type::Builtin(Named::newest("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")),
            go: G::Val,
            omit: true,
            default: None,
        };
        Schema {
            root: Type::Struct(Arc::new(Struct { fields: vec![meta], atomic: false, rest: Some(Type::Deduced) })),
            status_subresource: false,
            builtin: false,
        }
    }
}
