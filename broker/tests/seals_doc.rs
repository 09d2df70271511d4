//! `docs/seals.md`'s worked example is what the code computes: the test
//! builds the example's rows in a real store, seals them with the
//! broker's own sealing code, and compares every row's bytes and both
//! roots with the hex the document prints, so the document can't drift
//! from the code (or the code from the document).

mod common;

use mosaic_bus::store::canonical::{self, Hasher};
use mosaic_bus::store::{seals, Db, Store};
use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::path::Path;

/// The example's rows, in the order the document gives them, as SQL.
const SEAL_1: &str = "
INSERT INTO events(seq, id, business, kind, role, run, subject, body, at) VALUES
  (1, '01936d8a-7c00-7000-8000-000000000001', 'acme', 'session.launched', 'pm', 'pm-1',
   NULL, '{\"harness\":\"pi\"}', '2026-01-01T00:00:00.000Z');
INSERT INTO task_comment_cursors(seq, business, task_id, last_comment) VALUES
  (1, 'acme', 41, 7);
";
const SEAL_2: &str = "
INSERT INTO events(seq, id, business, kind, role, run, subject, body, at) VALUES
  (2, '01936d8a-7c01-7000-8000-000000000002', 'acme', 'note.kept', NULL, NULL,
   NULL, '{}', '2026-01-01T00:00:00.001Z');
";
const SEAL_AT: [&str; 2] = ["2026-01-01T00:00:01.000Z", "2026-01-01T00:00:02.000Z"];

/// What the code makes of the example: each row's bytes (labelled
/// `TABLE SEQ`) and each seal's root.
struct Computed {
    rows: Vec<(String, Vec<u8>)>,
    roots: Vec<String>,
    seals: Vec<seals::Seal>,
}

fn compute() -> Computed {
    let (_dir, bus) = common::private_bus();
    let store = Store::open(&bus.db_path()).expect("store");
    let writer = Connection::open(bus.db_path()).expect("writer");
    drop(store);
    let seals_conn = seals::open_for_sealing(&bus.seals_path(), "example").expect("seals");
    let reader = Db::new(
        Connection::open_with_flags(bus.db_path(), OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("reader"),
    );
    let mut rows = Vec::new();
    let mut roots = Vec::new();
    let mut all = Vec::new();
    for (i, sql) in [SEAL_1, SEAL_2].iter().enumerate() {
        writer.execute_batch(sql).expect("rows");
        let at = SEAL_AT[i];
        let seal = seals::seal_pending(&reader, &seals_conn, &mut |_| at.to_string())
            .expect("seal")
            .expect("something to seal");
        roots.push(canonical::hex(&seal.root));
        all.push(seal);
    }
    // Each row's bytes, by the same reader the sealer uses.
    for t in ["events", "task_comment_cursors"] {
        seals::each_row(&reader, t, i64::MIN, i64::MAX, &mut |form, seq, row| {
            let mut out = Vec::new();
            form.encode(seq, |i| row.get_ref(i), &mut out)?;
            rows.push((format!("{t} {seq}"), out));
            Ok(())
        })
        .expect("rows");
    }
    drop(reader);
    drop(seals_conn);
    bus.release();
    Computed {
        rows,
        roots,
        seals: all,
    }
}

/// The document's `bytes of TABLE row SEQ` blocks (the hex before each
/// line's `|`) and its `root N = HEX` lines.
fn from_doc(doc: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut blocks = BTreeMap::new();
    let mut roots = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("bytes of ") {
            // "bytes of events row 1"
            let label = rest.replacen(" row ", " ", 1);
            blocks.insert(label.clone(), String::new());
            current = Some(label);
            continue;
        }
        if l.starts_with("```") {
            current = None;
            continue;
        }
        if let Some(rest) = l.strip_prefix("root ") {
            if let Some((_, hex)) = rest.split_once(" = ") {
                roots.push(hex.trim().to_string());
            }
        }
        if let (Some(label), Some((hex, _))) = (&current, l.split_once('|')) {
            let hex: String = hex.split_whitespace().collect();
            if let Some(b) = blocks.get_mut(label) {
                b.push_str(&hex);
            }
        }
    }
    (blocks, roots)
}

fn doc_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/seals.md")
}

#[test]
fn the_worked_example_in_docs_seals_md_is_what_the_code_computes() {
    let c = compute();
    let doc = std::fs::read_to_string(doc_path()).expect("docs/seals.md");
    let (blocks, roots) = from_doc(&doc);
    let want_rows: BTreeMap<String, String> = c
        .rows
        .iter()
        .map(|(l, b)| (l.clone(), b.iter().map(|x| format!("{x:02x}")).collect()))
        .collect();
    if blocks != want_rows || roots != c.roots {
        // What to paste, when the form changed on purpose.
        for (l, b) in &c.rows {
            eprintln!("bytes of {l}: {}", canonical::hex_bytes(b));
        }
        for (i, r) in c.roots.iter().enumerate() {
            eprintln!("root {} = {r}", i + 1);
        }
    }
    assert_eq!(blocks, want_rows, "the row bytes in docs/seals.md");
    assert_eq!(roots, c.roots, "the roots in docs/seals.md");
    // And the roots are the documented hash of those bytes: SHA-256 over
    // the previous root, then the rows table by table in name order.
    let row = |l: &str| c.rows.iter().find(|(x, _)| x == l).expect(l).1.clone();
    let mut h1 = Hasher::new(Some(&canonical::ZERO));
    h1.push(&row("events 1"));
    h1.push(&row("task_comment_cursors 1"));
    let r1 = h1.finish();
    assert_eq!(canonical::hex(&r1), c.roots[0]);
    let mut h2 = Hasher::new(Some(&r1));
    h2.push(&row("events 2"));
    assert_eq!(canonical::hex(&h2.finish()), c.roots[1]);
    assert_eq!(c.seals[1].prev, r1);
    assert_eq!(c.seals[1].upto["events"], 2);
    assert_eq!(c.seals[1].upto["task_comment_cursors"], 1);
}
