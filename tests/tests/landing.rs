//! Landing on a project's main (3i row 137, #1631) through real brokers:
//! the git socket's `checkLand`, `recordLand`, `landRefused` and `landHeld`
//! host ops, after a push, a review and a cross-role decision the human
//! resolved through the real human shim (or the arbiter through the bus).

use mosaic_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

const TASK: &str = "vikunja:3/41";
const OTHER: &str = "vikunja:3/42";
const C1: &str = "1111111111111111111111111111111111111111";
const C2: &str = "2222222222222222222222222222222222222222";
const MAIN0: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const MAIN1: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const PATCH: &str = "cccccccccccccccccccccccccccccccccccccccc";

const ROLES: [&str; 5] = ["pm", "dev", "cto", "qa", "arch"];

/// pm is the delivery arbiter, so its own cross-role raise goes to the
/// human; dev's goes to pm; cto (technical arbiter) reviews; qa may land
/// only through a gated decision; arch reviews too.
fn business() -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"authority": {"withinRole": ["git.push.working", "review.request"],
                                 "crossRole": ["git.merge.protected", "message.send"]}},
            "dev": {"authority": {"withinRole": ["message.send", "git.push.working",
                                                 "review.request"],
                                  "crossRole": ["git.merge.protected", "task.close"]}},
            "cto": {"authority": {"withinRole": ["message.send", "review.verdict"],
                                  "crossRole": []}},
            "qa": {"authority": {"withinRole": ["git.push.working"], "crossRole": []}},
            "arch": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}}
        },
        "projects": {"site": {"repo": "/srv/records/site"}}
    })
}

fn config(root: &Path, business: &Value) -> Value {
    json!({"dataRoot": root, "businesses": {"acme": business}, "readers": ["acme"]})
}

struct Env {
    root: tempfile::TempDir,
    b: Broker,
    caps: HashMap<&'static str, String>,
    procs: Vec<Sleeper>,
    human: ShimSession,
}

fn env() -> Env {
    let root = data_root();
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business()));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (caps, procs) = b.bind_each(&ROLES);
    let human = ShimSession::human(&b);
    let e = Env {
        root,
        b,
        caps,
        procs,
        human,
    };
    for r in ROLES {
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
    fn op(&mut self, role: &str, mut op: Value) -> Value {
        op["cap"] = json!(self.caps[role]);
        self.b.op(op)
    }

    /// The human's request through the real `mosaic-human-cli`, started
    /// detached with a clean environment (the suite may run under an agent
    /// whose markers the proof refuses).
    fn human(&self, business: &str, verb: &str, args: Value) -> Value {
        self.human.call_in(business, verb, args)
    }

    /// Closes the broker and starts another on the same store with
    /// `business`, binding the same runs again (their claims are stored).
    fn restart(self, business: Value) -> Env {
        self.restart_after(business, true)
    }

    /// As [`Env::restart`], the broker closed (`clean`) or killed
    /// (SIGKILL, as a crash: the harness kills it on drop) and the crash
    /// procedure followed.
    fn restart_after(self, business: Value, clean: bool) -> Env {
        let Env {
            root,
            b,
            procs,
            human,
            ..
        } = self;
        if clean {
            b.close();
        } else {
            drop(b);
            // The crash procedure (docs/operations.md): the broker is
            // gone, so only its lock and socket are removed.
            let bus = root.path().join("bus");
            std::fs::remove_file(bus.join("writer.lock")).expect("a crash leaves writer.lock");
            let _ = std::fs::remove_file(bus.join("bus.sock"));
        }
        let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        let mut caps = HashMap::new();
        for (r, p) in ROLES.iter().zip(&procs) {
            let rec = launch(r, &format!("{r}-1"), p.id());
            let reply = b.op(json!({"op": "bindLaunch", "record": rec}));
            // A run that ended before the restart stays ended.
            if reply["error"] != json!("run-ended") {
                let cap = res_launch(&reply);
                caps.insert(*r, cap);
            }
        }
        Env {
            root,
            b,
            caps,
            procs,
            human,
        }
    }

    fn push(&mut self, role: &str, task: &str, commit: &str) {
        let r = self.op(
            role,
            json!({"op": "recordPush", "push": {
                "task_ref": task, "project": "site", "branch": "work/41",
                "ref": "refs/heads/work/41", "commit": commit, "previous": null}}),
        );
        assert_eq!(r["ok"], json!(true), "recordPush: {r}");
    }

    /// `role` asks `reviewer` to review `commit` of `task`, and the reviewer
    /// answers `verdict`; returns the verdict event's id.
    fn reviewed(&self, role: &str, task: &str, commit: &str, verdict: &str) -> Value {
        let req = self.ok(
            role,
            "review.request",
            json!({"task_ref": task, "commit": commit, "to": "cto"}),
        );
        let v = self.ok(
            "cto",
            "review.verdict",
            json!({"task_ref": task, "request": req["request"], "verdict": verdict,
                   "body": "looked"}),
        );
        v["verdict"].clone()
    }

    /// `role` raises a decision for `action` on `target`; returns its id.
    fn raise(&self, role: &str, action: &str, target: &str, extra: Value) -> Value {
        let mut args = json!({"action": action, "question": "Land it?", "target": target,
               "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "Not yet"}],
               "recommendation": "yes", "blocking": false});
        if let (Some(a), Value::Object(x)) = (args.as_object_mut(), extra) {
            a.extend(x);
        }
        self.ok(role, "decision.raise", args)["id"].clone()
    }

    fn check(&mut self, role: &str, args: Value) -> Value {
        self.op(role, json!({"op": "checkLand", "args": args}))
    }

    fn ticket(&mut self, role: &str, task: &str, decision: &Value) -> Value {
        let r = self.check(role, json!({"task_ref": task, "decision": decision}));
        res(&r)["ticket"].clone()
    }

    fn record(&mut self, ticket: &Value, land: Value) -> Value {
        self.b
            .op(json!({"op": "recordLand", "ticket": ticket, "land": land}))
    }

    /// Asks `landHeld` in both shapes, DESIGN.md's flat one and the spec's
    /// `record` (3i L53); they must agree.
    fn held(&mut self, role: &str, thread: Option<&str>) -> Value {
        let mut fields = json!({"business": "acme", "role": role});
        if let Some(t) = thread {
            fields["thread"] = json!(t);
        }
        let mut flat = fields.clone();
        flat["op"] = json!("landHeld");
        let flat = res(&self.b.op(flat))["held"].clone();
        let record = json!({"op": "landHeld", "record": fields});
        let record = res(&self.b.op(record))["held"].clone();
        assert_eq!(flat, record, "landHeld flat and in record");
        flat
    }

    fn count(&self, sql: &str, p: &str) -> i64 {
        db(self.root.path())
            .query_row(sql, [p], |r| r.get(0))
            .expect("count")
    }

    fn consumed(&self, decision: &Value) -> i64 {
        self.count(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            decision.as_str().expect("id"),
        )
    }

    /// The task's trail as the reader sees it.
    fn trail(&self, task: &str) -> Vec<Value> {
        let reader = self.b.reader_cap();
        let t = res(&self.b.call(&reader, "trail", json!({"subject": task}))).clone();
        t.as_array().expect("trail array").clone()
    }

    /// The task's `action.refused` events as `(op, code)`.
    fn refusals(&self, task: &str) -> Vec<(String, String)> {
        self.trail(task)
            .iter()
            .filter(|r| r["kind"] == json!("action.refused"))
            .map(|r| {
                (
                    r["body"]["op"].as_str().unwrap_or_default().to_string(),
                    r["body"]["code"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The messages `role` receives now.
    fn receive(&self, role: &str) -> Vec<Value> {
        self.ok(role, "message.receive", Value::Null)["messages"]
            .as_array()
            .expect("messages")
            .clone()
    }
}

fn res_launch(reply: &Value) -> String {
    assert_eq!(reply["ok"], json!(true), "bind: {reply}");
    reply["launch"]["cap"].as_str().expect("cap").to_string()
}

fn land(commit: &str, reviewed: &str) -> Value {
    json!({"commit": commit, "previous": MAIN0, "reviewed": reviewed, "base": MAIN0,
           "patch_id": PATCH})
}

fn pair(op: &str, code: &str) -> (String, String) {
    (op.to_string(), code.to_string())
}

/// The whole path: push, review request, approving verdict, a cross-role
/// raise the human resolves through the shim, `checkLand`, `recordLand`;
/// then the spent decision opens nothing again, on any path, also after a
/// restart.
/// 3i L48 and L71: a cross-role merge decision routed to the arbiter may be
/// resolved by the human through the CLI; the ticket and the landing record
/// then say `via: cli`, and the close says the human resolved it.
#[test]
fn a_decision_routed_to_the_arbiter_and_resolved_by_the_human_lands_via_cli() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    let routed: String = db(e.root.path())
        .query_row(
            "SELECT routed_to FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| r.get(0),
        )
        .expect("decision row");
    assert_eq!(routed, "pm");
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": d, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r}");
    assert_eq!(r["result"]["closed"]["by"], json!("Ada"));
    let ticket = e.ticket("dev", TASK, &d);
    assert_eq!(ticket["resolution"]["via"], json!("cli"));
    let out = res(&e.record(&ticket["id"], land(MAIN1, C1))).clone();
    let rec = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("landing record on the task's trail");
    assert_eq!(rec["body"]["via"], json!("cli"));
    let closes: Vec<Value> = e
        .receive("dev")
        .into_iter()
        .filter(|m| m["class"] == json!("DECISION"))
        .collect();
    assert_eq!(closes.len(), 1, "{closes:?}");
    assert_eq!(closes[0]["from_role"], json!("human"));
    assert!(
        closes[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("was resolved by Ada: yes (Land)")),
        "{closes:?}"
    );
}

#[test]
fn a_reviewed_task_lands_once_with_the_humans_approval() {
    let mut e = env();
    e.push("pm", TASK, C1);
    let verdict = e.reviewed("pm", TASK, C1, "approve");
    assert_eq!(e.held("pm", None), json!(false), "no decision yet");

    // pm is the delivery arbiter: its cross-role raise is the human's to resolve.
    let d = e.raise("pm", "git.merge.protected", TASK, json!({}));
    let row = db(e.root.path())
        .query_row(
            "SELECT class, routed_to FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .expect("decision row");
    assert_eq!(row, ("cross-role".to_string(), "human".to_string()));
    assert_eq!(e.held("pm", None), json!(false), "open");
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": d, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r} {}", e.b.stderr());
    assert_eq!(e.held("pm", None), json!(true));
    assert_eq!(e.held("dev", None), json!(false), "another role's approval");
    assert_eq!(
        e.held("pm", Some("t-1")),
        json!(false),
        "raised in no thread"
    );

    // checkLand hands out a ticket and writes nothing.
    let before = row_counts(e.root.path());
    let ticket = e.ticket("pm", TASK, &d);
    assert_eq!(row_counts(e.root.path()), before);
    let id = ticket["id"].clone();
    assert!(id.as_str().is_some_and(|s| s.len() == 36), "{ticket}");
    assert_eq!(
        ticket,
        json!({"id": id, "project": "site", "ref": "refs/heads/work/41", "commit": C1,
               "verdict": verdict,
               "resolution": {"decision": d, "option": "yes", "via": "cli"}})
    );

    // recordLand spends the decision and tells pm.
    let r = e.record(&id, land(MAIN1, C1));
    let out = res(&r).clone();
    assert_eq!(e.consumed(&d), 1);
    let trail = e.trail(TASK);
    let rec = trail
        .iter()
        .find(|x| x["id"] == out["event"])
        .expect("landing record on the task's trail");
    assert_eq!(rec["kind"], json!("action.allowed"));
    assert_eq!((&rec["role"], &rec["run"]), (&json!("pm"), &json!("pm-1")));
    assert_eq!(
        rec["body"],
        json!({"action": "git.merge.protected", "class": "cross-role", "target": TASK,
               "decision": d, "via": "cli", "project": "site", "ref": "refs/heads/work/41",
               "verdict": verdict, "commit": MAIN1, "previous": MAIN0, "reviewed": C1,
               "base": MAIN0, "patch_id": PATCH})
    );
    let got = e.receive("pm");
    let result: Vec<&Value> = got
        .iter()
        .filter(|m| m["from_role"] == json!("_bus"))
        .collect();
    assert_eq!(result.len(), 1, "{got:?}");
    assert_eq!(result[0]["id"], out["message"]);
    assert_eq!(result[0]["class"], json!("RESULT"));
    assert_eq!(result[0]["decision"], d);
    let text = result[0]["body"].as_str().expect("body");
    for part in [TASK, "site", MAIN1, MAIN0, d.as_str().expect("id")] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert_eq!(e.held("pm", None), json!(false), "spent");
    assert!(e.refusals(TASK).is_empty());

    // Spent: every path refuses it now.
    let spent = |e: &mut Env| {
        assert_eq!(
            err(&e.record(&id, land(MAIN1, C1))),
            "land-unknown",
            "the ticket ended"
        );
        assert_eq!(
            err(&e.check("pm", json!({"task_ref": TASK, "decision": d}))),
            "decision-consumed"
        );
        let r = e.op(
            "pm",
            json!({"op": "authorize", "action": "git.merge.protected", "target": TASK,
                   "decision": d}),
        );
        assert_eq!(err(&r), "decision-consumed");
        // message.send is cross-role for pm, and a merge approval is no
        // message approval: the shared helper matches the action first.
        assert_eq!(
            err(&e.call(
                "pm",
                "message.send",
                json!({"to": "cto", "body": "merged", "decision": d})
            )),
            "decision-mismatch"
        );
        assert_eq!(e.held("pm", None), json!(false));
        assert_eq!(e.consumed(&d), 1);
    };
    spent(&mut e);
    let mut e = e.restart(business());
    spent(&mut e);
    assert_eq!(
        e.refusals(TASK),
        vec![
            pair("checkLand", "decision-consumed"),
            pair("checkLand", "decision-consumed")
        ]
    );
    e.b.close();
}

/// Every `checkLand` refusal has its code, writes nothing but its
/// `action.refused` on the task's trail (none without a caller), and opens
/// no ticket.
#[test]
fn check_land_refuses_with_the_specs_codes() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    // dev's cross-role raise goes to pm, the delivery arbiter.
    let approve = |e: &Env, action: &str, target: &str| {
        let d = e.raise("dev", action, target, json!({}));
        e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
        d
    };
    let d = approve(&e, "git.merge.protected", TASK);

    // No caller: nothing is written.
    let before = row_counts(e.root.path());
    let r = e
        .b
        .op(json!({"op": "checkLand", "cap": "nope", "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "unknown-capability");
    let reader = e.b.reader_cap();
    let r = e
        .b
        .op(json!({"op": "checkLand", "cap": reader, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "read-only");
    // Malformed ops never reach a caller either.
    for op in [
        json!({"op": "checkLand", "cap": e.caps["dev"]}),
        json!({"op": "checkLand", "cap": e.caps["dev"], "args": [TASK]}),
        json!({"op": "checkLand", "cap": e.caps["dev"], "args": {}, "task_ref": TASK}),
    ] {
        assert_eq!(err(&e.b.op(op.clone())), "invalid-request", "{op}");
    }
    assert_eq!(row_counts(e.root.path()), before);

    // No subject: an agent's landing always names its task.
    for args in [
        json!({"decision": d}),
        json!({"task_ref": null, "decision": d}),
    ] {
        assert_eq!(err(&e.check("dev", args)), "no-subject");
    }
    for args in [
        json!({"task_ref": "site", "decision": d}),
        json!({"task_ref": TASK}),
        json!({"task_ref": TASK, "decision": 7}),
        json!({"task_ref": TASK, "decision": d, "verdict": "v"}),
    ] {
        assert_eq!(
            err(&e.check("dev", args.clone())),
            "invalid-request",
            "{args}"
        );
    }
    let nothing = "01890000-0000-7000-8000-000000000000";
    for id in [json!(nothing), json!("not-a-uuid")] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": id}))),
            "decision-not-found"
        );
    }

    // not-authorized: another task, another role, another action, and a
    // gated decision even though the human approved it.
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": d}))),
        "not-authorized",
        "the decision targets another task"
    );
    assert_eq!(
        err(&e.check("pm", json!({"task_ref": TASK, "decision": d}))),
        "not-authorized",
        "raised by dev"
    );
    let close = approve(&e, "task.close", TASK);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": close}))),
        "not-authorized",
        "a task.close approval"
    );
    let gated = e.raise("qa", "git.merge.protected", TASK, json!({}));
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": gated, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r}");
    assert_eq!(
        err(&e.check("qa", json!({"task_ref": TASK, "decision": gated}))),
        "not-authorized",
        "gated"
    );

    // decision-consumed: open, another option, withdrawn.
    let open = e.raise("dev", "git.merge.protected", TASK, json!({}));
    let no = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": no, "choice": "no"}));
    let gone = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("dev", "decision.withdraw", json!({"id": gone}));
    for (name, id) in [("open", &open), ("no", &no), ("withdrawn", &gone)] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": id}))),
            "decision-consumed",
            "{name}"
        );
    }

    // The commit rule: a verdict must approve the task's latest push.
    e.push("dev", OTHER, C1);
    let other = approve(&e, "git.merge.protected", OTHER);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "verdict-not-found"
    );
    e.reviewed("dev", OTHER, C1, "changes");
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "verdict-not-approve"
    );
    e.reviewed("dev", OTHER, C1, "approve");
    e.ticket("dev", OTHER, &other);
    e.push("dev", OTHER, C2);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "ref-moved",
        "pushed again after the approval"
    );

    // not-holder: the run released its role.
    e.ok("dev", "role.release", Value::Null);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "not-holder"
    );
    e.ok("dev", "role.claim", Value::Null);
    let ticket = e.ticket("dev", TASK, &d);
    assert_eq!(
        ticket["resolution"]["via"],
        json!("broker"),
        "pm resolved it"
    );

    // After a restart with dev's merge authority gone, its approval no
    // longer matches current policy; and a push to a project the business
    // no longer declares lands nowhere.
    let mut changed = business();
    changed["roles"]["dev"]["authority"]["crossRole"] = json!(["task.close"]);
    changed["projects"] = json!({"docs": {"repo": "/srv/records/docs"}});
    let mut e = e.restart(changed);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "decision-mismatch"
    );
    let pm = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pm, "choice": "yes"}),
    );
    e.reviewed("dev", OTHER, C2, "approve");
    assert_eq!(
        err(&e.check("pm", json!({"task_ref": OTHER, "decision": pm}))),
        "unknown-project"
    );

    let want: Vec<(String, String)> = [
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "decision-not-found",
        "decision-not-found",
        "not-authorized",
        "not-authorized",
        "not-authorized",
        "decision-consumed",
        "decision-consumed",
        "decision-consumed",
        "not-holder",
        "decision-mismatch",
    ]
    .iter()
    .map(|c| pair("checkLand", c))
    .collect();
    assert_eq!(e.refusals(TASK), want);
    // A refusal without a task ref lands on no trail.
    let unfiled = e.count(
        "SELECT count(*) FROM events WHERE kind = 'action.refused' AND subject IS NULL
           AND json_extract(body, '$.op') = ?1",
        "checkLand",
    );
    assert_eq!(unfiled, 3, "no-subject twice, and a task ref that is none");
    assert_eq!(
        e.refusals(OTHER),
        [
            "not-authorized",
            "verdict-not-found",
            "verdict-not-approve",
            "ref-moved",
            "unknown-project"
        ]
        .iter()
        .map(|c| pair("checkLand", c))
        .collect::<Vec<_>>()
    );
    e.b.close();
}

/// `recordLand` checks again inside its transaction and keeps the ticket
/// when it refuses; `landRefused` ends a landing without spending the
/// decision; an unknown ticket is `land-unknown`, a ticket from before a
/// restart included; a ticket outlives its run.
#[test]
fn record_land_and_land_refused_end_a_landing_once() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));

    // Unknown tickets: no caller, nothing written.
    let before = row_counts(e.root.path());
    for t in ["01890000-0000-7000-8000-000000000000", "x"] {
        assert_eq!(err(&e.record(&json!(t), land(MAIN1, C1))), "land-unknown");
        let r = e.b.op(json!({"op": "landRefused", "ticket": t,
                              "args": {"code": "merge-conflict", "notify": true}}));
        assert_eq!(err(&r), "land-unknown");
    }
    for op in [
        json!({"op": "recordLand", "ticket": 7, "land": land(MAIN1, C1)}),
        json!({"op": "recordLand", "ticket": "x"}),
        json!({"op": "landRefused", "ticket": "x", "args": "merge-conflict"}),
        json!({"op": "landRefused", "ticket": "x", "args": {}, "notify": true}),
    ] {
        assert_eq!(err(&e.b.op(op.clone())), "invalid-request", "{op}");
    }
    assert_eq!(row_counts(e.root.path()), before);

    // A malformed land is refused on the trail; the ticket stays open.
    let t1 = e.ticket("dev", TASK, &d)["id"].clone();
    let mut missing = land(MAIN1, C1);
    missing.as_object_mut().expect("object").remove("patch_id");
    let mut extra = land(MAIN1, C1);
    extra["branch"] = json!("main");
    for bad in [
        land("HEAD", C1),
        land(&MAIN1.to_uppercase(), C1),
        land(MAIN1, &C1[..39]),
        missing,
        extra,
    ] {
        assert_eq!(err(&e.record(&t1, bad.clone())), "invalid-request", "{bad}");
    }
    // reviewed must be the ticket's commit.
    assert_eq!(err(&e.record(&t1, land(MAIN1, C2))), "ref-moved");
    // The host ends it with its own code and detail, and tells dev.
    let r = e.b.op(json!({"op": "landRefused", "ticket": t1, "args": {
        "code": "merge-conflict", "detail": "src/main.rs", "notify": true}}));
    let out = res(&r).clone();
    assert!(out["message"].is_string(), "{out}");
    let ev = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("the refusal on the task's trail");
    assert_eq!(ev["kind"], json!("action.refused"));
    assert_eq!(
        ev["body"],
        json!({"action": "git.merge.protected", "op": "landRefused", "code": "merge-conflict",
               "detail": "src/main.rs"})
    );
    let got = e.receive("dev");
    let m = got
        .iter()
        .find(|m| m["id"] == out["message"])
        .expect("RESULT to dev");
    assert_eq!(
        (&m["class"], &m["from_role"], &m["decision"]),
        (&json!("RESULT"), &json!("_bus"), &d)
    );
    let text = m["body"].as_str().expect("body");
    assert!(
        text.contains("merge-conflict") && text.contains("src/main.rs"),
        "{text}"
    );
    // Ended: the ticket is gone, the decision unspent.
    assert_eq!(err(&e.record(&t1, land(MAIN1, C1))), "land-unknown");
    assert_eq!(e.consumed(&d), 0);
    assert_eq!(e.held("dev", None), json!(true));

    // landRefused's own arguments.
    let t2 = e.ticket("dev", TASK, &d)["id"].clone();
    for args in [
        json!({"code": "Merge Conflict", "notify": true}),
        json!({"code": "merge-conflict"}),
        json!({"code": "merge-conflict", "notify": "yes"}),
        json!({"code": "merge-conflict", "notify": true, "detail": ""}),
        json!({"code": "merge-conflict", "notify": true, "detail": "x".repeat(2001)}),
        json!({"code": "merge-conflict", "notify": true, "extra": 1}),
    ] {
        let r =
            e.b.op(json!({"op": "landRefused", "ticket": t2, "args": args}));
        assert_eq!(err(&r), "invalid-request", "{args}");
    }
    // Without notify, no message.
    let r = e.b.op(json!({"op": "landRefused", "ticket": t2,
                          "args": {"code": "hook-failed", "notify": false}}));
    assert_eq!(res(&r)["message"], Value::Null);
    assert!(e.receive("dev").is_empty());

    // The push moved between checkLand and recordLand: refused inside the
    // transaction, the decision unspent, the ticket still open.
    let t3 = e.ticket("dev", TASK, &d)["id"].clone();
    e.push("dev", TASK, C2);
    assert_eq!(err(&e.record(&t3, land(MAIN1, C1))), "ref-moved");
    assert_eq!(e.consumed(&d), 0);
    e.reviewed("dev", TASK, C2, "approve");
    assert_eq!(
        err(&e.record(&t3, land(MAIN1, C1))),
        "ref-moved",
        "the ticket's commit"
    );
    let r = e.b.op(json!({"op": "landRefused", "ticket": t3,
                          "args": {"code": "ref-moved", "notify": false}}));
    res(&r);

    // Two tickets for one decision: the first recorded spends it, the
    // second's recordLand is then decision-consumed.
    let t4 = e.ticket("dev", TASK, &d)["id"].clone();
    let t5 = e.ticket("dev", TASK, &d)["id"].clone();
    assert_ne!(t4, t5);
    // A ticket outlives its run: the host may record after the run ended.
    let r = e.b.op(json!({"op": "endLaunch",
                          "record": {"business": "acme", "run": "dev-1", "reason": "done"}}));
    res(&r);
    res(&e.record(&t4, land(MAIN1, C2)));
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(err(&e.record(&t5, land(MAIN1, C2))), "decision-consumed");
    let r = e.b.op(json!({"op": "landRefused", "ticket": t5,
                          "args": {"code": "decision-consumed", "notify": false}}));
    res(&r);

    // A ticket open at a restart is gone after it.
    e.push("pm", OTHER, C1);
    e.reviewed("pm", OTHER, C1, "approve");
    let pd = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pd, "choice": "yes"}),
    );
    let t6 = e.ticket("pm", OTHER, &pd)["id"].clone();
    let mut e = e.restart(business());
    let before = row_counts(e.root.path());
    assert_eq!(err(&e.record(&t6, land(MAIN1, C1))), "land-unknown");
    let r = e.b.op(json!({"op": "landRefused", "ticket": t6,
                          "args": {"code": "x", "notify": true}}));
    assert_eq!(err(&r), "land-unknown");
    assert_eq!(row_counts(e.root.path()), before);
    assert_eq!(e.held("pm", None), json!(true), "still unspent");
    let t7 = e.ticket("pm", OTHER, &pd);
    assert_eq!(t7["resolution"]["via"], json!("broker"));
    res(&e.record(&t7["id"], land(MAIN1, C1)));
    assert_eq!(e.held("pm", None), json!(false));

    let mut want: Vec<(String, String)> = [
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "ref-moved",
    ]
    .iter()
    .map(|c| pair("recordLand", c))
    .collect();
    want.push(pair("landRefused", "merge-conflict"));
    want.extend(std::iter::repeat_n(
        pair("landRefused", "invalid-request"),
        6,
    ));
    want.push(pair("landRefused", "hook-failed"));
    want.push(pair("recordLand", "ref-moved"));
    want.push(pair("recordLand", "ref-moved"));
    want.push(pair("landRefused", "ref-moved"));
    want.push(pair("recordLand", "decision-consumed"));
    want.push(pair("landRefused", "decision-consumed"));
    assert_eq!(e.refusals(TASK), want);
    // Refusals after the run ended are still the run's.
    let runs = e.count(
        "SELECT count(DISTINCT run) FROM events WHERE kind = 'action.refused' AND subject = ?1",
        TASK,
    );
    assert_eq!(runs, 1);
    e.b.close();
}

/// `landHeld`'s own arguments.
#[test]
fn land_held_refuses_unknown_businesses_roles_and_bad_shapes() {
    let mut e = env();
    let cases = [
        (
            json!({"op": "landHeld", "business": "globex", "role": "pm"}),
            "unknown-business",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "nobody"}),
            "unknown-role",
        ),
        (
            json!({"op": "landHeld", "business": "acme"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "pm", "thread": 3}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "pm", "run": "pm-1"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "nobody"}}),
            "unknown-role",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "pm"}, "business": "acme"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": ["acme", "pm"]}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "pm", "run": "r"}}),
            "invalid-request",
        ),
    ];
    for (op, code) in cases {
        assert_eq!(err(&e.b.op(op.clone())), code, "{op}");
    }
    let r =
        e.b.op(json!({"op": "landHeld", "business": "acme", "role": "pm", "thread": null}));
    assert_eq!(res(&r), &json!({"held": false}));
    // The spec's shape (3i L53) answers the same; DESIGN.md's flat one
    // stays. (An earlier build refused the spec's `record`.)
    let r =
        e.b.op(json!({"op": "landHeld", "record": {"business": "acme", "role": "pm"}}));
    assert_eq!(res(&r), &json!({"held": false}));
    // A role whose policy doesn't grant the merge cross-role never holds one.
    assert_eq!(e.held("qa", None), json!(false));
    e.b.close();
}

/// Only the landing ops (and `authorize` with the decision) write the
/// landing record: `recordEvent` can't forge one.
#[test]
fn record_event_cannot_forge_a_landing_record() {
    let mut e = env();
    let r = e.op(
        "pm",
        json!({"op": "recordEvent", "kind": "action.allowed", "subject": TASK,
               "body": {"action": "git.merge.protected", "target": TASK, "commit": MAIN1}}),
    );
    assert_eq!(err(&r), "reserved-event");
    e.b.close();
}

/// `h` pushes C1 for TASK, asks pm to review it, pm approves; `h` raises
/// the cross-role `git.merge.protected` on TASK and pm resolves it `yes`:
/// the decision's id.
fn approved_merge(b: &mut Broker, h: &str, pm: &str) -> Value {
    let r = b.op(json!({"op": "recordPush", "cap": h, "push": {
        "task_ref": TASK, "project": "site", "branch": "work/41",
        "ref": "refs/heads/work/41", "commit": C1, "previous": null}}));
    res(&r);
    let req = res(&b.call(
        h,
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "pm"}),
    ))
    .clone();
    res(&b.call(
        pm,
        "review.verdict",
        json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
               "body": "fine"}),
    ));
    let d = res(&b.call(
        h,
        "decision.raise",
        json!({"action": "git.merge.protected", "question": "Land?", "target": TASK,
               "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "blocking": false}),
    ))["id"]
        .clone();
    res(&b.call(pm, "decision.resolve", json!({"id": d, "choice": "yes"})));
    d
}

/// A thread run lands with a decision raised in its own thread only: the
/// same instance in another thread gets `decision-mismatch`, `landHeld`
/// answers per thread, and the RESULT is filed in the decision's thread.
#[test]
fn a_thread_run_lands_only_with_its_own_threads_decision() {
    let root = data_root();
    let business = json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["review.verdict", "message.send"],
                                 "crossRole": []}},
            "helper": {"definition": "assistant",
                       "authority": {"withinRole": ["git.push.working", "review.request",
                                                    "message.send"],
                                     "crossRole": ["git.merge.protected"]}}
        },
        "projects": {"site": {"repo": "/srv/records/site"}}
    });
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let project =
        res(&human.call("project.create", json!({"name": "Site", "repo": "site"})))["id"].clone();
    let thread = |name: &str| {
        res(&human.call("thread.create", json!({"project": project, "name": name})))["id"]
            .as_str()
            .expect("thread id")
            .to_string()
    };
    let (t1, t2) = (thread("One"), thread("Two"));
    let procs = [sleeper(), sleeper(), sleeper()];
    let pm = b.bind("pm", "pm-1", procs[0].id());
    let mut bind_thread = |run: &str, pid: u32, th: &str| {
        let mut rec = launch("helper", run, pid);
        rec["thread"] = json!(th);
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        res_launch(&r)
    };
    let h1 = bind_thread("h-1", procs[1].id(), &t1);
    let h2 = bind_thread("h-2", procs[2].id(), &t2);
    for cap in [&pm, &h1, &h2] {
        res(&b.call(cap, "role.claim", Value::Null));
    }

    let d = approved_merge(&mut b, &h1, &pm);

    let mut held = |th: Option<&str>| {
        let mut op = json!({"op": "landHeld", "business": "acme", "role": "helper"});
        if let Some(t) = th {
            op["thread"] = json!(t);
        }
        res(&b.op(op))["held"].clone()
    };
    assert_eq!(held(Some(&t1)), json!(true));
    assert_eq!(held(Some(&t2)), json!(false), "another thread");
    assert_eq!(held(None), json!(false), "no thread");

    let args = json!({"task_ref": TASK, "decision": d});
    let r = b.op(json!({"op": "checkLand", "cap": h2, "args": args}));
    assert_eq!(
        err(&r),
        "decision-mismatch",
        "the same instance in another thread"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h1, "args": args}));
    let ticket = res(&r)["ticket"].clone();
    let r = b.op(json!({"op": "recordLand", "ticket": ticket["id"], "land": land(MAIN1, C1)}));
    let out = res(&r).clone();
    let filed: String = db(root.path())
        .query_row(
            "SELECT thread FROM message_threads WHERE message = ?1",
            [out["message"].as_str().expect("message id")],
            |r| r.get(0),
        )
        .expect("the RESULT is filed in a thread");
    assert_eq!(filed, t1);
    let got = res(&b.call(&h1, "message.receive", Value::Null))["messages"].clone();
    assert!(
        got.as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "{got}"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h1, "args": args}));
    assert_eq!(err(&r), "decision-consumed");
    b.close();
}

/// Row 136: the approval binds to the role instance, not the run that
/// raised it. A later run of dev, holding its claim, lands with the
/// decision dev-1 raised; the record names the landing run; the RESULT
/// waits for dev's next run when the landing run ended before the host
/// recorded; and a ticket that ended refuses `landRefused` as well.
#[test]
fn a_later_run_of_the_raising_instance_lands_and_the_next_run_hears_of_it() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let end = |e: &mut Env, run: &str| {
        let r = e.b.op(json!({"op": "endLaunch",
                              "record": {"business": "acme", "run": run, "reason": "done"}}));
        res(&r);
    };
    end(&mut e, "dev-1");
    assert_eq!(e.held("dev", None), json!(true), "outlives its run");

    let p2 = sleeper();
    let dev2 = e.b.bind("dev", "dev-2", p2.id());
    res(&e.b.call(&dev2, "role.claim", Value::Null));
    let r =
        e.b.op(json!({"op": "checkLand", "cap": dev2, "args": {"task_ref": TASK, "decision": d}}));
    let ticket = res(&r)["ticket"].clone();
    assert_eq!(ticket["commit"], json!(C1));
    end(&mut e, "dev-2");
    let out = res(&e.record(&ticket["id"], land(MAIN1, C1))).clone();
    let rec = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("the landing record");
    assert_eq!(
        (&rec["role"], &rec["run"]),
        (&json!("dev"), &json!("dev-2"))
    );
    assert_eq!(e.consumed(&d), 1);
    let r = e.b.op(json!({"op": "landRefused", "ticket": ticket["id"],
                          "args": {"code": "merge-conflict", "notify": true}}));
    assert_eq!(err(&r), "land-unknown", "recordLand ended the landing");

    let p3 = sleeper();
    let dev3 = e.b.bind("dev", "dev-3", p3.id());
    res(&e.b.call(&dev3, "role.claim", Value::Null));
    let got = res(&e.b.call(&dev3, "message.receive", Value::Null))["messages"].clone();
    let m = got
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["id"] == out["message"])
        .cloned()
        .unwrap_or_else(|| panic!("the RESULT reaches dev's next run: {got}"));
    assert_eq!((&m["class"], &m["decision"]), (&json!("RESULT"), &d));
    let r =
        e.b.op(json!({"op": "checkLand", "cap": dev3, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "decision-consumed", "spent for every run");
    e.b.close();
}

/// REQ-LAND-1: a within-role merge decision (closed at its raise) never
/// lands, and `landHeld` never counts it.
#[test]
fn a_within_role_merge_decision_never_lands() {
    let root = data_root();
    let mut business = business();
    business["roles"]["ops"] = json!({"authority": {
        "withinRole": ["git.merge.protected", "git.push.working", "review.request"],
        "crossRole": []}});
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (pops, pcto) = (sleeper(), sleeper());
    let ops = b.bind("ops", "ops-1", pops.id());
    let cto = b.bind("cto", "cto-1", pcto.id());
    for cap in [&ops, &cto] {
        res(&b.call(cap, "role.claim", Value::Null));
    }
    let r = b.op(json!({"op": "recordPush", "cap": ops, "push": {
        "task_ref": TASK, "project": "site", "branch": "work/41",
        "ref": "refs/heads/work/41", "commit": C1, "previous": null}}));
    res(&r);
    let req = res(&b.call(
        &ops,
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
    ))
    .clone();
    res(&b.call(
        &cto,
        "review.verdict",
        json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
               "body": "fine"}),
    ));
    let d = res(&b.call(
        &ops,
        "decision.raise",
        json!({"action": "git.merge.protected", "question": "Land?", "target": TASK,
               "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "blocking": false, "choice": "yes"}),
    ))["id"]
        .clone();
    let class: String = db(root.path())
        .query_row(
            "SELECT class FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| r.get(0),
        )
        .expect("decision row");
    assert_eq!(class, "within-role");
    let r = b.op(json!({"op": "landHeld", "business": "acme", "role": "ops"}));
    assert_eq!(res(&r)["held"], json!(false));
    let r = b.op(json!({"op": "checkLand", "cap": ops, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "not-authorized");
    b.close();
}

/// Row 136 for a thread: a later run serving the same thread lands with
/// the decision an earlier one raised there, once it holds the thread's
/// claim (`not-holder` before); the RESULT is filed in that thread and the
/// thread's next run receives it after the landing run ended.
#[test]
fn a_later_run_of_the_same_thread_lands_its_decision() {
    let root = data_root();
    let business = json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["review.verdict", "message.send"],
                                 "crossRole": []}},
            "helper": {"definition": "assistant",
                       "authority": {"withinRole": ["git.push.working", "review.request",
                                                    "message.send"],
                                     "crossRole": ["git.merge.protected"]}}
        },
        "projects": {"site": {"repo": "/srv/records/site"}}
    });
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let project =
        res(&human.call("project.create", json!({"name": "Site", "repo": "site"})))["id"].clone();
    let t1 = res(&human.call("thread.create", json!({"project": project, "name": "One"})))["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let t2 = res(&human.call("thread.create", json!({"project": project, "name": "Two"})))["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let procs = [sleeper(), sleeper(), sleeper(), sleeper(), sleeper()];
    let pm = b.bind("pm", "pm-1", procs[0].id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let bind_thread = |b: &mut Broker, run: &str, pid: u32| {
        let mut rec = launch("helper", run, pid);
        rec["thread"] = json!(t1);
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        res_launch(&r)
    };
    let end = |b: &mut Broker, run: &str| {
        let r = b.op(json!({"op": "endLaunch",
                            "record": {"business": "acme", "run": run, "reason": "done"}}));
        res(&r);
    };
    let h1 = bind_thread(&mut b, "h-1", procs[1].id());
    res(&b.call(&h1, "role.claim", Value::Null));
    let d = approved_merge(&mut b, &h1, &pm);

    // h-3 serves the thread h-1 still holds: not its claim yet.
    let args = json!({"task_ref": TASK, "decision": d});
    let h3 = bind_thread(&mut b, "h-3", procs[2].id());
    let r = b.op(json!({"op": "checkLand", "cap": h3, "args": args}));
    assert_eq!(err(&r), "not-holder");
    end(&mut b, "h-1");
    res(&b.call(&h3, "role.claim", Value::Null));
    let r = b.op(json!({"op": "checkLand", "cap": h3, "args": args}));
    let ticket = res(&r)["ticket"].clone();
    end(&mut b, "h-3");
    // The instance's run in another thread, holding it.
    let mut rec = launch("helper", "h-2", procs[4].id());
    rec["thread"] = json!(t2);
    let h2 = res_launch(&b.op(json!({"op": "bindLaunch", "record": rec})));
    res(&b.call(&h2, "role.claim", Value::Null));
    let r = b.op(json!({"op": "recordLand", "ticket": ticket["id"], "land": land(MAIN1, C1)}));
    let out = res(&r).clone();
    let filed: String = db(root.path())
        .query_row(
            "SELECT thread FROM message_threads WHERE message = ?1",
            [out["message"].as_str().expect("message id")],
            |r| r.get(0),
        )
        .expect("the RESULT is filed in a thread");
    assert_eq!(filed, t1);
    let other = res(&b.call(&h2, "message.receive", Value::Null))["messages"].clone();
    assert!(
        !other
            .as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "not delivered in another thread: {other}"
    );

    let h4 = bind_thread(&mut b, "h-4", procs[3].id());
    res(&b.call(&h4, "role.claim", Value::Null));
    let got = res(&b.call(&h4, "message.receive", Value::Null))["messages"].clone();
    assert!(
        got.as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "the thread's next run receives the RESULT: {got}"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h4, "args": args}));
    assert_eq!(err(&r), "decision-consumed");
    b.close();
}

/// Row 137: the decision's target must be the branch the caller names, the
/// task ref for an agent's landing (`refactor` is land-work's), so a merge
/// approval for `refactor`, or for no target, lands no task: `checkLand`
/// refuses it `not-authorized`, and `landHeld` does not count it as one a
/// landing could use (the launcher would bind a land op that can only
/// refuse).
#[test]
fn a_merge_approval_for_another_branch_or_none_lands_no_task() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let refactor = e.raise("dev", "git.merge.protected", "refactor", json!({}));
    e.ok(
        "pm",
        "decision.resolve",
        json!({"id": refactor, "choice": "yes"}),
    );
    let mut untargeted = json!({"action": "git.merge.protected", "question": "Land?",
           "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "Not yet"}],
           "recommendation": "yes", "blocking": false});
    let none = e.ok("dev", "decision.raise", untargeted.take())["id"].clone();
    e.ok(
        "pm",
        "decision.resolve",
        json!({"id": none, "choice": "yes"}),
    );

    let before = row_counts(e.root.path());
    assert_eq!(
        e.held("dev", None),
        json!(false),
        "no approval lands a task"
    );
    assert_eq!(row_counts(e.root.path()), before, "landHeld writes nothing");
    assert!(e.refusals(TASK).is_empty());
    for d in [&refactor, &none] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
            "not-authorized",
            "{d}"
        );
    }
    // A task's own approval is held.
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    assert_eq!(e.held("dev", None), json!(true));
    e.b.close();
}

/// Each landing spends its own decision: after a task landed, new work on
/// it (a new push, a new approving verdict) lands again only with a new
/// approval, whose ticket names the new commit.
#[test]
fn a_task_lands_again_only_with_a_new_approval() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d1 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d1, "choice": "yes"}));
    let t1 = e.ticket("dev", TASK, &d1);
    res(&e.record(&t1["id"], land(MAIN1, C1)));

    e.push("dev", TASK, C2);
    let v2 = e.reviewed("dev", TASK, C2, "approve");
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d1}))),
        "decision-consumed"
    );
    assert_eq!(e.held("dev", None), json!(false));
    let d2 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d2, "choice": "yes"}));
    let t2 = e.ticket("dev", TASK, &d2);
    assert_eq!((&t2["commit"], &t2["verdict"]), (&json!(C2), &v2));
    let mut second = land(PATCH, C2);
    second["previous"] = json!(MAIN1);
    res(&e.record(&t2["id"], second));
    assert_eq!((e.consumed(&d1), e.consumed(&d2)), (1, 1));
    let landings: Vec<Value> = e
        .trail(TASK)
        .into_iter()
        .filter(|x| {
            x["kind"] == json!("action.allowed")
                && x["body"]["action"] == json!("git.merge.protected")
        })
        .map(|x| {
            json!([
                x["body"]["decision"],
                x["body"]["reviewed"],
                x["body"]["previous"]
            ])
        })
        .collect();
    assert_eq!(
        landings,
        vec![json!([d1, C1, MAIN0]), json!([d2, C2, MAIN1])]
    );
    e.b.close();
}

/// The spec's `recordLand {ticket, land}` / `landRefused {ticket, args}`
/// may carry the ticket object `checkLand` returned instead of its id
/// (DESIGN.md): it must be that ticket exactly; an altered copy is
/// `land-unknown`, an object without a string id `invalid-request`.
#[test]
fn the_ticket_may_come_back_whole_as_check_land_gave_it() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let t = e.ticket("dev", TASK, &d);
    let before = row_counts(e.root.path());
    let mut altered = t.clone();
    altered["commit"] = json!(C2);
    assert_eq!(err(&e.record(&altered, land(MAIN1, C1))), "land-unknown");
    let r = e.b.op(json!({"op": "landRefused", "ticket": altered,
                          "args": {"code": "merge-conflict", "notify": false}}));
    assert_eq!(err(&r), "land-unknown");
    let mut no_id = t.clone();
    no_id.as_object_mut().expect("ticket").remove("id");
    assert_eq!(err(&e.record(&no_id, land(MAIN1, C1))), "invalid-request");
    assert_eq!(row_counts(e.root.path()), before);
    // The whole ticket, as given: the landing is recorded and spent.
    res(&e.record(&t, land(MAIN1, C1)));
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(err(&e.record(&t, land(MAIN1, C1))), "land-unknown");

    // landRefused takes it whole too.
    e.push("dev", TASK, C2);
    e.reviewed("dev", TASK, C2, "approve");
    let d2 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d2, "choice": "yes"}));
    let t2 = e.ticket("dev", TASK, &d2);
    let r = e.b.op(json!({"op": "landRefused", "ticket": t2,
                          "args": {"code": "merge-conflict", "notify": false}}));
    assert!(res(&r)["event"].is_string(), "{r}");
    assert_eq!(err(&e.record(&t2["id"], land(MAIN1, C2))), "land-unknown");
    assert_eq!(e.consumed(&d2), 0);
    e.b.close();
}

/// A crash (SIGKILL) instead of a close: the landing that answered is
/// spent for good, and a ticket open at the crash is `land-unknown`, its
/// decision still usable.
#[test]
fn a_crash_keeps_what_recorded_and_forgets_open_tickets() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let t = e.ticket("dev", TASK, &d);
    res(&e.record(&t["id"], land(MAIN1, C1)));

    e.push("pm", OTHER, C2);
    e.reviewed("pm", OTHER, C2, "approve");
    let pd = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pd, "choice": "yes"}),
    );
    let open = e.ticket("pm", OTHER, &pd);

    let mut e = e.restart_after(business(), false);
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "decision-consumed"
    );
    assert_eq!(err(&e.record(&open["id"], land(MAIN1, C2))), "land-unknown");
    assert_eq!(e.held("pm", None), json!(true));
    let again = e.ticket("pm", OTHER, &pd);
    res(&e.record(&again["id"], land(MAIN1, C2)));
    assert_eq!(e.consumed(&pd), 1);
    e.b.close();
}
