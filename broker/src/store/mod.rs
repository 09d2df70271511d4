//! The evidence store: one read-write SQLite connection, opened only after
//! every check passes, written one transaction per verb.
//!
//! Invariants: only this module issues SQL that writes; the database file is
//! never deleted or reinitialized; every row's timestamp comes from [`Clock`].

pub mod backup;
pub mod canonical;
pub mod clock;
pub mod comments;
pub mod decisions;
pub mod evidence;
pub mod export;
pub mod landings;
pub mod messages;
pub mod names;
pub mod reads;
pub mod reviews;
pub mod root;
pub mod rows;
pub mod schema;
pub mod seals;
pub mod threads;
pub mod usage;
pub mod wal_vfs;

use crate::error::Code;
pub use clock::Clock;

use root::check_private;
use rusqlite::{Connection, OpenFlags};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The condition on an `events` row that the three secondary indexes of
/// `events` (`events_subject`, `events_run`, `events_kind`) are partial on
/// (schema 3i): every event but a send's authorization, an `action.allowed`
/// whose body starts `{"action":"message.send",` (every body is JSON from
/// `serde_json`, whose objects list their keys sorted, and no key of such a body
/// sorts before `action`). No read looks a send's authorization up through those indexes,
/// and leaving it out saves a send three index pages. SQLite uses a partial
/// index only for a query whose `WHERE` has its condition as a term, so
/// every read of `events` by subject, run or kind ANDs this in, as text;
/// `schema.sql` has the same text (`store::schema` tests that). A macro, so
/// that `concat!` can put it into a statement's literal; the store's own
/// (`crate::store::not_a_send!`), not exported at the crate's root.
macro_rules! not_a_send {
    () => {
        "(kind <> 'action.allowed' OR body < '{\"action\":\"message.send\",' \
         OR body >= '{\"action\":\"message.send\"-')"
    };
}

pub(crate) use not_a_send;

/// [`not_a_send!`] as a constant, for `format!`.
pub const NOT_A_SEND: &str = not_a_send!();

/// A handle on the store's database: every read function of the store
/// takes one, and a [`Tx`]'s writes run through one. Only the store reaches
/// the SQLite connection inside, so no other module of the broker can run a
/// statement of its own. The writer's is read through [`Store::db`] (a read
/// verb gets `&Core`, which begins no transaction, so what it holds reads
/// and nothing else); the sealer and the operator's tools open their own
/// read-only ones ([`open_reader`], [`open_for_tools`], `seals::open_*`).
pub struct Db(Connection);

/// The statements the store's modules run through a [`Db`] (private to the
/// store: outside it, a `Db` is only something to hand back to it).
impl Db {
    fn prepare_cached(&self, sql: &str) -> rusqlite::Result<rusqlite::CachedStatement<'_>> {
        self.0.prepare_cached(sql)
    }

    fn prepare(&self, sql: &str) -> rusqlite::Result<rusqlite::Statement<'_>> {
        self.0.prepare(sql)
    }

    fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.0.query_row(sql, params, f)
    }

    fn execute<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.0.execute(sql, params)
    }

    fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        self.0.execute_batch(sql)
    }

    fn is_autocommit(&self) -> bool {
        self.0.is_autocommit()
    }

    fn last_insert_rowid(&self) -> i64 {
        self.0.last_insert_rowid()
    }

    fn pragma_update<V: rusqlite::ToSql>(
        &self,
        schema: Option<rusqlite::DatabaseName<'_>>,
        name: &str,
        value: V,
    ) -> rusqlite::Result<()> {
        self.0.pragma_update(schema, name, value)
    }

    fn pragma_query_value<T, F>(
        &self,
        schema: Option<rusqlite::DatabaseName<'_>>,
        name: &str,
        f: F,
    ) -> rusqlite::Result<T>
    where
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.0.pragma_query_value(schema, name, f)
    }

    /// How long a read waits on a lock before it fails.
    pub fn set_busy_timeout(&self, wait: std::time::Duration) -> Result<(), Code> {
        self.0.busy_timeout(wait).map_err(storage)
    }

    /// The connection itself, for the programs that run SQL of their own on
    /// a store: the migrator's steps, and the tests and the benchmark,
    /// which plant rows and faults no verb would write (feature `raw-sql`).
    /// No module of the broker outside the store calls it
    /// (`broker/tests/house_rules.rs::the_store_s_connection_stays_in_the_store`).
    #[cfg(any(test, feature = "raw-sql"))]
    pub fn sql(&self) -> &Connection {
        &self.0
    }

    /// A connection opened elsewhere (the migrator's, a test's), to hand to
    /// the store's functions.
    pub fn new(conn: Connection) -> Db {
        Db(conn)
    }
}

/// The open store.
pub struct Store {
    conn: Db,
    pub clock: Clock,
    /// Batch transactions committed since open.
    pub batches_committed: u64,
    /// A batch transaction is open ([`Store::begin_batch`]).
    in_batch: bool,
    /// ... and no verb's changes have been kept in it yet.
    batch_fresh: bool,
    /// Loaded credential tokens no evidence row may contain.
    pub tokens: crate::tokens::KnownTokens,
    /// Delivered messages without a read receipt (see [`messages::Unread`]).
    pub unread: messages::Unread,
    /// Who holds each role now (see [`evidence::Holders`]).
    holders: evidence::Holders,
    /// Debug builds: the tests' way to make a COMMIT fail ([`CommitFault`]).
    fault: CommitFault,
}

/// A savepoint on the store's connection: released by [`Sp::release`],
/// rolled back (and released) when dropped without it. Its statements are
/// prepared once and kept, unlike `rusqlite::Savepoint`'s, which are parsed
/// again on every use. Derefs to the connection, for the verbs' queries.
///
/// The first verb of a batch runs without one ([`Sp::bare`]): the batch
/// transaction holds nothing else yet, so rolling the whole transaction
/// back and beginning it again undoes exactly that verb, and the savepoint's
/// bookkeeping (a copy of every page it first touches) is saved on the
/// common one-request batch.
struct Sp<'a> {
    conn: &'a Db,
    /// A real savepoint (else the batch transaction itself).
    guarded: bool,
    released: bool,
}

impl<'a> Sp<'a> {
    fn open(conn: &'a Db) -> rusqlite::Result<Sp<'a>> {
        run_cached(conn, "SAVEPOINT verb")?;
        Ok(Sp {
            conn,
            guarded: true,
            released: false,
        })
    }

    /// The batch transaction, which holds no other verb's changes.
    fn bare(conn: &'a Db) -> Sp<'a> {
        Sp {
            conn,
            guarded: false,
            released: false,
        }
    }

    /// Keeps the savepoint's changes (they become durable with the enclosing
    /// transaction's COMMIT; outside one, this commits them itself).
    /// On failure the savepoint is rolled back when dropped, as `rusqlite`'s is.
    fn release(mut self) -> rusqlite::Result<()> {
        if self.guarded {
            run_cached(self.conn, "RELEASE verb")?;
        }
        self.released = true;
        Ok(())
    }
}

impl Drop for Sp<'_> {
    fn drop(&mut self) {
        // A bare one is undone by the store, which restarts the batch.
        if self.guarded && !self.released {
            let _ = run_cached(self.conn, "ROLLBACK TO verb");
            let _ = run_cached(self.conn, "RELEASE verb");
        }
    }
}

impl std::ops::Deref for Sp<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.conn
    }
}

/// Runs one statement that returns no rows, prepared once per connection.
fn run_cached(conn: &Db, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// One verb's writes: a savepoint (inside the writer's batch transaction,
/// or a transaction of its own outside one) with the broker's clock beside it.
pub struct Tx<'a> {
    tx: Sp<'a>,
    pub clock: &'a mut Clock,
    /// The known-token check every writer applies before inserting.
    pub tokens: &'a crate::tokens::KnownTokens,
    /// Unread-index changes, applied when the transaction commits.
    pub unread: Vec<messages::UnreadOp>,
    /// The holders kept so far (the verbs before this one).
    holders: &'a evidence::Holders,
    /// This verb's claim rows, applied to the holders when it is kept.
    claims: Vec<evidence::HolderOp>,
}

impl Tx<'_> {
    /// What the verb reads through, inside its transaction (it sees the
    /// verb's own writes so far).
    pub fn db(&self) -> &Db {
        &self.tx
    }

    /// The run holding `(business, role)` now, as this verb sees it (its
    /// own claim rows included), from memory ([`evidence::Holders`]).
    pub fn holder(&self, business: &str, role: &str) -> Option<String> {
        evidence::holder_in(self, business, role)
    }

    /// True when `run` holds `role` now: the role's claim, or (a run of a
    /// thread instance) a thread's; as [`evidence::holds`], the role's
    /// holder from memory.
    pub fn holds(&self, business: &str, role: &str, run: &str) -> Result<bool, Code> {
        let holder = self.holder(business, role);
        evidence::holds_given(self.db(), holder.as_deref(), business, run)
    }

    /// The next broker timestamp.
    pub fn now(&mut self) -> String {
        self.clock.tick()
    }
}

fn storage(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// Maps a SQLite error to a static code. A trigger's `RAISE` text is a code
/// when it is one; anything else is logged by kind and is `storage-unavailable`.
pub fn map_sql_error(e: &rusqlite::Error) -> Code {
    if let rusqlite::Error::SqliteFailure(_, Some(msg)) = e {
        if let Some(code) = Code::parse(msg) {
            return code;
        }
    }
    tracing::warn!(code = "storage-unavailable", kind = ?sql_kind(e), "store error");
    Code::StorageUnavailable
}

fn sql_kind(e: &rusqlite::Error) -> Option<rusqlite::ErrorCode> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    }
}

impl Store {
    /// Opens (or creates) `bus.sqlite` in a locked `bus/` directory.
    pub fn open(db_path: &Path) -> Result<Store, Code> {
        let exists = check_private(db_path, false)?;
        for suffix in ["-wal", "-shm"] {
            let mut p = db_path.as_os_str().to_owned();
            p.push(suffix);
            check_private(Path::new(&p), false)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        // The WAL-append shim (see `wal_vfs`) when it registered; SQLite's
        // own unix VFS otherwise, which stores the very same bytes.
        let opened = if wal_vfs::register() {
            Connection::open_with_flags_and_vfs(db_path, flags, wal_vfs::NAME)
        } else {
            Connection::open_with_flags(db_path, flags)
        };
        let conn = Db(opened.map_err(|e| {
            tracing::warn!(kind = ?sql_kind(&e), "cannot open the database");
            Code::StorageUnavailable
        })?);
        let _ = std::fs::set_permissions(db_path, std::fs::Permissions::from_mode(0o600));
        // Every verb's statements stay prepared across requests.
        conn.0.set_prepared_statement_cache_capacity(256);
        conn.0
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(storage)?;
        if !exists {
            init(&conn)?;
        }
        configure(&conn)?;
        verify_schema(&conn)?;
        // The whole-store checks (quick_check; foreign keys and every row's
        // timestamp) each read all of it, so they run side by side: the
        // second pair on a read-only connection of its own (the schema is
        // already known to be the pinned one). Refusals keep their order:
        // quick_check, foreign keys, timestamps.
        let floor = std::thread::scope(|s| {
            let others = s.spawn(|| {
                let reader = open_reader(db_path).ok()?;
                Some((foreign_keys(&reader), latest_timestamp(&reader)))
            });
            let quick = quick_check(&conn);
            let others = others.join().map_err(|_| Code::StorageUnavailable)?;
            quick?;
            // Without a second connection they run here, after.
            let (fk, ts) = others.unwrap_or_else(|| (foreign_keys(&conn), latest_timestamp(&conn)));
            fk?;
            ts
        })?;
        ensure_store_id(&conn)?;
        let unread = messages::Unread::load(&conn)?;
        let holders = evidence::Holders::load(&conn)?;
        let fault = CommitFault::from_env(&conn);
        Ok(Store {
            conn,
            clock: Clock::starting_after(floor),
            batches_committed: 0,
            in_batch: false,
            batch_fresh: false,
            tokens: crate::tokens::KnownTokens::default(),
            unread,
            holders,
            fault,
        })
    }

    /// Runs `f` as one all-or-nothing unit: a savepoint released on `Ok` and
    /// rolled back on `Err`. Inside a batch ([`Store::begin_batch`]) it becomes
    /// durable with the batch's COMMIT; outside one it commits on its own.
    pub fn write<T>(&mut self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, Code>) -> Result<T, Code> {
        if self.in_batch && self.conn.is_autocommit() {
            // SQLite ended the batch transaction itself (an I/O error rolls
            // it all back): what ran before in this batch is gone, and what
            // runs now must not commit on its own; the batch's COMMIT fails
            // and every request in it answers `storage-unavailable`.
            return Err(Code::StorageUnavailable);
        }
        let bare = self.in_batch && self.batch_fresh;
        let sp = if bare {
            Sp::bare(&self.conn)
        } else {
            Sp::open(&self.conn).map_err(storage)?
        };
        // The verb runs in a block of its own, so that nothing of its `Tx`
        // (which borrows the holders) is left when its changes are taken in.
        let kept = {
            let mut t = Tx {
                tx: sp,
                clock: &mut self.clock,
                tokens: &self.tokens,
                unread: Vec::new(),
                holders: &self.holders,
                claims: Vec::new(),
            };
            match f(&mut t) {
                Ok(v) => {
                    let Tx {
                        tx, unread, claims, ..
                    } = t;
                    tx.release().map_err(storage)?;
                    Ok((v, unread, claims))
                }
                // Dropping the savepoint (at the block's end) rolls it back.
                Err(code) => Err(code),
            }
        };
        match kept {
            Ok((v, unread, claims)) => {
                self.batch_fresh = false;
                for op in unread {
                    self.unread.apply(op);
                }
                for op in claims {
                    self.holders.apply(op);
                }
                Ok(v)
            }
            // A bare verb is undone with the whole (otherwise empty) batch
            // transaction. Timestamps it took are not reused: the clock
            // only moves forward.
            Err(code) => {
                if bare {
                    self.restart_batch();
                }
                Err(code)
            }
        }
    }

    /// Rolls back the batch transaction, which holds only a failed verb's
    /// changes, and begins it again. If it cannot begin, the rest of the
    /// batch runs as separate transactions, as when a batch cannot begin.
    fn restart_batch(&mut self) {
        let _ = run_cached(&self.conn, "ROLLBACK");
        if run_cached(&self.conn, "BEGIN IMMEDIATE").is_err() {
            self.in_batch = false;
            self.batch_fresh = false;
        }
    }

    /// Debug builds only: the next COMMIT of this store (a batch's, or a
    /// write's outside a batch) fails for real, as SQLite's commit hook
    /// makes it fail ([`CommitFault`]), and is rolled back. For the tests of
    /// what a failed COMMIT leaves behind.
    #[cfg(debug_assertions)]
    pub fn fail_next_commit(&mut self) {
        self.fault.arm(&self.conn);
    }

    /// Whether a batch transaction is open.
    pub fn in_batch(&self) -> bool {
        self.in_batch
    }

    /// Opens the batch transaction the writer thread runs a group of requests
    /// in. Callers go through `Core::begin_batch` (the writer's state), which also
    /// keeps what the batch changes in memory.
    pub(crate) fn begin_batch(&mut self) -> Result<(), Code> {
        run_cached(&self.conn, "BEGIN IMMEDIATE").map_err(storage)?;
        self.fault.at_begin(&self.conn);
        self.in_batch = true;
        self.batch_fresh = true;
        Ok(())
    }

    /// Commits the batch (durably: WAL, synchronous=FULL); on failure rolls it back.
    pub(crate) fn commit_batch(&mut self) -> Result<(), Code> {
        let was_open = std::mem::replace(&mut self.in_batch, false);
        self.batch_fresh = false;
        if !was_open {
            // Restarting it failed: each verb since committed on its own.
            return Ok(());
        }
        self.fault.before_commit(&self.conn);
        match run_cached(&self.conn, "COMMIT") {
            Ok(()) => {
                self.batches_committed += 1;
                Ok(())
            }
            Err(e) => {
                let _ = run_cached(&self.conn, "ROLLBACK");
                // The batch's requests updated the unread index as each one
                // was kept; none of them is in the store now.
                self.reload_indexes();
                Err(storage(e))
            }
        }
    }

    /// Rebuilds the unread index and the holders from the store, after a batch whose
    /// changes it had taken in was rolled back.
    fn reload_indexes(&mut self) {
        match messages::Unread::load(&self.conn) {
            Ok(u) => self.unread = u,
            Err(code) => {
                tracing::error!(code = code.as_str(), "cannot rebuild the unread index");
            }
        }
        match evidence::Holders::load(&self.conn) {
            Ok(h) => self.holders = h,
            Err(code) => {
                tracing::error!(code = code.as_str(), "cannot rebuild the holders");
            }
        }
    }

    /// The writer's handle, for reads (see [`Db`]).
    pub fn db(&self) -> &Db {
        &self.conn
    }

    /// The store's id (`meta.store_id`), which its seals file names.
    pub fn id(&self) -> Result<String, Code> {
        store_id(&self.conn)?.ok_or(Code::SchemaMetadata)
    }
}

/// The store's id: `meta.store_id`, 128 random bits in hex, written once
/// when a broker that seals first opens the store (`None` before that).
/// Its seals file records the same id, so seals are never checked against
/// another store (`seals-foreign`). A backup keeps it: the copy is the
/// same store, and its seals go on from the same chain.
pub fn store_id(conn: &Db) -> Result<Option<String>, Code> {
    use rusqlite::OptionalExtension;
    conn.query_row("SELECT value FROM meta WHERE key = 'store_id'", [], |r| {
        r.get(0)
    })
    .optional()
    .map_err(|_| Code::SchemaMetadata)
}

/// Writes `meta.store_id` if the store has none yet (a new store, or one
/// last opened by a broker from before seals).
fn ensure_store_id(conn: &Db) -> Result<(), Code> {
    if store_id(conn)?.is_some() {
        return Ok(());
    }
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('store_id', ?1)",
        [crate::ids::store_id()],
    )
    .map(|_| ())
    .map_err(storage)
}

fn init(conn: &Db) -> Result<(), Code> {
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(storage)?;
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .map_err(storage)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Code::JournalMode);
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(storage)?;
    // The schema's last step rebuilds tables others refer to, as the
    // migrator does (with foreign keys off: see `mosaic-migrate`'s runner);
    // here they are empty, and [`configure`] turns foreign keys on after.
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(storage)?;
    conn.execute_batch("BEGIN IMMEDIATE").map_err(storage)?;
    let r = conn.execute_batch(schema::SCHEMA_SQL).and_then(|_| {
        // The comment cursors' epoch (3c) is when the store began to keep them.
        let epoch = clock::format_ms(clock::now_ms());
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?1), ('schema_sha256', ?2),
             ('comment_cursor_epoch', ?3)",
            [
                schema::SCHEMA_VERSION,
                schema::SCHEMA_SHA256,
                epoch.as_str(),
            ],
        )
    });
    match r {
        Ok(_) => conn.execute_batch("COMMIT").map_err(storage),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(storage(e))
        }
    }
}

fn configure(conn: &Db) -> Result<(), Code> {
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(storage)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(storage)?;
    Ok(())
}

/// A read-only connection to the store, through the same VFS as the writer's.
pub fn open_reader(db_path: &Path) -> rusqlite::Result<Db> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    if wal_vfs::register() {
        Connection::open_with_flags_and_vfs(db_path, flags, wal_vfs::NAME)
    } else {
        Connection::open_with_flags(db_path, flags)
    }
    .map(Db)
}

/// Opens an existing store read-only for the operator's tools (`verify`,
/// `backup`, `export`), on a live broker's root or on a copy: a missing
/// file is `store-missing`, a symlink `unsafe-path`, a file SQLite can't
/// read `store-unreadable`, one without the metadata `schema-metadata`,
/// and one at another version `schema-version`. Writes nothing.
pub fn open_for_tools(db_path: &Path) -> Result<Db, Code> {
    match std::fs::symlink_metadata(db_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Code::StoreMissing),
        Err(_) => return Err(Code::StoreUnreadable),
        Ok(md) if md.file_type().is_symlink() => return Err(Code::UnsafePath),
        Ok(md) if !md.file_type().is_file() => return Err(Code::StoreUnreadable),
        Ok(_) => {}
    }
    let conn = open_reader(db_path).map_err(|_| Code::StoreUnreadable)?;
    conn.0
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|_| Code::StoreUnreadable)?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|_| Code::StoreUnreadable)?;
    if stored_version(&conn)? != schema::SCHEMA_VERSION {
        return Err(Code::SchemaVersion);
    }
    Ok(conn)
}

/// Whether the store's schema is the pinned one (its recorded source
/// digest and its `sqlite_master`): a trigger dropped and not put back
/// shows here.
pub fn schema_is_pinned(conn: &Db) -> Result<bool, Code> {
    Ok(meta_value(conn, "schema_sha256")? == schema::SCHEMA_SHA256
        && schema::master_digest(&conn.0).map_err(|_| Code::StoreUnreadable)?
            == schema::MASTER_SHA256)
}

/// The open-time checks, in order: metadata, version, digests, WAL; then
/// [`quick_check`], [`foreign_keys`] and the timestamps of every row (in
/// [`latest_timestamp`]).
fn verify_schema(conn: &Db) -> Result<(), Code> {
    if stored_version(conn)? != schema::SCHEMA_VERSION {
        return Err(Code::SchemaVersion);
    }
    check_pin(conn, &schema::CURRENT)
}

/// The schema version a store says it is at: `schema-metadata` when it has
/// no `meta` table or no version in it.
pub fn stored_version(conn: &Db) -> Result<String, Code> {
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n == 1)
        .map_err(|_| Code::SchemaMetadata)?;
    if !has_meta {
        return Err(Code::SchemaMetadata);
    }
    meta_value(conn, "schema_version")
}

fn meta_value(conn: &Db, key: &str) -> Result<String, Code> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .map_err(|_| Code::SchemaMetadata)
}

/// Checks a store against the pin of the version it says it is at: the
/// source digest in `meta` and of the pinned text (`schema-digest`), the
/// `sqlite_master` digest (`schema-digest`) and WAL mode (`journal-mode`).
pub fn check_pin(conn: &Db, pin: &schema::Pin<'_>) -> Result<(), Code> {
    if meta_value(conn, "schema_sha256")? != pin.sha256
        || schema::sha256_hex(pin.sql.as_bytes()) != pin.sha256
    {
        return Err(Code::SchemaDigest);
    }
    if schema::master_digest(&conn.0).map_err(storage)? != pin.master {
        return Err(Code::SchemaDigest);
    }
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .map_err(storage)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Code::JournalMode);
    }
    Ok(())
}

/// The whole-store checks of an open, one after the other on one
/// connection: `quick_check` and `foreign_key_check` (`integrity`), then
/// every row's timestamp (`timestamp`). Returns the latest timestamp.
pub fn whole_store_checks(conn: &Db) -> Result<i64, Code> {
    quick_check(conn)?;
    foreign_keys(conn)?;
    latest_timestamp(conn)
}

/// `PRAGMA quick_check`.
fn quick_check(conn: &Db) -> Result<(), Code> {
    let quick: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|_| Code::Integrity)?;
    if quick != "ok" {
        return Err(Code::Integrity);
    }
    Ok(())
}

/// `PRAGMA foreign_key_check`.
fn foreign_keys(conn: &Db) -> Result<(), Code> {
    let fk_violation = conn
        .prepare("PRAGMA foreign_key_check")
        .and_then(|mut s| s.exists([]))
        .map_err(|_| Code::Integrity)?;
    if fk_violation {
        return Err(Code::Integrity);
    }
    Ok(())
}

/// The open-time timestamp check, then the latest timestamp over every
/// evidence table: the spec's full scan ([`full_timestamp_scan`]'s rule),
/// stopping at the first bad row. Every row's `at` (and
/// `task_snapshots.read_at`) must be canonical and later than the row before
/// it by `seq`, so a row written behind the broker's back (its trigger
/// dropped and put back, leaving the digest intact) refuses the open
/// wherever it sits, not only as a table's newest row.
fn latest_timestamp(conn: &Db) -> Result<i64, Code> {
    let mut latest = 0i64;
    for table in schema::EVIDENCE_TABLES {
        // A store at an older version (the migrator checks one before its
        // steps) lacks the tables later versions added.
        if !has_table(conn, table).map_err(|_| Code::Timestamp)? {
            continue;
        }
        let mut bad = Vec::new();
        let last = scan_table(conn, table, &mut bad, true).map_err(|e| {
            tracing::warn!(code = "timestamp", table = *table, kind = ?sql_kind(&e), "timestamp scan failed");
            Code::Timestamp
        })?;
        if !bad.is_empty() {
            tracing::warn!(
                code = "timestamp",
                table = *table,
                "stored timestamp refused"
            );
            return Err(Code::Timestamp);
        }
        latest = latest.max(last.unwrap_or(0));
    }
    Ok(latest)
}

fn has_table(conn: &Db, table: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .query_row([table], |r| r.get::<_, i64>(0))
        .map(|n| n == 1)
}

/// Scans one evidence table in `seq` order, pushing the `seq` of every row
/// whose `at` or non-null `read_at` is not canonical or whose `at` is not
/// later than the last canonical one before it (stopping at the first when
/// `first_only`). Returns the last canonical `at` in milliseconds.
fn scan_table(
    conn: &Db,
    table: &str,
    bad: &mut Vec<i64>,
    first_only: bool,
) -> rusqlite::Result<Option<i64>> {
    use rusqlite::types::ValueRef;
    let read_at = if table == "task_snapshots" {
        "read_at"
    } else {
        "NULL"
    };
    let sql = format!("SELECT seq, at, {read_at} FROM {table} ORDER BY seq");
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let canonical = |v: ValueRef<'_>| match v {
        ValueRef::Text(b) => std::str::from_utf8(b).ok().and_then(clock::parse_canonical),
        _ => None,
    };
    let mut prev: Option<i64> = None;
    while let Some(r) = rows.next()? {
        let ms = canonical(r.get_ref(1)?);
        let ra = r.get_ref(2)?;
        let ra_ok = matches!(ra, ValueRef::Null) || canonical(ra).is_some();
        let ordered = match (prev, ms) {
            (Some(p), Some(m)) => m > p,
            _ => true,
        };
        if ms.is_none() || !ra_ok || !ordered {
            bad.push(r.get(0)?);
            if first_only {
                return Ok(prev);
            }
        }
        if ms.is_some() {
            prev = ms;
        }
    }
    Ok(prev)
}

/// The full scan the spec describes: every `at` and non-null `read_at` in
/// every evidence table that is not canonical or not strictly later than its
/// predecessor by `seq`. The insert triggers keep this empty, and every open
/// runs it (stopping at the first bad row); tests compare it with the
/// triggers row by row.
pub fn full_timestamp_scan(conn: &Db) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut bad = Vec::new();
    for table in schema::EVIDENCE_TABLES {
        if !has_table(conn, table)? {
            continue;
        }
        let mut seqs = Vec::new();
        scan_table(conn, table, &mut seqs, false)?;
        bad.extend(seqs.into_iter().map(|s| (table.to_string(), s)));
    }
    Ok(bad)
}

/// The variable a debug build of the broker reads at open: the path of a
/// flag file. When the file is there at a batch's COMMIT and the batch
/// changed a row, the file is removed and that COMMIT fails
/// ([`CommitFault`]). A release build never reads it.
pub const FAIL_COMMIT_ENV: &str = "MOSAIC_BUS_TEST_FAIL_COMMIT";

/// Debug builds only: a real COMMIT failure on demand, for tests. SQLite's
/// commit hook, installed only once something asks for a failure, turns
/// the commit into a rollback (`SQLITE_CONSTRAINT_COMMITHOOK`), so the
/// broker takes its own failed-COMMIT path with SQLite's state as after
/// any failed COMMIT. Asked for by [`Store::fail_next_commit`] (in-process
/// tests) or by [`FAIL_COMMIT_ENV`]'s flag file (a broker child: the test
/// creates the file just before the request whose batch must fail). A
/// release build has neither: every method is empty.
#[cfg(debug_assertions)]
#[derive(Default)]
struct CommitFault {
    /// Read by the commit hook: fail the next commit (and disarm).
    armed: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// [`FAIL_COMMIT_ENV`]'s flag file.
    flag: Option<std::path::PathBuf>,
    /// `total_changes` when the batch began.
    changes_at_begin: u64,
}

#[cfg(debug_assertions)]
impl CommitFault {
    fn from_env(conn: &Db) -> CommitFault {
        let mut f = CommitFault::default();
        if let Some(p) = std::env::var_os(FAIL_COMMIT_ENV) {
            f.flag = Some(p.into());
            f.hook(conn);
        }
        f
    }

    /// Installs the commit hook once; returns the flag it reads.
    fn hook(&mut self, conn: &Db) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        use std::sync::atomic::{AtomicBool, Ordering};
        if let Some(a) = &self.armed {
            return a.clone();
        }
        let armed = std::sync::Arc::new(AtomicBool::new(false));
        let seen = armed.clone();
        conn.0
            .commit_hook(Some(move || seen.swap(false, Ordering::SeqCst)));
        self.armed = Some(armed.clone());
        armed
    }

    fn arm(&mut self, conn: &Db) {
        self.hook(conn)
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn at_begin(&mut self, conn: &Db) {
        if self.flag.is_some() {
            self.changes_at_begin = conn.0.total_changes();
        }
    }

    /// A batch that changed a row while the flag file is there fails its
    /// COMMIT; the file is taken away, so only that one does.
    fn before_commit(&mut self, conn: &Db) {
        let Some(flag) = &self.flag else { return };
        if conn.0.total_changes() != self.changes_at_begin && std::fs::remove_file(flag).is_ok() {
            self.arm(conn);
        }
    }
}

#[cfg(not(debug_assertions))]
#[derive(Default)]
struct CommitFault;

#[cfg(not(debug_assertions))]
impl CommitFault {
    fn from_env(_: &Db) -> CommitFault {
        CommitFault
    }
    fn at_begin(&mut self, _: &Db) {}
    fn before_commit(&mut self, _: &Db) {}
}
