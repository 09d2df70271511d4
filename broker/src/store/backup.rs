//! Consistent copies through SQLite's online backup API, for
//! `mosaic-bus backup` and `mosaic-migrate`'s backup before its first step.
//!
//! A copy is a new data root: `DEST/bus/bus.sqlite` and, when the store
//! has one, `DEST/bus/seals.sqlite`, every directory 0700 and every file
//! 0600, in WAL mode so a broker boots on it. Each file is copied in one
//! backup step, so it is one snapshot of its source (the source's WAL
//! included) however the broker writes meanwhile, and WAL readers don't
//! block the writer. The seals are copied before the store: every seal in
//! the copy covers rows committed before it was made, which are then in
//! the store's later snapshot.
//!
//! Invariants: nothing is written at or under a DEST that already exists
//! (a symlink included, dangling or not): `backup-destination`; a copy
//! that fails midway is removed (it was ours alone); the sources are only
//! read.

use super::root::{BUS_DIR, DB_FILE, SEALS_FILE};
use super::seals::SealsDb;
use super::Db;
use crate::error::Code;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What was copied where.
#[derive(Debug, Clone)]
pub struct Copied {
    /// The copy's data root.
    pub dest: PathBuf,
    /// Whether a seals file was copied.
    pub seals: bool,
}

/// Checks `dest` is free: nothing there (not even a dangling symlink),
/// and its parent an existing directory.
pub fn check_destination(dest: &Path) -> Result<(), Code> {
    if std::fs::symlink_metadata(dest).is_ok() {
        return Err(Code::BackupDestination);
    }
    let parent = match dest.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return Err(Code::BackupDestination),
    };
    match std::fs::metadata(parent) {
        Ok(md) if md.is_dir() => Ok(()),
        _ => Err(Code::BackupDestination),
    }
}

/// Copies the store `store` is open on (and the seals file `seals`, when
/// given) into a new data root at `dest`. `dest` must be free
/// ([`check_destination`]); on failure whatever was made there is removed.
pub fn copy_root(store: &Db, seals: Option<&SealsDb>, dest: &Path) -> Result<Copied, Code> {
    check_destination(dest)?;
    make_dir(dest)?;
    let r = copy_into(store, seals, dest);
    if r.is_err() {
        remove_copy(dest);
    }
    r
}

fn copy_into(store: &Db, seals: Option<&SealsDb>, dest: &Path) -> Result<Copied, Code> {
    let bus = dest.join(BUS_DIR);
    make_dir(&bus)?;
    if let Some(s) = seals {
        copy_db(s.file(), &bus.join(SEALS_FILE))?;
    }
    copy_db(store, &bus.join(DB_FILE))?;
    sync_dir(&bus)?;
    sync_dir(dest)?;
    if let Some(parent) = dest.parent() {
        let _ = sync_dir(parent);
    }
    Ok(Copied {
        dest: dest.to_path_buf(),
        seals: seals.is_some(),
    })
}

fn make_dir(p: &Path) -> Result<(), Code> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(p)
        .map_err(|_| Code::BackupDestination)
}

/// Removes a copy this module made (only the files it makes).
fn remove_copy(dest: &Path) {
    let bus = dest.join(BUS_DIR);
    for f in [DB_FILE, SEALS_FILE] {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(bus.join(format!("{f}{suffix}")));
        }
    }
    let _ = std::fs::remove_dir(&bus);
    let _ = std::fs::remove_dir(dest);
}

fn failed(e: rusqlite::Error) -> Code {
    tracing::warn!(error = %e, "backup failed");
    Code::BackupFailed
}

/// One database, one snapshot: the whole source in one backup step.
fn copy_db(src: &Db, to: &Path) -> Result<(), Code> {
    // Made here, private, before SQLite opens it.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(to)
        .map_err(|_| Code::BackupDestination)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut dst = Connection::open_with_flags(to, flags).map_err(failed)?;
    {
        let b = Backup::new(&src.0, &mut dst).map_err(failed)?;
        // Busy or locked: the source was being written at that instant;
        // try again shortly, for at most about thirty seconds.
        let mut tries = 0;
        loop {
            match b.step(-1).map_err(failed)? {
                StepResult::Done => break,
                _ if tries < 3000 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return Err(Code::BackupFailed),
            }
        }
    }
    // The copy keeps (or takes) WAL mode, which the broker requires, and
    // is on disk before this returns.
    let mode: String = dst
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(failed)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Code::BackupFailed);
    }
    dst.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .map_err(failed)?;
    dst.close().map_err(|(_, e)| failed(e))?;
    let f = std::fs::File::open(to).map_err(|_| Code::BackupFailed)?;
    f.sync_all().map_err(|_| Code::BackupFailed)
}

fn sync_dir(p: &Path) -> Result<(), Code> {
    std::fs::File::open(p)
        .and_then(|d| d.sync_all())
        .map_err(|_| Code::BackupFailed)
}

/// Folds a copied database's WAL back in and removes it (and its shared
/// memory file), which the read-only checks of the copy left: the copy
/// ends as the one file per database it began as.
pub fn tidy(db: &Path) -> Result<(), Code> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(db, flags).map_err(failed)?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .map_err(failed)?;
    conn.close().map_err(|(_, e)| failed(e))
}

/// `PRAGMA quick_check` on a copied database.
pub fn quick_check(db: &Path) -> Result<(), Code> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(failed)?;
    let ok: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(failed)?;
    if ok == "ok" {
        Ok(())
    } else {
        Err(Code::BackupFailed)
    }
}

/// A name for a backup made at `ms` (epoch milliseconds) of a store at
/// `version`: `backup-<version>-<YYYYMMDDTHHMMSSmmmZ>`.
pub fn backup_name(version: &str, ms: i64) -> String {
    let t = super::clock::format_ms(ms);
    let compact: String = t.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("backup-{version}-{compact}")
}
