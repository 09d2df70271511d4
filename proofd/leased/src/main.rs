//! `mosaic-leased --socket PATH --state FILE`: the lease broker.
//! Exit 0 after SIGTERM/SIGINT (and for `--help`, `--version`); exit 2
//! with one line `{"error":CODE}` on stderr when startup is refused, or
//! one line naming an unknown option.

use mosaic_wire::cli;
use std::ffi::OsString;
use std::process::ExitCode;

const HELP: &str = "\
mosaic-leased: the Mosaic lease broker

Usage:
  mosaic-leased --socket PATH --state FILE
  mosaic-leased --help | --version

  --socket PATH   the lease socket to listen on (0600; docs/leased.md)
  --state FILE    the state file (0600), replaced atomically on each change

Exit status: 0 after SIGTERM or SIGINT, and for --help and --version; 2 with
one line {\"error\":CODE} on stderr when startup is refused, or with one line
naming an unknown option.
";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Some(ask) = cli::asked(&args) {
        return cli::answer(ask, "mosaic-leased", env!("CARGO_PKG_VERSION"), HELP);
    }
    // Options come in pairs (`--socket PATH --state FILE`): one in an
    // option's place that this binary doesn't know is named on one line.
    let unknown = args
        .iter()
        .step_by(2)
        .find(|a| cli::is_option(a) && *a != "--socket" && *a != "--state");
    if let Some(opt) = unknown {
        return cli::unknown_option("mosaic-leased", opt);
    }
    let result = mosaic_leased::parse_args(args.into_iter()).and_then(mosaic_leased::run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{{\"error\":\"{}\"}}", e.as_str());
            ExitCode::from(2)
        }
    }
}
