//! Known tokens in process: a request, its evidence and its reply holding a loaded token refuse known-token, filed under no subject; no evidence possible is storage-unavailable.

mod common;
use mosaic_bus::error::Code;
use mosaic_bus::handlers::ops::records;
use mosaic_bus::tokens::KnownTokens;
use serde_json::{json, Map, Value};
#[path = "support/mht_env.rs"]
mod mht_env;
use mht_env::{human, reader, role, Env};

#[test]
fn known_tokens_refuse_requests_evidence_and_replies() {
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    // Stored before the token was loaded (as if the token changed later).
    let old = e.ok(
        &pm,
        "message.send",
        json!({"to": "human", "body": "abcdEFGH12345678xyz"}),
    );
    e.core
        .set_known_tokens(KnownTokens::new(vec!["abcdEFGH12345678".into()]));
    let msgs = e.count("SELECT count(*) FROM messages");
    assert_eq!(
        e.call(
            &pm,
            "message.send",
            json!({"to": "cto", "body": "token abcdEFGH12345678 here"})
        ),
        Err(Code::KnownToken)
    );
    assert_eq!(e.count("SELECT count(*) FROM messages"), msgs);
    assert_eq!(
        e.count(
            "SELECT count(*) FROM events WHERE kind = 'action.refused' AND role = 'pm'
             AND body = '{\"action\":\"message.send\",\"code\":\"known-token\"}'"
        ),
        1
    );
    // In a key, for the human too.
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "cto", "body": "x", "abcdEFGH12345678": 1})
        ),
        Err(Code::KnownToken)
    );
    // A reply that would carry a token refuses.
    assert_eq!(
        e.call(&human(), "messages", Value::Null),
        Err(Code::KnownToken)
    );
    assert_eq!(
        e.call(&reader(), "trail", json!({"subject": old["id"]})),
        Err(Code::KnownToken)
    );
    // Evidence through the host op writer.
    let mut body = Map::new();
    body.insert("note".into(), json!("abcdEFGH12345678"));
    assert_eq!(
        records::record_event_as(
            &mut e.core,
            "acme",
            "pm",
            "run-p",
            "tracker.note",
            body,
            None
        ),
        Err(Code::KnownToken)
    );
    assert_eq!(
        records::record_task(
            &mut e.core,
            "acme",
            "vikunja:1/2",
            "2026-01-01T00:00:00.000Z",
            Some(
                json!({"title": "abcdEFGH12345678"})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        ),
        Err(Code::KnownToken)
    );
    assert_eq!(e.count("SELECT count(*) FROM task_snapshots"), 0);
    // Five on record: the two sends, the human's read, the two host ops.
    // The reader's refused trail writes nothing (3i: readers never write).
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'action.refused'"),
        5
    );
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'action.refused' AND role IS NULL AND run IS NULL"),
        1,
        "recordTask's, which has no caller but the host"
    );
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE body LIKE '%abcdEFGH12345678%'"),
        0
    );
}

#[test]
fn known_token_refusal_without_evidence_is_storage_unavailable() {
    let mut e = Env::new();
    e.core
        .set_known_tokens(KnownTokens::new(vec!["abcdEFGH12345678".into()]));
    // Another connection holds the write lock past the store's busy timeout.
    let other = rusqlite::Connection::open(e.bus.db_path()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "cto", "body": "abcdEFGH12345678"})
        ),
        Err(Code::StorageUnavailable)
    );
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "cto", "body": "abcdEFGH12345678"})
        ),
        Err(Code::KnownToken)
    );
}

/// Issue 31's mutant of `verbs/mod.rs` (`refused`): the known-token
/// refusal keeping its subject. A refusal is filed under the request's
/// task ref, its subject; a known-token refusal records nothing of the
/// request but the verb and the code (spec 3i: known-token content in
/// broker evidence refuses). Here the task ref itself carries a (numeric)
/// loaded token, and then the body does under a plain task ref: neither
/// refusal has a subject, and no row holds the token. The same request
/// refused for another reason keeps its subject.
#[test]
fn a_known_token_refusal_is_filed_under_no_subject() {
    const TOKEN: &str = "424242424242424242";
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    e.core
        .set_known_tokens(KnownTokens::new(vec![TOKEN.into()]));
    let in_ref = json!({"to": "cto", "body": "x", "task_ref": format!("vikunja:7/{TOKEN}")});
    assert_eq!(e.call(&pm, "message.send", in_ref), Err(Code::KnownToken));
    let in_body = json!({"to": "cto", "body": format!("t {TOKEN}"), "task_ref": "vikunja:7/8"});
    assert_eq!(e.call(&pm, "message.send", in_body), Err(Code::KnownToken));
    // Refused for another reason (a send takes no task ref), the subject
    // is kept.
    let other = json!({"to": "cto", "body": "x", "task_ref": "vikunja:7/8"});
    assert_eq!(
        e.call(&pm, "message.send", other),
        Err(Code::InvalidRequest)
    );

    let mut st = e
        .core
        .store
        .db()
        .sql()
        .prepare(
            "SELECT role, subject, body FROM events WHERE kind = 'action.refused' ORDER BY seq",
        )
        .unwrap();
    let rows: Vec<(String, Option<String>, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    drop(st);
    let known = r#"{"action":"message.send","code":"known-token"}"#.to_string();
    assert_eq!(
        rows,
        vec![
            ("pm".to_string(), None, known.clone()),
            ("pm".to_string(), None, known),
            (
                "pm".to_string(),
                Some("vikunja:7/8".to_string()),
                r#"{"action":"message.send","code":"invalid-request"}"#.to_string()
            ),
        ]
    );
    assert_eq!(
        e.count(&format!(
            "SELECT count(*) FROM events WHERE subject LIKE '%{TOKEN}%' OR body LIKE '%{TOKEN}%'"
        )),
        0
    );
}
