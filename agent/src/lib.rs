//! drover-agent: the cluster side of drover. One poll runs the pipeline
//! `resolve -> fetch -> verify -> unpack -> plan -> apply -> wait -> prune -> record`
//! (one module per stage), against a [`target::Target`].

pub mod target;
