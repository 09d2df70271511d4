//! How transcripts are read: pi's session directories, Claude Code's subagent files and resumed sessions, an interrupted turn, and lines too large to hold, on real brokers and real files.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::Write;
#[path = "support/usage_env.rs"]
mod usage_env;
use usage_env::{
    append, baselined, bind_pm_and_dev, cc, cc_line, cc_user, delivered_turn, ends_at_once, known,
    pad_line, peak_kib, pi, unknown, Env, SECRET,
};

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
