//! `mosaic-leased` parses a request before anything acts: bad frames and bad fields refuse with their exact code and the daemon keeps serving; its docs list every code it answers.

use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;
#[path = "support/leased_env.rs"]
mod leased_env;
use leased_env::{
    binding, code, connect, is_id, ok, parse_reply, raw, read_reply, register, req, Daemon, TempDir,
};

/// Every field rule, from the test process (a fresh anchor each time is not
/// needed: these are refused before identity is used).
#[test]
fn field_rules_refusals() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let s = &d.sock;
    let fake = "A".repeat(43);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"runtime_generation":0}), "missing-field"),
        (json!({"action":7,"runtime_generation":0}), "invalid-field"),
        (
            json!({"action":"renew","runtime_generation":0}),
            "unknown-action",
        ),
        (json!({"action":"register_anchor"}), "missing-field"),
        (
            json!({"action":"register_anchor","runtime_generation":-1}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":1.5}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":"1"}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"x":1}),
            "unknown-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":null}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":""}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":fake}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"authenticate","runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"authenticate","session_id":fake}),
            "missing-field",
        ),
        (
            json!({"action":"authenticate","session_id":5,"runtime_generation":0}),
            "invalid-field",
        ),
        (
            json!({"action":"authenticate","session_id":fake,"runtime_generation":0,"token":"x"}),
            "unknown-field",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":{}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":[1]}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b"}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b","schema_version":1,"extra":0}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":-1,"request_epoch":1,"h_source":"a","h_payload":"b","schema_version":1}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"","h_payload":"b","schema_version":1}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":binding(1),"token":"x"}),
            "unknown-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":1}),
            "invalid-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":"t","binding":binding(1)}),
            "unknown-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":"t"}),
            "unknown-session",
        ),
    ];
    for (obj, want) in cases {
        assert_eq!(code(&req(s, &obj)), want, "for {obj}");
    }
    let raw_cases: Vec<(&[u8], &str)> = vec![
        (b"not json\n", "malformed-request"),
        (b"[1,2]\n", "malformed-request"),
        (b"\"register_anchor\"\n", "malformed-request"),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0\n",
            "malformed-request",
        ),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0} {}\n",
            "malformed-request",
        ),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0,\"runtime_generation\":1}\n",
            "duplicate-field",
        ),
        (
            b"{\"action\":\"reg\xff\",\"runtime_generation\":0}\n",
            "malformed-request",
        ),
        (
            b"\xef\xbb\xbf{\"action\":\"register_anchor\",\"runtime_generation\":0}\n",
            "malformed-request",
        ),
    ];
    for (bytes, want) in raw_cases {
        assert_eq!(code(&parse_reply(&raw(s, bytes))), want, "for {bytes:?}");
    }
    // Still serving, and none of the above registered anything.
    let r = req(s, &register(0));
    assert!(is_id(ok(&r)["session_id"].as_str().unwrap()));
}

#[test]
fn framing_fails_closed_and_daemon_keeps_serving() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let s = &d.sock;
    let good = b"{\"action\":\"register_anchor\",\"runtime_generation\":0}";
    let serving = |g: u64| {
        // A refusal that proves a full parse + reply still happens.
        let r = req(
            s,
            &json!({"action":"authenticate","session_id":"x","runtime_generation":g}),
        );
        assert_eq!(code(&r), "unknown-session");
    };

    // Unterminated: EOF without newline; and an empty connection.
    assert_eq!(code(&parse_reply(&raw(s, good))), "unterminated-frame");
    serving(0);
    assert_eq!(code(&parse_reply(&raw(s, b""))), "unterminated-frame");
    serving(0);

    // Two frames in one write.
    let mut two = good.to_vec();
    two.push(b'\n');
    two.extend_from_slice(good);
    two.push(b'\n');
    assert_eq!(code(&parse_reply(&raw(s, &two))), "multiple-frames");
    serving(0);

    // A delayed second frame: no reply before EOF, then refusal.
    let mut c = connect(s);
    c.write_all(good).unwrap();
    c.write_all(b"\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut second = good.to_vec();
    second.push(b'\n');
    c.write_all(&second).unwrap();
    // The daemon may already have refused and closed its side.
    let _ = c.shutdown(std::net::Shutdown::Write);
    assert_eq!(code(&parse_reply(&read_reply(c))), "multiple-frames");
    serving(0);

    // Newline but no half-close: no success; closed at the 1 s deadline,
    // with the deadline's own code (never the request's answer).
    let mut c = connect(s);
    c.write_all(good).unwrap();
    c.write_all(b"\n").unwrap();
    assert_eq!(code(&parse_reply(&read_reply(c))), "deadline-exceeded");
    // Nothing at all, never closed: same deadline.
    let c = connect(s);
    assert_eq!(code(&parse_reply(&read_reply(c))), "deadline-exceeded");
    serving(0);

    // Oversized: more than 64 KiB without a newline, and a 64 KiB + 1 frame.
    let big = vec![b' '; 70 * 1024];
    assert_eq!(code(&parse_reply(&raw(s, &big))), "frame-too-large");
    serving(0);
    let pad = |total: usize| {
        let mut f = good.to_vec();
        f.resize(total - 1, b' ');
        f.push(b'\n');
        f
    };
    assert_eq!(
        code(&parse_reply(&raw(s, &pad(64 * 1024 + 1)))),
        "frame-too-large"
    );
    serving(0);
    // Exactly 64 KiB (newline included) is accepted.
    let r = parse_reply(&raw(s, &pad(64 * 1024)));
    assert!(is_id(ok(&r)["session_id"].as_str().unwrap()));

    // Non-UTF-8 bytes.
    assert_eq!(
        code(&parse_reply(&raw(s, b"\xff\xfe\n"))),
        "malformed-request"
    );
    serving(0);
}

/// docs/leased.md lists every refusal and startup code, as a table row.
#[test]
fn docs_list_every_code() {
    use mosaic_leased::code::{Code, StartupError};
    let doc = include_str!("../../../docs/leased.md");
    for c in Code::ALL {
        assert!(doc.contains(&format!("| `{}` |", c.as_str())), "{c:?}");
    }
    for c in StartupError::ALL {
        assert!(doc.contains(&format!("| `{}` |", c.as_str())), "{c:?}");
    }
    let mut seen = std::collections::HashSet::new();
    for c in Code::ALL {
        assert!(seen.insert(c.as_str()), "duplicate {c:?}");
        assert!(c
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-'));
    }
}
