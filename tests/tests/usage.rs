//! `usage.begin` / `usage.end` on a real broker over the real socket, with
//! real transcript files the tests write: sums over turns, replays charged
//! once, the run's account on each record, and every unknown outcome
//! (absent source, rewritten transcript, unfinished turn, parse failure,
//! missing baseline) recorded with its code and logged without text.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Text that must never leave a transcript (not in a reply, the store or
/// the log).
const SECRET: &str = "transcript-secret-7f3a";

struct Env {
    root: tempfile::TempDir,
    files: tempfile::TempDir,
    b: Broker,
    pm: String,
    _procs: Vec<Sleeper>,
}

impl Env {
    fn new() -> Env {
        let root = data_root();
        let files = tempfile::tempdir().expect("tempdir");
        let mut b = Broker::start(root.path());
        let p = sleeper();
        let pm = b.bind("pm", "run-pm", p.id());
        res(&b.call(&pm, "role.claim", Value::Null));
        Env {
            root,
            files,
            b,
            pm,
            _procs: vec![p],
        }
    }

    /// Binds `role` as `run` with `harness`, a transcript and an account,
    /// and claims the role.
    fn run(
        &mut self,
        role: &str,
        run: &str,
        harness: &str,
        transcript: Option<&Path>,
        account: Option<&str>,
    ) -> String {
        let p = sleeper();
        let mut rec = json!({"business": "acme", "role": role, "run": run, "harness": harness,
                             "pid": p.id(), "startTime": start_time(p.id())});
        if let Some(t) = transcript {
            rec["transcript"] = json!(t.to_str().unwrap());
        }
        if let Some(a) = account {
            rec["account"] = json!(a);
        }
        let r = self.b.op(json!({"op": "bindLaunch", "record": rec}));
        assert_eq!(r["ok"], json!(true), "bind: {r}");
        let cap = r["launch"]["cap"].as_str().unwrap().to_string();
        res(&self.b.call(&cap, "role.claim", Value::Null));
        self._procs.push(p);
        cap
    }

    /// A message from the pm to `role`, delivered to `cap`'s run: a turn.
    fn turn(&self, role: &str, cap: &str) -> String {
        let sent = res(&self
            .b
            .call(&self.pm, "message.send", json!({"to": role, "body": "go"})))
        .clone();
        let got = res(&self.b.call(cap, "message.receive", Value::Null)).clone();
        let id = sent["id"].as_str().unwrap().to_string();
        assert!(
            got["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == json!(id)),
            "{got}"
        );
        id
    }

    fn begin(&self, cap: &str, turn: &str) -> Value {
        res(&self.b.call(cap, "usage.begin", json!({"turn": turn}))).clone()
    }

    fn end(&self, cap: &str, turn: &str) -> Value {
        res(&self.b.call(cap, "usage.end", json!({"turn": turn}))).clone()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.files.path().join(name)
    }

    /// Every usage record of `turn`: (kind, source, account, input, output,
    /// cache_write, cache_read, code, provider, model).
    fn records(&self, turn: &str) -> Vec<Value> {
        let conn = db(self.root.path());
        let mut st = conn
            .prepare(
                "SELECT kind, source, account, input, output, cache_write, cache_read, code,
                   provider, model, baseline FROM usage_records WHERE turn = ?1 ORDER BY seq",
            )
            .unwrap();
        let rows = st
            .query_map([turn], |r| {
                Ok(json!({
                    "kind": r.get::<_, String>(0)?, "source": r.get::<_, String>(1)?,
                    "account": r.get::<_, Option<String>>(2)?,
                    "input": r.get::<_, Option<i64>>(3)?, "output": r.get::<_, Option<i64>>(4)?,
                    "cacheWrite": r.get::<_, Option<i64>>(5)?, "cacheRead": r.get::<_, Option<i64>>(6)?,
                    "code": r.get::<_, Option<String>>(7)?,
                    "provider": r.get::<_, Option<String>>(8)?, "model": r.get::<_, Option<String>>(9)?,
                    "baseline": r.get::<_, Option<String>>(10)?,
                }))
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    }
}

fn append(p: &Path, lines: &[Value]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

/// A Claude Code reply line.
fn cc(id: &str, usage: [u64; 4], stop: Value, block: &str) -> Value {
    json!({"type": "assistant", "sessionId": "s", "message": {
        "id": id, "model": "claude-sonnet-4-5", "role": "assistant", "stop_reason": stop,
        "content": [{"type": block, "text": SECRET}],
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                  "cache_creation_input_tokens": usage[2], "cache_read_input_tokens": usage[3]}}})
}

fn cc_user() -> Value {
    json!({"type": "user", "message": {"role": "user", "content": SECRET}})
}

/// A pi reply entry.
fn pi(id: &str, model: &str, usage: [u64; 4], stop: &str) -> Value {
    json!({"type": "message", "id": id, "parentId": null, "timestamp": "2026-01-01T00:00:00Z",
           "message": {"role": "assistant", "content": [{"type": "text", "text": SECRET}],
                       "provider": "openai", "model": model, "stopReason": stop,
                       "usage": {"input": usage[0], "output": usage[1], "cacheWrite": usage[2],
                                 "cacheRead": usage[3], "totalTokens": 0}}})
}

fn known(
    turn: &str,
    source: &str,
    account: Value,
    model: &str,
    provider: &str,
    n: [Value; 4],
) -> Value {
    json!({"turn": turn, "outcomes": [{"source": source, "known": true, "provider": provider,
           "model": model, "account": account, "input": n[0], "output": n[1],
           "cacheWrite": n[2], "cacheRead": n[3]}]})
}

fn unknown(turn: &str, source: &str, code: &str) -> Value {
    json!({"turn": turn, "outcomes": [{"source": source, "known": false, "code": code}]})
}

fn baselined(turn: &str, source: &str) -> Value {
    json!({"turn": turn, "sources": [{"source": source, "baseline": true}]})
}

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
fn pi_reads_a_session_directory_and_counts_past_2_pow_53_as_strings() {
    let mut e = Env::new();
    let dir = e.path("sessions");
    std::fs::create_dir(&dir).unwrap();
    // pi writes its session file only with its first entry: the directory
    // is empty at the first begin.
    let dev = e.run("dev", "run-dev", "pi", Some(&dir), None);
    let t1 = e.turn("dev", &dev);
    assert_eq!(e.begin(&dev, &t1), baselined(&t1, "pi"));
    let f = dir.join("2026-01-01_abc.jsonl");
    append(
        &f,
        &[
            json!({"type": "session", "version": 3, "id": "u", "cwd": "/w"}),
            json!({"type": "message", "id": "e1", "message": {"role": "user", "content": SECRET}}),
            pi("e2", "gpt-5", [10, 1, 0, 0], "toolUse"),
            json!({"type": "message", "id": "e3", "message": {"role": "toolResult", "toolCallId": "c"}}),
            pi("e4", "gpt-5", [20, 2, 5, 7], "stop"),
        ],
    );
    assert_eq!(
        e.end(&dev, &t1),
        known(
            &t1,
            "pi",
            json!(null),
            "gpt-5",
            "openai",
            [json!(30), json!(3), json!(5), json!(7)]
        )
    );
    // A turn whose counts pass 2^53 - 1: decimal strings, exact.
    let t2 = e.turn("dev", &dev);
    e.begin(&dev, &t2);
    let big = 1u64 << 62;
    append(&f, &[pi("e5", "gpt-5", [big, 3, 0, (1 << 53) - 1], "stop")]);
    assert_eq!(
        e.end(&dev, &t2),
        known(
            &t2,
            "pi",
            json!(null),
            "gpt-5",
            "openai",
            [
                json!(big.to_string()),
                json!(3),
                json!(0),
                json!(9007199254740991u64)
            ]
        )
    );
    let rows = e.records(&t2);
    assert_eq!(rows[1]["input"], json!(big));
    assert_eq!(
        rows[1]["account"],
        json!(null),
        "a pi run without an account"
    );
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

/// The baseline is in the store before `usage.begin` answers: a broker
/// restarted between a turn's begin and its end (the run bound again with
/// its record) counts the turn against it.
/// Binds pm (`run-pm`) and dev (`run-dev`: Claude Code, transcript `t`,
/// account `acct-r`) to the two sleepers, as a restarted broker binds them
/// again; their capabilities.
fn bind_pm_and_dev(b: &mut Broker, procs: &[Sleeper], t: &Path) -> (String, String) {
    let pm = b.bind("pm", "run-pm", procs[0].id());
    let dev_rec = json!({"business": "acme", "role": "dev", "run": "run-dev",
        "harness": "claude-code", "pid": procs[1].id(), "startTime": start_time(procs[1].id()),
        "transcript": t.to_str().unwrap(), "account": "acct-r"});
    let r = b.op(json!({"op": "bindLaunch", "record": dev_rec}));
    let dev = r["launch"]["cap"].as_str().expect("cap").to_string();
    (pm, dev)
}

/// Both claim their roles and pm sends dev a message, which dev receives:
/// the turn's id.
fn delivered_turn(b: &Broker, pm: &str, dev: &str) -> String {
    res(&b.call(pm, "role.claim", Value::Null));
    res(&b.call(dev, "role.claim", Value::Null));
    let sent = res(&b.call(pm, "message.send", json!({"to": "dev", "body": "go"}))).clone();
    res(&b.call(dev, "message.receive", Value::Null));
    sent["id"].as_str().unwrap().to_string()
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

/// A Claude Code transcript line as the harness writes it: the envelope
/// (`parentUuid`, `isSidechain`, `sessionId`, `requestId`, `uuid`, ...)
/// around one content block of a reply whose usage repeats on each line.
fn cc_line(
    session: &str,
    id: &str,
    usage: [u64; 4],
    stop: Value,
    block: &str,
    side: bool,
) -> Value {
    json!({"parentUuid": null, "isSidechain": side, "userType": "external", "cwd": "/w",
           "sessionId": session, "version": "2.1.4", "gitBranch": "main",
           "requestId": format!("req_{id}"), "type": "assistant", "uuid": format!("u-{id}-{block}"),
           "timestamp": "2026-12-01T10:00:00.000Z",
           "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-opus-4-5",
                       "content": [{"type": block, "text": SECRET}], "stop_reason": stop,
                       "stop_sequence": null,
                       "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                                 "cache_creation_input_tokens": usage[2],
                                 "cache_read_input_tokens": usage[3],
                                 "cache_creation": {"ephemeral_5m_input_tokens": usage[2],
                                                    "ephemeral_1h_input_tokens": 0},
                                 "service_tier": "standard"}}})
}

/// Claude Code's real layout with a per-run project directory as the
/// transcript: a subagent's replies go to `<session>/subagents/agent-*.jsonl`
/// (beside a `.meta.json`), and they are the run's spend too; a resumed
/// session is a new file that starts with a copy of the history it resumes
/// (the same message ids), which was charged already and is not again.
#[test]
fn claude_code_subagent_files_count_and_a_resumed_session_s_copied_history_does_not() {
    let mut e = Env::new();
    let dir = e.path("project");
    std::fs::create_dir(&dir).unwrap();
    let dev = e.run("dev", "run-dev", "claude-code", Some(&dir), Some("acct"));

    // Turn 1: the main reply asks for a subagent (Task), the subagent
    // works in its own file, the main reply then ends the turn.
    let t1 = e.turn("dev", &dev);
    assert_eq!(e.begin(&dev, &t1), baselined(&t1, "claude-code"));
    let s1 = dir.join("s1.jsonl");
    let sub = dir.join("s1").join("subagents");
    std::fs::create_dir_all(&sub).unwrap();
    let history = vec![
        cc_user(),
        cc_line(
            "s1",
            "msg_m1",
            [10, 3, 100, 1000],
            json!(null),
            "thinking",
            false,
        ),
        cc_line(
            "s1",
            "msg_m1",
            [10, 40, 100, 1000],
            json!("tool_use"),
            "tool_use",
            false,
        ),
    ];
    append(&s1, &history);
    std::fs::write(sub.join("agent-a1.meta.json"), r#"{"agentType":"Explore"}"#).unwrap();
    append(
        &sub.join("agent-a1.jsonl"),
        &[
            cc_line(
                "s1",
                "msg_a1",
                [5, 6, 7, 8],
                json!("tool_use"),
                "tool_use",
                true,
            ),
            cc_line(
                "s1",
                "msg_a2",
                [1, 2, 3, 4],
                json!("end_turn"),
                "text",
                true,
            ),
        ],
    );
    let tail = vec![
        json!({"type": "user", "isSidechain": false, "sessionId": "s1",
               "message": {"role": "user", "content": [{"type": "tool_result", "content": SECRET}]}}),
        cc_line(
            "s1",
            "msg_m2",
            [20, 30, 0, 1100],
            json!("end_turn"),
            "text",
            false,
        ),
    ];
    append(&s1, &tail);
    assert_eq!(
        e.end(&dev, &t1),
        known(
            &t1,
            "claude-code",
            json!("acct"),
            "claude-opus-4-5",
            "anthropic",
            [json!(36), json!(78), json!(110), json!(2112)]
        )
    );

    // Turn 2: `--resume` writes a new session file: the copied history
    // first, then the new turn's reply.
    let t2 = e.turn("dev", &dev);
    assert_eq!(e.begin(&dev, &t2), baselined(&t2, "claude-code"));
    let copied: Vec<Value> = history
        .iter()
        .chain(tail.iter())
        .map(|l| {
            let mut l = l.clone();
            l["sessionId"] = json!("s2");
            l
        })
        .collect();
    let s2 = dir.join("s2.jsonl");
    append(&s2, &copied);
    append(
        &s2,
        &[
            cc_user(),
            cc_line(
                "s2",
                "msg_m3",
                [2, 4, 6, 8],
                json!("end_turn"),
                "text",
                false,
            ),
        ],
    );
    assert_eq!(
        e.end(&dev, &t2),
        known(
            &t2,
            "claude-code",
            json!("acct"),
            "claude-opus-4-5",
            "anthropic",
            [json!(2), json!(4), json!(6), json!(8)]
        )
    );

    // Turn 3: resumed again, but stopped before any new reply: the copy
    // alone is no reply of this turn.
    let t3 = e.turn("dev", &dev);
    e.begin(&dev, &t3);
    append(&dir.join("s3.jsonl"), &copied);
    assert_eq!(
        e.end(&dev, &t3),
        unknown(&t3, "claude-code", "usage-turn-incomplete")
    );

    // Turn 4: the main reply asks for a tool; an inline sidechain line
    // (older Claude Code) ending after it does not end the main turn.
    let t4 = e.turn("dev", &dev);
    e.begin(&dev, &t4);
    append(
        &s2,
        &[
            cc_line(
                "s2",
                "msg_m4",
                [1, 1, 0, 0],
                json!("tool_use"),
                "tool_use",
                false,
            ),
            cc_line(
                "s2",
                "msg_a3",
                [1, 1, 0, 0],
                json!("end_turn"),
                "text",
                true,
            ),
        ],
    );
    assert_eq!(
        e.end(&dev, &t4),
        unknown(&t4, "claude-code", "usage-turn-incomplete")
    );

    let total = res(&e.b.call(&e.b.reader_cap(), "usage", Value::Null))["total"].clone();
    assert_eq!(
        total,
        json!({"input": 38, "output": 82, "cacheWrite": 116, "cacheRead": 2120, "unknownTurns": 2})
    );
    assert!(!e.b.stderr().contains(SECRET));
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

/// A turn the user or the runner stopped: Claude Code writes the refused
/// tool's result and then a user line `[Request interrupted by user for
/// tool use]` (or `[Request interrupted by user]` mid-reply). The turn has
/// ended, so what its replies spent is known; without the marker a reply
/// asking for a tool still leaves the turn unfinished.
#[test]
fn an_interrupted_claude_code_turn_counts_what_it_spent() {
    let mut e = Env::new();
    let t = e.path("s.jsonl");
    let dev = e.run("dev", "run-dev", "claude-code", Some(&t), None);
    let interrupt = |text: &str| {
        json!({"parentUuid": "p", "isSidechain": false, "type": "user", "sessionId": "s",
               "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
    };
    let t1 = e.turn("dev", &dev);
    e.begin(&dev, &t1);
    append(
        &t,
        &[
            cc_user(),
            cc_line(
                "s",
                "msg_i1",
                [9, 8, 7, 6],
                json!("tool_use"),
                "tool_use",
                false,
            ),
            json!({"type": "user", "isSidechain": false, "sessionId": "s",
                   "message": {"role": "user", "content": [{"type": "tool_result",
                     "content": "The user doesn't want to proceed with this tool use.",
                     "is_error": true, "tool_use_id": "toolu_1"}]}}),
            interrupt("[Request interrupted by user for tool use]"),
        ],
    );
    assert_eq!(
        e.end(&dev, &t1),
        known(
            &t1,
            "claude-code",
            json!(null),
            "claude-opus-4-5",
            "anthropic",
            [json!(9), json!(8), json!(7), json!(6)]
        )
    );
    // Interrupted mid-reply.
    let t2 = e.turn("dev", &dev);
    e.begin(&dev, &t2);
    append(
        &t,
        &[
            cc_user(),
            cc_line("s", "msg_i2", [1, 2, 0, 0], json!(null), "tool_use", false),
            interrupt("[Request interrupted by user]"),
        ],
    );
    assert_eq!(e.end(&dev, &t2)["outcomes"][0]["known"], json!(true));
    // A subagent's interruption does not end the session's turn.
    let t3 = e.turn("dev", &dev);
    e.begin(&dev, &t3);
    let mut side = interrupt("[Request interrupted by user]");
    side["isSidechain"] = json!(true);
    append(
        &t,
        &[
            cc_user(),
            cc_line(
                "s",
                "msg_i3",
                [1, 1, 0, 0],
                json!("tool_use"),
                "tool_use",
                false,
            ),
            side,
        ],
    );
    assert_eq!(
        e.end(&dev, &t3),
        unknown(&t3, "claude-code", "usage-turn-incomplete")
    );
    // Stopped before any reply: nothing known.
    let t4 = e.turn("dev", &dev);
    e.begin(&dev, &t4);
    append(&t, &[cc_user(), interrupt("[Request interrupted by user]")]);
    assert_eq!(
        e.end(&dev, &t4),
        unknown(&t4, "claude-code", "usage-turn-incomplete")
    );
}

/// The broker's peak resident size so far (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM")
}

/// A user line `{"type":"user","pad":[0,0,…]}` of `len` bytes and its
/// newline: no reply, and as a JSON tree millions of values.
fn pad_line(len: usize) -> Vec<u8> {
    let mut l = Vec::with_capacity(len + 1);
    l.extend_from_slice(br#"{"type":"user","pad":[0"#);
    while l.len() + 2 + 2 <= len {
        l.extend_from_slice(b",0");
    }
    l.extend_from_slice(b"]}\n");
    l
}

/// `usage.end {turn}` from `n` connections at once; their replies.
fn ends_at_once(socket: &Path, cap: &str, turn: &str, n: usize) -> Vec<Value> {
    let line = format!(
        "{}\n",
        json!({"cap": cap, "verb": "usage.end", "args": {"turn": turn}})
    );
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    use std::io::Read;
                    let mut c = std::os::unix::net::UnixStream::connect(socket).expect("connect");
                    // Only a hang reaches this.
                    c.set_read_timeout(Some(std::time::Duration::from_secs(120)))
                        .expect("timeout");
                    c.write_all(line.as_bytes()).expect("send");
                    c.shutdown(std::net::Shutdown::Write).expect("half-close");
                    let mut out = String::new();
                    c.read_to_string(&mut out).expect("reply");
                    serde_json::from_str::<Value>(out.trim()).expect("reply is JSON")
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().expect("call")).collect()
    })
}

/// Issue 29 item 2: a bound agent appends a 12 MiB and a 60 MiB line of
/// zeros to its transcript and fires four `usage.end` at once. Each line
/// used to be parsed into a JSON tree first (a gigabyte for the 60 MiB
/// one) and every call read the turn itself (four times that). Now a line
/// is read without a tree, one line at a time under the 16 MiB cap, and
/// the run's calls share one reading: the broker's peak resident size
/// grows by less than 128 MiB, the four answers are one record, a line
/// under the cap leaves the turn countable and one over it settles the
/// turn `usage-transcript-too-large`.
#[test]
fn huge_transcript_lines_cost_the_broker_bounded_memory_and_concurrent_ends_one_reading() {
    let root = data_root();
    let files = tempfile::tempdir().expect("tempdir");
    let t = files.path().join("s.jsonl");
    let procs: Vec<Sleeper> = (0..2).map(|_| sleeper()).collect();
    let mut b = Broker::start(root.path());
    let (pm, dev) = bind_pm_and_dev(&mut b, &procs, &t);
    let before = peak_kib(b.child.id());

    // A 12 MiB line (under the cap), then the turn's closing reply: known.
    let turn = delivered_turn(&b, &pm, &dev);
    res(&b.call(&dev, "usage.begin", json!({"turn": turn})));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&t)
        .unwrap();
    f.write_all(&pad_line(12 << 20)).unwrap();
    append(&t, &[cc("m1", [4, 3, 2, 1], json!("end_turn"), "text")]);
    let ends = ends_at_once(&b.socket, &dev, &turn, 4);
    let want = known(
        &turn,
        "claude-code",
        json!("acct-r"),
        "claude-sonnet-4-5",
        "anthropic",
        [json!(4), json!(3), json!(2), json!(1)],
    );
    for e in &ends {
        assert_eq!(res(e), &want, "{e}");
    }

    // The next turn appends the 12 MiB line again and a 60 MiB one: over
    // the line cap, so the turn is unknown, for all four calls alike.
    res(&b.call(&pm, "message.send", json!({"to": "dev", "body": "more"})));
    let got = res(&b.call(&dev, "message.receive", Value::Null)).clone();
    let turn2 = got["messages"][0]["id"].as_str().unwrap().to_string();
    res(&b.call(&dev, "usage.begin", json!({"turn": turn2})));
    f.write_all(&pad_line(12 << 20)).unwrap();
    f.write_all(&pad_line(60 << 20)).unwrap();
    drop(f);
    let ends = ends_at_once(&b.socket, &dev, &turn2, 4);
    for e in &ends {
        assert_eq!(
            res(e),
            &unknown(&turn2, "claude-code", "usage-transcript-too-large"),
            "{e}"
        );
    }

    let after = peak_kib(b.child.id());
    eprintln!("broker peak resident size: {before} KiB before, {after} KiB after");
    assert!(
        after.saturating_sub(before) < 128 << 10,
        "the broker's peak resident size grew from {before} KiB to {after} KiB"
    );
    // Tighter: within two lines' worth (the cap is 16 MiB), so one reading
    // at a time. Four calls each reading the 12 MiB line for themselves
    // took the peak up by about 66 MiB; one reading, by about 17 MiB.
    assert!(
        after.saturating_sub(before) < 32 << 10,
        "one reading at a time: the peak grew from {before} KiB to {after} KiB"
    );
    // One outcome per turn, however many calls.
    let n: i64 = db(root.path())
        .query_row(
            "SELECT count(*) FROM usage_records WHERE kind <> 'baseline'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    b.close();
}
