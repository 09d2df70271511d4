//! `mosaic-bus export --data-root DIR [--after CURSOR] [--follow]`: every
//! evidence row as one JSON line, in commit order, for log shippers
//! (docs/operations.md, "Shipping the evidence").
//!
//! A line is `{"table","seq","seal","cursor","row"}`: `seal` is the `seq` of
//! the seal that covers the row (null while none does yet), `cursor` is
//! where the export stands after this row (give it to `--after` to resume
//! with the next row), `row` the row's columns.
//!
//! Order: the rows each seal added, seal by seal, then the rows no seal
//! covers yet; within each of those groups by the broker's timestamp `at`,
//! which strictly increases across every row it writes (a row without one,
//! `task_comment_cursors`, after the rest of its group). Rows one seal
//! covers were all committed before any row the next one adds, so the
//! whole stream is in commit order.
//!
//! The cursor is the highest `seq` exported per table (`table:seq,...`,
//! tables in name order, those with none left out): each table's rows are
//! exported in `seq` order, so resuming after it gives every later row
//! exactly once. Every read is one WAL read transaction, which never
//! blocks the broker's writer; `--follow` reads again whenever either file
//! changed (checked every 200 ms).

use crate::error::Code;
use crate::store::root::{BUS_DIR, DB_FILE, SEALS_FILE};
use crate::store::schema::SEALED_TABLES;
use crate::store::seals::SealsDb;
use crate::store::seals::{self, Upto};
use crate::store::Db;
use crate::store::{self as st, export};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// How often `--follow` looks for new rows.
pub const POLL: Duration = Duration::from_millis(200);

/// Where an export stands: the highest `seq` exported per table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor(BTreeMap<&'static str, i64>);

impl Cursor {
    /// Parses a cursor `export` printed (`export-cursor` otherwise).
    pub fn parse(s: &str) -> Result<Cursor, Code> {
        let mut m = BTreeMap::new();
        for part in s.split(',') {
            let (t, n) = part.split_once(':').ok_or(Code::ExportCursor)?;
            let table = SEALED_TABLES
                .iter()
                .find(|x| **x == t)
                .ok_or(Code::ExportCursor)?;
            let digits = !n.is_empty()
                && n.bytes()
                    .enumerate()
                    .all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'));
            let n: i64 = if digits {
                n.parse().map_err(|_| Code::ExportCursor)?
            } else {
                return Err(Code::ExportCursor);
            };
            if m.insert(*table, n).is_some() {
                return Err(Code::ExportCursor);
            }
        }
        Ok(Cursor(m))
    }

    /// The printed form.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (t, n) in &self.0 {
            if !s.is_empty() {
                s.push(',');
            }
            s.push_str(t);
            s.push(':');
            s.push_str(&n.to_string());
        }
        s
    }

    /// The first `seq` of `table` not exported yet, given the range's own
    /// lower bound.
    fn from(&self, table: &str, lo: i64) -> i64 {
        self.0
            .get(table)
            .map_or(lo, |n| lo.max(n.saturating_add(1)))
    }
}

/// A running export: its two read connections and where it stands.
pub struct Export {
    store: Db,
    seals: SealsDb,
    cursor: Cursor,
    /// The last seal whose rows were all exported, and its `upto`.
    seal_done: i64,
    upto_done: Upto,
    seen: (Option<i64>, Option<i64>),
}

impl Export {
    /// Opens the store and its seals under `data_root`, to export after
    /// `cursor`.
    pub fn open(data_root: &Path, cursor: Cursor) -> Result<Export, Code> {
        let bus = data_root.join(BUS_DIR);
        let store = st::open_for_tools(&bus.join(DB_FILE))?;
        let seals_conn = seals::open_read(&bus.join(SEALS_FILE))?;
        let id = st::store_id(&store)?.ok_or(Code::SealsForeign)?;
        seals::check_file(&seals_conn, Some(&id))?;
        Ok(Export {
            store,
            seals: seals_conn,
            cursor,
            seal_done: 0,
            upto_done: BTreeMap::new(),
            seen: (None, None),
        })
    }

    /// Whether either file changed since the last pass.
    pub fn changed(&self) -> bool {
        let now = (seals::data_version(&self.store), self.seals.data_version());
        now.0.is_none() || now != self.seen
    }

    /// One pass: writes every row not exported yet, in order. Returns how
    /// many, or `None` when `out` is gone.
    pub fn pass(&mut self, out: &mut dyn Write) -> Result<Option<u64>, Code> {
        self.seen = (seals::data_version(&self.store), self.seals.data_version());
        self.seals.begin_read()?;
        let r = seals::begin_read(&self.store).and_then(|()| self.in_snapshot(out));
        seals::end_read(&self.store);
        self.seals.end_read();
        r
    }

    fn in_snapshot(&mut self, out: &mut dyn Write) -> Result<Option<u64>, Code> {
        let mut n = 0u64;
        let mut batch = seals::after(&self.seals, self.seal_done, 1000)?;
        while !batch.is_empty() {
            for seal in std::mem::take(&mut batch) {
                let ranges = self.ranges(|t, prev| seal.range(prev, t));
                match self.emit(&ranges, Some(seal.seq), out)? {
                    Some(k) => n += k,
                    None => return Ok(None),
                }
                self.seal_done = seal.seq;
                self.upto_done = seal.upto;
            }
            batch = seals::after(&self.seals, self.seal_done, 1000)?;
        }
        // What no seal covers yet.
        let heads = seals::table_heads(&self.store)?;
        let ranges = self.ranges(|t, prev| {
            let lo = seals::lower_bound(prev, t);
            let hi = heads.get(t).copied().unwrap_or(0);
            (hi >= lo).then_some((lo, hi))
        });
        match self.emit(&ranges, None, out)? {
            Some(k) => n += k,
            None => return Ok(None),
        }
        Ok(Some(n))
    }

    /// Each table's range after the seals done, less what the cursor says
    /// is exported.
    fn ranges(
        &self,
        range: impl Fn(&str, &Upto) -> Option<(i64, i64)>,
    ) -> Vec<(&'static str, i64, i64)> {
        SEALED_TABLES
            .iter()
            .filter_map(|t| {
                let (lo, hi) = range(t, &self.upto_done)?;
                let lo = self.cursor.from(t, lo);
                (hi >= lo).then_some((*t, lo, hi))
            })
            .collect()
    }

    fn emit(
        &mut self,
        ranges: &[(&'static str, i64, i64)],
        seal: Option<i64>,
        out: &mut dyn Write,
    ) -> Result<Option<u64>, Code> {
        if ranges.is_empty() {
            return Ok(Some(0));
        }
        let mut gone = false;
        let cursor = &mut self.cursor;
        let n = export::each_in_order(&self.store, ranges, &mut |row| {
            cursor.0.insert(row.table, row.seq);
            let line = json!({
                "table": row.table,
                "seq": row.seq,
                "seal": seal,
                "cursor": cursor.to_text(),
                "row": Value::Object(row.to_object()),
            });
            let ok =
                serde_json::to_writer(&mut *out, &line).is_ok() && out.write_all(b"\n").is_ok();
            gone = !ok;
            ok
        })?;
        Ok((!gone).then_some(n))
    }
}

/// Runs an export to `out`: one pass, or with `follow` until `out` is gone.
pub fn run(
    data_root: &Path,
    after: Option<&str>,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), Code> {
    let cursor = match after {
        Some(s) => Cursor::parse(s)?,
        None => Cursor::default(),
    };
    let mut ex = Export::open(data_root, cursor)?;
    loop {
        let wrote = ex.pass(out)?;
        if wrote.is_none() || out.flush().is_err() {
            return Ok(());
        }
        if !follow {
            return Ok(());
        }
        std::thread::sleep(POLL);
        while !ex.changed() {
            std::thread::sleep(POLL);
        }
    }
}
