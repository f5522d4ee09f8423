//! `drover`: the bundler CLI. All logic lives in the `drover_bundler` library.

fn main() -> std::process::ExitCode {
    drover_bundler::cli::main()
}
