//! Decisions, authority and single-use approvals on real brokers: real
//! `mosaic-bus` children, real sockets, real SQLite. Human-routed
//! resolutions need a proven human session and are tested in process
//! (broker/tests/decisions_human.rs).

use mosaic_tests::*;
use serde_json::{json, Value};

#[path = "support/decisions_env.rs"]
mod decisions_env;
use decisions_env::{business, config_with, Env, MERGE_TARGET};

#[test]
fn raise_checks_its_choices_in_the_spec_order_and_every_field_code() {
    let e = Env::new();
    let two = json!([{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}]);
    let cases: Vec<(Value, &str)> = vec![
        // options first: a bad option list wins over a bad recommendation and approval choice
        (
            json!({"options": "yes", "recommendation": "maybe", "approvalChoice": "nope"}),
            "invalid-options",
        ),
        (
            json!({"options": [{"key": "yes", "text": "Yes"}], "recommendation": "maybe"}),
            "invalid-options",
        ),
        (
            json!({"options": [{"key": "yes", "text": "A"}, {"key": "yes", "text": "B"}]}),
            "invalid-options",
        ),
        (
            json!({"options": [{"key": "_x", "text": "A"}, {"key": "yes", "text": "B"}]}),
            "invalid-options",
        ),
        (
            json!({"options": [{"key": "a", "text": ""}, {"key": "yes", "text": "B"}]}),
            "invalid-options",
        ),
        (
            json!({"options": [{"key": "a", "text": "A", "why": "x"}, {"key": "yes", "text": "B"}]}),
            "invalid-request",
        ),
        (json!({"options": ["yes", "no"]}), "invalid-request"),
        // then the recommendation, before the approval choice
        (
            json!({"options": two, "recommendation": "yes: because", "approvalChoice": "nope"}),
            "invalid-recommendation",
        ),
        (
            json!({"options": two, "recommendation": null}),
            "invalid-recommendation",
        ),
        // then the approval choice, default `yes`
        (
            json!({"options": two, "approvalChoice": "ship"}),
            "invalid-approval-choice",
        ),
        (
            json!({"options": [{"key": "go", "text": "Go"}, {"key": "stop", "text": "Stop"}],
                "recommendation": "go"}),
            "invalid-approval-choice",
        ),
        // the other fields
        (json!({"blocking": true}), "task-required"),
        (
            json!({"blocking": true, "task_ref": "vikunja:3"}),
            "invalid-request",
        ),
        (json!({"task_ref": "jira:3/41"}), "invalid-request"),
        (json!({"requirement_ref": "REQ-DEC-0"}), "invalid-request"),
        (json!({"domain": "legal"}), "invalid-request"),
        (json!({"surprise": 1}), "invalid-request"),
        (json!({"blocking": "no"}), "invalid-request"),
        (json!({"action": "made.up"}), "unknown-action"),
        (json!({"project": "elsewhere"}), "unknown-project"),
        (
            json!({"action": "role.revoke", "target": "nobody"}),
            "unknown-role",
        ),
        (json!({"action": "role.revoke"}), "invalid-request"),
        // within-role closes at raise and needs its choice; others take none
        (json!({"action": "record.write"}), "choice-required"),
        (
            json!({"action": "record.write", "choice": "maybe"}),
            "invalid-choice",
        ),
        (json!({"choice": "yes"}), "invalid-choice"),
        (
            json!({"supersedes": "00000000-0000-4000-8000-000000000000"}),
            "supersede-refused",
        ),
        (json!({"supersedes": "not-a-uuid"}), "supersede-refused"),
    ];
    for (extra, code) in cases {
        let r = e.raise("dev", extra.clone());
        assert_eq!(err(&r), code, "{extra}");
    }
    // A refused raise stored nothing.
    assert_eq!(
        e.count("SELECT count(*) FROM decisions WHERE business = ?1", "acme"),
        0
    );
    // A blocking decision with a strict task ref, and every optional field.
    let d = e.raised(
        "dev",
        json!({"blocking": true, "task_ref": "vikunja:3/41", "project": "site",
               "requirement_ref": "REQ-DEC-2", "target": MERGE_TARGET, "domain": "delivery"}),
    );
    assert_eq!(d["blocking"], json!(true));
    assert_eq!(d["task_ref"], json!("vikunja:3/41"));
    assert_eq!(
        d["options"],
        json!([{"key": "yes", "text": "Merge it"}, {"key": "no", "text": "Not yet"}])
    );
    assert_eq!(
        d["authorization"],
        json!({"action": "git.merge.protected", "target": MERGE_TARGET, "approvalChoice": "yes"})
    );
    // A reader may not raise.
    assert_eq!(err(&e.reader("decision.raise", json!({}))), "read-only");
}

#[test]
fn a_released_role_cannot_raise() {
    let e = Env::new();
    let r = e.call("qa", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.raise("qa", json!({"action": "prd.approve"}))),
        "not-holder"
    );
}

#[test]
fn routing_is_fixed_at_raise() {
    let e = Env::new();
    // (raiser, extra args, class, routed_to, state)
    let cases: Vec<(&str, Value, &str, &str, &str)> = vec![
        // within-role closes atomically with its choice
        (
            "dev",
            json!({"action": "record.write", "choice": "no"}),
            "within-role",
            "dev",
            "resolved",
        ),
        // cross-role: the delivery arbiter, or the technical one by domain
        ("dev", json!({}), "cross-role", "pm", "open"),
        (
            "dev",
            json!({"domain": "technical"}),
            "cross-role",
            "cto",
            "open",
        ),
        // the arbiter is the raiser: the human resolves, the class stays cross-role
        ("pm", json!({}), "cross-role", "human", "open"),
        (
            "cto",
            json!({"domain": "technical"}),
            "cross-role",
            "human",
            "open",
        ),
        // unlisted actions and hard waits are gated to the human
        (
            "dev",
            json!({"action": "prd.approve"}),
            "gated",
            "human",
            "open",
        ),
        (
            "qa",
            json!({"action": "message.send", "target": "pm"}),
            "gated",
            "human",
            "open",
        ),
        ("pm", json!({"action": "deploy"}), "gated", "human", "open"),
        // a non-blocking role.revoke by a role that doesn't list it: the human's inbox
        (
            "qa",
            json!({"action": "role.revoke", "target": "dev"}),
            "gated",
            "human",
            "open",
        ),
        // role.launch: within-role for launch.by, gated for anyone else
        (
            "pm",
            json!({"action": "role.launch", "target": "qa", "choice": "yes"}),
            "within-role",
            "pm",
            "resolved",
        ),
        (
            "dev",
            json!({"action": "role.launch", "target": "qa"}),
            "gated",
            "human",
            "open",
        ),
    ];
    for (raiser, extra, class, to, state) in cases {
        let d = e.raised(raiser, extra.clone());
        assert_eq!(d["class"], json!(class), "{raiser} {extra}");
        assert_eq!(d["routed_to"], json!(to), "{raiser} {extra}");
        assert_eq!(d["state"], json!(state), "{raiser} {extra}");
        assert_eq!(d["raised_by_role"], json!(raiser));
        assert_eq!(d["raised_by_run"], json!(format!("{raiser}-1")));
    }
    // The within-role close is one `resolved` row by the raising run.
    let d = e.raised("dev", json!({"action": "record.write", "choice": "yes"}));
    assert_eq!(d["choice"], json!("yes"));
    let id = d["id"].as_str().unwrap();
    assert_eq!(
        e.count("SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'resolved' AND by = 'dev-1'", id),
        1
    );
    // The raise's context event: action.allowed for decision.raise, not a use.
    let ev = d["event"].as_str().unwrap();
    let body: String = e
        .db()
        .query_row(
            "SELECT body FROM events WHERE id = ?1 AND kind = 'action.allowed'",
            [ev],
            |r| r.get(0),
        )
        .unwrap();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["action"], json!("decision.raise"));
    assert_eq!(body["authorization"]["approvalChoice"], json!("yes"));
    assert_eq!(
        e.count(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            id
        ),
        0
    );
}

#[test]
fn cross_role_approval_is_single_use_across_paths_and_restarts() {
    let mut e = Env::new();
    let d = e.raised("dev", json!({"target": MERGE_TARGET}));
    let id = d["id"].clone();
    // Not yet resolved: not approved. Without a decision: decision required.
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), Some(&id))),
        "decision-not-approved"
    );
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), None)),
        "decision-required"
    );
    // Only the routed role's holder resolves.
    assert_eq!(err(&e.resolve("cto", &id, "yes")), "not-resolver");
    assert_eq!(err(&e.resolve("dev", &id, "yes")), "not-resolver");
    assert_eq!(err(&e.resolve("pm", &id, "maybe")), "invalid-choice");
    assert_eq!(
        err(&e.call("pm", "decision.seen", json!({"id": "nope"}))),
        "decision-not-found"
    );
    assert_eq!(
        err(&e.call("dev", "decision.seen", json!({"id": id}))),
        "not-resolver"
    );
    let s = e.call("pm", "decision.seen", json!({"id": id, "note": "looking"}));
    assert_eq!(s["ok"], json!(true), "{s}");
    let r = e.call(
        "pm",
        "decision.resolve",
        json!({"id": id, "choice": "yes", "note": "ship it"}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    // The decision's trail holds its events, oldest first, each a whole row.
    let trail = e.call("pm", "trail", json!({"subject": id}));
    let events: Vec<&Value> = trail["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["record"] == json!("decision_event"))
        .collect();
    assert_eq!(events.len(), 2, "{trail}");
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    for ev in &events {
        assert_eq!(
            keys(ev),
            ["at", "by", "choice", "decision", "input", "kind", "note", "record", "run", "seq"]
        );
        assert_eq!(ev["decision"], id);
    }
    assert_eq!(
        (&events[0]["kind"], &events[0]["note"], &events[0]["choice"]),
        (&json!("seen"), &json!("looking"), &Value::Null)
    );
    assert_eq!(
        (&events[1]["kind"], &events[1]["note"], &events[1]["choice"]),
        (&json!("resolved"), &json!("ship it"), &json!("yes"))
    );
    assert_eq!(err(&e.resolve("pm", &id, "no")), "decision-closed");
    assert_eq!(
        err(&e.call("dev", "decision.withdraw", json!({"id": id}))),
        "decision-closed"
    );

    // The close message to the raising role, exact text, from the closing role and run.
    let ids = id.as_str().unwrap();
    let (from_role, from_run, to, class, body, request): (String, String, String, String, String, Option<String>) = e
        .db()
        .query_row(
            "SELECT from_role, from_run, to_role, class, body, request FROM messages WHERE decision = ?1",
            [ids],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .unwrap();
    assert_eq!(
        (
            from_role.as_str(),
            from_run.as_str(),
            to.as_str(),
            class.as_str()
        ),
        ("pm", "pm-1", "dev", "DECISION")
    );
    assert_eq!(
        body,
        format!("Decision {ids} on git.merge.protected was resolved by pm-1: yes (Merge it).\nNote: ship it")
    );
    assert_eq!(request, None);

    // Mismatches: another target, another instance, another action.
    assert_eq!(
        err(&e.authorize(
            "dev",
            "git.merge.protected",
            Some("vikunja:3/42"),
            Some(&id)
        )),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", None, Some(&id))),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.authorize("cto", "git.merge.protected", Some(MERGE_TARGET), Some(&id))),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.authorize("dev", "role.revoke", Some(MERGE_TARGET), Some(&id))),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.authorize(
            "dev",
            "git.merge.protected",
            Some(MERGE_TARGET),
            Some(&json!("00000000-0000-4000-8000-000000000000"))
        )),
        "decision-not-found"
    );
    assert_eq!(
        err(&e.authorize("dev", "made.up", None, None)),
        "unknown-action"
    );

    // The approval: once.
    let ok = e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), Some(&id));
    assert_eq!(ok["ok"], json!(true), "{ok}");
    assert_eq!(ok["result"]["allowed"], json!(true));
    let event = ok["result"]["event"].as_str().unwrap().to_string();
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), Some(&id))),
        "decision-consumed"
    );
    assert_eq!(
        e.count(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            ids
        ),
        1
    );
    let body: String = e
        .db()
        .query_row("SELECT body FROM events WHERE id = ?1", [&event], |r| {
            r.get(0)
        })
        .unwrap();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"action": "git.merge.protected", "target": MERGE_TARGET, "decision": ids, "class": "cross-role"})
    );

    // After a restart (new broker, same data root), still consumed.
    e.restart(business());
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), Some(&id))),
        "decision-consumed"
    );
}

#[test]
fn a_class_change_in_policy_is_a_mismatch_in_either_direction() {
    let mut e = Env::new();
    // cross-role at raise, gated after the policy changes
    let cross = e.raised("dev", json!({"target": MERGE_TARGET}))["id"].clone();
    let r = e.resolve("pm", &cross, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    // gated at raise (dev may not record... qa lists nothing), cross-role after
    let gated = e.raised("qa", json!({"target": MERGE_TARGET}))["id"].clone();
    let mut changed = business();
    changed["roles"]["dev"]["authority"]["crossRole"] = json!(["role.revoke"]);
    changed["roles"]["qa"]["authority"]["crossRole"] = json!(["git.merge.protected"]);
    e.restart(changed.clone());
    assert_eq!(
        err(&e.authorize(
            "dev",
            "git.merge.protected",
            Some(MERGE_TARGET),
            Some(&cross)
        )),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.authorize(
            "qa",
            "git.merge.protected",
            Some(MERGE_TARGET),
            Some(&gated)
        )),
        "decision-mismatch"
    );
    // The refused uses spent nothing: back under the raise-time policy, it works once.
    e.restart(business());
    let ok = e.authorize(
        "dev",
        "git.merge.protected",
        Some(MERGE_TARGET),
        Some(&cross),
    );
    assert_eq!(ok["ok"], json!(true), "{ok}");
}

#[test]
fn a_within_role_approval_is_single_use_and_other_options_refuse() {
    let mut e = Env::new();
    // Without a decision, within-role authorize keeps its behaviour: allowed, every time.
    for _ in 0..2 {
        let r = e.authorize("dev", "record.write", Some("docs/a.md"), None);
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    let yes = e.raised(
        "dev",
        json!({"action": "record.write", "target": "docs/a.md", "choice": "yes"}),
    )["id"]
        .clone();
    let no = e.raised(
        "dev",
        json!({"action": "record.write", "target": "docs/a.md", "choice": "no"}),
    )["id"]
        .clone();
    assert_eq!(
        err(&e.authorize("dev", "record.write", Some("docs/a.md"), Some(&no))),
        "decision-not-approved"
    );
    let r = e.authorize("dev", "record.write", Some("docs/a.md"), Some(&yes));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.authorize("dev", "record.write", Some("docs/a.md"), Some(&yes))),
        "decision-consumed"
    );
    // A custom approval choice.
    let ship = e.raised(
        "dev",
        json!({"action": "record.write", "options": [{"key": "ship", "text": "Ship"}, {"key": "hold", "text": "Hold"}],
               "recommendation": "hold", "approvalChoice": "ship", "choice": "ship"}),
    );
    assert_eq!(ship["authorization"]["approvalChoice"], json!("ship"));
    let r = e.authorize("dev", "record.write", None, Some(&ship["id"]));
    assert_eq!(r["ok"], json!(true), "{r}");
    // Not the holder: a released role authorizes nothing.
    let r = e.call("dev", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true));
    assert_eq!(
        err(&e.authorize("dev", "record.write", None, None)),
        "not-holder"
    );
}

#[test]
fn withdraw_supersede_and_the_decisions_lists() {
    let e = Env::new();
    let a = e.raised("dev", json!({"target": MERGE_TARGET}))["id"].clone();
    // Another role cannot supersede or withdraw it.
    assert_eq!(
        err(&e.raise("cto", json!({"supersedes": a}))),
        "supersede-refused"
    );
    assert_eq!(
        err(&e.call("cto", "decision.withdraw", json!({"id": a}))),
        "not-raiser"
    );
    // The same role instance supersedes it in the raise's transaction.
    let b = e.raised("dev", json!({"target": MERGE_TARGET, "supersedes": a}));
    assert_eq!(b["supersedes"], a);
    assert_eq!(err(&e.resolve("pm", &a, "yes")), "decision-closed");
    // A closed decision cannot be superseded again.
    assert_eq!(
        err(&e.raise("dev", json!({"supersedes": a}))),
        "supersede-refused"
    );
    // The raising run's own withdraw.
    let w = e.call(
        "dev",
        "decision.withdraw",
        json!({"id": b["id"], "note": "not needed"}),
    );
    assert_eq!(w["ok"], json!(true), "{w}");
    // Neither the supersede nor the raising run's withdraw sends a message.
    assert_eq!(
        e.count("SELECT count(*) FROM messages WHERE business = ?1", "acme"),
        0
    );

    let open = e.raised("dev", json!({"domain": "technical"}))["id"].clone(); // routed to cto
    let _human = e.raised("pm", json!({})); // routed to the human
    let c = e.raised("cto", json!({}))["id"].clone(); // routed to pm
                                                      // roles: open decisions routed to a role, oldest first; never the human's.
    let roles = e.reader("decisions", json!({"list": "roles"}));
    let ids: Vec<Value> = roles["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(ids, vec![open.clone(), c.clone()]);
    assert_eq!(
        roles["result"][0]["authorization"]["approvalChoice"],
        json!("yes")
    );
    assert_eq!(roles["result"][0]["blocking"], json!(false));
    // Every listed row is the decision row `trail` gives the same session
    // for its id, as `inbox` shows it too.
    let trail_of = |id: &Value| -> Vec<Value> {
        let t = e.reader("trail", json!({"subject": id}));
        t["result"].as_array().expect("trail").clone()
    };
    let decision_in = |items: &[Value], id: &Value| -> Value {
        items
            .iter()
            .find(|r| r["record"] == json!("decision") && r["id"] == *id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for row in roles["result"].as_array().unwrap() {
        assert_eq!(*row, decision_in(&trail_of(&row["id"]), &row["id"]));
    }
    let inbox = e.reader("inbox", Value::Null);
    let human_row = &inbox["result"]["decisions"][0];
    assert_eq!(human_row["id"], _human["id"]);
    assert_eq!(
        *human_row,
        decision_in(&trail_of(&_human["id"]), &_human["id"])
    );
    // recent: closed ones, newest close first, each with its closing row.
    let r = e.resolve("pm", &c, "no");
    assert_eq!(r["ok"], json!(true));
    let recent = e.reader("decisions", json!({"list": "recent"}));
    let rows = recent["result"].as_array().unwrap();
    let got: Vec<(Value, Value)> = rows
        .iter()
        .map(|d| (d["id"].clone(), d["closed"]["kind"].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (c.clone(), json!("resolved")),
            (b["id"].clone(), json!("withdrawn")),
            (a.clone(), json!("withdrawn"))
        ]
    );
    assert_eq!(rows[0]["closed"]["choice"], json!("no"));
    assert_eq!(rows[1]["closed"]["note"], json!("not needed"));
    for row in rows {
        let items = trail_of(&row["id"]);
        let mut decision = row.clone();
        let closed = decision
            .as_object_mut()
            .and_then(|o| o.remove("closed"))
            .unwrap_or(Value::Null);
        assert_eq!(decision, decision_in(&items, &row["id"]));
        let mut close = items
            .iter()
            .find(|r| {
                r["record"] == json!("decision_event")
                    && (r["kind"] == json!("resolved") || r["kind"] == json!("withdrawn"))
            })
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(o) = close.as_object_mut() {
            o.remove("record");
        }
        assert_eq!(closed, close);
    }
    // Roles may not list; bad lists refuse.
    assert_eq!(
        err(&e.call("pm", "decisions", json!({"list": "roles"}))),
        "human-required"
    );
    assert_eq!(
        err(&e.reader("decisions", json!({"list": "all"}))),
        "invalid-request"
    );
    assert_eq!(
        err(&e.reader("decisions", json!({"list": "roles", "x": 1}))),
        "invalid-request"
    );
    // Readers resolve nothing.
    assert_eq!(
        err(&e.reader("decision.resolve", json!({"id": open, "choice": "yes"}))),
        "read-only"
    );
}

#[test]
fn launch_authority_and_host_refusals() {
    let mut e = Env::new();
    // launch.by launches within-role; anyone else needs a (gated) decision.
    let pm = e.caps["pm"].clone();
    let dev = e.caps["dev"].clone();
    let r = e
        .broker()
        .op(json!({"op": "authorizeLaunch", "cap": pm, "instance": "qa", "id": 5}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["id"], json!(5));
    assert_eq!(r["result"]["allowed"], json!(true));
    let r = e
        .broker()
        .op(json!({"op": "authorizeLaunch", "cap": dev, "instance": "qa"}));
    assert_eq!(err(&r), "decision-required");
    let r = e
        .broker()
        .op(json!({"op": "authorizeLaunch", "cap": pm, "instance": "nobody"}));
    assert_eq!(err(&r), "unknown-role");
    // Both refusals are on record as action.refused against the caller.
    let refused: Vec<(String, String)> = {
        let db = e.db();
        let mut s = db
            .prepare("SELECT run, body FROM events WHERE kind = 'action.refused' ORDER BY seq")
            .unwrap();
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    assert_eq!(refused.len(), 2);
    assert_eq!(refused[0].0, "dev-1");
    let b0: Value = serde_json::from_str(&refused[0].1).unwrap();
    assert_eq!(
        b0,
        json!({"action": "role.launch", "target": "qa", "code": "decision-required"})
    );
    let b1: Value = serde_json::from_str(&refused[1].1).unwrap();
    assert_eq!(b1["code"], json!("unknown-role"));

    // refuse: the code only; a task ref subject files it on the task's trail.
    let r = e
        .broker()
        .op(json!({"op": "refuse", "cap": pm, "code": "capacity", "subject": "vikunja:3/41"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let trail = e.call("pm", "trail", json!({"subject": "vikunja:3/41"}));
    let recs = trail["result"].as_array().unwrap();
    assert!(
        recs.iter()
            .any(|x| x["kind"] == json!("action.refused")
                && x["body"] == json!({"code": "capacity"})),
        "{trail}"
    );
    let r = e
        .broker()
        .op(json!({"op": "refuse", "cap": pm, "code": "spawn-failed", "subject": "qa"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let ev = r["result"]["event"].as_str().unwrap().to_string();
    let subject: Option<String> = e
        .db()
        .query_row("SELECT subject FROM events WHERE id = ?1", [&ev], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(subject, None);
    // Any other subject, of any type, or none, records null.
    for other in [
        json!(42),
        json!(""),
        json!({"task": "vikunja:3/41"}),
        json!(null),
    ] {
        let r = e
            .broker()
            .op(json!({"op": "refuse", "cap": pm, "code": "spawn-failed", "subject": other}));
        assert_eq!(r["ok"], json!(true), "{other}: {r}");
        let ev = r["result"]["event"].as_str().unwrap().to_string();
        let (subject, body): (Option<String>, String) = e
            .db()
            .query_row(
                "SELECT subject, body FROM events WHERE id = ?1",
                [&ev],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(subject, None, "{other}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"code": "spawn-failed"})
        );
    }
    let r = e
        .broker()
        .op(json!({"op": "refuse", "cap": pm, "code": "Not A Code"}));
    assert_eq!(err(&r), "invalid-request");
    let r = e
        .broker()
        .op(json!({"op": "refuse", "cap": "nope", "code": "capacity"}));
    assert_eq!(err(&r), "unknown-capability");
    let reader = e.broker().reader_cap();
    let r = e
        .broker()
        .op(json!({"op": "authorize", "cap": reader, "action": "record.write"}));
    assert_eq!(err(&r), "read-only");
    let r = e
        .broker()
        .op(json!({"op": "authorize", "cap": pm, "action": "record.write", "extra": 1}));
    assert_eq!(err(&r), "invalid-request");
    // The verdict key is accepted (its task.close check is issue 6's).
    let r = e
        .broker()
        .op(json!({"op": "authorize", "cap": pm, "action": "record.write", "verdict": "x"}));
    assert_eq!(r["ok"], json!(true), "{r}");

    // Launch toggles are the human's: roles and readers are refused.
    assert_eq!(
        err(&e.call("pm", "launch.revoke", Value::Null)),
        "human-required"
    );
    assert_eq!(
        err(&e.reader("launch.restore", Value::Null)),
        "human-required"
    );
}

#[test]
fn a_raise_whose_close_could_not_reach_the_raiser_is_refused_and_logged() {
    let mut b = business();
    b["roles"]["pm"]["definition"] = json!("product");
    b["roles"]["dev"]["messaging"] = json!({"sendTo": ["pm"], "receiveFrom": ["product"]});
    let e = Env::with(b);
    // cross-role to pm (definition `product`, listed): fine
    let d = e.raised("dev", json!({}));
    assert_eq!(d["routed_to"], json!("pm"));
    // technical arbiter cto is not listed; neither is the human for a gated route
    let r = e.raise(
        "dev",
        json!({"domain": "technical", "task_ref": "vikunja:3/41"}),
    );
    assert_eq!(err(&r), "decision-route-refused");
    assert_eq!(
        err(&e.raise("dev", json!({"action": "prd.approve"}))),
        "decision-route-refused"
    );
    // within-role raises are exempt
    let w = e.raised("dev", json!({"action": "record.write", "choice": "yes"}));
    assert_eq!(w["class"], json!("within-role"));
    // Nothing stored for the refusals; each one logged as action.refused.
    assert_eq!(
        e.count("SELECT count(*) FROM decisions WHERE business = ?1", "acme"),
        2
    );
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'action.refused' AND run = ?1 AND json_extract(body, '$.code') = 'decision-route-refused'", "dev-1"),
        2
    );
    let trail = e.call("dev", "trail", json!({"subject": "vikunja:3/41"}));
    assert!(
        trail["result"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["kind"] == json!("action.refused")),
        "{trail}"
    );
}

#[test]
fn authority_maps_may_name_only_routed_actions() {
    let root = data_root();
    for (list, action) in [
        ("withinRole", "deploy"),
        ("crossRole", "spend"),
        ("crossRole", "made.up"),
    ] {
        let mut b = business();
        b["roles"]["qa"]["authority"][list] = json!([action]);
        let (_b, reply) = Broker::spawn(root.path(), config_with(root.path(), b));
        assert_eq!(
            reply,
            json!({"ok": false, "error": "invalid-business"}),
            "{list} {action}"
        );
    }
    let mut b = business();
    b["roles"]["qa"]["authority"]["crossRole"] = json!(["prd.approve", "role.launch", "routine"]);
    let (b, reply) = Broker::spawn(root.path(), config_with(root.path(), b));
    assert_eq!(reply["ok"], json!(true), "{reply}");
    b.close();
}

#[test]
fn any_run_of_the_raising_instance_consumes_its_approval_once() {
    let mut e = Env::new();
    let id = e.raised("dev", json!({"target": MERGE_TARGET}))["id"].clone();
    let r = e.resolve("pm", &id, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    // dev-1 leaves; dev-2 holds the instance and uses the approval (row 136).
    let r = e.call("dev", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.authorize("dev", "git.merge.protected", Some(MERGE_TARGET), Some(&id))),
        "not-holder"
    );
    let p2 = sleeper();
    let cap2 = e.broker().bind("dev", "dev-2", p2.id());
    let r = e.broker().call(&cap2, "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    let op = json!({"op": "authorize", "cap": cap2, "action": "git.merge.protected",
                    "target": MERGE_TARGET, "decision": id});
    let r = e.broker().op(op.clone());
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["result"]["allowed"], json!(true));
    assert!(r["result"]["event"].is_string(), "{r}");
    assert_eq!(
        r["result"].as_object().map(|o| o.len()),
        Some(2),
        "exactly {{allowed, event}}: {r}"
    );
    assert_eq!(err(&e.broker().op(op)), "decision-consumed");
}

/// A run that no longer holds the routed role resolves nothing and marks
/// nothing seen (`not-holder`), whether it released the role or was
/// revoked, while its capability is still bound; the run that holds the
/// role now does. Issue 31's mutant: `check_resolver` without its holder
/// check.
#[test]
fn only_the_routed_roles_current_holder_resolves() {
    let mut e = Env::new();
    let id = e.raised("dev", json!({"target": MERGE_TARGET}))["id"].clone();
    let r = e.call("pm", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(err(&e.resolve("pm", &id, "yes")), "not-holder");
    assert_eq!(
        err(&e.call("pm", "decision.seen", json!({"id": id}))),
        "not-holder"
    );
    // pm-2 holds the arbiter role now: pm-1 still resolves nothing.
    let p2 = sleeper();
    let cap2 = e.broker().bind("pm", "pm-2", p2.id());
    let r = e.broker().call(&cap2, "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(err(&e.resolve("pm", &id, "yes")), "not-holder");
    let r = e.broker().call(
        &cap2,
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["result"]["closed"]["by"], json!("pm-2"));
    // The refusals changed nothing: one close, by pm-2.
    assert_eq!(
        e.count(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind IN ('resolved', 'seen')",
            id.as_str().unwrap()
        ),
        1
    );
}

/// One spelling per field (3i L70, L153, L157): the `decision.raise` reply
/// names the approval option `approvalChoice`, as the inbox, trail and
/// `decisions` rows of the same decision do; no row says `approval_choice`.
#[test]
fn the_raise_reply_spells_approval_choice_as_every_row_does() {
    let e = Env::new();
    let d = e.raised(
        "dev",
        json!({"target": MERGE_TARGET, "approvalChoice": "no",
               "question": "Hold the merge?"}),
    );
    let id = d["id"].clone();
    let inbox = e.call("pm", "inbox", Value::Null);
    let inbox_row = inbox["result"]["decisions"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == id).cloned())
        .expect("in the arbiter's inbox");
    let trail = e.reader("trail", json!({"subject": id}));
    let trail_row = trail["result"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["record"] == json!("decision")).cloned())
        .expect("on its trail");
    let listed = e.reader("decisions", json!({"list": "roles"}));
    let list_row = listed["result"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == id).cloned())
        .expect("in the roles list");
    for (what, row) in [
        ("raise", &d),
        ("inbox", &inbox_row),
        ("trail", &trail_row),
        ("decisions", &list_row),
    ] {
        assert_eq!(row["approvalChoice"], json!("no"), "{what}: {row}");
        assert_eq!(
            row["authorization"]["approvalChoice"],
            json!("no"),
            "{what}: {row}"
        );
        assert!(row.get("approval_choice").is_none(), "{what}: {row}");
    }
}
