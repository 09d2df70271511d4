//! The contract sweep (docs/contract.md): the cases where the build and the
//! spec's verb rows or DESIGN.md's host ops disagreed, each through the real
//! broker, its real socket and host channel, and the real shims.

use mosaic_tests::*;
use serde_json::{json, Value};

/// `names` (3i L78) is for "human and agent sessions": a reader's views are
/// the ones L215 lists, and a tester "may use message.send, message.receive
/// and message.read, plus the reader's views of inbox, agents, tasks, trail,
/// decisions, messages and replies; every other verb refuses tester-refused"
/// (L218). A reader gets `read-only`, as the spec has a reader get for the
/// role-only `requirements` read.
#[test]
fn names_is_for_human_and_agent_sessions_only() {
    let dir = data_root();
    let root = dir.path();
    let (mut b, reply) = Broker::spawn(root, config(root));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let p = sleeper();
    let pm = b.bind("pm", "pm-1", p.id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let human = ShimSession::human(&b);
    res(&human.call("name.set", json!({"instance": "dev", "name": "maker"})));

    let want = json!([{"instance": "dev", "name": "maker"}]);
    let strip_at = |v: &Value| -> Value {
        let mut v = v.clone();
        for row in v.as_array_mut().expect("a list") {
            assert!(row["at"].is_string(), "{row}");
            row.as_object_mut().expect("a row").remove("at");
        }
        v
    };
    assert_eq!(strip_at(&human.ok("names", Value::Null)), want);
    assert_eq!(strip_at(res(&b.call(&pm, "names", Value::Null))), want);
    let r = b.call(&b.reader_cap(), "names", Value::Null);
    assert_eq!(err(&r), "read-only", "{r}");
    let tester = ShimSession::tester(&b);
    let r = tester.call("names", Value::Null);
    assert_eq!(err(&r), "tester-refused", "{r}");
    // The tester's refusal leaves evidence, as every resolved caller's does.
    let found = refusals(root);
    assert!(
        found.contains(&json!([
            "tester",
            "tester-cli",
            null,
            "names",
            "tester-refused"
        ])),
        "{found:?}"
    );
    b.close();
}
