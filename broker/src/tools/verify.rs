//! `mosaic-bus verify --data-root DIR [--anchor SEQ:ROOT]...`: recomputes
//! every seal from the store's rows, offline and read-only, on a live
//! broker's root or on a backup (`docs/seals.md`, "Checking a store").
//!
//! Output: one JSON object per line: a finding, or an `unsealed` range
//! (not an error), then the summary. Exit 0 when every seal and anchor
//! matches, 1 with findings, 2 when there is nothing to check
//! (`{"error":CODE}` on stderr).

use crate::error::Code;
use crate::store::canonical::{self, Digest32};
use crate::store::root::{BUS_DIR, DB_FILE, SEALS_FILE};
use crate::store::schema::SEALED_TABLES;
use crate::store::seals::SealsDb;
use crate::store::seals::{self, Seal, Upto};
use crate::store::Db;
use crate::store::{self as st};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// A seal's `seq` and `root` kept outside the data root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    pub root: Digest32,
}

impl Anchor {
    /// `SEQ:ROOT`: a positive decimal integer (no sign, no leading zero)
    /// and 64 hex digits.
    pub fn parse(s: &str) -> Option<Anchor> {
        let (seq, root) = s.split_once(':')?;
        let digits = !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit());
        if !digits || seq.starts_with('0') {
            return None;
        }
        let seq: i64 = seq.parse().ok()?;
        let root = canonical::from_hex(&root.to_ascii_lowercase())?;
        Some(Anchor { seq, root })
    }
}

/// What a check found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Findings and unsealed ranges, in the order printed.
    pub lines: Vec<Value>,
    /// How many of `lines` are findings.
    pub findings: usize,
    pub seals: i64,
    pub rows: u64,
    pub unsealed: i64,
    /// The newest seal's `seq` and root, if any.
    pub newest: Option<(i64, Digest32)>,
}

impl Report {
    fn finding(&mut self, v: Value) {
        self.findings += 1;
        self.lines.push(v);
    }

    /// The summary line.
    pub fn summary(&self, anchors: usize) -> Value {
        json!({
            "ok": self.findings == 0,
            "seals": self.seals,
            "rows": self.rows,
            "unsealed": self.unsealed,
            "anchors": anchors,
            "findings": self.findings,
            "newest": self.newest.map(|(seq, root)| json!({"seq": seq, "root": canonical::hex(&root)})),
        })
    }
}

/// Checks the store and seals under `data_root`. `Err` is exit 2.
pub fn verify(data_root: &Path, anchors: &[Anchor]) -> Result<Report, Code> {
    let bus = data_root.join(BUS_DIR);
    let store = st::open_for_tools(&bus.join(DB_FILE))?;
    let store_id = st::store_id(&store)?;
    let seals_conn = seals::open_read(&bus.join(SEALS_FILE))?;
    seals::quick_check(&seals_conn)?;
    match &store_id {
        Some(id) => seals::check_file(&seals_conn, Some(id))?,
        // A store no sealing broker opened has no id: no seals file can be its.
        None => {
            seals::check_file(&seals_conn, None)?;
            return Err(Code::SealsForeign);
        }
    }
    let mut report = Report::default();
    if !st::schema_is_pinned(&store)? {
        report.finding(json!({"finding": "schema-changed", "detail":
            "the schema differs from the pinned one: a trigger, table, view or index was changed"}));
    }
    // The seals' snapshot first, then the store's: every row a seal
    // covers was committed before it, so it is in the store's snapshot.
    seals_conn.begin_read()?;
    let r =
        seals::begin_read(&store).and_then(|()| check(&store, &seals_conn, anchors, &mut report));
    seals::end_read(&store);
    seals_conn.end_read();
    r?;
    Ok(report)
}

fn check(
    store: &Db,
    seals_conn: &SealsDb,
    anchors: &[Anchor],
    report: &mut Report,
) -> Result<(), Code> {
    let mut wanted: BTreeMap<i64, Vec<&Anchor>> = BTreeMap::new();
    for a in anchors {
        wanted.entry(a.seq).or_default().push(a);
    }
    let mut prev_root = canonical::ZERO;
    let mut prev_seq = 0i64;
    let mut prev_upto: Upto = BTreeMap::new();
    seals::each(seals_conn, &mut |seal: Seal| {
        if seal.seq != prev_seq + 1 || seal.prev != prev_root {
            report.finding(json!({"finding": "chain-broken", "seal": seal.seq,
                "detail": "its seq or prev does not follow the seal before it"}));
        }
        let went_down: Vec<&str> = prev_upto
            .iter()
            .filter(|(t, u)| seal.upto.get(*t).copied().unwrap_or(0) < **u)
            .map(|(t, _)| t.as_str())
            .collect();
        for t in went_down {
            report.finding(
                json!({"finding": "chain-broken", "seal": seal.seq, "table": t,
                "detail": "its upto is lower than the seal before it"}),
            );
        }
        check_seal(store, &seal, &prev_upto, report)?;
        if let Some(list) = wanted.remove(&seal.seq) {
            for a in list {
                if a.root != seal.root {
                    report.finding(anchor_finding(a, Some(&seal.root)));
                }
            }
        }
        report.seals += 1;
        report.newest = Some((seal.seq, seal.root));
        prev_root = seal.root;
        prev_seq = seal.seq;
        prev_upto = seal.upto;
        Ok(())
    })?;
    for a in wanted.values().flatten() {
        report.finding(anchor_finding(a, None));
    }
    // What no seal covers yet: reported, not an error.
    let heads = seals::table_heads(store)?;
    for t in SEALED_TABLES {
        let head = heads.get(*t).copied().unwrap_or(0);
        let lo = seals::lower_bound(&prev_upto, t).max(1);
        if head >= lo {
            report.unsealed += head - lo + 1;
            report
                .lines
                .push(json!({"unsealed": t, "from": lo, "to": head}));
        }
    }
    Ok(())
}

fn anchor_finding(a: &Anchor, found: Option<&Digest32>) -> Value {
    json!({"finding": "anchor", "seq": a.seq, "expected": canonical::hex(&a.root),
        "found": found.map(canonical::hex)})
}

/// Recomputes one seal's root from its own `prev`; when it differs, names
/// the tables whose rows differ from the seal's per-table digests.
fn check_seal(store: &Db, seal: &Seal, prev_upto: &Upto, report: &mut Report) -> Result<(), Code> {
    let ranges: Vec<(&str, i64, i64)> = SEALED_TABLES
        .iter()
        .filter_map(|t| seal.range(prev_upto, t).map(|(lo, hi)| (*t, lo, hi)))
        .collect();
    let hashed = seals::hash_ranges(store, &seal.prev, &ranges, false)?;
    report.rows += hashed.rows;
    if hashed.root == seal.root {
        return Ok(());
    }
    let again = seals::hash_ranges(store, &seal.prev, &ranges, true)?;
    let mut named = false;
    for &(t, lo, hi) in &ranges {
        if again.tables.get(t) != seal.tables.get(t) {
            named = true;
            // The first seal has no lower bound: name the lowest row there.
            let from = if lo == i64::MIN {
                seals::min_seq(store, t)?.map_or(1, |m| m.min(1))
            } else {
                lo
            };
            report.finding(
                json!({"finding": "rows-differ", "seal": seal.seq, "table": t,
                "from": from, "to": hi}),
            );
        }
    }
    if !named {
        report.finding(json!({"finding": "seal-root", "seal": seal.seq,
            "detail": "the seal's root is not the hash of its rows, which match its table digests"}));
    }
    Ok(())
}
