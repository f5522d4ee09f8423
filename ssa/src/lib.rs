//! drover-ssa: server-side apply as a Kubernetes API server carries it out.
//!
//! Field management is structured-merge-diff's (v4.4.1, what Kubernetes 1.30 runs):
//! [`fieldpath`] (paths and sets, `fieldsV1`), [`typed`] (field sets, merge, compare,
//! removal over a [`schema`]), [`update`] (ownership after an update or an apply,
//! conflicts). Around it, what the API server adds: [`server`] (managed-fields entries,
//! identity fields, status subresources, `before-first-apply`), [`defaults`] and
//! [`roundtrip`] (what a stored object holds that nobody wrote), [`quantity`].
//! Schemas: [`builtin`] (per Kubernetes minor, generated from the published OpenAPI v3 of
//! 1.29–1.35 and the Go API types), [`crd`] and [`openapi`] (a server's own OpenAPI v3,
//! for kinds the table lacks), written out in structured-merge-diff's language by [`smd`].
//!
//! The agent asks [`verdict::apply_change`] whether a resync must write; the test
//! suite's fake API server serves every write with [`server`]. Both are checked against
//! scenarios recorded with the real library (docs/fake-apiserver.md).

pub mod builtin;
pub mod crd;
pub mod deep;
pub mod defaults;
pub mod fieldpath;
pub mod live;
pub mod openapi;
pub mod quantity;
pub mod roundtrip;
pub mod schema;
pub mod server;
pub mod smd;
pub mod typed;
pub mod update;
pub mod verdict;

pub use schema::Schema;
