//! Usage records (schema 3i) on a real SQLite store: the writer, the replay
//! lookups, the database's own guards, and the `usage` read's sums over
//! rows written through `append_usage_record`.

mod common;

use mosaic_bus::error::Code;
use mosaic_bus::policy::usage::{aggregate, Reading, Tokens};
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::usage::{
    append_usage_record, each_usage_reading, usage_baseline, usage_outcome, Kind, NewReading,
    NewUsageRecord, UsageRecord,
};
use mosaic_bus::store::Store;
use rusqlite::Connection;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// A new store holding messages `m1`..`m4` (the turns a run can answer).
fn fresh() -> (tempfile::TempDir, BusDir, PathBuf) {
    let (d, bus) = common::private_bus();
    let db = bus.db_path();
    let mut s = Store::open(&db).unwrap();
    s.write(|t| {
        for id in ["m1", "m2", "m3", "m4"] {
            let at = t.now();
            t.db().sql().execute(
                "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
                 VALUES (?1, 'acme', 'pm', 'run-pm', 'cto', 'INFO', 'hi', ?2)",
                [id, at.as_str()],
            )
            .map_err(|_| Code::StorageUnavailable)?;
        }
        Ok(())
    })
    .unwrap();
    (d, bus, db)
}

fn baseline() -> Map<String, Value> {
    let Value::Object(m) = json!({"file": "9f86d081", "bytes": 120, "sha256": "ab12"}) else {
        unreachable!()
    };
    m
}

fn rec<'a>(run: &'a str, turn: &'a str, reading: NewReading<'a>) -> NewUsageRecord<'a> {
    NewUsageRecord {
        business: "acme",
        run,
        role: "cto",
        turn,
        source: "claude-code",
        provider: Some("anthropic"),
        model: Some("claude-opus"),
        account: Some("work"),
        reading,
    }
}

fn append(s: &mut Store, r: &NewUsageRecord<'_>) -> Result<UsageRecord, Code> {
    s.write(|t| append_usage_record(t, r))
}

/// The business's readings, as the `usage` read gets them.
fn readings(s: &Store) -> Vec<Reading> {
    let mut out = Vec::new();
    each_usage_reading(s.db(), "acme", &mut |r| out.push(r.clone())).unwrap();
    out
}

fn tokens(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Tokens {
    Tokens {
        input,
        output,
        cache_write,
        cache_read,
    }
}

#[test]
fn each_kind_is_appended_with_the_clock_and_found_again_by_run_source_and_turn() {
    let (_d, _bus, db) = fresh();
    let mut s = Store::open(&db).unwrap();
    let b = baseline();
    let base = append(&mut s, &rec("run-1", "m1", NewReading::Baseline(&b))).unwrap();
    assert_eq!(base.kind, Kind::Baseline(b.clone()));
    assert_eq!(base.account.as_deref(), Some("work"));
    let known = append(
        &mut s,
        &rec("run-1", "m1", NewReading::Known(tokens(10, 20, 30, 40))),
    )
    .unwrap();
    assert!(known.seq > base.seq && known.at > base.at);
    let unknown = append(
        &mut s,
        &rec("run-1", "m2", NewReading::Unknown("usage-parse-failed")),
    )
    .unwrap();
    assert_eq!(unknown.kind, Kind::Unknown("usage-parse-failed".into()));

    let c = s.db();
    assert_eq!(
        usage_baseline(c, "run-1", "claude-code", "m1").unwrap(),
        Some(base)
    );
    assert_eq!(
        usage_outcome(c, "run-1", "claude-code", "m1").unwrap(),
        Some(known)
    );
    assert_eq!(
        usage_outcome(c, "run-1", "claude-code", "m2").unwrap(),
        Some(unknown)
    );
    assert_eq!(
        usage_baseline(c, "run-1", "claude-code", "m2").unwrap(),
        None
    );
    assert_eq!(usage_outcome(c, "run-1", "pi", "m1").unwrap(), None);
    assert_eq!(
        usage_outcome(c, "run-2", "claude-code", "m1").unwrap(),
        None
    );
    drop(s);
    // The rows pass the open-time checks (every `at` canonical and increasing).
    Store::open(&db).expect("reopens");
}

#[test]
fn a_second_baseline_or_outcome_for_a_turn_is_refused_and_changes_nothing() {
    let (_d, _bus, db) = fresh();
    let mut s = Store::open(&db).unwrap();
    let b = baseline();
    append(&mut s, &rec("run-1", "m1", NewReading::Baseline(&b))).unwrap();
    append(
        &mut s,
        &rec("run-1", "m1", NewReading::Known(tokens(1, 1, 1, 1))),
    )
    .unwrap();
    let count = |s: &Store| -> i64 {
        s.db()
            .sql()
            .query_row("SELECT count(*) FROM usage_records", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(
        append(&mut s, &rec("run-1", "m1", NewReading::Baseline(&b))),
        Err(Code::StorageUnavailable)
    );
    // An unknown outcome after a known one is a second outcome too.
    assert_eq!(
        append(
            &mut s,
            &rec("run-1", "m1", NewReading::Unknown("usage-turn-incomplete"))
        ),
        Err(Code::StorageUnavailable)
    );
    assert_eq!(count(&s), 2);
    // Another source, or another run, answering the same message is its own reading.
    let mut other = rec("run-1", "m1", NewReading::Known(tokens(2, 2, 2, 2)));
    other.source = "pi";
    append(&mut s, &other).unwrap();
    append(
        &mut s,
        &rec("run-2", "m1", NewReading::Known(tokens(3, 3, 3, 3))),
    )
    .unwrap();
    assert_eq!(count(&s), 4);
}

#[test]
fn the_database_refuses_malformed_rows_and_edits() {
    let (_d, _bus, db) = fresh();
    {
        let mut s = Store::open(&db).unwrap();
        let b = baseline();
        append(&mut s, &rec("run-1", "m1", NewReading::Baseline(&b))).unwrap();
        // A turn that is no message refuses (foreign key).
        assert_eq!(
            append(
                &mut s,
                &rec("run-1", "nope", NewReading::Known(tokens(1, 1, 1, 1)))
            ),
            Err(Code::StorageUnavailable)
        );
        // A count SQLite can't hold is refused before the insert.
        assert_eq!(
            append(
                &mut s,
                &rec("run-1", "m2", NewReading::Known(tokens(u64::MAX, 0, 0, 0)))
            ),
            Err(Code::InvalidRequest)
        );
        // An account past 256 characters.
        let long = "a".repeat(257);
        let mut r = rec("run-1", "m2", NewReading::Known(tokens(1, 1, 1, 1)));
        r.account = Some(&long);
        assert_eq!(append(&mut s, &r), Err(Code::StorageUnavailable));
    }
    let c = Connection::open(&db).unwrap();
    let insert = |sql: &str| c.execute_batch(sql).map_err(|e| e.to_string());
    let at = "'2099-01-01T00:00:00.000Z'";
    for bad in [
        // known without all four counts
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, input, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'known', 1, {at})"
        ),
        // a negative count
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind,
                   input, output, cache_write, cache_read, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'known', -1, 0, 0, 0, {at})"
        ),
        // a count stored as text
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind,
                   input, output, cache_write, cache_read, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'known', '1x', 0, 0, 0, {at})"
        ),
        // unknown without a code, baseline that is no object, a kind outside the three
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'unknown', {at})"
        ),
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, baseline, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'baseline', '[1]', {at})"
        ),
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, code, at)
                 VALUES ('acme', 'r', 'cto', 'm3', 's', 'other', 'x', {at})"
        ),
        // an empty source
        format!(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, code, at)
                 VALUES ('acme', 'r', 'cto', 'm3', '', 'unknown', 'x', {at})"
        ),
    ] {
        assert!(insert(&bad).is_err(), "{bad}");
    }
    for edit in [
        "UPDATE usage_records SET run = 'x'",
        "DELETE FROM usage_records",
    ] {
        let e = insert(edit).expect_err(edit);
        assert!(e.contains("append-only"), "{edit}: {e}");
    }
    let n: i64 = c
        .query_row("SELECT count(*) FROM usage_records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

/// The read's rows: outcomes and pending baselines only; sums past 2^53 and
/// past 2^63 exact, as strings; unknown and pending turns counted once each.
#[test]
fn readings_sum_exactly_and_count_pending_and_unknown_turns() {
    let (_d, _bus, db) = fresh();
    let mut s = Store::open(&db).unwrap();
    let b = baseline();
    let big = i64::MAX as u64;
    // run-1: m1 known (baseline then outcome), m2 known, m3 unknown.
    append(&mut s, &rec("run-1", "m1", NewReading::Baseline(&b))).unwrap();
    append(
        &mut s,
        &rec("run-1", "m1", NewReading::Known(tokens(1 << 52, big, 7, 0))),
    )
    .unwrap();
    append(
        &mut s,
        &rec("run-1", "m2", NewReading::Known(tokens(1 << 52, big, 0, 0))),
    )
    .unwrap();
    append(
        &mut s,
        &rec("run-1", "m3", NewReading::Unknown("usage-source-failed")),
    )
    .unwrap();
    // run-2 (no account, another model): m1 pending (baseline only), m4 known.
    let mut pending = rec("run-2", "m1", NewReading::Baseline(&b));
    pending.account = None;
    pending.provider = None;
    pending.model = None;
    append(&mut s, &pending).unwrap();
    let mut r2 = rec("run-2", "m4", NewReading::Known(tokens(1, 1, 1, 1)));
    r2.account = None;
    r2.model = Some("claude-sonnet");
    append(&mut s, &r2).unwrap();
    // Another business's rows never count here.
    let mut beta = rec("run-9", "m4", NewReading::Known(tokens(1000, 0, 0, 0)));
    beta.business = "beta";
    append(&mut s, &beta).unwrap();

    let rows = readings(&s);
    assert_eq!(rows.len(), 5, "the answered baseline is not a reading");
    let v = aggregate(&rows).to_json();
    assert_eq!(
        v["total"],
        json!({"input": "9007199254740993", "output": "18446744073709551615",
               "cacheWrite": 8, "cacheRead": 1, "unknownTurns": 2})
    );
    assert_eq!(
        v["byRun"],
        json!([
            {"run": "run-1", "input": "9007199254740992", "output": "18446744073709551614",
             "cacheWrite": 7, "cacheRead": 0, "unknownTurns": 1},
            {"run": "run-2", "input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1,
             "unknownTurns": 1},
        ])
    );
    assert_eq!(
        v["byAccount"],
        json!([
            {"account": null, "input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1,
             "unknownTurns": 1},
            {"account": "work", "input": "9007199254740992", "output": "18446744073709551614",
             "cacheWrite": 7, "cacheRead": 0, "unknownTurns": 1},
        ])
    );
    assert_eq!(
        v["byModel"],
        json!([
            {"model": null, "input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0,
             "unknownTurns": 1},
            {"model": "claude-opus", "input": "9007199254740992",
             "output": "18446744073709551614", "cacheWrite": 7, "cacheRead": 0,
             "unknownTurns": 1},
            {"model": "claude-sonnet", "input": 1, "output": 1, "cacheWrite": 1,
             "cacheRead": 1, "unknownTurns": 0},
        ])
    );
    assert_eq!(
        v["byInstance"],
        json!([{"instance": "cto", "input": "9007199254740993",
                "output": "18446744073709551615", "cacheWrite": 8, "cacheRead": 1,
                "unknownTurns": 2}])
    );
    // The pending turn's end arrives: it is no longer unknown.
    append(
        &mut s,
        &rec("run-2", "m1", NewReading::Known(tokens(0, 0, 0, 0))),
    )
    .unwrap();
    let v = aggregate(&readings(&s)).to_json();
    assert_eq!(v["total"]["unknownTurns"], json!(1));
}
