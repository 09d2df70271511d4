//! Who may call the review verbs, in process (human and tester sessions need
//! a proof a child broker's socket can't get here): a real `Core` on a real
//! store, calling `verbs::dispatch` as the socket would after the proof gate.

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use mosaic_bus::verbs::dispatch;
use serde_json::{json, Value};
use std::sync::Arc;

#[test]
fn review_verbs_refuse_the_human_the_tester_and_readers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_str().unwrap(),
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
    }))
    .unwrap();
    let bus = BusDir::acquire(dir.path()).unwrap();
    let store = Store::open(&bus.db_path()).unwrap();
    let mut core = Core::new(store, Arc::new(cfg));
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
            let args = args.as_object().cloned();
            assert_eq!(
                dispatch(&mut core, caller, verb, args),
                Err(*code),
                "{verb} as {caller:?}"
            );
        }
    }
    // No review was written. The human's and the tester's refusals are on
    // the task's trail (3i refusal evidence; this test asserted no events
    // at all before); the reader's left none.
    let rows: Vec<(String, String, String)> = core
        .store
        .conn()
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
    bus.release();
}
