//! drover-proto: the contract shared by the bundler (`drover`) and the agent
//! (`drover-agent`): media types, the bundle config schema, the deterministic archive
//! codec, references, registry/layout access, and (in `trust`) signatures and policy.

pub mod archive;
pub mod auth;
pub mod bundle;
pub mod channel;
pub mod compat;
pub mod config;
pub mod digest;
pub mod error;
pub mod health;
pub mod hint;
pub mod keys;
pub mod layout;
pub mod manifest;
pub mod media;
pub mod object;
pub mod ocitar;
pub mod reference;
pub mod registry;
pub mod report;
pub mod repo;
pub mod signed;
pub mod text;
pub mod time;
pub mod trust;
pub mod yaml;

pub use error::StoreError;
pub use reference::{Reference, RegistryRef};
pub use registry::{RegistryClient, RegistryOptions};
pub use repo::{FetchLimits, FetchedBundle, Repo};
