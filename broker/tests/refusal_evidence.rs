//! Refusal evidence in process, where a test can reach what the socket
//! can't: the evidence write failing for real (another connection holds the
//! store's write lock), refusals inside a group-commit batch, and an
//! END_PROTECTED decision an arbiter resolved under an earlier config.

mod common;

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

fn business(aide_definition: &str) -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm", "authority": {"withinRole": ["message.send"], "crossRole": []}},
            "dev": {"definition": "dev", "authority": {"withinRole": [], "crossRole": ["role.revoke"]}},
            "aide": {"definition": aide_definition, "authority": {"withinRole": [], "crossRole": []}}
        }
    })
}

fn core(dir: &std::path::Path, bus: &BusDir, aide_definition: &str) -> Core {
    let store = Store::open(&bus.db_path()).unwrap();
    let config = BootConfig::from_json(json!({
        "dataRoot": dir.to_str().unwrap(),
        "businesses": {"acme": business(aide_definition)},
    }))
    .unwrap();
    Core::new(store, Arc::new(config))
}

fn role(r: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("{r}-1"),
    }
}

fn call(core: &mut Core, c: &Caller, verb: &str, args: Value) -> Result<Value, Code> {
    let args: Option<Map<String, Value>> = match args {
        Value::Object(m) => Some(m),
        _ => None,
    };
    dispatch(core, c, verb, args)
}

fn count(core: &Core, sql: &str) -> i64 {
    core.store
        .db()
        .sql()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn refusals(core: &Core) -> i64 {
    count(
        core,
        "SELECT count(*) FROM events WHERE kind = 'action.refused'",
    )
}

/// When the refusal evidence can't be written, the caller gets
/// `storage-unavailable` and nothing is stored; once the store takes
/// writes again, the same refusal gets its own code and its row.
#[test]
fn a_failed_evidence_write_answers_storage_unavailable() {
    let (d, bus) = common::private_bus();
    let mut core = core(d.path(), &bus, "helper");
    // Don't wait out the default five seconds for a lock that won't come.
    core.store.db().sql().busy_timeout(Duration::ZERO).unwrap();
    let other = rusqlite::Connection::open(bus.db_path()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The refusal itself only reads (WAL readers don't wait on a writer).
    assert_eq!(
        call(&mut core, &role("pm"), "role.release", Value::Null),
        Err(Code::StorageUnavailable)
    );
    assert_eq!(
        call(
            &mut core,
            &Caller::Human {
                business: "acme".into()
            },
            "tasks",
            json!({"label": "x"})
        ),
        Err(Code::StorageUnavailable)
    );
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(refusals(&core), 0);
    assert_eq!(
        call(&mut core, &role("pm"), "role.release", Value::Null),
        Err(Code::NotHolder)
    );
    assert_eq!(refusals(&core), 1);
    drop(core);
    bus.release();
}

/// In a group-commit batch each refusal's evidence is kept in its own
/// savepoint while the refused verb's effects roll back, and the accepted
/// requests around it commit; a refusal first in the batch (no savepoint:
/// the bare batch transaction) too.
#[test]
fn refusals_inside_a_batch_keep_their_evidence_alone() {
    let (d, bus) = common::private_bus();
    let mut core = core(d.path(), &bus, "helper");
    call(&mut core, &role("pm"), "role.claim", Value::Null).unwrap();
    core.begin_batch().unwrap();
    // First in the batch: refused.
    assert_eq!(
        call(
            &mut core,
            &role("pm"),
            "message.send",
            json!({"to": "nobody", "body": "x"})
        ),
        Err(Code::UnknownRole)
    );
    call(
        &mut core,
        &role("pm"),
        "message.send",
        json!({"to": "dev", "body": "one"}),
    )
    .unwrap();
    assert_eq!(
        call(
            &mut core,
            &role("dev"),
            "message.send",
            json!({"to": "pm", "body": "x"})
        ),
        Err(Code::NotHolder)
    );
    call(
        &mut core,
        &role("pm"),
        "message.send",
        json!({"to": "dev", "body": "two"}),
    )
    .unwrap();
    core.commit_batch().unwrap();
    assert_eq!(count(&core, "SELECT count(*) FROM messages"), 2);
    let rows: Vec<(String, String)> = core
        .store
        .db()
        .sql()
        .prepare("SELECT run, body FROM events WHERE kind = 'action.refused' ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        [
            (
                "pm-1".into(),
                r#"{"action":"message.send","code":"unknown-role"}"#.into()
            ),
            (
                "dev-1".into(),
                r#"{"action":"message.send","code":"not-holder"}"#.into()
            ),
        ]
    );
    drop(core);
    bus.release();
}

/// A revoke of an END_PROTECTED instance with a decision an arbiter
/// resolved (raised while the instance was not protected) is
/// `role-end-refused`; one the human resolved through the CLI passes that
/// check (and then finds no thread of the assistant held: `not-held`).
#[test]
fn an_arbiter_resolution_never_ends_an_assistant() {
    let (d, bus) = common::private_bus();
    let mut core = core(d.path(), &bus, "helper");
    for r in ["pm", "dev"] {
        call(&mut core, &role(r), "role.claim", Value::Null).unwrap();
    }
    let raise = json!({"action": "role.revoke", "target": "aide", "question": "End it?",
                       "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
                       "recommendation": "yes", "blocking": false});
    let d1 = call(&mut core, &role("dev"), "decision.raise", raise.clone()).unwrap();
    assert_eq!(d1["routed_to"], json!("pm"));
    call(
        &mut core,
        &role("pm"),
        "decision.resolve",
        json!({"id": d1["id"], "choice": "yes"}),
    )
    .unwrap();
    // The next start makes the aide an assistant.
    drop(core);
    let mut core = self::core(d.path(), &bus, "assistant");
    let revoke = |id: &Value| json!({"role": "aide", "decision": id});
    assert_eq!(
        call(&mut core, &role("dev"), "role.revoke", revoke(&d1["id"])),
        Err(Code::RoleEndRefused)
    );
    // Now a raise routes to the human, who resolves it through the CLI.
    let d2 = call(&mut core, &role("dev"), "decision.raise", raise).unwrap();
    assert_eq!(
        (&d2["class"], &d2["routed_to"]),
        (&json!("gated"), &json!("human"))
    );
    let human = Caller::Human {
        business: "acme".into(),
    };
    call(
        &mut core,
        &human,
        "decision.resolve",
        json!({"id": d2["id"], "choice": "yes"}),
    )
    .unwrap();
    assert_eq!(
        call(&mut core, &role("dev"), "role.revoke", revoke(&d2["id"])),
        Err(Code::NotHeld)
    );
    // Both refusals are on record against dev.
    assert_eq!(
        count(
            &core,
            "SELECT count(*) FROM events WHERE kind = 'action.refused' AND run = 'dev-1'
                      AND json_extract(body, '$.action') = 'role.revoke'"
        ),
        2
    );
    drop(core);
    bus.release();
}
