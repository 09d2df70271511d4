//! The task board and `task.created`, in process: tracker snapshots read
//! through the `recordEvent` host op, the `tasks` and `state` reads, and a
//! task's creation written once (a real `Core` on a real store in a private
//! data root, calling `handlers::dispatch` as the socket would).

mod common;
use mosaic_bus::error::Code;
use mosaic_bus::handlers::ops::records;
use serde_json::{json, Map, Value};
#[path = "support/mht_env.rs"]
mod mht_env;
use mht_env::{human, reader, role, Env};

#[test]
fn tasks_state_and_task_created_through_record_event() {
    let mut e = Env::new();
    let cap_caller = role("pm", "run-p");
    e.ok(&cap_caller, "role.claim", Value::Null);
    let rt = |e: &mut Env, r: &str, at: &str, f: Option<Value>| {
        let f = f.map(|v| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        });
        records::record_task(&mut e.core, "acme", r, at, f)
    };
    let at = "2026-01-01T00:00:00.000Z";
    rt(
        &mut e,
        "vikunja:3/41",
        at,
        Some(json!({"title": "Old", "done": false})),
    )
    .unwrap();
    rt(
        &mut e,
        "vikunja:3/41",
        at,
        Some(json!({"title": "A", "done": false, "priority": 0,
        "assignees": ["acme-pm-bot", "someone"], "labels": [7], "bucket": "Doing"})),
    )
    .unwrap();
    rt(&mut e, "vikunja:3/42", at, Some(json!({"title": "B", "done": true, "priority": 3, "assignees": ["acme-cto-bot", "acme-pm-bot"]}))).unwrap();
    rt(&mut e, "vikunja:3/43", at, None).unwrap();
    rt(
        &mut e,
        "vikunja:5/44",
        at,
        Some(json!({"title": "Moved", "done": false})),
    )
    .unwrap();
    assert_eq!(
        rt(
            &mut e,
            "vikunja:3/45",
            "2026-01-01T00:00:00Z",
            Some(json!({}))
        ),
        Err(Code::InvalidRequest)
    );
    assert_eq!(
        rt(&mut e, "vikunja:3", at, Some(json!({}))),
        Err(Code::InvalidRequest)
    );
    assert_eq!(
        rt(&mut e, "vikunja:3/45", at, Some(json!({"secret": 1}))),
        Err(Code::InvalidRequest)
    );
    assert_eq!(
        records::record_task(&mut e.core, "nope", "vikunja:3/45", at, None),
        Err(Code::UnknownBusiness)
    );

    // task.created needs a same-business human input and a requirement id.
    let input = e.event("acme", "human.input", json!({"verb": "task.create"}));
    let beta_input = e.event("beta", "human.input", json!({"verb": "task.create"}));
    let mut body = Map::new();
    body.insert("task_ref".into(), json!("vikunja:4/44"));
    body.insert("request".into(), json!(beta_input));
    body.insert("requirement".into(), json!("REQ-MSG-2"));
    assert_eq!(
        records::record_event(
            &mut e.core,
            "no-such-cap",
            "task.created",
            body.clone(),
            Some("vikunja:4/44")
        ),
        Err(Code::UnknownCapability)
    );
    let created = |e: &mut Env, body: Map<String, Value>, subject: &str| {
        records::record_event_as(
            &mut e.core,
            "acme",
            "pm",
            "run-p",
            "task.created",
            body,
            Some(subject),
        )
    };
    assert_eq!(
        created(&mut e, body.clone(), "vikunja:4/44"),
        Err(Code::HumanInputRequired)
    );
    body.insert("request".into(), json!(input));
    body.insert("requirement".into(), json!("REQ-msg-2"));
    assert_eq!(
        created(&mut e, body.clone(), "vikunja:4/44"),
        Err(Code::InvalidRequest)
    );
    body.insert("requirement".into(), json!("REQ-MSG-2"));
    assert_eq!(
        created(&mut e, body.clone(), "vikunja:3/44"),
        Err(Code::TaskSubject)
    );
    created(&mut e, body.clone(), "vikunja:4/44").unwrap();
    // A later task.created for the same task id does not change the requirement.
    body.insert("task_ref".into(), json!("vikunja:3/44"));
    body.insert("requirement".into(), json!("REQ-MSG-9"));
    created(&mut e, body, "vikunja:3/44").unwrap();
    for kind in [
        "human.input",
        "launch.revoked",
        "launch.restored",
        "review.requested",
        "review.verdict",
    ] {
        assert_eq!(
            records::record_event_as(&mut e.core, "acme", "pm", "run-p", kind, Map::new(), None),
            Err(Code::ReservedEvent),
            "{kind}"
        );
    }
    let mut push = Map::new();
    push.insert("action".into(), json!("git.push.working"));
    assert_eq!(
        records::record_event_as(
            &mut e.core,
            "acme",
            "pm",
            "run-p",
            "action.allowed",
            push,
            None
        ),
        Err(Code::ReservedEvent)
    );

    let before = e.counts();
    let all = e.ok(&reader(), "tasks", Value::Null);
    let refs: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_ref"].as_str().unwrap())
        .collect();
    assert_eq!(
        refs,
        vec![
            "vikunja:3/41",
            "vikunja:3/42",
            "vikunja:3/43",
            "vikunja:5/44"
        ]
    );
    assert_eq!(all[0]["priority"], json!(0), "Vikunja's 0 stays 0");
    assert_eq!(all[0]["fields"]["title"], json!("A"));
    assert_eq!(all[1]["priority"], json!(3));
    assert_eq!(all[2]["tombstone"], json!(true));
    assert_eq!(all[2]["priority"], Value::Null);
    assert_eq!(all[3]["priority"], Value::Null);
    assert_eq!(
        all[3]["requirement"],
        json!("REQ-MSG-2"),
        "moved task keeps its first requirement"
    );
    assert_eq!(all[0]["requirement"], Value::Null);
    let one = e.ok(&cap_caller, "tasks", json!({"task_ref": "vikunja:3/43"}));
    assert_eq!(one["tombstone"], json!(true));
    assert_eq!(
        e.call(&cap_caller, "tasks", json!({"task_ref": "vikunja:9/9"})),
        Err(Code::TaskNotFound)
    );
    assert_eq!(
        e.call(
            &cap_caller,
            "tasks",
            json!({"task_ref": "vikunja:3/41", "done": true})
        ),
        Err(Code::InvalidRequest)
    );

    let short = e.ok(&human(), "tasks", json!({"limit": 2}));
    assert_eq!(short["total"], json!(3), "tombstones are left out");
    assert_eq!(short["next"], json!("vikunja:3/42"));
    assert_eq!(
        short["tasks"][0],
        json!({"task_ref": "vikunja:3/41", "title": "A", "done": false, "bucket": "Doing",
               "assignees": ["pm"], "labels": [7], "priority": 0, "requirement": null,
               "changed_at": all[0]["at"]})
    );
    assert_eq!(short["tasks"][1]["assignees"], json!(["cto", "pm"]));
    let rest = e.ok(
        &human(),
        "tasks",
        json!({"limit": 2, "after": short["next"]}),
    );
    assert_eq!(rest["tasks"][0]["task_ref"], json!("vikunja:5/44"));
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(
        e.ok(&human(), "tasks", json!({"done": true}))["tasks"][0]["task_ref"],
        json!("vikunja:3/42")
    );
    assert_eq!(
        e.ok(&human(), "tasks", json!({"assignee": "cto"}))["total"],
        json!(1)
    );
    assert_eq!(
        e.ok(&human(), "tasks", json!({"label": 7}))["total"],
        json!(1)
    );
    assert_eq!(
        e.ok(&human(), "tasks", json!({"requirement": "REQ-MSG-2"}))["tasks"][0]["task_ref"],
        json!("vikunja:5/44")
    );
    assert_eq!(
        e.ok(&human(), "tasks", json!({"after": "vikunja:4"}))["total"],
        json!(3),
        "after needn't be on the board"
    );
    for bad in [
        json!({"done": "yes"}),
        json!({"assignee": "nobody"}),
        json!({"requirement": "REQ-1"}),
        json!({"limit": 0}),
        json!({"limit": 201}),
        json!({"label": true}),
        json!({"colour": "red"}),
    ] {
        assert_eq!(
            e.call(&human(), "tasks", bad.clone()),
            Err(Code::InvalidRequest),
            "{bad}"
        );
        // The refusal is the one row it leaves (checked by count below).
        assert_eq!(
            e.refusals().last(),
            Some(&json!([
                "human",
                "human-cli",
                null,
                "tasks",
                "invalid-request"
            ]))
        );
    }

    let st = e.ok(&cap_caller, "state", Value::Null);
    assert_eq!(
        st["launch"],
        json!({"state": "allowed", "at": null, "event": null})
    );
    assert_eq!(st["tasks"]["total"], json!(2));
    assert_eq!(st["tasks"]["cap"], json!(50));
    assert_eq!(
        st["tasks"]["open"],
        json!([{"task_ref": "vikunja:3/41", "title": "A"}, {"task_ref": "vikunja:5/44", "title": "Moved"}])
    );
    assert_eq!(e.counts(), before, "reads write nothing");
    let rev = e.event("acme", "launch.revoked", json!({}));
    assert_eq!(
        e.ok(&human(), "state", Value::Null)["launch"]["state"],
        json!("revoked")
    );
    assert_eq!(
        e.ok(&reader(), "state", Value::Null)["launch"]["event"],
        json!(rev)
    );
    let res = e.event("acme", "launch.restored", json!({}));
    let st = e.ok(&human(), "state", Value::Null);
    assert_eq!(st["launch"]["state"], json!("allowed"));
    assert_eq!(st["launch"]["event"], json!(res));
    assert!(st["launch"]["at"].is_string());
}
