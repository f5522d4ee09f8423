//! One module per `drover` command: each has its `Args` and an async `run` that returns
//! a report (`crate::output::Report`); `cli.rs` prints it.
pub mod keygen;
pub mod render;
pub mod build;
pub mod push;
pub mod publish;
pub mod sign;
pub mod verify;
pub mod inspect;
pub mod pull;
pub mod diff;
pub mod promote;
pub mod rollback;
pub mod export;
pub mod import;
pub mod releases;
pub mod fleet;
