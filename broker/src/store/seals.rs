//! Seals (`<dataRoot>/bus/seals.sqlite`): a hash chain over every evidence
//! row, so that a row changed, removed or slipped in behind the triggers'
//! back shows. `docs/seals.md` defines the bytes; [`super::canonical`]
//! encodes them.
//!
//! Invariants: the seals file is append-only like the store (triggers
//! refuse UPDATE and DELETE, and an insert that is not the next `seq` on
//! the last root); only the broker's sealer writes it, never a verb; it
//! names its store's id and refuses another; every read of the store here
//! is a plain read (the sealer's connection is read-only).

use super::canonical::{self, Digest32, Hasher, RowForm};
use super::root::check_private;
use super::schema::SEALED_TABLES;
use super::Db;
use crate::error::Code;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The value of the seals file's `meta.format`.
pub const FORMAT: &str = "mosaic-seals-1";

/// The seals file's schema.
pub const SEALS_SQL: &str = "\
CREATE TABLE meta (
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE seals (
  seq INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  prev TEXT NOT NULL CHECK (length(prev) = 64 AND prev NOT GLOB '*[^0-9a-f]*'),
  root TEXT NOT NULL CHECK (length(root) = 64 AND root NOT GLOB '*[^0-9a-f]*'),
  upto TEXT NOT NULL CHECK (json_valid(upto) AND json_type(upto) = 'object'),
  tables TEXT NOT NULL CHECK (json_valid(tables) AND json_type(tables) = 'object')
);
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER meta_no_replace BEFORE INSERT ON meta
  WHEN EXISTS (SELECT 1 FROM meta WHERE key = NEW.key)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER seals_no_update BEFORE UPDATE ON seals BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER seals_no_delete BEFORE DELETE ON seals BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER seals_chain BEFORE INSERT ON seals
  WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM seals), 0) + 1
    OR NEW.prev IS NOT coalesce((SELECT root FROM seals ORDER BY seq DESC LIMIT 1),
      '0000000000000000000000000000000000000000000000000000000000000000')
    OR NEW.at <= (SELECT at FROM seals ORDER BY seq DESC LIMIT 1)
  BEGIN SELECT RAISE(ABORT, 'append-only'); END;
";

/// A connection to the seals file, of its own type: the sealer holds the
/// store's [`Db`] and this side by side ([`seal_pending`]), and the
/// compiler, not the argument order, keeps the seals from being written
/// into the store or the store's rows read from the seals file.
pub struct SealsDb(Db);

impl SealsDb {
    /// A connection opened elsewhere (a test's) on a seals file.
    pub fn new(conn: Connection) -> SealsDb {
        SealsDb(Db(conn))
    }

    /// Begins a read transaction on the seals file (see [`begin_read`]).
    pub fn begin_read(&self) -> Result<(), Code> {
        snapshot(&self.0, unreadable)
    }

    /// Ends it.
    pub fn end_read(&self) {
        end_read(&self.0)
    }

    /// `PRAGMA data_version` of the seals file (see [`data_version`]).
    pub fn data_version(&self) -> Option<i64> {
        data_version(&self.0)
    }

    /// The file as a plain database, for the backup's page copy only.
    pub(crate) fn file(&self) -> &Db {
        &self.0
    }
}

/// One seal: `upto` maps every sealed table to the highest `seq` it covers
/// (0: none yet); `tables` holds, for each table with rows in this seal,
/// the SHA-256 of those rows' bytes alone, which `verify` uses to name the
/// table that differs (the chain itself is `prev` and `root`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    pub seq: i64,
    pub at: String,
    pub prev: Digest32,
    pub root: Digest32,
    pub upto: BTreeMap<String, i64>,
    pub tables: BTreeMap<String, Digest32>,
}

impl Seal {
    /// The rows of `table` this seal adds after `prev` (the previous
    /// seal's `upto`; empty for the first): `seq` from [`lower_bound`] to
    /// this seal's `upto`, both included, or `None` when that is empty.
    pub fn range(&self, prev: &Upto, table: &str) -> Option<(i64, i64)> {
        let lo = lower_bound(prev, table);
        let hi = self.upto.get(table).copied().unwrap_or(0);
        (hi >= lo).then_some((lo, hi))
    }
}

/// Each sealed table's highest covered `seq`.
pub type Upto = BTreeMap<String, i64>;

/// The lowest `seq` of `table` a seal after `prev` covers: one past
/// `prev`'s, or no bound at all when `prev` doesn't name the table (the
/// first seal, or a table a migration added since). So every row with a
/// `seq` at or below the first seal's `upto` is that seal's, a row slipped
/// in at 0 or below included.
pub fn lower_bound(prev: &Upto, table: &str) -> i64 {
    prev.get(table).map_or(i64::MIN, |u| u.saturating_add(1))
}

fn unreadable(e: rusqlite::Error) -> Code {
    tracing::debug!(error = %e, "seals file unreadable");
    Code::SealsUnreadable
}

fn store_unreadable(e: rusqlite::Error) -> Code {
    tracing::debug!(error = %e, "store unreadable");
    Code::StoreUnreadable
}

/// Opens the seals file for the broker's sealer: creates it (0600, WAL,
/// its schema and `meta`) when it is missing, else checks it is a seals
/// file for `store_id` (`seals-unreadable`, `seals-foreign`).
pub fn open_for_sealing(path: &Path, store_id: &str) -> Result<SealsDb, Code> {
    let exists = check_private(path, false)?;
    for suffix in ["-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        check_private(Path::new(&p), false)?;
    }
    if !exists {
        // Made here with its mode, so it is private whatever the umask.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|_| Code::UnsafePath)?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Db(Connection::open_with_flags(path, flags).map_err(unreadable)?);
    conn.0
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unreadable)?;
    if !exists {
        init(&conn, store_id).map_err(unreadable)?;
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(unreadable)?;
    let conn = SealsDb(conn);
    // A damaged file can't carry the chain on: the start refuses.
    quick_check(&conn)?;
    check_file(&conn, Some(store_id))?;
    newest(&conn)?;
    Ok(conn)
}

fn init(conn: &Db, store_id: &str) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let r = conn.execute_batch(SEALS_SQL).and_then(|_| {
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('format', ?1), ('store', ?2)",
            [FORMAT, store_id],
        )
    });
    match r {
        Ok(_) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// A read-only connection to an existing seals file (`seals-missing` when
/// there is none; `seals-unreadable` when it is no seals file).
pub fn open_read(path: &Path) -> Result<SealsDb, Code> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Code::SealsMissing),
        Ok(md) if md.file_type().is_file() => {}
        _ => return Err(Code::SealsUnreadable),
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Db(Connection::open_with_flags(path, flags).map_err(unreadable)?);
    conn.0
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unreadable)?;
    Ok(SealsDb(conn))
}

/// Checks the file is a seals file of this format and, given one, for
/// `store_id`.
pub fn check_file(conn: &SealsDb, store_id: Option<&str>) -> Result<(), Code> {
    let get = |key: &str| -> Result<Option<String>, Code> {
        conn.0
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(unreadable)
    };
    if get("format")?.as_deref() != Some(FORMAT) {
        return Err(Code::SealsUnreadable);
    }
    let stored = get("store")?.ok_or(Code::SealsUnreadable)?;
    if store_id.is_some_and(|id| id != stored) {
        return Err(Code::SealsForeign);
    }
    Ok(())
}

/// `PRAGMA quick_check` on the seals file (`seals-unreadable` unless "ok").
pub fn quick_check(conn: &SealsDb) -> Result<(), Code> {
    let mut st = conn.0.prepare("PRAGMA quick_check").map_err(unreadable)?;
    let mut rows = st.query([]).map_err(unreadable)?;
    let first: Option<String> = match rows.next().map_err(unreadable)? {
        Some(r) => Some(r.get(0).map_err(unreadable)?),
        None => None,
    };
    if first.as_deref() != Some("ok") || rows.next().map_err(unreadable)?.is_some() {
        return Err(Code::SealsUnreadable);
    }
    Ok(())
}

const SEAL_COLUMNS: &str = "seq, at, prev, root, upto, tables";

fn seal_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Seal, Code>> {
    let seq: i64 = r.get(0)?;
    let at: String = r.get(1)?;
    let prev: String = r.get(2)?;
    let root: String = r.get(3)?;
    let upto: String = r.get(4)?;
    let tables: String = r.get(5)?;
    Ok(parse_seal(seq, at, &prev, &root, &upto, &tables))
}

fn parse_seal(
    seq: i64,
    at: String,
    prev: &str,
    root: &str,
    upto: &str,
    tables: &str,
) -> Result<Seal, Code> {
    let prev = canonical::from_hex(prev).ok_or(Code::SealsUnreadable)?;
    let root = canonical::from_hex(root).ok_or(Code::SealsUnreadable)?;
    let upto: BTreeMap<String, i64> =
        serde_json::from_str(upto).map_err(|_| Code::SealsUnreadable)?;
    let raw: BTreeMap<String, String> =
        serde_json::from_str(tables).map_err(|_| Code::SealsUnreadable)?;
    let mut digests = BTreeMap::new();
    for (t, h) in raw {
        digests.insert(t, canonical::from_hex(&h).ok_or(Code::SealsUnreadable)?);
    }
    Ok(Seal {
        seq,
        at,
        prev,
        root,
        upto,
        tables: digests,
    })
}

/// A read-only handle on the seals file, for the `seal` verb and the
/// `seals` host op: its connection stays in the store.
pub struct SealsReader(SealsDb);

impl SealsReader {
    /// Opens the seals file read-only (see [`open_read`]).
    pub fn open(path: &Path) -> Result<SealsReader, Code> {
        open_read(path).map(SealsReader)
    }

    /// The newest seal (see [`newest`]).
    pub fn newest(&self) -> Result<Option<Seal>, Code> {
        newest(&self.0)
    }

    /// The seals after `seq` (see [`after`]).
    pub fn after(&self, seq: i64, limit: i64) -> Result<Vec<Seal>, Code> {
        after(&self.0, seq, limit)
    }
}

/// The newest seal, if any.
pub fn newest(conn: &SealsDb) -> Result<Option<Seal>, Code> {
    conn.0
        .prepare_cached(&format!(
            "SELECT {SEAL_COLUMNS} FROM seals ORDER BY seq DESC LIMIT 1"
        ))
        .and_then(|mut st| st.query_row([], seal_from_row).optional())
        .map_err(unreadable)?
        .transpose()
}

/// Up to `limit` seals after `after`, oldest first.
pub fn after(conn: &SealsDb, after: i64, limit: i64) -> Result<Vec<Seal>, Code> {
    let mut st = conn
        .0
        .prepare_cached(&format!(
            "SELECT {SEAL_COLUMNS} FROM seals WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))
        .map_err(unreadable)?;
    let rows = st
        .query_map(params![after, limit], seal_from_row)
        .map_err(unreadable)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.map_err(unreadable)??);
    }
    Ok(out)
}

/// Calls `f` with every seal, oldest first, one at a time.
pub fn each(conn: &SealsDb, f: &mut dyn FnMut(Seal) -> Result<(), Code>) -> Result<(), Code> {
    let mut st = conn
        .0
        .prepare(&format!("SELECT {SEAL_COLUMNS} FROM seals ORDER BY seq"))
        .map_err(unreadable)?;
    let mut rows = st.query([]).map_err(unreadable)?;
    while let Some(r) = rows.next().map_err(unreadable)? {
        f(seal_from_row(r).map_err(unreadable)??)?;
    }
    Ok(())
}

/// Begins a read transaction and takes its snapshot now (a WAL read
/// transaction starts at its first read, not at `BEGIN`).
pub fn begin_read(store: &Db) -> Result<(), Code> {
    snapshot(store, store_unreadable)
}

fn snapshot(conn: &Db, err: fn(rusqlite::Error) -> Code) -> Result<(), Code> {
    conn.execute_batch("BEGIN").map_err(err)?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|_| ())
    .map_err(err)
}

/// Ends a read transaction.
pub fn end_read(conn: &Db) {
    let _ = conn.execute_batch("COMMIT");
}

/// The sealed tables the store has, with the highest `seq` of each (0 for
/// an empty one).
pub fn table_heads(store: &Db) -> Result<BTreeMap<String, i64>, Code> {
    let mut heads = BTreeMap::new();
    for t in SEALED_TABLES {
        let present: i64 = store
            .prepare_cached("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .and_then(|mut st| st.query_row([t], |r| r.get(0)))
            .map_err(store_unreadable)?;
        if present == 0 {
            continue;
        }
        let max: i64 = store
            .prepare_cached(&format!("SELECT coalesce(max(seq), 0) FROM {t}"))
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(store_unreadable)?;
        heads.insert((*t).to_string(), max);
    }
    Ok(heads)
}

/// The lowest `seq` of `table`, if it has a row.
pub fn min_seq(store: &Db, table: &str) -> Result<Option<i64>, Code> {
    store
        .prepare_cached(&format!("SELECT min(seq) FROM {table}"))
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .map_err(store_unreadable)
}

/// What hashing a seal's rows gave.
#[derive(Debug, Clone, Default)]
pub struct Hashed {
    /// SHA-256 over `prev` and every row, table by table.
    pub root: Digest32,
    /// Per table with rows: SHA-256 over its rows alone (when asked for).
    pub tables: BTreeMap<String, Digest32>,
    /// Rows hashed.
    pub rows: u64,
}

/// Hashes the rows `seq ∈ [lo, hi]` of each `(table, lo, hi)` (given in
/// sealed-table order) after `prev`, the way a seal's root is made. With
/// `per_table`, also each table's own digest.
pub fn hash_ranges(
    store: &Db,
    prev: &Digest32,
    ranges: &[(&str, i64, i64)],
    per_table: bool,
) -> Result<Hashed, Code> {
    let mut root = Hasher::new(Some(prev));
    let mut out = Hashed::default();
    let mut scratch = Vec::new();
    for &(table, lo, hi) in ranges {
        let mut own = per_table.then(|| Hasher::new(None));
        let n = each_row(store, table, lo, hi, &mut |form, seq, row| {
            if let Some(own) = own.as_mut() {
                scratch.clear();
                form.encode(seq, |i| row.get_ref(i), &mut scratch)?;
                root.push(&scratch);
                own.push(&scratch);
            } else {
                form.encode(seq, |i| row.get_ref(i), root.buf())?;
                root.row_done();
            }
            Ok(())
        })
        .map_err(store_unreadable)?;
        out.rows += n;
        if let Some(own) = own {
            if n > 0 {
                out.tables.insert(table.to_string(), own.finish());
            }
        }
    }
    out.root = root.finish();
    Ok(out)
}

/// The query every reader of rows in `seq` order uses.
pub fn rows_sql(table: &str) -> String {
    format!("SELECT * FROM {table} WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq")
}

/// Calls `f` with the rows of `table` with `seq` in `[lo, hi]`, in `seq`
/// order, with the table's canonical form; returns how many.
pub fn each_row(
    store: &Db,
    table: &str,
    lo: i64,
    hi: i64,
    f: &mut dyn FnMut(&RowForm, i64, &rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> rusqlite::Result<u64> {
    let mut st = store.prepare_cached(&rows_sql(table))?;
    let names: Vec<&str> = st.column_names();
    let form =
        RowForm::new(table, &names).ok_or(rusqlite::Error::InvalidColumnName("seq".to_string()))?;
    let seq_at = form.seq_index();
    let mut rows = st.query(params![lo, hi])?;
    let mut n = 0u64;
    while let Some(r) = rows.next()? {
        let seq: i64 = r.get(seq_at)?;
        f(&form, seq, r)?;
        n += 1;
    }
    Ok(n)
}

/// Seals what the last seal did not cover, if anything: reads the store
/// in one read transaction, then appends the seal. `now` gives the seal's
/// timestamp (later than the last seal's).
pub fn seal_pending(
    store: &Db,
    seals: &SealsDb,
    now: &mut dyn FnMut(Option<&str>) -> String,
) -> Result<Option<Seal>, Code> {
    let last = newest(seals)?;
    let (prev, prev_upto) = match &last {
        Some(s) => (s.root, s.upto.clone()),
        None => (canonical::ZERO, BTreeMap::new()),
    };
    begin_read(store)?;
    let r = seal_in_snapshot(store, &prev, &prev_upto);
    end_read(store);
    let Some((hashed, upto)) = r? else {
        return Ok(None);
    };
    let seal = Seal {
        seq: last.as_ref().map_or(0, |s| s.seq) + 1,
        at: now(last.as_ref().map(|s| s.at.as_str())),
        prev,
        root: hashed.root,
        upto,
        tables: hashed.tables,
    };
    append(seals, &seal)?;
    Ok(Some(seal))
}

fn seal_in_snapshot(
    store: &Db,
    prev: &Digest32,
    prev_upto: &Upto,
) -> Result<Option<(Hashed, Upto)>, Code> {
    let heads = table_heads(store)?;
    let mut ranges = Vec::new();
    let mut upto = BTreeMap::new();
    let mut grew = false;
    for t in SEALED_TABLES {
        let before = prev_upto.get(*t).copied().unwrap_or(0);
        let head = heads.get(*t).copied().unwrap_or(0);
        grew |= head > before;
        let hi = head.max(before);
        let lo = lower_bound(prev_upto, t);
        if hi >= lo {
            ranges.push((*t, lo, hi));
        }
        upto.insert((*t).to_string(), hi);
    }
    if !grew {
        return Ok(None);
    }
    let hashed = hash_ranges(store, prev, &ranges, true)?;
    Ok(Some((hashed, upto)))
}

/// Appends one seal (its own transaction, durable on return).
pub fn append(seals: &SealsDb, seal: &Seal) -> Result<(), Code> {
    let upto = serde_json::to_string(&seal.upto).map_err(|_| Code::StorageUnavailable)?;
    let tables: BTreeMap<&str, String> = seal
        .tables
        .iter()
        .map(|(t, d)| (t.as_str(), canonical::hex(d)))
        .collect();
    let tables = serde_json::to_string(&tables).map_err(|_| Code::StorageUnavailable)?;
    seals
        .0
        .prepare_cached(
            "INSERT INTO seals(seq, at, prev, root, upto, tables) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut st| {
            st.execute(params![
                seal.seq,
                seal.at,
                canonical::hex(&seal.prev),
                canonical::hex(&seal.root),
                upto,
                tables
            ])
        })
        .map(|_| ())
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot append a seal");
            Code::StorageUnavailable
        })
}

/// `PRAGMA data_version`: changes whenever another connection commits.
pub fn data_version(conn: &Db) -> Option<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0)).ok()
}
