//! The review loop (row 93, #1587) on real brokers: pushes recorded through
//! the git socket's host ops, `review.request`, `review.verdict`,
//! `reviewFetch`, and the `task.close` verdict rule inside `authorize`.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;

const TASK: &str = "vikunja:3/41";
const OTHER: &str = "vikunja:3/42";
const C1: &str = "1111111111111111111111111111111111111111";
const C2: &str = "2222222222222222222222222222222222222222";
const C3: &str = "3333333333333333333333333333333333333333";

/// Roles claimed at start; `arch` and `ops` are bound but only claimed when a
/// test asks.
const CLAIMED: [&str; 4] = ["pm", "cto", "dev", "qa"];

fn business() -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
            "cto": {"authority": {"withinRole": ["message.send", "review.verdict"],
                                  "crossRole": []}},
            "dev": {"authority": {"withinRole": ["message.send", "git.push.working",
                                                 "review.request", "task.close"],
                                  "crossRole": []}},
            "qa": {"authority": {"withinRole": [], "crossRole": ["review.verdict"]}},
            "arch": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}},
            "ops": {"authority": {"withinRole": [],
                                  "crossRole": ["review.request", "task.close"]}}
        },
        "launch": {"by": "pm", "instances": ["cto", "dev", "qa", "arch"]},
        "projects": {"site": {"repo": "/srv/records/site"}}
    })
}

struct Env {
    root: tempfile::TempDir,
    b: Broker,
    caps: HashMap<&'static str, String>,
    _procs: Vec<Sleeper>,
}

fn env() -> Env {
    let root = data_root();
    let config = json!({"dataRoot": root.path(), "businesses": {"acme": business()},
                        "readers": ["acme"]});
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (caps, procs) = b.bind_each(&["pm", "cto", "dev", "qa", "arch", "ops"]);
    let e = Env {
        root,
        b,
        caps,
        _procs: procs,
    };
    for r in CLAIMED {
        e.ok(r, "role.claim", Value::Null);
    }
    e
}

impl Env {
    fn call(&self, role: &str, verb: &str, args: Value) -> Value {
        self.b.call(&self.caps[role], verb, args)
    }
    fn ok(&self, role: &str, verb: &str, args: Value) -> Value {
        res(&self.call(role, verb, args)).clone()
    }
    fn refused(&self, role: &str, verb: &str, args: Value) -> String {
        err(&self.call(role, verb, args)).to_string()
    }
    fn op(&mut self, role: &str, mut op: Value) -> Value {
        op["cap"] = json!(self.caps[role]);
        self.b.op(op)
    }
    fn push(&mut self, role: &str, task: &str, project: &str, commit: &str) -> Value {
        self.op(
            role,
            json!({"op": "recordPush", "push": {
                "task_ref": task, "project": project, "branch": "work/41",
                "ref": "refs/heads/work/41", "commit": commit, "previous": null}}),
        )
    }
    fn pushed(&mut self, task: &str, commit: &str) {
        let r = self.push("dev", task, "site", commit);
        assert_eq!(r["ok"], json!(true), "recordPush: {r}");
    }
    fn request(&self, commit: &str, to: &str) -> Value {
        self.call(
            "dev",
            "review.request",
            json!({"task_ref": TASK, "commit": commit, "to": to, "note": "please look"}),
        )
    }
    fn verdict(&self, role: &str, request: &Value, verdict: &str) -> Value {
        self.call(
            role,
            "review.verdict",
            json!({"task_ref": TASK, "request": request, "verdict": verdict, "body": "looked"}),
        )
    }
    fn close(&mut self, verdict: Option<&str>) -> Value {
        let mut op = json!({"op": "authorize", "action": "task.close", "target": TASK});
        if let Some(v) = verdict {
            op["verdict"] = json!(v);
        }
        self.op("dev", op)
    }
    fn count(&self, sql: &str) -> i64 {
        db(self.root.path())
            .query_row(sql, [], |r| r.get(0))
            .expect("count")
    }
    fn closes(&self) -> i64 {
        self.count(
            "SELECT count(*) FROM events WHERE kind = 'action.allowed'
             AND json_extract(body, '$.action') = 'task.close'",
        )
    }
    /// Raises a cross-role decision for `action` on the task as `role` and
    /// has the delivery arbiter (pm) approve it; returns its id.
    fn approved(&self, role: &str, action: &str) -> Value {
        let d = self.ok(
            role,
            "decision.raise",
            json!({"action": action, "question": "May I?", "target": TASK,
                   "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
                   "recommendation": "yes", "blocking": false}),
        );
        let id = d["id"].clone();
        self.ok("pm", "decision.resolve", json!({"id": id, "choice": "yes"}));
        id
    }
    fn consumed(&self, decision: &Value) -> i64 {
        db(self.root.path())
            .query_row(
                "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
                [decision.as_str().expect("decision id")],
                |r| r.get(0),
            )
            .expect("count")
    }
    fn action_refused(&self) -> i64 {
        self.count("SELECT count(*) FROM events WHERE kind = 'action.refused'")
    }
    /// The task's `action.refused` events as `(op, code)`.
    fn refusals(&self, task: &str) -> Vec<(String, String)> {
        let reader = self.b.reader_cap();
        let t = res(&self.b.call(&reader, "trail", json!({"subject": task}))).clone();
        t.as_array()
            .expect("trail array")
            .iter()
            .filter(|r| r["kind"] == json!("action.refused"))
            .map(|r| {
                assert_eq!(r["subject"], json!(task), "{r}");
                (
                    r["body"]["op"].as_str().unwrap_or_default().to_string(),
                    r["body"]["code"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }
}

fn pair(op: &str, code: &str) -> (String, String) {
    (op.to_string(), code.to_string())
}

#[test]
fn push_request_fetch_verdict_close_end_to_end() {
    let mut e = env();

    // checkPush records nothing when it allows.
    let before = row_counts(e.root.path());
    let r = e.op("dev", json!({"op": "checkPush", "task_ref": TASK}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(row_counts(e.root.path()), before);

    // recordPush writes the push record on the task's trail.
    let r = e.push("dev", TASK, "site", C1);
    let push_event = res(&r)["event"].clone();
    let reader = e.b.reader_cap();
    let trail = res(&e.b.call(&reader, "trail", json!({"subject": TASK}))).clone();
    let rec = trail
        .as_array()
        .expect("trail")
        .iter()
        .find(|x| x["id"] == push_event)
        .expect("push record on the trail")
        .clone();
    assert_eq!(rec["kind"], json!("action.allowed"));
    assert_eq!(rec["role"], json!("dev"));
    assert_eq!(rec["body"]["action"], json!("git.push.working"));
    assert_eq!(rec["body"]["project"], json!("site"));
    assert_eq!(rec["body"]["branch"], json!("work/41"));
    assert_eq!(rec["body"]["ref"], json!("refs/heads/work/41"));
    assert_eq!(rec["body"]["commit"], json!(C1));
    assert_eq!(rec["body"]["previous"], Value::Null);

    // review.request to a claimed reviewer: held is its run.
    let req = res(&e.request(C1, "cto")).clone();
    assert_eq!(req["commit"], json!(C1));
    assert_eq!(req["ref"], json!("refs/heads/work/41"));
    assert_eq!(req["held"], json!("cto-1"));
    let request = req["request"].clone();
    let ev: (String, String, String) = db(e.root.path())
        .query_row(
            "SELECT kind, subject, body FROM events WHERE id = ?1",
            [request.as_str().expect("id")],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("review.requested row");
    assert_eq!((ev.0.as_str(), ev.1.as_str()), ("review.requested", TASK));
    let body: Value = serde_json::from_str(&ev.2).expect("body");
    assert_eq!(
        body,
        json!({"task_ref": TASK, "project": "site", "ref": "refs/heads/work/41",
               "commit": C1, "to": "cto", "message": req["message"], "held": "cto-1"})
    );

    // The reviewer receives a REVIEW-REQUEST naming the request.
    let got = e.ok("cto", "message.receive", Value::Null);
    let msgs = got["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 1, "{got}");
    assert_eq!(msgs[0]["id"], req["message"]);
    assert_eq!(msgs[0]["class"], json!("REVIEW-REQUEST"));
    assert_eq!(msgs[0]["from_role"], json!("dev"));
    let text = msgs[0]["body"].as_str().expect("body");
    assert!(text.contains(request.as_str().expect("id")), "{text}");
    assert!(text.contains("please look"), "{text}");

    // The host fetches what to bundle for the reviewer.
    let r = e.op(
        "cto",
        json!({"op": "reviewFetch", "args": {"task_ref": TASK, "request": request}}),
    );
    assert_eq!(
        res(&r),
        &json!({"project": "site", "commit": C1, "ref": "refs/heads/work/41"})
    );

    // The verdict: an event and a REVIEW-RESULT in reply to the request.
    let v = res(&e.verdict("cto", &request, "approve")).clone();
    assert_eq!(v["commit"], json!(C1));
    let got = e.ok("dev", "message.receive", Value::Null);
    let msgs = got["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 1, "{got}");
    assert_eq!(msgs[0]["id"], v["message"]);
    assert_eq!(msgs[0]["class"], json!("REVIEW-RESULT"));
    assert_eq!(msgs[0]["from_role"], json!("cto"));
    assert_eq!(msgs[0]["in_reply_to"], req["message"]);
    assert!(msgs[0]["body"]
        .as_str()
        .is_some_and(|b| b.contains("approve") && b.contains("looked")));
    let vb: String = db(e.root.path())
        .query_row(
            "SELECT body FROM events WHERE id = ?1 AND kind = 'review.verdict' AND subject = ?2",
            [v["verdict"].as_str().expect("id"), TASK],
            |r| r.get(0),
        )
        .expect("review.verdict row");
    let vb: Value = serde_json::from_str(&vb).expect("body");
    assert_eq!(
        vb,
        json!({"task_ref": TASK, "request": request, "commit": C1, "verdict": "approve",
               "message": v["message"]})
    );

    // task.close with the approving verdict for the latest push is allowed.
    let r = e.close(v["verdict"].as_str());
    assert_eq!(res(&r)["allowed"], json!(true), "{r}");
    assert_eq!(e.closes(), 1);
    assert!(e.refusals(TASK).is_empty());
}

#[test]
fn review_request_refusals() {
    let mut e = env();
    // No push at all: the commit is unknown.
    assert_eq!(err(&e.request(C1, "cto")), "unknown-commit");
    e.pushed(TASK, C1);
    e.pushed(TASK, C2);
    e.pushed(OTHER, C3);
    // An older push of this task is stale; a commit pushed for another task is unknown here.
    assert_eq!(err(&e.request(C1, "cto")), "stale-commit");
    assert_eq!(err(&e.request(C3, "cto")), "unknown-commit");
    assert_eq!(err(&e.request("abc", "cto")), "unknown-commit");
    assert_eq!(err(&e.request(C2, "nobody")), "unknown-role");
    assert_eq!(err(&e.request(C2, "dev")), "self-review");
    assert_eq!(err(&e.request(C2, "pm")), "not-a-reviewer");
    // pm has no review.request authority: the shared helper's code.
    assert_eq!(
        e.refused(
            "pm",
            "review.request",
            json!({"task_ref": TASK, "commit": C2, "to": "cto"})
        ),
        "decision-required"
    );
    assert_eq!(
        e.refused(
            "dev",
            "review.request",
            json!({"task_ref": "not-a-task", "commit": C2, "to": "cto"})
        ),
        "invalid-request"
    );
    let reader = e.b.reader_cap();
    assert_eq!(
        err(&e.b.call(
            &reader,
            "review.request",
            json!({"task_ref": TASK, "commit": C2, "to": "cto"})
        )),
        "read-only"
    );
    assert_eq!(
        err(&e.b.call(
            &reader,
            "review.verdict",
            json!({"task_ref": TASK, "request": "x", "verdict": "approve", "body": "b"})
        )),
        "read-only"
    );
    // None of those refusals left a review request or a message behind.
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'review.requested'"),
        0
    );
    assert_eq!(e.count("SELECT count(*) FROM messages"), 0);

    // A reviewer nobody holds: held is null and the message waits for a claim.
    let r = res(&e.request(C2, "arch")).clone();
    assert_eq!(r["held"], Value::Null);
    assert_eq!(r["commit"], json!(C2));
    e.ok("arch", "role.claim", Value::Null);
    let got = e.ok("arch", "message.receive", Value::Null);
    assert_eq!(got["messages"][0]["id"], r["message"]);
    assert_eq!(got["messages"][0]["class"], json!("REVIEW-REQUEST"));
    // Now held: a second request names arch's run.
    let r2 = res(&e.request(C2, "arch")).clone();
    assert_eq!(r2["held"], json!("arch-1"));
}

#[test]
fn review_verdict_refusals() {
    let mut e = env();
    e.pushed(TASK, C1);
    let req = res(&e.request(C1, "cto")).clone();
    let request = req["request"].clone();

    assert_eq!(err(&e.verdict("cto", &request, "maybe")), "invalid-request");
    // Not addressed to arch (a within-role reviewer).
    e.ok("arch", "role.claim", Value::Null);
    assert_eq!(
        err(&e.verdict("arch", &request, "approve")),
        "request-not-found"
    );
    // Unknown id, and the right id on another task.
    assert_eq!(
        err(&e.verdict("cto", &json!("no-such-request"), "approve")),
        "request-not-found"
    );
    assert_eq!(
        e.refused(
            "cto",
            "review.verdict",
            json!({"task_ref": OTHER, "request": request, "verdict": "approve", "body": "b"})
        ),
        "request-not-found"
    );
    // The push record is not a review request.
    let push_id = db(e.root.path())
        .query_row(
            "SELECT id FROM events WHERE kind = 'action.allowed' AND subject = ?1",
            [TASK],
            |r| r.get::<_, String>(0),
        )
        .expect("push id");
    assert_eq!(
        err(&e.verdict("cto", &json!(push_id), "approve")),
        "request-not-found"
    );
    // qa holds review.verdict cross-role only: without a decision it refuses.
    assert_eq!(
        err(&e.verdict("qa", &request, "approve")),
        "decision-required"
    );

    let v = res(&e.verdict("cto", &request, "changes")).clone();
    assert_eq!(v["commit"], json!(C1));
    assert_eq!(
        err(&e.verdict("cto", &request, "approve")),
        "verdict-exists"
    );
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'review.verdict'"),
        1
    );
}

#[test]
fn task_close_checks_the_verdict_only_on_a_pushed_task() {
    let mut e = env();
    // No push: the verdict is a citation the broker doesn't check.
    let r = e.close(Some("anything-at-all"));
    assert_eq!(res(&r)["allowed"], json!(true), "{r}");
    assert_eq!(e.closes(), 1);

    e.pushed(TASK, C1);
    let allowed_before = e.count("SELECT count(*) FROM events WHERE kind = 'action.allowed'");
    assert_eq!(err(&e.close(None)), "verdict-not-found");
    assert_eq!(err(&e.close(Some("no-such-verdict"))), "verdict-not-found");

    let req = res(&e.request(C1, "cto")).clone();
    // A review request is not a verdict.
    assert_eq!(err(&e.close(req["request"].as_str())), "verdict-not-found");
    let changes = res(&e.verdict("cto", &req["request"], "changes")).clone();
    assert_eq!(
        err(&e.close(changes["verdict"].as_str())),
        "verdict-not-approve"
    );

    let req = res(&e.request(C1, "cto")).clone();
    let approve = res(&e.verdict("cto", &req["request"], "approve")).clone();
    // A new push makes the approval stale.
    e.pushed(TASK, C2);
    assert_eq!(err(&e.close(approve["verdict"].as_str())), "verdict-stale");
    // A verdict of another task is not found on this one.
    e.pushed(OTHER, C3);
    let other_req = res(&e.call(
        "dev",
        "review.request",
        json!({"task_ref": OTHER, "commit": C3, "to": "cto"}),
    ))
    .clone();
    let other_v = res(&e.call(
        "cto",
        "review.verdict",
        json!({"task_ref": OTHER, "request": other_req["request"], "verdict": "approve",
               "body": "ok"}),
    ))
    .clone();
    assert_eq!(
        err(&e.close(other_v["verdict"].as_str())),
        "verdict-not-found"
    );

    // Every refusal rolled its action.allowed back: only the pushes and the
    // review requests' authorizations were added.
    assert_eq!(e.closes(), 1);
    let added =
        e.count("SELECT count(*) FROM events WHERE kind = 'action.allowed'") - allowed_before;
    // 2 pushes + 3 review.request + 3 review.verdict authorizations.
    assert_eq!(added, 8);

    // The latest push, reviewed and approved: allowed.
    let req = res(&e.request(C2, "cto")).clone();
    let ok = res(&e.verdict("cto", &req["request"], "approve")).clone();
    let r = e.close(ok["verdict"].as_str());
    assert_eq!(res(&r)["allowed"], json!(true), "{r}");
    assert_eq!(e.closes(), 2);
}

#[test]
fn host_op_refusals_land_on_the_task_trail() {
    let mut e = env();
    // pm has no git.push.working.
    let r = e.op("pm", json!({"op": "checkPush", "task_ref": TASK}));
    assert_eq!(err(&r), "decision-required");
    let r = e.push("pm", TASK, "site", C1);
    assert_eq!(err(&r), "decision-required");
    // dev may push, but only to one of the business's projects.
    let r = e.push("dev", TASK, "elsewhere", C1);
    assert_eq!(err(&r), "unknown-project");
    // A run that no longer holds its role.
    e.ok("qa", "role.release", Value::Null);
    let r = e.op("qa", json!({"op": "checkPush", "task_ref": TASK}));
    assert_eq!(err(&r), "not-holder");
    // None of that recorded a push.
    assert_eq!(
        e.count(
            "SELECT count(*) FROM events WHERE kind = 'action.allowed'
             AND json_extract(body, '$.action') = 'git.push.working'"
        ),
        0
    );

    e.pushed(TASK, C1);
    let req = res(&e.request(C1, "cto")).clone();
    let request = req["request"].clone();
    e.ok("arch", "role.claim", Value::Null);
    // arch is a reviewer, but the request is cto's; pm is no reviewer at all.
    let r = e.op(
        "arch",
        json!({"op": "reviewFetch", "args": {"task_ref": TASK, "request": request}}),
    );
    assert_eq!(err(&r), "request-not-found");
    let r = e.op(
        "pm",
        json!({"op": "reviewFetch", "args": {"task_ref": TASK, "request": request}}),
    );
    assert_eq!(err(&r), "request-not-found");
    let r = e.op(
        "cto",
        json!({"op": "reviewFetch", "args": {"task_ref": OTHER, "request": request}}),
    );
    assert_eq!(err(&r), "request-not-found");

    assert_eq!(
        e.refusals(TASK),
        vec![
            pair("checkPush", "decision-required"),
            pair("recordPush", "decision-required"),
            pair("recordPush", "unknown-project"),
            pair("checkPush", "not-holder"),
            pair("reviewFetch", "request-not-found"),
            pair("reviewFetch", "request-not-found"),
        ]
    );
    assert_eq!(
        e.refusals(OTHER),
        vec![pair("reviewFetch", "request-not-found")]
    );
}

#[test]
fn record_event_cannot_forge_review_or_push_evidence() {
    let mut e = env();
    for (kind, body) in [
        ("review.requested", json!({"task_ref": TASK})),
        (
            "review.verdict",
            json!({"task_ref": TASK, "verdict": "approve"}),
        ),
        (
            "action.allowed",
            json!({"action": "git.push.working", "task_ref": TASK, "commit": C1}),
        ),
    ] {
        let r = e.op(
            "dev",
            json!({"op": "recordEvent", "kind": kind, "body": body, "subject": TASK}),
        );
        assert_eq!(err(&r), "reserved-event", "{kind}");
    }
    // So a review request still has no push to name.
    assert_eq!(err(&e.request(C1, "cto")), "unknown-commit");
}

/// A decision cited for `review.request`, `review.verdict` or `task.close`
/// is spent only by a call that succeeds: a later refusal in the same verb
/// (`stale-commit`, `request-not-found`, `verdict-stale`) rolls the
/// consumption back with the rest, and a second use is `decision-consumed`.
#[test]
fn a_cited_decision_is_spent_only_when_the_review_step_commits() {
    let mut e = env();
    e.ok("ops", "role.claim", Value::Null);
    e.pushed(TASK, C1);
    e.pushed(TASK, C2);

    // review.request, cross-role for ops.
    let d = e.approved("ops", "review.request");
    let req =
        |commit: &str| json!({"task_ref": TASK, "commit": commit, "to": "cto", "decision": d});
    assert_eq!(e.refused("ops", "review.request", req(C1)), "stale-commit");
    assert_eq!(
        e.refused("ops", "review.request", req(C3)),
        "unknown-commit"
    );
    assert_eq!(e.consumed(&d), 0);
    let r = e.ok("ops", "review.request", req(C2));
    assert_eq!(e.consumed(&d), 1);
    let cited: Option<String> = db(e.root.path())
        .query_row(
            "SELECT decision FROM messages WHERE id = ?1",
            [r["message"].as_str().expect("message id")],
            |row| row.get(0),
        )
        .expect("REVIEW-REQUEST row");
    assert_eq!(cited.as_deref(), d.as_str());
    assert_eq!(
        e.refused("ops", "review.request", req(C2)),
        "decision-consumed"
    );
    // The REVIEW-RESULT goes back to ops, the requesting role.
    let v = res(&e.verdict("cto", &r["request"], "approve")).clone();
    let got = e.ok("ops", "message.receive", Value::Null);
    let results: Vec<&Value> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["class"] == json!("REVIEW-RESULT"))
        .collect();
    assert_eq!(results.len(), 1, "{got}");
    assert_eq!(results[0]["id"], v["message"]);
    assert_eq!(results[0]["in_reply_to"], r["message"]);

    // review.verdict, cross-role for qa.
    let to_qa = res(&e.request(C2, "qa")).clone();
    let dv = e.approved("qa", "review.verdict");
    let verdict = |request: &Value| {
        json!({"task_ref": TASK, "request": request, "verdict": "approve", "body": "ok",
               "decision": dv})
    };
    // cto's request is not addressed to qa.
    assert_eq!(
        e.refused("qa", "review.verdict", verdict(&r["request"])),
        "request-not-found"
    );
    assert_eq!(e.consumed(&dv), 0);
    let qv = e.ok("qa", "review.verdict", verdict(&to_qa["request"]));
    assert_eq!(e.consumed(&dv), 1);
    assert_eq!(qv["commit"], json!(C2));

    // task.close, cross-role for ops: a stale verdict keeps the decision.
    let dc = e.approved("ops", "task.close");
    e.pushed(TASK, C3);
    let close = |verdict: &Value| {
        json!({"op": "authorize", "action": "task.close", "target": TASK,
               "decision": dc, "verdict": verdict})
    };
    let stale = e.op("ops", close(&qv["verdict"]));
    assert_eq!(err(&stale), "verdict-stale");
    assert_eq!(e.consumed(&dc), 0);
    assert_eq!(e.closes(), 0);
    let fresh = res(&e.request(C3, "cto")).clone();
    let ok = res(&e.verdict("cto", &fresh["request"], "approve")).clone();
    let r = e.op("ops", close(&ok["verdict"]));
    assert_eq!(res(&r)["allowed"], json!(true), "{r}");
    assert_eq!(e.consumed(&dc), 1);
    assert_eq!(e.closes(), 1);
}

/// The git socket's ops: what each refusal leaves, and what it doesn't.
#[test]
fn git_socket_refusals_record_against_the_run_and_only_then() {
    let mut e = env();
    e.pushed(TASK, C1);

    // No run behind the capability: refused, nothing recorded.
    let before = e.action_refused();
    let reader = e.b.reader_cap();
    for op in [
        json!({"op": "checkPush", "cap": reader, "task_ref": TASK}),
        json!({"op": "reviewFetch", "cap": reader, "args": {"task_ref": TASK, "request": "r"}}),
    ] {
        assert_eq!(err(&e.b.op(op.clone())), "read-only", "{op}");
    }
    let r =
        e.b.op(json!({"op": "checkPush", "cap": "not-a-cap", "task_ref": TASK}));
    assert_eq!(err(&r), "unknown-capability");
    assert_eq!(e.action_refused(), before);

    // A malformed push is refused and filed on the task it names.
    let r = e.op(
        "dev",
        json!({"op": "recordPush", "push": {"task_ref": TASK, "project": "site",
               "branch": "work/41", "ref": "refs/heads/work/41", "commit": C2,
               "previous": C1, "force": true}}),
    );
    assert_eq!(err(&r), "invalid-request");
    let r = e.op(
        "dev",
        json!({"op": "recordPush", "push": {"task_ref": TASK, "project": "site",
               "branch": "work/41", "ref": "refs/heads/work/41", "previous": C1}}),
    );
    assert_eq!(err(&r), "invalid-request");
    // A task ref that isn't one: refused, recorded with no subject.
    let r = e.op("dev", json!({"op": "checkPush", "task_ref": "task-41"}));
    assert_eq!(err(&r), "invalid-request");
    let unfiled: (i64, Option<String>) = db(e.root.path())
        .query_row(
            "SELECT count(*), max(role) FROM events WHERE kind = 'action.refused'
             AND subject IS NULL AND json_extract(body, '$.op') = 'checkPush'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("unfiled refusal");
    assert_eq!(unfiled, (1, Some("dev".to_string())));

    // reviewFetch by a reviewer whose run released its role.
    let req = res(&e.request(C1, "cto")).clone();
    e.ok("cto", "role.release", Value::Null);
    let r = e.op(
        "cto",
        json!({"op": "reviewFetch", "args": {"task_ref": TASK, "request": req["request"]}}),
    );
    assert_eq!(err(&r), "not-holder");
    assert_eq!(
        e.refusals(TASK),
        vec![
            pair("recordPush", "invalid-request"),
            pair("recordPush", "invalid-request"),
            pair("reviewFetch", "not-holder"),
        ]
    );

    // A later push names its previous commit, and becomes the latest.
    let r = e.op(
        "dev",
        json!({"op": "recordPush", "push": {"task_ref": TASK, "project": "site",
               "branch": "work/41", "ref": "refs/heads/work/41", "commit": C2,
               "previous": C1}}),
    );
    let ev = res(&r)["event"].as_str().expect("event id").to_string();
    let (subject, body): (String, String) = db(e.root.path())
        .query_row(
            "SELECT subject, body FROM events WHERE id = ?1 AND kind = 'action.allowed'",
            [&ev],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("push record");
    assert_eq!(subject, TASK);
    let body: Value = serde_json::from_str(&body).expect("body");
    assert_eq!(body["previous"], json!(C1));
    assert_eq!(body["commit"], json!(C2));
    assert_eq!(err(&e.request(C1, "arch")), "stale-commit");
}
