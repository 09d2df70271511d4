//! `mosaic-bus backup --data-root DIR DEST`: a consistent copy of the store
//! and its seals as a new data root DEST, taken through SQLite's online
//! backup API while the broker serves, and verified (`verify` on the copy)
//! before it answers. No `sqlite3` program needed.
//!
//! DEST must not exist (a symlink there, dangling or not, refuses too:
//! `backup-destination`, nothing written). A copy that fails midway is
//! removed; one that does not verify is left in place for inspection and
//! answered `backup-failed`.

use super::verify;
use crate::error::Code;
use crate::store::root::{BUS_DIR, DB_FILE, SEALS_FILE};
use crate::store::{self as st, backup, seals};
use serde_json::{json, Value};
use std::path::Path;

/// Copies and verifies; the answer line.
pub fn backup(data_root: &Path, dest: &Path) -> Result<Value, Code> {
    backup::check_destination(dest)?;
    let bus = data_root.join(BUS_DIR);
    let store = st::open_for_tools(&bus.join(DB_FILE))?;
    let seals_conn = seals::open_read(&bus.join(SEALS_FILE))?;
    let id = st::store_id(&store)?.ok_or(Code::SealsForeign)?;
    seals::check_file(&seals_conn, Some(&id))?;
    let copied = backup::copy_root(&store, Some(&seals_conn), dest)?;
    drop((store, seals_conn));
    let report = verify::verify(&copied.dest, &[]).map_err(|code| {
        tracing::warn!(code = code.as_str(), "the copy does not open for verify");
        Code::BackupFailed
    })?;
    if report.findings > 0 {
        return Err(Code::BackupFailed);
    }
    let bus = copied.dest.join(BUS_DIR);
    for f in [SEALS_FILE, DB_FILE] {
        backup::tidy(&bus.join(f))?;
    }
    let mut s = report.summary(0);
    if let Some(o) = s.as_object_mut() {
        o.remove("anchors");
        o.remove("findings");
        o.insert("dest".into(), json!(copied.dest.to_string_lossy()));
    }
    Ok(s)
}
