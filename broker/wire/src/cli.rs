//! The command-line conventions every binary of the workspace keeps
//! (DESIGN.md: every binary answers `--help` and `--version`):
//!
//! - `--help` (`-h`) prints the binary's usage on stdout and exits 0;
//!   `--version` (`-V`) prints `NAME VERSION` on stdout and exits 0. Either
//!   one anywhere on the command line wins over everything else, before the
//!   binary reads its input, opens a socket or touches a file.
//! - An option the binary does not know (an argument starting with `-`
//!   where it takes options) is one line on stderr naming the option and
//!   `--help`, and exit status [`USAGE_EXIT`].
//!
//! Each binary keeps its own other usage errors as documented (the
//! daemons' `{"error":"usage"}` line).

use std::ffi::{OsStr, OsString};
use std::process::ExitCode;

/// The exit status of a command-line error.
pub const USAGE_EXIT: u8 = 2;

/// What `--help` or `--version` on a command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Help,
    Version,
}

/// `--help`/`-h` anywhere in `args` (the arguments after the program
/// name), else `--version`/`-V` anywhere; `None` when neither is there.
pub fn asked(args: &[OsString]) -> Option<Ask> {
    let any = |names: &[&str]| {
        args.iter()
            .any(|a| names.iter().any(|n| a.as_os_str() == OsStr::new(n)))
    };
    if any(&["--help", "-h"]) {
        Some(Ask::Help)
    } else if any(&["--version", "-V"]) {
        Some(Ask::Version)
    } else {
        None
    }
}

/// Answers `ask` on stdout: `help` as given, or `NAME VERSION`. Exit 0,
/// or [`USAGE_EXIT`] when stdout can't be written.
pub fn answer(ask: Ask, name: &str, version: &str, help: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = match ask {
        Ask::Help => out.write_all(help.as_bytes()),
        Ask::Version => writeln!(out, "{name} {version}"),
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(USAGE_EXIT),
    }
}

/// True when `arg` is shaped like an option (starts with `-` and is not
/// `-` alone).
pub fn is_option(arg: &OsStr) -> bool {
    let b = arg.as_encoded_bytes();
    b.len() > 1 && b[0] == b'-'
}

/// The one line for an unknown option: `NAME: unknown option "ARG"; see
/// NAME --help`. The option is quoted with Rust's escapes (a non-UTF-8
/// byte shown as the replacement character), so the line stays one line
/// whatever the argument holds.
pub fn unknown_option_line(name: &str, arg: &OsStr) -> String {
    format!(
        "{name}: unknown option {:?}; see {name} --help",
        arg.to_string_lossy()
    )
}

/// Prints [`unknown_option_line`] on stderr and gives [`USAGE_EXIT`].
pub fn unknown_option(name: &str, arg: &OsStr) -> ExitCode {
    eprintln!("{}", unknown_option_line(name, arg));
    ExitCode::from(USAGE_EXIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn help_wins_over_version_anywhere_on_the_line() {
        assert_eq!(asked(&os(&[])), None);
        assert_eq!(asked(&os(&["/tmp/s"])), None);
        assert_eq!(asked(&os(&["/tmp/s", "-h"])), Some(Ask::Help));
        assert_eq!(asked(&os(&["-V", "--help"])), Some(Ask::Help));
        assert_eq!(asked(&os(&["--x", "--version"])), Some(Ask::Version));
        assert_eq!(asked(&os(&["--helpme"])), None);
    }

    #[test]
    fn the_unknown_option_line_is_one_line_naming_the_option_and_help() {
        assert_eq!(
            unknown_option_line("mosaic-bus", OsStr::new("--frob")),
            "mosaic-bus: unknown option \"--frob\"; see mosaic-bus --help"
        );
        let odd = unknown_option_line("x", OsStr::new("--a\nb\"c"));
        assert!(!odd.contains('\n'), "{odd}");
        assert!(odd.contains("--a\\nb\\\"c"), "{odd}");
        assert!(is_option(OsStr::new("-x")) && is_option(OsStr::new("--x")));
        assert!(!is_option(OsStr::new("-")) && !is_option(OsStr::new("/p")));
        assert!(!is_option(OsStr::new("")));
    }

    /// An unknown option exits [`USAGE_EXIT`], never 0. (`cargo mutants`:
    /// docs/testing.md.)
    #[test]
    fn an_unknown_option_exits_with_the_usage_status() {
        assert_eq!(
            format!("{:?}", unknown_option("x", OsStr::new("--frob"))),
            format!("{:?}", ExitCode::from(USAGE_EXIT))
        );
        assert_ne!(
            format!("{:?}", ExitCode::from(USAGE_EXIT)),
            format!("{:?}", ExitCode::SUCCESS)
        );
    }
}
