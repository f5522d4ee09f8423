//! The shape of the generated table: struct types, fields, value types, list kinds and
//! Go shapes.

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
