//! Text that leaves drover for a person: the one home of the rules that make untrusted
//! text (from a registry, a report, a cluster) safe to print ([`clean`]) and that keep
//! Secret values off every screen and log ([`redact`]).

pub mod clean;
pub mod redact;
