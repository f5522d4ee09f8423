//! drover-bundler: the CI/CD side of drover. Reads rendered YAML or a platform
//! definition, builds reproducible bundles, signs, pushes, promotes, exports and imports.

pub mod cli;
pub mod cmd;
pub mod fleet;
pub mod input;
pub mod output;
pub mod parallel;
pub mod platform;
pub mod regargs;
pub mod release;
pub mod signing;
pub mod trustargs;
