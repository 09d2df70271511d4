//! The WAL-append VFS (`store::wal_vfs`) on real files: whatever a commit
//! returned is in the files (as a process kill would leave them), plain
//! SQLite reads exactly what went through the shim, large and rolled-back
//! transactions included, and a commit's frames reach the kernel in far
//! fewer write calls than SQLite's two per frame.

use mosaic_bus::store::wal_vfs;
use rusqlite::{params, Connection, OpenFlags};
use std::path::Path;

fn through_shim(db: &Path) -> Connection {
    assert!(wal_vfs::register(), "the unix VFS is there to wrap");
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    let c = Connection::open_with_flags_and_vfs(db, flags, wal_vfs::NAME).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, v BLOB NOT NULL);
         CREATE INDEX IF NOT EXISTS t_v ON t(v);",
    )
    .unwrap();
    c
}

/// A row as (key, length, checksum of the value): short enough to print.
type Row = (i64, usize, u64);

fn row(k: i64, v: &[u8]) -> Row {
    let sum = v.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    (k, v.len(), sum)
}

fn rows(c: &Connection) -> Vec<Row> {
    let mut st = c.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
    let r = st
        .query_map([], |r| Ok(row(r.get(0)?, &r.get::<_, Vec<u8>>(1)?)))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    r
}

fn blob(k: i64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k as usize * 31 + i * 7) as u8).collect()
}

/// Copies the database and its WAL byte for byte while the writer still has
/// them open: the state a SIGKILL (or this process dying) would leave.
fn snapshot(dir: &Path, to: &Path) -> Connection {
    std::fs::create_dir_all(to).unwrap();
    for f in ["a.db", "a.db-wal"] {
        std::fs::copy(dir.join(f), to.join(f)).unwrap();
    }
    Connection::open(to.join("a.db")).unwrap()
}

#[test]
fn every_committed_transaction_is_in_the_files_and_plain_sqlite_reads_it_back() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("a.db");
    let mut c = through_shim(&db);
    c.execute_batch("PRAGMA wal_autocheckpoint=0;").unwrap();
    let mut expected = Vec::new();

    // Small transactions, one row each.
    for k in 0..50 {
        c.execute(
            "INSERT INTO t(k, v) VALUES (?1, ?2)",
            params![k, blob(k, 100)],
        )
        .unwrap();
        expected.push(row(k, &blob(k, 100)));
    }
    // One transaction larger than the pending limit and than one write:
    // 3 MiB of rows, with overflow pages.
    {
        let tx = c.transaction().unwrap();
        for k in 100..148 {
            tx.execute(
                "INSERT INTO t(k, v) VALUES (?1, ?2)",
                params![k, blob(k, 64 * 1024)],
            )
            .unwrap();
            expected.push(row(k, &blob(k, 64 * 1024)));
        }
        tx.commit().unwrap();
    }
    // A rolled-back transaction and a rolled-back savepoint leave nothing.
    {
        let tx = c.transaction().unwrap();
        tx.execute("INSERT INTO t(k, v) VALUES (900, x'00')", [])
            .unwrap();
        tx.rollback().unwrap();
    }
    {
        let mut tx = c.transaction().unwrap();
        {
            let sp = tx.savepoint().unwrap();
            sp.execute("INSERT INTO t(k, v) VALUES (901, x'00')", [])
                .unwrap();
            // Dropped: rolled back.
        }
        tx.execute(
            "INSERT INTO t(k, v) VALUES (200, ?1)",
            params![blob(200, 10)],
        )
        .unwrap();
        expected.push(row(200, &blob(200, 10)));
        tx.commit().unwrap();
    }
    // A page written again in the same transaction after a cache spill: the
    // second write lands behind the run, so it is not an append.
    c.execute_batch("PRAGMA cache_size=2;").unwrap();
    {
        let tx = c.transaction().unwrap();
        for k in 300..400 {
            tx.execute(
                "INSERT INTO t(k, v) VALUES (?1, ?2)",
                params![k, blob(k, 3000)],
            )
            .unwrap();
        }
        tx.execute("UPDATE t SET v = ?2 WHERE k = ?1", params![300, blob(1, 5)])
            .unwrap();
        tx.commit().unwrap();
        expected.push(row(300, &blob(1, 5)));
        expected.extend((301..400).map(|k| row(k, &blob(k, 3000))));
    }
    expected.sort();

    // What a crash now would leave: the files as they are on disk.
    let killed = snapshot(d.path(), &d.path().join("killed"));
    assert_eq!(
        rows(&killed),
        expected,
        "a kill keeps every returned commit"
    );
    let ok: String = killed
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");

    // The same through a plain connection beside the writer.
    let plain = Connection::open(&db).unwrap();
    assert_eq!(rows(&plain), expected);
    drop(plain);

    // A checkpoint reads the WAL back through the shim.
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    assert_eq!(rows(&c), expected);
    drop(c);
    let reopened = through_shim(&db);
    assert_eq!(rows(&reopened), expected);
}

/// Write system calls this thread has made (`syscw` in /proc/thread-self/io).
fn writes_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

fn writes_per_commit(c: &Connection) -> (u64, u64) {
    // A table with five indexes: each row dirties six pages.
    c.execute_batch(
        "CREATE TABLE w(a TEXT, b TEXT, c TEXT, d TEXT, e TEXT);
         CREATE INDEX w_a ON w(a); CREATE INDEX w_b ON w(b); CREATE INDEX w_c ON w(c);
         CREATE INDEX w_d ON w(d); CREATE INDEX w_e ON w(e);",
    )
    .unwrap();
    let before = writes_by_this_thread();
    let n = 20;
    for i in 0..n {
        let s = format!("{i:08}");
        c.execute("INSERT INTO w VALUES (?1, ?1, ?1, ?1, ?1)", [&s])
            .unwrap();
    }
    (writes_by_this_thread() - before, n)
}

#[test]
fn a_commit_reaches_the_kernel_in_one_write_where_sqlite_makes_two_per_frame() {
    let d = tempfile::tempdir().unwrap();
    let shim = through_shim(&d.path().join("a.db"));
    let (shim_writes, n) = writes_per_commit(&shim);
    let plain = Connection::open(d.path().join("b.db")).unwrap();
    plain
        .execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")
        .unwrap();
    let (plain_writes, _) = writes_per_commit(&plain);
    // Six frames per commit: SQLite alone makes twelve writes, the shim one.
    assert!(
        plain_writes >= 12 * n,
        "plain SQLite: {plain_writes} writes for {n} commits"
    );
    assert!(
        shim_writes <= n + 2,
        "through the shim: {shim_writes} writes for {n} commits"
    );
}

const FSIZE_CHILD: &str = "MOSAIC_WAL_VFS_FSIZE_CHILD";

/// Sets this process's soft file-size limit (writes past it fail with EFBIG).
fn limit_file_size(bytes: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim), 0);
        lim.rlim_cur = bytes.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

/// The child half of the test below: runs alone in its own process, since
/// the file-size limit applies to the whole process.
fn refused_write_child(dir: &Path) {
    // SAFETY: ignoring SIGXFSZ makes an over-limit write fail with EFBIG
    // instead of killing the process.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let db = dir.join("a.db");
    let c = through_shim(&db);
    c.execute_batch("PRAGMA wal_autocheckpoint=0;").unwrap();
    let mut acknowledged = Vec::new();
    for k in 0..10 {
        c.execute(
            "INSERT INTO t(k, v) VALUES (?1, ?2)",
            params![k, blob(k, 50)],
        )
        .unwrap();
        acknowledged.push(row(k, &blob(k, 50)));
    }
    let wal = std::fs::metadata(dir.join("a.db-wal")).unwrap().len();
    limit_file_size(wal + 200 * 1024);

    // Commits of ~40 KiB each until the disk refuses one.
    let mut refused = None;
    for k in 10..100 {
        match c.execute(
            "INSERT INTO t(k, v) VALUES (?1, ?2)",
            params![k, blob(k, 40_000)],
        ) {
            Ok(_) => acknowledged.push(row(k, &blob(k, 40_000))),
            Err(e) => {
                refused = Some(k);
                let code = e.sqlite_error_code();
                assert!(
                    matches!(
                        code,
                        Some(rusqlite::ErrorCode::SystemIoFailure | rusqlite::ErrorCode::DiskFull)
                    ),
                    "refused with {e:?}"
                );
                break;
            }
        }
    }
    let refused = refused.expect("the limit refuses a commit");
    assert!(refused > 10, "some commits fit under the limit");
    assert_eq!(rows(&c), acknowledged, "the refused commit left nothing");

    // With room again the same connection goes on.
    limit_file_size(u64::MAX);
    c.execute(
        "INSERT INTO t(k, v) VALUES (500, ?1)",
        params![blob(500, 10)],
    )
    .unwrap();
    acknowledged.push(row(500, &blob(500, 10)));

    // What a kill would leave, read by plain SQLite: exactly what was acknowledged.
    let killed = snapshot(dir, &dir.join("killed"));
    assert_eq!(rows(&killed), acknowledged);
    let ok: String = killed
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_commit_the_disk_refuses_fails_whole_and_the_connection_goes_on() {
    if let Ok(dir) = std::env::var(FSIZE_CHILD) {
        refused_write_child(Path::new(&dir));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_commit_the_disk_refuses_fails_whole_and_the_connection_goes_on",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(FSIZE_CHILD, d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child really ran the test (not zero filtered tests).
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// Whatever the synchronous mode, a commit's frames are in the file when
/// the commit returns: with NORMAL or OFF SQLite publishes a commit without
/// a sync, so the shim must not hold its last frame back until one.
#[test]
fn without_a_sync_a_returned_commit_is_in_the_file_all_the_same() {
    for mode in ["NORMAL", "OFF"] {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("a.db");
        let c = through_shim(&db);
        c.execute_batch(&format!("PRAGMA synchronous={mode};"))
            .unwrap();
        let mut expected = Vec::new();
        for k in 0..30 {
            c.execute(
                "INSERT INTO t(k, v) VALUES (?1, ?2)",
                params![k, blob(k, 700)],
            )
            .unwrap();
            expected.push(row(k, &blob(k, 700)));
            // A kill now must keep this commit.
            let killed = snapshot(d.path(), &d.path().join(format!("killed{k}")));
            assert_eq!(rows(&killed), expected, "{mode}: commit {k}");
        }
    }
}
