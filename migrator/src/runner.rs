//! The migration itself: find the store, hold the writer lock, check the
//! store at its version, run the steps after it one transaction each.
//!
//! Invariants: nothing is created (a missing store refuses before `bus/`
//! is touched); every refusal is a static [`Code`]; a step commits whole or
//! not at all, and a committed step stays even when a later one refuses,
//! so a rerun resumes from the version the store reached.

use crate::steps::Step;
use mosaic_bus::error::Code;
use mosaic_bus::store::backup;
use mosaic_bus::store::root::{
    check_data_root, check_private, BusDir, BUS_DIR, DB_FILE, SEALS_FILE,
};
use mosaic_bus::store::schema::{master_digest, sha256_hex, Pin};
use mosaic_bus::store::{check_pin, stored_version, whole_store_checks, Db};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The version the store was at.
    pub from: String,
    /// The version it is at now.
    pub to: String,
    /// The steps run, in order (empty when it was already current).
    pub steps: Vec<String>,
}

/// Holds the writer lock; gives it back however the migration ends.
struct Held(BusDir);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.release_lock();
    }
}

/// Where the backup before the first step goes (issue 30 item 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupPlan {
    /// In the data root, beside `bus/`: `<dataRoot>/backup-<from>-<time>`.
    Beside,
    /// In this existing directory: `<dir>/backup-<from>-<time>`.
    Into(std::path::PathBuf),
    /// None (`--no-backup`: the operator's choice, on purpose).
    Skip,
}

/// Migrates the store under `data_root` along `versions` (oldest first)
/// with `steps`, taking no backup (the command line's default is
/// [`migrate_with_backup`] with [`BackupPlan::Beside`]). `out` gets each
/// line to print as it happens: a step's own lines, then one line per step
/// done.
pub fn migrate(
    data_root: &Path,
    versions: &[Pin<'_>],
    steps: &[Step],
    out: &mut dyn FnMut(&str),
) -> Result<Report, Code> {
    migrate_with_backup(data_root, versions, steps, &BackupPlan::Skip, out)
}

/// [`migrate`], with a consistent backup of the store (and its seals,
/// when it has them) before the first step, as `backup` says: made with
/// the broker's own online-backup code (`mosaic_bus::store::backup`),
/// private, checked (`quick_check` and the pin of the version it is at),
/// and printed as a line `{"backup": PATH}` before any step runs. A store
/// already current needs no step and gets no backup.
pub fn migrate_with_backup(
    data_root: &Path,
    versions: &[Pin<'_>],
    steps: &[Step],
    backup: &BackupPlan,
    out: &mut dyn FnMut(&str),
) -> Result<Report, Code> {
    check_data_root(data_root)?;
    // Before the lock: taking it would create `bus/`.
    let dir = data_root.join(BUS_DIR);
    let db = dir.join(DB_FILE);
    if !check_private(&dir, true)? || !check_private(&db, false)? {
        return Err(Code::StoreMissing);
    }
    let _held = Held(BusDir::acquire(data_root)?);
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        check_private(Path::new(&p), false)?;
    }
    let conn = open(&db)?;
    let backup = match backup {
        BackupPlan::Skip => None,
        BackupPlan::Beside => Some(data_root.to_path_buf()),
        BackupPlan::Into(dir) => Some(dir.clone()),
    };
    run(
        &Db::new(conn),
        versions,
        steps,
        backup.as_deref(),
        &dir,
        out,
    )
}

/// Copies the store at `bus` (its connection `conn`, at `version`) into a
/// new backup directory under `into`; returns where.
fn take_backup(
    conn: &Db,
    bus: &Path,
    into: &Path,
    pin: &Pin<'_>,
) -> Result<std::path::PathBuf, Code> {
    match std::fs::metadata(into) {
        Ok(md) if md.is_dir() => {}
        _ => return Err(Code::BackupDestination),
    }
    let now = mosaic_bus::store::clock::now_ms();
    let dest = into.join(backup::backup_name(pin.version, now));
    let seals_path = bus.join(SEALS_FILE);
    let seals = if check_private(&seals_path, false)? {
        Some(
            Connection::open_with_flags(&seals_path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .map(mosaic_bus::store::seals::SealsDb::new)
                .map_err(|_| Code::SealsUnreadable)?,
        )
    } else {
        None
    };
    let copied = backup::copy_root(conn, seals.as_ref(), &dest)?;
    // The copy is the store as it is now: the same checks pass on it.
    let copy_db = copied.dest.join(BUS_DIR).join(DB_FILE);
    backup::quick_check(&copy_db)?;
    {
        let copy = Connection::open_with_flags(&copy_db, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map(Db::new)
            .map_err(|_| Code::BackupFailed)?;
        check_pin(&copy, pin).map_err(|_| Code::BackupFailed)?;
    }
    backup::tidy(&copy_db)?;
    Ok(copied.dest)
}

/// Opens the existing store read-write; never creates it.
fn open(db: &Path) -> Result<Connection, Code> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(db, flags).map_err(|_| Code::StorageUnavailable)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|_| Code::StorageUnavailable)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|_| Code::StorageUnavailable)?;
    // A step may rebuild a table others refer to (3h → 3i rebuilds them
    // all): with foreign keys enforced, dropping the old table would first
    // delete its rows from under the rows that refer to them. SQLite can't
    // change this inside a transaction, so it is set here, once; every
    // store is checked whole (foreign keys included) before the steps, a
    // rebuilding step checks its result, and the broker checks again at
    // every open.
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(|_| Code::StorageUnavailable)?;
    Ok(conn)
}

fn run(
    conn: &Db,
    versions: &[Pin<'_>],
    steps: &[Step],
    backup_into: Option<&Path>,
    bus: &Path,
    out: &mut dyn FnMut(&str),
) -> Result<Report, Code> {
    let from = stored_version(conn)?;
    // A version this lineage does not know, older or newer, is not ours to touch.
    let mut at = versions
        .iter()
        .position(|p| p.version == from)
        .ok_or(Code::SchemaVersion)?;
    check_pin(conn, &versions[at])?;
    whole_store_checks(conn)?;
    if let (Some(into), Some(_)) = (backup_into, versions.get(at + 1)) {
        let dest = take_backup(conn, bus, into, &versions[at])?;
        out(&serde_json::json!({"backup": dest.to_string_lossy()}).to_string());
    }
    let mut done = Vec::new();
    while let Some(target) = versions.get(at + 1) {
        let here = versions[at].version;
        let step = steps
            .iter()
            .find(|s| s.from == here && s.to == target.version)
            .ok_or(Code::MigrationStep)?;
        for line in apply(conn, step, target)? {
            out(&line);
        }
        out(
            &serde_json::json!({"step": step.name, "from": here, "to": target.version}).to_string(),
        );
        done.push(step.name.to_string());
        at += 1;
    }
    Ok(Report {
        from,
        to: versions[at].version.to_string(),
        steps: done,
    })
}

/// Runs one step in its own transaction and proves the result is `target`.
fn apply(db: &Db, step: &Step, target: &Pin<'_>) -> Result<Vec<String>, Code> {
    let conn = db.sql();
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|_| Code::StorageUnavailable)?;
    let r = in_transaction(db, step, target);
    let r = match r {
        Ok(lines) => conn
            .execute_batch("COMMIT")
            .map(|_| lines)
            .map_err(|_| Code::StorageUnavailable),
        Err(code) => Err(code),
    };
    if r.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    r
}

fn in_transaction(db: &Db, step: &Step, target: &Pin<'_>) -> Result<Vec<String>, Code> {
    let conn = db.sql();
    let failed = |_| Code::MigrationStep;
    // The guard goes back with its very text, so the digest can match.
    let guard: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'meta_no_update'",
            [],
            |r| r.get(0),
        )
        .map_err(|_| Code::SchemaMetadata)?;
    conn.execute_batch("DROP TRIGGER meta_no_update")
        .map_err(failed)?;
    let lines = (step.apply)(conn).map_err(failed)?;
    let set = |key: &str, value: &str| {
        conn.execute("UPDATE meta SET value = ?2 WHERE key = ?1", [key, value])
            .map_err(failed)
            .and_then(|n| {
                if n == 1 {
                    Ok(())
                } else {
                    Err(Code::MigrationStep)
                }
            })
    };
    set("schema_version", target.version)?;
    set("schema_sha256", target.sha256)?;
    conn.execute_batch(&guard).map_err(failed)?;
    if sha256_hex(target.sql.as_bytes()) != target.sha256
        || master_digest(conn).map_err(failed)? != target.master
    {
        return Err(Code::MigrationStep);
    }
    Ok(lines)
}
