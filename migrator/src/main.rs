//! `mosaic-migrate /absolute/dataRoot`: migrates a stopped bus's store to
//! the schema this build's broker runs. Prints one JSON line per step and a
//! last `{"ok":true,"from":V,"to":V,"steps":[...]}`; a refusal prints
//! `{"error":CODE}` on stderr and exits 2.

use mosaic_bus::error::Code;
use mosaic_migrate::{lineage, migrate_with_backup, steps, BackupPlan};
use mosaic_wire::cli;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

const HELP: &str = "\
mosaic-migrate /absolute/dataRoot [--backup DIR | --no-backup]
mosaic-migrate --help | --version

Offline schema migration of the bus store at <dataRoot>/bus/bus.sqlite.
Run it only with the bus stopped. It takes the broker's writer lock,
checks the store, and before the first step makes a consistent backup of
the store and its seals (SQLite's online backup API, 0600) in a new
directory backup-<version>-<time> inside the data root, or inside DIR with
--backup DIR, and prints {\"backup\":PATH}; --no-backup skips it on
purpose. Then it runs each migration step in a transaction of its own,
and prints one JSON line per step, then a ready line. A store already at
the current version is checked and left alone (no backup is needed).
Exit 0 when the store is current (and for --help, --version); 2 with
{\"error\":CODE} on stderr otherwise, or with one line naming an unknown
option.
";

fn refuse(code: Code) -> ExitCode {
    eprintln!("{}", json!({"error": code.as_str()}));
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // Nothing we create is for others.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(ask) = cli::asked(&args) {
        return cli::answer(ask, "mosaic-migrate", env!("CARGO_PKG_VERSION"), HELP);
    }
    // Its options are --backup DIR and --no-backup: any other is unknown,
    // named on one line.
    if let Some(opt) = args
        .iter()
        .find(|a| cli::is_option(a) && *a != "--backup" && *a != "--no-backup")
    {
        return cli::unknown_option("mosaic-migrate", opt);
    }
    let Some((root, backup)) = parse_args(&args) else {
        return refuse(Code::Usage);
    };
    let stdout = std::io::stdout();
    let mut print = |line: &str| {
        let mut o = stdout.lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    match migrate_with_backup(root, lineage::VERSIONS, steps::STEPS, &backup, &mut print) {
        Ok(r) => {
            print(&json!({"ok": true, "from": r.from, "to": r.to, "steps": r.steps}).to_string());
            ExitCode::SUCCESS
        }
        Err(code) => refuse(code),
    }
}

/// `ROOT [--backup DIR | --no-backup]`, in any order, each at most once.
fn parse_args(args: &[std::ffi::OsString]) -> Option<(&Path, BackupPlan)> {
    let mut root = None;
    let mut backup = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--backup" && backup.is_none() {
            backup = Some(BackupPlan::Into(it.next()?.into()));
        } else if a == "--no-backup" && backup.is_none() {
            backup = Some(BackupPlan::Skip);
        } else if !a.as_encoded_bytes().starts_with(b"-") && root.is_none() {
            root = Some(Path::new(a));
        } else {
            return None;
        }
    }
    Some((root?, backup.unwrap_or(BackupPlan::Beside)))
}
