//! The sealer: seals what the last run left unsealed when the broker
//! starts (before it serves), then, on a thread of its own, new evidence
//! within `sealSeconds` of its commit, and once more at close. It reads the store on a read-only
//! connection of its own and writes only `seals.sqlite`.
//!
//! Invariants: the writer thread never waits for it and never hears from
//! it (it notices commits by `PRAGMA data_version`, polled once per
//! period), so sealing costs a send nothing but the CPU its hashing takes;
//! a seal covers only committed rows; each seal is logged at INFO (`seal`,
//! with its `seq` and `root`), the anchor an operator keeps outside the
//! data root.

use crate::error::Code;
use crate::store::seals::SealsDb;
use crate::store::Db;
use crate::store::{self, canonical, clock, seals};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// `sealSeconds`: the default, and the bounds a boot config may give
/// (defined with the config, which checks them).
pub use crate::config::{
    SEAL_SECONDS_DEFAULT as DEFAULT_SECONDS, SEAL_SECONDS_MAX as MAX_SECONDS,
    SEAL_SECONDS_MIN as MIN_SECONDS,
};

/// The running sealer.
pub struct Sealer {
    close: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    seals_path: PathBuf,
}

/// The seals file, checked (or made) and not yet sealed into.
pub struct SealsFile {
    conn: SealsDb,
    path: PathBuf,
}

impl SealsFile {
    /// Opens (or creates) the seals file of the store whose id is
    /// `store_id`: `seals-unreadable` or `seals-foreign` as the file says.
    pub fn open(path: &Path, store_id: &str) -> Result<SealsFile, Code> {
        Ok(SealsFile {
            conn: seals::open_for_sealing(path, store_id)?,
            path: path.to_path_buf(),
        })
    }

    /// Seals what the last run left unsealed, here and now (before the
    /// broker serves: after a start, every row committed before it is
    /// sealed), then starts the sealer thread on the store at `db_path`,
    /// which looks every `period`.
    pub fn start(self, db_path: &Path, period: Duration) -> Result<Sealer, Code> {
        let store_conn = store::open_reader(db_path).map_err(|_| Code::StorageUnavailable)?;
        let _ = store_conn.set_busy_timeout(Duration::from_secs(5));
        let SealsFile { conn, path } = self;
        seal_now(&store_conn, &conn)?;
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bus-sealer".into())
            .spawn(move || run(store_conn, conn, rx, period))
            .map_err(|_| Code::StorageUnavailable)?;
        Ok(Sealer {
            close: Some(tx),
            thread: Some(thread),
            seals_path: path,
        })
    }
}

impl Sealer {
    /// The seals file.
    pub fn path(&self) -> &Path {
        &self.seals_path
    }

    /// Seals what the writer committed last and stops. Call after the
    /// writer thread has ended, so nothing committed is left unsealed.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = self.close.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(store: Db, seals_conn: SealsDb, rx: mpsc::Receiver<()>, period: Duration) {
    let mut seen = seals::data_version(&store);
    loop {
        match rx.recv_timeout(period) {
            Err(mpsc::RecvTimeoutError::Timeout) => pass(&store, &seals_conn, &mut seen),
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // At close: whatever changed since the last look.
                seen = None;
                pass(&store, &seals_conn, &mut seen);
                return;
            }
        }
    }
}

/// One look: when the store changed since the last one, seal what is new.
fn pass(store: &Db, seals_conn: &SealsDb, seen: &mut Option<i64>) {
    let now = seals::data_version(store);
    if now.is_some() && now == *seen {
        return;
    }
    match seal_now(store, seals_conn) {
        Ok(_) => *seen = now,
        // Tried again at the next period; nothing is lost meanwhile.
        Err(code) => tracing::warn!(code = code.as_str(), "sealing failed"),
    }
}

/// Seals what is unsealed now, logging the seal; `None` when nothing was.
pub fn seal_now(store: &Db, seals_conn: &SealsDb) -> Result<Option<seals::Seal>, Code> {
    let sealed = seals::seal_pending(store, seals_conn, &mut seal_time)?;
    if let Some(s) = &sealed {
        tracing::info!(seq = s.seq, root = %canonical::hex(&s.root), "seal");
    }
    Ok(sealed)
}

/// A seal's timestamp: now, or a millisecond after the last seal's when
/// the clock has not moved past it.
pub fn seal_time(last: Option<&str>) -> String {
    let now = clock::now_ms();
    let floor = last.and_then(clock::parse_canonical).unwrap_or(i64::MIN);
    clock::format_ms(now.max(floor.saturating_add(1)))
}
