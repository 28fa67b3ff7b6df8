//! The `ragtrail` binary: parse arguments, hand over to the library's CLI layer.
use std::process::ExitCode;

fn main() -> ExitCode {
    ragtrail::cli::main()
}
