//! The shape of the generated table: struct types, fields, value types, list kinds, Go
//! shapes, and the Kubernetes minors each of them holds in. The table holds no pointer:
//! strings are offsets into one text ([`S`]), fields, element types and list keys are index
//! ranges into flat arrays, so it is read-only data the loader never relocates (a table of
//! `&'static str`s is rewritten at every start of a position-independent program, and all
//! its pages become private memory of the process). The accessors (in `builtin/mod.rs`)
//! give `&'static` values.

/// A string of the table: its offset and length in [`super::STRINGS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S(pub u32, pub u16);

/// The server minors a row holds in: `1.lo` to `1.hi`, inclusive. `lo` 0 stands for every
/// minor up to the oldest published OpenAPI the table was checked against
/// ([`super::OLDEST`]), `hi` 255 for every minor after the newest ([`super::NEWEST`]),
/// where the Go API types the table was generated from decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct M(pub u8, pub u8);

impl M {
    /// Every minor.
    pub const ALL: M = M(0, 255);
    /// No minor.
    pub const NONE: M = M(1, 0);

    /// Whether `minor` (as [`super::known_minor`] gives it) is in the range.
    pub const fn holds(self, minor: u8) -> bool {
        self.0 <= minor && minor <= self.1
    }
}

/// A struct type.
#[derive(Debug)]
pub struct T {
    /// Schema name (`io.k8s.api.apps.v1.Deployment`).
    pub name: S,
    /// The minors in which it is owned and replaced as one value
    /// (`x-kubernetes-map-type: atomic`, `+structType=atomic`).
    pub atomic: M,
    /// Its fields, inlined ones flattened: a run of [`super::FIELDS`] (start, count).
    pub fields: (u16, u16),
}

/// A struct field.
#[derive(Debug)]
pub struct F {
    /// JSON name.
    pub name: S,
    /// Value type.
    pub ty: Ty,
    /// Go shape (what the JSON encoder does with a zero value).
    pub go: G,
    /// `omitempty`.
    pub omit: bool,
    /// The default as JSON: a list key's default from the published OpenAPI (what
    /// structured-merge-diff reads for a missing key), else the Go `+default=`.
    pub def: Option<S>,
    /// The minors that have the field with this type and default (a field whose type
    /// changed between minors has one row per type).
    pub m: M,
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
    /// any value, owned as one (`RawExtension`: schemaconv's `__untyped_atomic_`)
    Untyped,
    /// any value, maps granular and lists atomic (`JSON`, `JSONSchemaPropsOrArray`:
    /// schemaconv's `__untyped_deduced_`)
    Deduced,
    /// a struct type by name
    Named(S),
    /// a struct type by name whose atomicity this field overrides (true: atomic;
    /// `PersistentVolumeSpec.claimRef` is a granular `ObjectReference`)
    NamedAs(S, bool),
    /// a list of the element type [`super::ELEMS`]`[i]`
    List(u16, R),
    /// `map[string]X` of the element type [`super::ELEMS`]`[i]`; true when `+mapType=atomic`
    Map(u16, bool),
}

/// How a list's items are owned.
#[derive(Debug)]
pub enum R {
    /// the list is one value
    Atomic,
    /// a set of scalars
    Set,
    /// items keyed by the fields of a run of [`super::KEYS`] (start, count)
    Keys(u16, u16),
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
