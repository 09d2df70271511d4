//! Big stores, fast: a real store (made by the broker's own `Store::open`)
//! filled with evidence rows in bulk through plain SQL (the schema's
//! triggers still check every row), then sealed by the broker's own
//! sealing code, one seal per chunk. For the tests and benchmarks that need
//! a million rows without a million requests.

use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::{seals, Store};
use rusqlite::{params, Connection, OpenFlags};
use std::path::Path;

/// Fills the store under `root` (made if missing) with `rows` evidence
/// rows, half events and half messages, in `chunks` chunks, sealing after
/// each. With `gap`, every row's `seq` is even (so a row can be slipped in
/// between two). Returns the seals made.
pub fn bulk_store(root: &Path, rows: u64, chunks: u64, gap: bool) -> Vec<seals::Seal> {
    let bus = BusDir::acquire(root).expect("lock");
    let store = Store::open(&bus.db_path()).expect("store");
    let store_id = store.id().expect("store id");
    drop(store);
    let seals_conn = seals::open_for_sealing(&bus.seals_path(), &store_id).expect("seals file");
    let writer = Connection::open(bus.db_path()).expect("writer");
    writer
        .execute_batch("PRAGMA synchronous = OFF")
        .expect("pragma");
    let reader = mosaic_bus::store::Db::new(
        Connection::open_with_flags(bus.db_path(), OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("reader"),
    );
    let (ev0, msg0): (i64, i64) = writer
        .query_row(
            "SELECT (SELECT coalesce(max(seq), 0) FROM events),
                    (SELECT coalesce(max(seq), 0) FROM messages)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("heads");
    // Later than anything the clock handed out so far.
    let t0: i64 = 4_102_444_800_000; // 2100-01-01
    let step = if gap { 2 } else { 1 };
    let per_chunk = rows.div_ceil(chunks.max(1));
    let mut made = Vec::new();
    let mut done = 0u64;
    let mut n = 0i64;
    while done < rows {
        let this = per_chunk.min(rows - done);
        writer.execute_batch("BEGIN").expect("begin");
        {
            let mut ev = writer
                .prepare_cached(
                    "INSERT INTO events(seq, id, business, kind, role, run, subject, body, at)
                     VALUES (?1, ?2, 'acme', 'note.kept', 'pm', 'pm-1', NULL, ?3, ?4)",
                )
                .expect("events insert");
            let mut msg = writer
                .prepare_cached(
                    "INSERT INTO messages(seq, id, business, from_role, from_run, to_role, class, body, at)
                     VALUES (?1, ?2, 'acme', 'pm', 'pm-1', 'cto', 'INFO', ?3, ?4)",
                )
                .expect("messages insert");
            for _ in 0..this {
                n += 1;
                let at = mosaic_bus::store::clock::format_ms(t0 + n);
                let id = format!("00000000-0000-7000-8000-{n:012x}");
                if n % 2 == 0 {
                    ev.execute(params![
                        ev0 + step * (n / 2),
                        id,
                        format!("{{\"n\":{n},\"text\":\"a note of a typical length, some forty bytes\"}}"),
                        at
                    ])
                    .expect("event");
                } else {
                    msg.execute(params![
                        msg0 + step * (n / 2 + 1),
                        id,
                        format!("message {n}: a body of a typical length for an agent's note to another"),
                        at
                    ])
                    .expect("message");
                }
            }
        }
        writer.execute_batch("COMMIT").expect("commit");
        done += this;
        let s = seals::seal_pending(&reader, &seals_conn, &mut |last| {
            mosaic_bus::sealer::seal_time(last)
        })
        .expect("seal")
        .expect("rows to seal");
        made.push(s);
    }
    drop(reader);
    drop(writer);
    drop(seals_conn);
    bus.release_lock();
    made
}
