//! Who may call the review verbs, in process (human and tester sessions need
//! a proof a child broker's socket can't get here): a real `Core` on a real
//! store, calling `handlers::dispatch` as the socket would after the proof gate.

mod common;

use common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::error::Code;
use serde_json::{json, Value};

#[test]
fn review_verbs_refuse_the_human_the_tester_and_readers() {
    let mut e = Inproc::boot(json!({
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "cto", "delivery": "pm"},
            "roles": {
                "pm": {"authority": {"withinRole": ["review.request"], "crossRole": []}},
                "cto": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}}
            },
            "vars": {"bus.tester": true}
        }},
        "readers": ["acme"],
    }));
    let business = || "acme".to_string();
    let callers = [
        (
            Caller::Human {
                business: business(),
            },
            Code::AgentRequired,
        ),
        (
            Caller::Tester {
                business: business(),
            },
            Code::TesterRefused,
        ),
        (
            Caller::Reader {
                business: business(),
            },
            Code::ReadOnly,
        ),
    ];
    let calls: [(&str, Value); 2] = [
        (
            "review.request",
            json!({"task_ref": "vikunja:3/41", "commit": "abc", "to": "cto"}),
        ),
        (
            "review.verdict",
            json!({"task_ref": "vikunja:3/41", "request": "r", "verdict": "approve", "body": "b"}),
        ),
    ];
    for (caller, code) in &callers {
        for (verb, args) in &calls {
            assert_eq!(
                e.call(caller, verb, args.clone()),
                Err(*code),
                "{verb} as {caller:?}"
            );
        }
    }
    // No review was written. The human's and the tester's refusals are on
    // the task's trail (3i refusal evidence; this test asserted no events
    // at all before); the reader's left none.
    let rows: Vec<(String, String, String)> = e
        .core
        .store
        .db()
        .sql()
        .prepare("SELECT kind, run, subject FROM events ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let refused = |run: &str| {
        (
            "action.refused".to_string(),
            run.to_string(),
            "vikunja:3/41".to_string(),
        )
    };
    assert_eq!(
        rows,
        [
            refused("human-cli"),
            refused("human-cli"),
            refused("tester-cli"),
            refused("tester-cli"),
        ]
    );
}
