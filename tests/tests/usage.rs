//! `usage.begin` / `usage.end` on a real broker over the real socket, with
//! real transcript files the tests write: sums over turns, replays charged
//! once, the run's account on each record, and every unknown outcome
//! (absent source, rewritten transcript, unfinished turn, parse failure,
//! missing baseline) recorded with its code and logged without text.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::Write;
#[path = "support/usage_env.rs"]
mod usage_env;
use usage_env::{
    append, baselined, bind_pm_and_dev, cc, cc_user, delivered_turn, known, pi, unknown, Env,
    SECRET,
};

#[test]
fn claude_code_turns_sum_once_each_replay_charges_nothing_and_carry_the_account() {
    let mut e = Env::new();
    let t = e.path("session.jsonl");
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), Some("acct-team"));
    // History before the first turn is not this turn's.
    append(
        &t,
        &[
            cc_user(),
            cc("m0", [1000, 1000, 0, 0], json!("end_turn"), "text"),
        ],
    );

    let t1 = e.turn("dev", &dev);
    assert_eq!(e.begin(&dev, &t1), baselined(&t1, "claude-code"));
    append(
        &t,
        &[
            cc_user(),
            cc("m1", [10, 5, 100, 1000], json!(null), "thinking"),
            cc("m1", [10, 7, 100, 1000], json!("tool_use"), "tool_use"),
            json!({"type": "user", "message": {"content": [{"type": "tool_result", "content": SECRET}]}}),
            cc("m2", [3, 20, 0, 1100], json!("end_turn"), "text"),
        ],
    );
    let want1 = known(
        &t1,
        "claude-code",
        json!("acct-team"),
        "claude-sonnet-4-5",
        "anthropic",
        [json!(13), json!(27), json!(100), json!(2100)],
    );
    assert_eq!(e.end(&dev, &t1), want1);
    // Replays: the recorded results again, nothing more written.
    assert_eq!(e.end(&dev, &t1), want1);
    assert_eq!(e.begin(&dev, &t1), baselined(&t1, "claude-code"));
    let rows = e.records(&t1);
    assert_eq!(rows.len(), 2, "one baseline and one outcome: {rows:#?}");
    assert_eq!(rows[0]["kind"], json!("baseline"));
    assert_eq!(rows[1]["kind"], json!("known"));
    assert_eq!(
        (
            &rows[1]["input"],
            &rows[1]["output"],
            &rows[1]["cacheWrite"],
            &rows[1]["cacheRead"]
        ),
        (&json!(13), &json!(27), &json!(100), &json!(2100))
    );
    for r in &rows {
        assert_eq!(r["account"], json!("acct-team"), "{r}");
    }
    // The baseline holds digests and lengths, no path and no text.
    let base = rows[0]["baseline"].as_str().unwrap();
    assert!(
        !base.contains("session") && !base.contains(SECRET) && !base.contains("/"),
        "{base}"
    );

    // A second turn: begin twice, end twice; charged once.
    let t2 = e.turn("dev", &dev);
    assert_eq!(e.begin(&dev, &t2), baselined(&t2, "claude-code"));
    assert_eq!(e.begin(&dev, &t2), baselined(&t2, "claude-code"));
    append(
        &t,
        &[cc_user(), cc("m3", [1, 2, 3, 4], json!("end_turn"), "text")],
    );
    let want2 = known(
        &t2,
        "claude-code",
        json!("acct-team"),
        "claude-sonnet-4-5",
        "anthropic",
        [json!(1), json!(2), json!(3), json!(4)],
    );
    assert_eq!(e.end(&dev, &t2), want2);
    // Written after the end: not the second turn's.
    append(&t, &[cc("m4", [500, 500, 0, 0], json!("end_turn"), "text")]);
    assert_eq!(e.end(&dev, &t2), want2);
    assert_eq!(e.records(&t2).len(), 2);

    // session.launched never carries the account or the transcript.
    let conn = db(e.root.path());
    let launched: String = conn
        .query_row(
            "SELECT body FROM events WHERE kind = 'session.launched' AND run = 'run-dev'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        !launched.contains("acct-team")
            && !launched.contains("account")
            && !launched.contains("transcript"),
        "{launched}"
    );
    assert!(!e.b.stderr().contains(SECRET));
}

#[test]
fn unknown_turns_are_recorded_once_with_their_code_and_logged_without_text() {
    let mut e = Env::new();
    let t = e.path("cc.jsonl");
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), Some("acct"));
    append(
        &t,
        &[cc_user(), cc("m0", [1, 1, 0, 0], json!("end_turn"), "text")],
    );

    // A rewritten transcript: the history before the turn changed.
    let rewritten = e.turn("dev", &dev);
    e.begin(&dev, &rewritten);
    std::fs::write(&t, "").unwrap();
    append(
        &t,
        &[cc_user(), cc("m1", [9, 9, 0, 0], json!("end_turn"), "text")],
    );
    let want = unknown(&rewritten, "claude-code", "usage-transcript-rewritten");
    assert_eq!(e.end(&dev, &rewritten), want);
    assert_eq!(e.end(&dev, &rewritten), want, "a replay");
    let rows = e.records(&rewritten);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            &rows[1]["kind"],
            &rows[1]["code"],
            &rows[1]["account"],
            &rows[1]["input"]
        ),
        (
            &json!("unknown"),
            &json!("usage-transcript-rewritten"),
            &json!("acct"),
            &json!(null)
        )
    );

    // An unfinished turn: the last reply asks for a tool.
    let open = e.turn("dev", &dev);
    e.begin(&dev, &open);
    append(&t, &[cc("m2", [1, 1, 0, 0], json!("tool_use"), "tool_use")]);
    assert_eq!(
        e.end(&dev, &open),
        unknown(&open, "claude-code", "usage-turn-incomplete")
    );

    // A partial last line.
    let partial = e.turn("dev", &dev);
    e.begin(&dev, &partial);
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
        write!(f, "{{\"type\":\"assistant\",\"message\":{{\"id\":\"m3\"").unwrap();
    }
    assert_eq!(
        e.end(&dev, &partial),
        unknown(&partial, "claude-code", "usage-turn-incomplete")
    );

    // Start the file over so the next turns begin on whole lines.
    std::fs::remove_file(&t).unwrap();
    // An unparseable line.
    let bad = e.turn("dev", &dev);
    e.begin(&dev, &bad);
    append(
        &t,
        &[json!({"type": "assistant", "message": {"id": "m4", "content": SECRET}})],
    );
    assert_eq!(
        e.end(&dev, &bad),
        unknown(&bad, "claude-code", "usage-parse-failed")
    );

    // An end with no begin.
    let unbegun = e.turn("dev", &dev);
    let want = unknown(&unbegun, "claude-code", "usage-baseline-missing");
    assert_eq!(e.end(&dev, &unbegun), want);
    // A begin after the turn settled: nothing is baselined.
    assert_eq!(
        e.begin(&dev, &unbegun),
        json!({"turn": unbegun, "sources": [
        {"source": "claude-code", "baseline": false, "code": "usage-baseline-missing"}]})
    );
    assert_eq!(e.records(&unbegun).len(), 1);

    // A harness with no built-in source: settled at begin.
    let codex = e.run("cto", "run-cto", "codex", Some(&t), None);
    let absent = e.turn("cto", &codex);
    let begun = e.begin(&codex, &absent);
    assert_eq!(
        begun,
        json!({"turn": absent, "sources": [
        {"source": "codex", "baseline": false, "code": "usage-source-absent"}]})
    );
    assert_eq!(e.begin(&codex, &absent), begun);
    assert_eq!(
        e.end(&codex, &absent),
        unknown(&absent, "codex", "usage-source-absent")
    );
    assert_eq!(e.records(&absent).len(), 1);

    // A known source but no transcript in the launch record.
    let pm_turn = {
        let sent = res(&e
            .b
            .call(&codex, "message.send", json!({"to": "pm", "body": "x"})))
        .clone();
        res(&e.b.call(&e.pm, "message.receive", Value::Null));
        sent["id"].as_str().unwrap().to_string()
    };
    // The pm's run was bound with harness pi and no transcript.
    assert_eq!(
        e.begin(&e.pm, &pm_turn)["sources"][0]["code"],
        json!("usage-source-absent")
    );
    assert_eq!(
        e.end(&e.pm, &pm_turn),
        unknown(&pm_turn, "pi", "usage-source-absent")
    );

    // Each unknown outcome is logged once, with its code, never with text.
    let log = e.b.stderr();
    for code in [
        "usage-transcript-rewritten",
        "usage-turn-incomplete",
        "usage-parse-failed",
        "usage-baseline-missing",
        "usage-source-absent",
    ] {
        assert!(log.contains(code), "{code} not logged:\n{log}");
    }
    assert_eq!(
        log.matches("usage-transcript-rewritten").count(),
        1,
        "{log}"
    );
    assert!(!log.contains(SECRET), "{log}");
    assert!(
        !log.contains(t.to_str().unwrap()),
        "the transcript path is not logged"
    );
}

#[test]
fn usage_calls_refuse_what_is_not_the_holder_s_delivered_turn() {
    let mut e = Env::new();
    let t = e.path("s.jsonl");
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), None);
    let cto = e.run("cto", "run-cto", "claude-code", Some(&t), None);
    let turn = e.turn("dev", &dev);
    let call = |cap: &str, verb: &str, args: Value| err(&e.b.call(cap, verb, args)).to_string();
    for verb in ["usage.begin", "usage.end"] {
        assert_eq!(call(&dev, verb, json!({})), "invalid-request");
        assert_eq!(
            call(&dev, verb, json!({"turn": turn, "run": "x"})),
            "invalid-request"
        );
        assert_eq!(call(&dev, verb, json!({"turn": 7})), "invalid-request");
        assert_eq!(
            call(
                &dev,
                verb,
                json!({"turn": "00000000-0000-4000-8000-000000000000"})
            ),
            "message-not-found"
        );
        // Another role's turn.
        assert_eq!(call(&cto, verb, json!({"turn": turn})), "message-not-found");
        assert_eq!(
            call(&e.b.reader_cap(), verb, json!({"turn": turn})),
            "read-only"
        );
    }
    // Sent but not yet received: not delivered.
    let sent = res(&e
        .b
        .call(&e.pm, "message.send", json!({"to": "cto", "body": "later"})))
    .clone();
    let undelivered = sent["id"].as_str().unwrap();
    assert_eq!(
        call(&cto, "usage.begin", json!({"turn": undelivered})),
        "not-delivered"
    );
    // Not the holder any more.
    res(&e.b.call(&dev, "role.release", Value::Null));
    assert_eq!(
        call(&dev, "usage.begin", json!({"turn": turn})),
        "not-holder"
    );
    assert_eq!(call(&dev, "usage.end", json!({"turn": turn})), "not-holder");
    // Nothing was recorded; each refusal left its evidence.
    let conn = db(e.root.path());
    let n: i64 = conn
        .query_row("SELECT count(*) FROM usage_records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let refused: Vec<Value> = refusals(e.root.path())
        .into_iter()
        .filter(|r| r[3] == json!("usage.begin") || r[3] == json!("usage.end"))
        .collect();
    assert!(
        refused.contains(&json!(["dev", "run-dev", null, "usage.end", "not-holder"])),
        "{refused:?}"
    );
    assert!(
        refused.contains(&json!([
            "cto",
            "run-cto",
            null,
            "usage.begin",
            "not-delivered"
        ])),
        "{refused:?}"
    );
    assert_eq!(
        refused.len(),
        13,
        "every refusal but the reader's: {refused:#?}"
    );
}

/// Turns recorded by `usage.begin`/`usage.end` from real transcripts, read
/// back through the `usage` read: sums per run, instance, provider, model
/// and account, pending and unknown turns counted, and totals past 2^53 - 1
/// (past 2^63 - 1 too, summed exactly) as decimal strings.
#[test]
fn the_usage_read_sums_what_the_turns_recorded() {
    let mut e = Env::new();
    let big = 1u64 << 62;
    // dev: Claude Code, with an account.
    let t = e.path("dev.jsonl");
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), Some("acct-a"));
    let d1 = e.turn("dev", &dev);
    e.begin(&dev, &d1);
    append(
        &t,
        &[
            cc_user(),
            cc("m1", [13, 27, 100, 2100], json!("end_turn"), "text"),
        ],
    );
    assert_eq!(e.end(&dev, &d1)["outcomes"][0]["known"], json!(true));
    let d2 = e.turn("dev", &dev);
    e.begin(&dev, &d2);
    append(
        &t,
        &[
            cc_user(),
            cc("m2", [big, 5, 0, 0], json!("end_turn"), "text"),
        ],
    );
    assert_eq!(
        e.end(&dev, &d2)["outcomes"][0]["input"],
        json!(big.to_string())
    );
    // Replays change nothing in the read.
    e.end(&dev, &d2);
    e.begin(&dev, &d2);

    // cto: pi, no account; one known turn, one unfinished, one pending.
    let dir = e.path("cto");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("s.jsonl");
    let cto = e.run("cto", "run-cto", "pi", Some(&dir), None);
    let c1 = e.turn("cto", &cto);
    e.begin(&cto, &c1);
    append(&f, &[pi("p1", "gpt-5", [big, 1, 2, 3], "stop")]);
    assert_eq!(e.end(&cto, &c1)["outcomes"][0]["known"], json!(true));
    let c3 = e.turn("cto", &cto);
    e.begin(&cto, &c3);
    append(&f, &[pi("p2", "gpt-5", [7, 7, 7, 7], "toolUse")]);
    assert_eq!(
        e.end(&cto, &c3)["outcomes"][0]["code"],
        json!("usage-turn-incomplete")
    );
    // The next turn begins after the unfinished one's lines: pending.
    let c2 = e.turn("cto", &cto);
    e.begin(&cto, &c2);

    // pm: pi without a transcript; settled unknown at begin.
    let sent = res(&e
        .b
        .call(&cto, "message.send", json!({"to": "pm", "body": "x"})))
    .clone();
    res(&e.b.call(&e.pm, "message.receive", Value::Null));
    let p1 = sent["id"].as_str().unwrap().to_string();
    e.begin(&e.pm, &p1);

    let row = |k: &str, v: Value, n: [Value; 4], unknown: u64| {
        json!({k: v, "input": n[0], "output": n[1], "cacheWrite": n[2], "cacheRead": n[3],
               "unknownTurns": unknown})
    };
    let s = |n: u64| json!(n.to_string());
    let dev_sums = [s(big + 13), json!(32), json!(100), json!(2100)];
    let cto_sums = [s(big), json!(1), json!(2), json!(3)];
    let none = [json!(0), json!(0), json!(0), json!(0)];
    let want = json!({
        "total": {"input": "9223372036854775821", "output": 33, "cacheWrite": 102,
                  "cacheRead": 2103, "unknownTurns": 3},
        "byRun": [
            row("run", json!("run-cto"), cto_sums.clone(), 2),
            row("run", json!("run-dev"), dev_sums.clone(), 0),
            row("run", json!("run-pm"), none.clone(), 1),
        ],
        "byInstance": [
            row("instance", json!("cto"), cto_sums.clone(), 2),
            row("instance", json!("dev"), dev_sums.clone(), 0),
            row("instance", json!("pm"), none.clone(), 1),
        ],
        "byProvider": [
            row("provider", json!(null), none.clone(), 3),
            row("provider", json!("anthropic"), dev_sums.clone(), 0),
            row("provider", json!("openai"), cto_sums.clone(), 0),
        ],
        "byModel": [
            row("model", json!(null), none.clone(), 3),
            row("model", json!("claude-sonnet-4-5"), dev_sums.clone(), 0),
            row("model", json!("gpt-5"), cto_sums.clone(), 0),
        ],
        "byAccount": [
            row("account", json!(null), cto_sums.clone(), 3),
            row("account", json!("acct-a"), dev_sums.clone(), 0),
        ],
    });
    assert_eq!(
        res(&e.b.call(&e.b.reader_cap(), "usage", Value::Null)),
        &want
    );
    // The pending turn ends: it becomes known and leaves unknownTurns.
    append(&f, &[pi("p3", "gpt-5", [1, 0, 0, 0], "stop")]);
    let after = res(&e.b.call(&e.b.reader_cap(), "usage", Value::Null)).clone();
    assert_eq!(
        after["total"]["unknownTurns"],
        json!(3),
        "c2 is still pending"
    );
    let ended = e.end(&cto, &c2);
    assert_eq!(ended["outcomes"][0]["known"], json!(true), "{ended}");
    let after = res(&e.b.call(&e.b.reader_cap(), "usage", Value::Null)).clone();
    assert_eq!(after["total"]["unknownTurns"], json!(2));
    assert_eq!(after["total"]["input"], json!("9223372036854775822"));
}

#[test]
fn a_baseline_taken_before_a_restart_counts_the_turn_after_it() {
    let root = data_root();
    let files = tempfile::tempdir().expect("tempdir");
    let t = files.path().join("s.jsonl");
    append(
        &t,
        &[
            cc_user(),
            cc("m0", [50, 50, 0, 0], json!("end_turn"), "text"),
        ],
    );
    let procs: Vec<Sleeper> = (0..2).map(|_| sleeper()).collect();
    let mut b = Broker::start(root.path());
    let (pm, dev) = bind_pm_and_dev(&mut b, &procs, &t);
    let turn = delivered_turn(&b, &pm, &dev);
    let begun = res(&b.call(&dev, "usage.begin", json!({"turn": turn}))).clone();
    assert_eq!(begun, baselined(&turn, "claude-code"));
    b.close();

    append(
        &t,
        &[cc_user(), cc("m1", [4, 3, 2, 1], json!("end_turn"), "text")],
    );
    let mut b = Broker::start(root.path());
    let (_, dev) = bind_pm_and_dev(&mut b, &procs, &t);
    // The claim outlives the broker; the begin is a replay.
    assert_eq!(
        res(&b.call(&dev, "usage.begin", json!({"turn": turn}))),
        &begun
    );
    assert_eq!(
        res(&b.call(&dev, "usage.end", json!({"turn": turn}))),
        &known(
            &turn,
            "claude-code",
            json!("acct-r"),
            "claude-sonnet-4-5",
            "anthropic",
            [json!(4), json!(3), json!(2), json!(1)]
        )
    );
    b.close();
}

/// A transcript that can't be read (a FIFO: not a file, never opened) or
/// is past the reader's caps (over 256 session files) settles the turn
/// unknown at `usage.begin`; the end answers the same record.
#[test]
fn an_unreadable_or_oversized_transcript_settles_the_turn_at_begin() {
    let mut e = Env::new();
    let fifo = e.path("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let dev = e.run("dev", "run-dev", "pi", Some(&fifo), None);
    let turn = e.turn("dev", &dev);
    assert_eq!(
        e.begin(&dev, &turn),
        json!({"turn": turn, "sources": [
            {"source": "pi", "baseline": false, "code": "usage-source-failed"}]})
    );
    assert_eq!(
        e.end(&dev, &turn),
        unknown(&turn, "pi", "usage-source-failed")
    );
    assert_eq!(e.records(&turn).len(), 1);

    let many = e.path("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..=256 {
        std::fs::write(many.join(format!("{i}.jsonl")), "").unwrap();
    }
    let cto = e.run("cto", "run-cto", "pi", Some(&many), None);
    let turn = e.turn("cto", &cto);
    assert_eq!(
        e.begin(&cto, &turn)["sources"][0]["code"],
        json!("usage-transcript-too-large")
    );
    assert_eq!(
        e.end(&cto, &turn),
        unknown(&turn, "pi", "usage-transcript-too-large")
    );
}

/// A replayed `usage.end` after a broker restart answers the recorded
/// outcome: lines written to the transcript since are not charged, and the
/// read does not change.
#[test]
fn an_end_replayed_after_a_restart_charges_nothing_more() {
    let root = data_root();
    let files = tempfile::tempdir().expect("tempdir");
    let t = files.path().join("s.jsonl");
    let procs: Vec<Sleeper> = (0..2).map(|_| sleeper()).collect();
    let mut b = Broker::start(root.path());
    let (pm, dev) = bind_pm_and_dev(&mut b, &procs, &t);
    let turn = delivered_turn(&b, &pm, &dev);
    res(&b.call(&dev, "usage.begin", json!({"turn": turn})));
    append(
        &t,
        &[cc_user(), cc("m1", [4, 3, 2, 1], json!("end_turn"), "text")],
    );
    let ended = res(&b.call(&dev, "usage.end", json!({"turn": turn}))).clone();
    let read = res(&b.call(&b.reader_cap(), "usage", Value::Null)).clone();
    b.close();

    append(
        &t,
        &[
            cc_user(),
            cc("m2", [400, 300, 0, 0], json!("end_turn"), "text"),
        ],
    );
    let mut b = Broker::start(root.path());
    let (_, dev) = bind_pm_and_dev(&mut b, &procs, &t);
    assert_eq!(
        res(&b.call(&dev, "usage.end", json!({"turn": turn}))),
        &ended
    );
    assert_eq!(
        res(&b.call(&dev, "usage.begin", json!({"turn": turn})))["sources"][0]["baseline"],
        json!(true)
    );
    assert_eq!(res(&b.call(&b.reader_cap(), "usage", Value::Null)), &read);
    let n: i64 = db(root.path())
        .query_row("SELECT count(*) FROM usage_records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2, "one baseline, one outcome");
    b.close();
}

/// The runner verbs are a role run's: the human gets `agent-required` and
/// the tester `tester-refused`, each with its `action.refused` evidence;
/// and no read that shows a run (agents, state, inbox, a turn's trail)
/// carries the run's account.
#[test]
fn the_human_and_the_tester_are_refused_the_runner_verbs_and_no_read_shows_the_account() {
    let mut e = Env::new();
    let t = e.path("s.jsonl");
    let account = "acct-9d41-private";
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), Some(account));
    let turn = e.turn("dev", &dev);
    e.begin(&dev, &turn);
    append(
        &t,
        &[cc_user(), cc("m1", [1, 2, 3, 4], json!("end_turn"), "text")],
    );
    assert_eq!(e.end(&dev, &turn)["outcomes"][0]["account"], json!(account));

    let human = ShimSession::human(&e.b);
    let tester = ShimSession::tester(&e.b);
    let before = refusals(e.root.path()).len();
    for verb in ["usage.begin", "usage.end"] {
        assert_eq!(
            err(&human.call(verb, json!({"turn": turn}))),
            "agent-required"
        );
        assert_eq!(
            err(&tester.call(verb, json!({"turn": turn}))),
            "tester-refused"
        );
    }
    let refused: Vec<Value> = refusals(e.root.path())[before..]
        .iter()
        .map(|r| json!([r[3], r[4]]))
        .collect();
    assert_eq!(
        refused,
        [
            json!(["usage.begin", "agent-required"]),
            json!(["usage.begin", "tester-refused"]),
            json!(["usage.end", "agent-required"]),
            json!(["usage.end", "tester-refused"]),
        ]
    );

    let reader = e.b.reader_cap();
    let shown = [
        e.b.call(&reader, "agents", Value::Null),
        e.b.call(&reader, "state", Value::Null),
        e.b.call(&reader, "inbox", Value::Null),
        e.b.call(&reader, "trail", json!({"subject": "dev"})),
        e.b.call(&reader, "trail", json!({"subject": turn})),
        e.b.call(&dev, "agents", Value::Null),
        e.b.call(&dev, "inbox", Value::Null),
        human.call("agents", Value::Null),
        human.call("state", Value::Null),
    ];
    for r in &shown {
        assert_eq!(r["ok"], json!(true), "{r}");
        assert!(!r.to_string().contains(account), "{r}");
    }
    assert!(
        shown[0].to_string().contains("run-dev"),
        "agents shows the run: {}",
        shown[0]
    );
    // Only the usage read and the end's reply carry it.
    let usage = res(&e.b.call(&reader, "usage", Value::Null)).clone();
    assert_eq!(usage["byAccount"][0]["account"], json!(account), "{usage}");
}
