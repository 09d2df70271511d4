//! The `usage` read (3i rows 124, 126; issue 24) through the real broker:
//! who may read it, its shape, and that it is scoped to the caller's
//! business and writes nothing. The sums themselves over turns recorded by
//! `usage.begin`/`usage.end` are `tests/tests/usage.rs`'s.

use mosaic_bus::client::Client;
use mosaic_bus::views::views;
use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

fn zero() -> Value {
    json!({"input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0, "unknownTurns": 0})
}

fn empty() -> Value {
    json!({
        "total": zero(),
        "byRun": [], "byInstance": [], "byProvider": [], "byModel": [], "byAccount": [],
    })
}

/// The human, a reader and a held role read it; a role whose run doesn't
/// hold its role gets `not-holder`, the tester `tester-refused`, and
/// arguments `invalid-request`. A store with no readings answers zero
/// totals and empty groups, and the read writes nothing.
#[test]
fn the_human_readers_and_a_held_role_read_usage_and_nobody_else() {
    let dir = data_root();
    let root = dir.path();
    let mut b = Broker::start(root);
    let procs: Vec<Sleeper> = (0..2).map(|_| sleeper()).collect();
    let pm = b.bind("pm", "pm-1", procs[0].id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let cto = b.bind("cto", "cto-1", procs[1].id());
    let human = ShimSession::human(&b);
    let tester = ShimSession::tester(&b);
    let reader = b.reader_cap();

    let before = row_counts(root);
    assert_eq!(res(&b.call(&pm, "usage", Value::Null)), &empty());
    assert_eq!(res(&b.call(&reader, "usage", Value::Null)), &empty());
    assert_eq!(res(&human.call("usage", Value::Null)), &empty());
    let client = Client::new(&b.socket, reader.clone());
    assert_eq!(views(&client).usage().expect("the view"), empty());
    assert_eq!(row_counts(root), before, "a read writes nothing");

    // A bound run that has not claimed its role holds nothing.
    assert_eq!(err(&b.call(&cto, "usage", Value::Null)), "not-holder");
    assert_eq!(err(&tester.call("usage", Value::Null)), "tester-refused");
    assert_eq!(
        err(&b.call(&reader, "usage", json!({"run": "pm-1"}))),
        "invalid-request"
    );
    assert_eq!(
        views(&Client::new(&b.socket, cto))
            .usage()
            .unwrap_err()
            .code,
        "not-holder"
    );
    b.close();
}

/// Two businesses, each with a dev run on Claude Code and a reader.
fn two_businesses(root: &Path) -> Value {
    let dev = json!({"definition": "dev", "authority": {"withinRole": ["message.send"], "crossRole": []}});
    let biz = |id: &str| {
        json!({"id": id, "human": "Ada", "arbiters": {"technical": "dev", "delivery": "dev"},
               "roles": {"dev": dev.clone(), "pm": dev.clone()}})
    };
    json!({
        "dataRoot": root.to_str().expect("utf-8"),
        "businesses": {"acme": biz("acme"), "beta": biz("beta")},
        "readers": ["acme", "beta"],
    })
}

/// One Claude Code reply line, as the harness writes it.
fn reply_line(id: &str, input: u64, output: u64) -> String {
    json!({"type": "assistant", "sessionId": "s", "message": {
        "id": id, "model": "claude-opus-4", "role": "assistant", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "done"}],
        "usage": {"input_tokens": input, "output_tokens": output,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
    .to_string()
}

/// Binds `business`'s dev on Claude Code with `transcript` and `account`,
/// claims it, has its pm send it a message, and records that turn through
/// `usage.begin`/`usage.end` with one reply of `input`/`output` tokens.
/// Returns the dev's capability.
fn one_turn(
    b: &mut Broker,
    business: &str,
    transcript: &Path,
    account: &str,
    input: u64,
    output: u64,
    procs: &mut Vec<Sleeper>,
) -> String {
    let mut bind = |role: &str, run: &str, extra: Value| {
        let p = sleeper();
        let mut rec = json!({"business": business, "role": role, "run": run,
                             "harness": "claude-code", "pid": p.id(),
                             "startTime": start_time(p.id())});
        if let (Value::Object(r), Value::Object(x)) = (&mut rec, extra) {
            r.extend(x);
        }
        procs.push(p);
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        assert_eq!(r["ok"], json!(true), "bind: {r}");
        let cap = r["launch"]["cap"].as_str().expect("cap").to_string();
        res(&b.call(&cap, "role.claim", Value::Null));
        cap
    };
    let dev = bind(
        "dev",
        &format!("{business}-dev"),
        json!({"transcript": transcript.to_str().expect("utf-8"), "account": account}),
    );
    let pm = bind("pm", &format!("{business}-pm"), json!({}));
    let sent = res(&b.call(&pm, "message.send", json!({"to": "dev", "body": "go"}))).clone();
    res(&b.call(&dev, "message.receive", Value::Null));
    let turn = sent["id"].as_str().expect("id");
    std::fs::write(transcript, "").expect("transcript");
    res(&b.call(&dev, "usage.begin", json!({"turn": turn})));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(transcript)
        .expect("open");
    writeln!(f, "{}", reply_line(&format!("{business}-m"), input, output)).expect("append");
    let end = res(&b.call(&dev, "usage.end", json!({"turn": turn}))).clone();
    assert_eq!(end["outcomes"][0]["known"], json!(true), "{end}");
    dev
}

/// Each business sees only its own readings, whoever reads (its reader,
/// its human, its held role); a role that released its claim reads nothing.
#[test]
fn each_business_reads_only_its_own_usage() {
    let dir = data_root();
    let root = dir.path();
    let files = tempfile::tempdir().expect("tempdir");
    let (mut b, boot) = Broker::spawn(root, two_businesses(root));
    assert_eq!(boot["ok"], json!(true), "boot: {boot}");
    let mut procs = Vec::new();
    let acme_dev = one_turn(
        &mut b,
        "acme",
        &files.path().join("acme.jsonl"),
        "acct-acme",
        11,
        22,
        &mut procs,
    );
    let beta_dev = one_turn(
        &mut b,
        "beta",
        &files.path().join("beta.jsonl"),
        "acct-beta",
        1000,
        2000,
        &mut procs,
    );
    let reader = |business: &str| -> String {
        boot["readers"]
            .as_array()
            .expect("readers")
            .iter()
            .find(|r| r["business"] == json!(business))
            .and_then(|r| r["cap"].as_str())
            .expect("a reader")
            .to_string()
    };
    let only = |business: &str, account: &str, input: u64, output: u64| {
        let sums = json!({"input": input, "output": output, "cacheWrite": 0, "cacheRead": 0,
                          "unknownTurns": 0});
        let keyed = |k: &str, v: Value| {
            let mut m = json!({k: v});
            if let (Value::Object(m), Value::Object(s)) = (&mut m, sums.clone()) {
                m.extend(s);
            }
            json!([m])
        };
        json!({
            "total": sums,
            "byRun": keyed("run", json!(format!("{business}-dev"))),
            "byInstance": keyed("instance", json!("dev")),
            "byProvider": keyed("provider", json!("anthropic")),
            "byModel": keyed("model", json!("claude-opus-4")),
            "byAccount": keyed("account", json!(account)),
        })
    };
    let acme = only("acme", "acct-acme", 11, 22);
    let beta = only("beta", "acct-beta", 1000, 2000);
    assert_eq!(res(&b.call(&reader("acme"), "usage", Value::Null)), &acme);
    assert_eq!(res(&b.call(&acme_dev, "usage", Value::Null)), &acme);
    assert_eq!(
        res(&ShimSession::human(&b).call("usage", Value::Null)),
        &acme
    );
    assert_eq!(res(&b.call(&reader("beta"), "usage", Value::Null)), &beta);
    assert_eq!(res(&b.call(&beta_dev, "usage", Value::Null)), &beta);
    // A released role no longer holds it.
    res(&b.call(&beta_dev, "role.release", Value::Null));
    assert_eq!(err(&b.call(&beta_dev, "usage", Value::Null)), "not-holder");
    b.close();
}
