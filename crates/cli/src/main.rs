//! The `ragtrail` binary: parse arguments, hand over to the CLI crate.
use std::process::ExitCode;

fn main() -> ExitCode {
    ragtrail_cli::main()
}
