//! The platform model (docs/design.md §6): fleet, cluster types, environments, overrides,
//! namespace templates and workloads, loaded strictly, composed and rendered per
//! (environment, cluster type). See `docs/platform.md`.

pub mod command;
pub mod error;
pub mod exec;
pub mod fleetedit;
pub mod health;
pub mod load;
pub mod membership;
pub mod model;
pub mod render;
pub mod selector;
pub mod template;
pub mod values;

pub use error::PlatformError;
pub use load::{ClusterType, Level, Platform, Workload, RESERVED_CLUSTER_TYPE};
pub use render::{par_map, RenderedType};
