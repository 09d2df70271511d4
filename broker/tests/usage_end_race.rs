//! `usage.end`'s writer-side finish when two calls raced (issue 31): a real
//! `Core` on a real store, the staged verb's two halves called as the
//! server calls them (`handlers::prepare_staged`, the slow part, then
//! `handlers::finish_staged`), with the window between them held open by the
//! test itself rather than by timing.

mod common;

use common::Inproc;
use mosaic_bus::budget::Budget;
use mosaic_bus::config::LaunchRecord;
use mosaic_bus::core::Caller;
use mosaic_bus::handlers::{finish_staged, prepare_staged, Prepared};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::Path;

fn role(r: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("run-{r}"),
    }
}

fn args(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// A Claude Code reply that ends the turn, `input` tokens in.
fn reply(id: &str, input: u64) -> String {
    json!({"type": "assistant", "message": {"id": id, "model": "m", "stop_reason": "end_turn",
           "content": [{"type": "text"}], "usage": {"input_tokens": input, "output_tokens": 1}}})
    .to_string()
}

fn append(p: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .expect("open");
    writeln!(f, "{line}").expect("write");
}

/// A `usage.end` prepared on the writer side.
fn prepared(e: &mut Inproc, dev: &Caller, turn: &str) -> Prepared {
    match prepare_staged(&mut e.core, dev, "usage.end", args(json!({"turn": turn}))) {
        Ok(p) => p,
        Err(c) => panic!("prepare: {c}"),
    }
}

#[test]
fn an_end_that_lost_the_race_answers_the_record_the_winner_wrote() {
    let files = tempfile::tempdir().expect("tempdir");
    let t = files.path().join("s.jsonl");
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    let mut e = Inproc::boot(json!({"businesses": {"acme": {
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {"pm": {"authority": send}, "dev": {"authority": send}}
    }}}));
    let rec = LaunchRecord::from_json(json!({
        "business": "acme", "role": "dev", "run": "run-dev", "harness": "claude-code",
        "pid": std::process::id(), "startTime": 1, "transcript": t.to_str().expect("utf-8")}))
    .expect("record");
    e.core.bind_run(rec);
    let (pm, dev) = (role("pm"), role("dev"));
    e.ok(&pm, "role.claim", Value::Null);
    e.ok(&dev, "role.claim", Value::Null);
    let sent = e.ok(&pm, "message.send", json!({"to": "dev", "body": "go"}));
    let turn = sent["id"].as_str().expect("id").to_string();
    e.ok(&dev, "message.receive", Value::Null);
    e.ok(&dev, "usage.begin", json!({"turn": turn}));

    // Two ends of the turn, both prepared before either is recorded (as
    // two connections' would be), each reading the transcript as it is
    // when its worker runs: the second sees one more reply.
    append(&t, &reply("msg_01A", 5));
    let mut first = prepared(&mut e, &dev, &turn);
    let mut second = prepared(&mut e, &dev, &turn);
    let first_found = first.run_here(Budget::start());
    append(&t, &reply("msg_01B", 7));
    let second_found = second.run_here(Budget::start());

    let won =
        finish_staged(&mut e.core, &dev, "usage.end", first, first_found).expect("first finish");
    assert_eq!(won["outcomes"][0]["input"], json!(5), "{won}");
    // The loser's reading (12) is not what the turn recorded: it answers
    // the winner's record, and writes nothing.
    let lost =
        finish_staged(&mut e.core, &dev, "usage.end", second, second_found).expect("second finish");
    assert_eq!(lost, won);
    // A later replay says the same.
    assert_eq!(e.ok(&dev, "usage.end", json!({"turn": turn})), won);

    let conn = rusqlite::Connection::open(e.bus.db_path()).expect("db");
    let outcomes: i64 = conn
        .query_row(
            "SELECT count(*) FROM usage_records WHERE turn = ?1 AND kind <> 'baseline'",
            [&turn],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(outcomes, 1);
}
