//! `drover-agent`: see the library crate.
fn main() {
    std::process::exit(drover_agent::main_entry());
}
