//! Refusal evidence (3i, DESIGN.md "Schema 3i"), argument hygiene, the
//! END_PROTECTED rules and the comment cursors, on real brokers: a real
//! `mosaic-bus` child, real sockets, real SQLite.
//!
//! Every refusal of a resolved caller (a role's run, the proven human, the
//! proven tester) leaves one `action.refused {action, code}` against it, on
//! the task's trail when the request names a task; the verb's own effects
//! are absent. No caller, or a reader: nothing.

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/refusals_env.rs"]
mod refusals_env;
use refusals_env::{business, env, row, Env, C1, NO_ID, TASK};

/// The review family and `task.close` (through `authorize`): each refusal
/// is on the task's trail with its code, and the review or close is absent.
#[test]
fn review_and_close_refusals_land_on_the_task_trail() {
    let mut e = env();
    // review.request of a commit never pushed.
    e.refuses(
        "dev",
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
        "unknown-commit",
        Some(TASK),
    );
    // review.verdict with no such request.
    e.refuses(
        "cto",
        "review.verdict",
        json!({"task_ref": TASK, "request": NO_ID, "verdict": "approve", "body": "ok"}),
        "request-not-found",
        Some(TASK),
    );
    // task.close without the decision dev's cross-role grant needs.
    let close = e.b.op(json!({"op": "authorize", "cap": e.caps["dev"],
                              "action": "task.close", "target": TASK}));
    assert_eq!(close["error"], json!("decision-required"), "{close}");
    assert_eq!(
        e.trail_refusals(TASK),
        [
            row("dev", Some(TASK), "review.request", "unknown-commit"),
            row("cto", Some(TASK), "review.verdict", "request-not-found"),
            row("dev", Some(TASK), "task.close", "decision-required"),
        ]
    );
    assert_eq!(
        e.count(
            "SELECT count(*) FROM events WHERE kind IN ('review.requested', 'review.verdict')
                 OR (kind = 'action.allowed' AND subject = 'vikunja:3/41')"
        ),
        0,
        "no review, no close"
    );
    // A malformed task ref files nothing on a trail; the refusal is still on record.
    e.refuses(
        "dev",
        "review.request",
        json!({"task_ref": "vikunja:3", "commit": C1, "to": "cto"}),
        "invalid-request",
        None,
    );
    e.b.close();
}

/// One refusal per verb family, each against its caller with its code and
/// subject, its own effects absent.
#[test]
fn every_verb_family_records_its_refusals() {
    let e = env();
    // roles: qa's run is not pm's holder; a second claim is refused.
    e.refuses("qa", "role.claim", Value::Null, "role-held", None);
    e.refuses(
        "dev",
        "role.revoke",
        json!({"role": "qa", "decision": NO_ID}),
        "decision-not-found",
        None,
    );
    // events
    e.refuses(
        "pm",
        "event.emit",
        json!({"kind": "action.allowed", "body": {"action": "deploy"}}),
        "invalid-request",
        None,
    );
    // messages: qa has no message.send grant.
    e.refuses(
        "qa",
        "message.send",
        json!({"to": "pm", "body": "x"}),
        "decision-required",
        None,
    );
    e.refuses(
        "pm",
        "message.read",
        json!({"id": NO_ID}),
        "message-not-found",
        None,
    );
    // decisions: a raise naming a task lands on its trail.
    e.refuses(
        "dev",
        "decision.raise",
        json!({"action": "no.such.action", "question": "?", "options": [{"key": "yes", "text": "Y"}, {"key": "no", "text": "N"}],
               "recommendation": "yes", "blocking": true, "task_ref": TASK}),
        "unknown-action",
        Some(TASK),
    );
    e.refuses(
        "pm",
        "decision.resolve",
        json!({"id": NO_ID, "choice": "yes"}),
        "decision-not-found",
        None,
    );
    // launch (human only): a role gets human-required.
    e.refuses("pm", "launch.revoke", Value::Null, "human-required", None);
    // reads: a role's refused read is recorded too.
    e.refuses(
        "pm",
        "tasks",
        json!({"label": "bug"}),
        "invalid-request",
        None,
    );
    e.refuses("pm", "messages", Value::Null, "human-required", None);
    e.refuses(
        "pm",
        "tasks",
        json!({"task_ref": TASK, "done": true}),
        "invalid-request",
        Some(TASK),
    );
    // A verb of another class, and one nobody knows: the name as sent.
    e.refuses("pm", "thread.list", Value::Null, "human-required", None);
    e.refuses("pm", "no.such.verb", Value::Null, "unknown-verb", None);
    assert_eq!(
        e.trail_refusals(TASK),
        [
            row("dev", Some(TASK), "decision.raise", "unknown-action"),
            row("pm", Some(TASK), "tasks", "invalid-request"),
        ]
    );
    // No decision was stored, pm still holds its role.
    assert_eq!(e.count("SELECT count(*) FROM decisions"), 0);
    e.b.close();
}

/// No caller, or a reader: nothing is written at all.
#[test]
fn no_caller_and_readers_leave_no_evidence() {
    let e = env();
    let before = (e.counts(), e.refusals());
    // Unknown capability, bad frame, bad envelope.
    assert_eq!(
        err(&e.b.call("not-a-capability", "role.claim", Value::Null)),
        "unknown-capability"
    );
    assert_eq!(
        err(&raw_request(&e.b.socket, b"{not json\n")),
        "invalid-request"
    );
    assert_eq!(
        err(&raw_request(&e.b.socket, b"{\"verb\":\"trail\"}\n")),
        "invalid-request"
    );
    // A reader refused, by class and by argument.
    for (verb, args, code) in [
        (
            "message.send",
            json!({"to": "pm", "body": "x"}),
            "read-only",
        ),
        ("role.claim", Value::Null, "read-only"),
        (
            "tasks",
            json!({"label": "x", "task_ref": TASK}),
            "invalid-request",
        ),
        ("no.such.verb", Value::Null, "unknown-verb"),
    ] {
        assert_eq!(err(&e.b.call(&e.reader, verb, args)), code, "{verb}");
    }
    assert_eq!((e.counts(), e.refusals()), before);
    e.b.close();
}

/// A refused `decision.raise` whose route is refused writes its own
/// `action.refused` (with the authorization); the dispatch adds no second.
#[test]
fn a_refused_route_is_recorded_once() {
    let root = data_root();
    let mut biz = business();
    // qa only hears from the cto: the human (gated route) may not close to it.
    biz["roles"]["qa"]["messaging"] = json!({"sendTo": ["cto"], "receiveFrom": ["cto"]});
    let config = json!({"dataRoot": root.path(), "businesses": {"acme": biz}});
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let p = sleeper();
    let qa = b.bind("qa", "qa-1", p.id());
    assert_eq!(
        res(&b.call(&qa, "role.claim", Value::Null))["op"],
        json!("claim")
    );
    let r = b.call(
        &qa,
        "decision.raise",
        json!({"action": "deploy", "question": "?", "options": [{"key": "yes", "text": "Y"}, {"key": "no", "text": "N"}],
               "recommendation": "yes", "blocking": true, "task_ref": TASK}),
    );
    assert_eq!(err(&r), "decision-route-refused");
    assert_eq!(
        refusals(root.path()),
        [row(
            "qa",
            Some(TASK),
            "decision.raise",
            "decision-route-refused"
        )]
    );
    b.close();
}

/// END_PROTECTED (Q169): a role.revoke of an assistant instance is gated at
/// every class and routes to the human; only the chief of staff's reason
/// or the human's CLI resolution may end it.
#[test]
fn an_assistant_instance_ends_only_by_the_chief_of_staff_or_the_human() {
    let e = env();
    // dev holds role.revoke cross-role: for qa it goes to the arbiter, for
    // the assistant to the human, gated.
    let raise = |target: &str| {
        e.ok(
            "dev",
            "decision.raise",
            json!({"action": "role.revoke", "target": target, "question": "End it?",
                   "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
                   "recommendation": "yes", "blocking": false}),
        )
    };
    let qa = raise("qa");
    assert_eq!(
        (&qa["class"], &qa["routed_to"]),
        (&json!("cross-role"), &json!("pm"))
    );
    let aide = raise("aide");
    assert_eq!(
        (&aide["class"], &aide["routed_to"]),
        (&json!("gated"), &json!("human"))
    );
    // So no arbiter resolves it: pm can't.
    assert_eq!(
        e.refused(
            "pm",
            "decision.resolve",
            json!({"id": aide["id"], "choice": "yes"})
        ),
        "not-resolver"
    );
    // A reason from anyone but the chief of staff: role-end-refused from
    // pm, which holds role.end but is not the chief of staff; a role without
    // role.end gets decision-required first (the role.end rule).
    e.refuses(
        "pm",
        "role.revoke",
        json!({"role": "aide", "reason": "done"}),
        "role-end-refused",
        None,
    );
    for who in ["dev", "qa"] {
        e.refuses(
            who,
            "role.revoke",
            json!({"role": "aide", "reason": "done"}),
            "decision-required",
            None,
        );
    }
    // The chief of staff's reason passes: the end then finds no thread of
    // the aide held (its runs are thread runs; none is bound here).
    e.refuses(
        "cos",
        "role.revoke",
        json!({"role": "aide", "reason": "done"}),
        "not-held",
        None,
    );
    // A non-protected target keeps the old rule: cos ends qa with a reason.
    let r = e.ok(
        "cos",
        "role.revoke",
        json!({"role": "qa", "reason": "stuck"}),
    );
    assert_eq!((&r["role"], &r["op"]), (&json!("qa"), &json!("revoke")));
    // Nothing revoked the aide.
    assert_eq!(
        e.count("SELECT count(*) FROM role_claims WHERE role = 'aide' AND op = 'revoke'"),
        0
    );
    e.b.close();
}

/// The task sync's comment cursors through the host channel: a cursor and
/// its comment events commit together; a cursor that does not increase
/// refuses `cursor-not-increasing` and writes nothing; `commentCursor`
/// answers `{cursor|null, epoch}`.
#[test]
fn comment_cursors_commit_with_their_comments() {
    let mut e = env();
    let cursor = |e: &mut Env, task: &str| {
        let r =
            e.b.op(json!({"op": "commentCursor", "business": "acme", "task_ref": task}));
        assert_eq!(r["ok"], json!(true), "{r}");
        r["result"].clone()
    };
    let first = cursor(&mut e, TASK);
    assert_eq!(first["cursor"], Value::Null);
    let epoch = first["epoch"].as_str().expect("epoch").to_string();
    assert!(epoch.ends_with('Z'), "{epoch}");
    let comment = |id: i64, body: &str| json!({"id": id, "author": "ada", "at": "2026-12-03T10:00:00Z", "body": body});
    let r = e.b.op(
        json!({"op": "recordComments", "business": "acme", "task_ref": TASK, "cursor": 12,
                          "comments": [comment(10, "first"), comment(12, "second")], "id": 4}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["id"], json!(4));
    assert_eq!(r["result"]["cursor"], json!(12));
    assert_eq!(r["result"]["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(cursor(&mut e, TASK), json!({"cursor": 12, "epoch": epoch}));
    // On the task's trail, in order.
    let t = res(&e.b.call(&e.reader, "trail", json!({"subject": TASK}))).clone();
    let comments: Vec<&Value> = t
        .as_array()
        .expect("trail")
        .iter()
        .filter(|r| r["kind"] == json!("task.comment"))
        .collect();
    assert_eq!(comments.len(), 2);
    assert_eq!(
        comments[1]["body"],
        json!({"task_ref": TASK, "comment": 12, "author": "ada", "at": "2026-12-03T10:00:00Z", "body": "second"})
    );
    // Not increasing: the same cursor, a lower one, or a comment at or
    // below the stored cursor. Nothing is written.
    let before = (
        e.counts(),
        e.count("SELECT count(*) FROM task_comment_cursors"),
    );
    for (c, comments) in [
        (12, json!([])),
        (11, json!([comment(11, "late")])),
        (20, json!([comment(12, "again"), comment(20, "new")])),
    ] {
        let r = e.b.op(
            json!({"op": "recordComments", "business": "acme", "task_ref": TASK,
                              "cursor": c, "comments": comments}),
        );
        assert_eq!(r["error"], json!("cursor-not-increasing"), "{c}: {r}");
    }
    // Malformed: comments out of order or past the cursor, bad shapes, an
    // unknown business, a non-ref task.
    for (op, code) in [
        (
            json!({"task_ref": TASK, "cursor": 30, "comments": [comment(25, "b"), comment(21, "a")]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "cursor": 30, "comments": [comment(31, "a")]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "cursor": "30", "comments": []}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "cursor": 0, "comments": []}),
            "invalid-request",
        ),
        (json!({"task_ref": TASK, "cursor": 30}), "invalid-request"),
        (
            json!({"task_ref": TASK, "cursor": 30, "comments": [{"id": 21, "author": "a", "at": "t"}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "cursor": 30, "comments": [{"id": "21", "author": "a", "at": "t", "body": ""}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "cursor": 30, "comments": [], "extra": 1}),
            "invalid-request",
        ),
        (
            json!({"task_ref": "vikunja:3", "cursor": 30, "comments": []}),
            "invalid-request",
        ),
        (
            json!({"business": "nope", "task_ref": TASK, "cursor": 30, "comments": []}),
            "unknown-business",
        ),
    ] {
        let mut m = json!({"op": "recordComments", "business": "acme"});
        for (k, v) in op.as_object().expect("op") {
            m[k] = v.clone();
        }
        let r = e.b.op(m.clone());
        assert_eq!(r["error"], json!(code), "{m}: {r}");
    }
    assert_eq!(
        (
            e.counts(),
            e.count("SELECT count(*) FROM task_comment_cursors")
        ),
        before,
        "refused recordComments wrote nothing"
    );
    // A baseline (no eligible comments) moves the cursor alone; the task id
    // keeps its cursor under another project (task ids survive moves).
    let r = e.b.op(
        json!({"op": "recordComments", "business": "acme", "task_ref": "vikunja:9/41",
                          "cursor": 15, "comments": []}),
    );
    assert_eq!(r["result"], json!({"cursor": 15, "events": []}), "{r}");
    assert_eq!(cursor(&mut e, TASK)["cursor"], json!(15));
    assert_eq!(cursor(&mut e, "vikunja:3/42")["cursor"], Value::Null);
    e.b.close();
}

/// 3i L68 and L237, the audit of issue 30: a run bound to a role it no
/// longer holds (it released it; its capability is still good) acts with
/// none of the role's grants. Every verb a role session may call that acts
/// for the role, and every host op that authorizes with a capability,
/// answers `not-holder` and writes nothing but the refusal. The reads a
/// role makes (`trail`, `inbox`, `agents`, `tasks`, `state`,
/// `requirements`, `names`) and `role.claim` are left out; the list must
/// name every other verb a role may call, so a new one can't skip it.
#[test]
fn a_run_that_holds_no_role_acts_with_none_of_its_grants() {
    let root = data_root();
    let org = root.path().join("organization.json");
    std::fs::write(
        &org,
        br#"{"revision": 1, "plugins": {"harness": {"pi": {"on": true, "levels": ["low"]}}}}"#,
    )
    .expect("org");
    std::fs::set_permissions(&org, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let every = json!([
        "message.send",
        "role.end",
        "review.request",
        "review.verdict",
        "record.write",
        "instance.name",
        "organization.change",
        "git.push.working",
        "task.close",
        "role.launch",
        "role.revoke"
    ]);
    let business = json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "boss"},
        "roles": {
            "boss": {"definition": "pm",
                     "authority": {"withinRole": every, "crossRole": ["git.merge.protected"]}},
            "cto": {"definition": "cto",
                    "authority": {"withinRole": ["message.send", "review.verdict"],
                                  "crossRole": ["git.merge.protected"]}},
            "chief": {"definition": "chief-of-staff",
                      "authority": {"withinRole": ["message.send"], "crossRole": []}}
        },
        "launch": {"by": "chief", "instances": ["boss", "cto"]},
        "projects": {"site": {"repo": "/srv/records/site"}}
    });
    let config = json!({"dataRoot": root.path(), "businesses": {"acme": business},
                        "organization": org});
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (caps, _procs) = b.bind_each(&["boss", "cto", "chief"]);
    for r in ["boss", "cto", "chief"] {
        res(&b.call(&caps[r], "role.claim", Value::Null));
    }
    let boss = caps["boss"].clone();
    let options = json!([{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}]);
    // A decision routed to boss (the delivery arbiter), and one boss raised.
    let routed = res(&b.call(
        &caps["cto"],
        "decision.raise",
        json!({"action": "git.merge.protected", "question": "Merge?", "target": TASK,
               "options": options, "recommendation": "yes", "blocking": false}),
    ))["id"]
        .clone();
    let own = res(&b.call(
        &boss,
        "decision.raise",
        json!({"action": "prd.approve", "question": "Approve?", "options": options,
               "recommendation": "yes", "blocking": false}),
    ))["id"]
        .clone();
    let msg = res(&b.call(
        &caps["cto"],
        "message.send",
        json!({"to": "boss", "body": "hi"}),
    ))["id"]
        .clone();
    res(&b.call(&boss, "message.receive", Value::Null));
    res(&b.call(&boss, "role.release", Value::Null));

    let cases: Vec<(&str, Value)> = vec![
        ("role.release", Value::Null),
        ("role.revoke", json!({"role": "cto", "reason": "done"})),
        ("role.revoke", json!({"role": "cto", "decision": NO_ID})),
        (
            "event.emit",
            json!({"kind": "action.allowed", "body": {"action": "routine"}}),
        ),
        ("message.send", json!({"to": "cto", "body": "hello"})),
        ("message.receive", Value::Null),
        ("message.read", json!({"id": msg})),
        (
            "decision.raise",
            json!({"action": "prd.approve", "question": "Again?",
                                   "options": options, "recommendation": "yes",
                                   "blocking": false}),
        ),
        ("decision.resolve", json!({"id": routed, "choice": "yes"})),
        ("decision.seen", json!({"id": routed})),
        ("decision.withdraw", json!({"id": own})),
        (
            "review.request",
            json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
        ),
        (
            "review.verdict",
            json!({"task_ref": TASK, "request": NO_ID, "verdict": "approve",
                                   "body": "ok"}),
        ),
        (
            "organization.set",
            json!({"revision": 1, "limits": {"perDefinition": {}}}),
        ),
        ("name.set", json!({"instance": "cto", "name": "tech"})),
        (
            "staff.request",
            json!({"task_ref": TASK, "roles": [{"role": "cto", "count": 1}]}),
        ),
        ("spec.read", json!({"project": "site"})),
        (
            "record.write",
            json!({"project": "site", "path": "docs/plan.md",
                                 "record": "# Plan"}),
        ),
        ("usage.begin", json!({"turn": msg})),
        ("usage.end", json!({"turn": msg})),
        ("usage", Value::Null),
    ];
    let reads = [
        "role.claim",
        "trail",
        "inbox",
        "agents",
        "tasks",
        "state",
        "requirements",
        "names",
    ];
    let mut role_verbs: Vec<&str> = mosaic_bus::handlers::VERBS
        .iter()
        .filter(|v| v.sessions.role.is_none() && !reads.contains(&v.name))
        .map(|v| v.name)
        .collect();
    let mut named: Vec<&str> = cases.iter().map(|(v, _)| *v).collect();
    role_verbs.sort_unstable();
    named.sort_unstable();
    named.dedup();
    assert_eq!(named, role_verbs, "every verb a role may call is probed");

    let before = row_counts(root.path());
    let mut wrong = Vec::new();
    for (verb, args) in &cases {
        let r = b.call(&boss, verb, args.clone());
        if r["error"] != json!("not-holder") {
            wrong.push(format!("{verb} {args}: {r}"));
        }
    }
    let ops = [
        json!({"op": "authorize", "action": "task.close", "target": TASK}),
        json!({"op": "authorizeLaunch", "instance": "cto"}),
        json!({"op": "checkPush", "task_ref": TASK}),
        json!({"op": "recordPush", "push": {"task_ref": TASK, "project": "site",
               "branch": "work/41", "ref": "refs/heads/work/41", "commit": C1,
               "previous": null}}),
        json!({"op": "reviewFetch", "args": {"task_ref": TASK, "request": NO_ID}}),
        json!({"op": "checkLand", "args": {"task_ref": TASK, "decision": routed}}),
    ];
    for mut op in ops {
        op["cap"] = json!(boss);
        let r = b.op(op.clone());
        if r["error"] != json!("not-holder") {
            wrong.push(format!("{op}: {r}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(
        row_counts(root.path()),
        before,
        "nothing but refusals written"
    );
    let _ = b.op(json!({"op": "close"}));
}
