//! Shared setup of `landing.rs` and `landing_approvals.rs`.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pub const TASK: &str = "vikunja:3/41";
pub const OTHER: &str = "vikunja:3/42";
pub const C1: &str = "1111111111111111111111111111111111111111";
pub const C2: &str = "2222222222222222222222222222222222222222";
pub const MAIN0: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const MAIN1: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
pub const PATCH: &str = "cccccccccccccccccccccccccccccccccccccccc";

pub const ROLES: [&str; 5] = ["pm", "dev", "cto", "qa", "arch"];

/// pm is the delivery arbiter, so its own cross-role raise goes to the
/// human; dev's goes to pm; cto (technical arbiter) reviews; qa may land
/// only through a gated decision; arch reviews too.
pub fn business() -> Value {
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

pub fn config(root: &Path, business: &Value) -> Value {
    json!({"dataRoot": root, "businesses": {"acme": business}, "readers": ["acme"]})
}

pub struct Env {
    pub root: tempfile::TempDir,
    pub b: Broker,
    pub caps: HashMap<&'static str, String>,
    pub procs: Vec<Sleeper>,
    pub human: ShimSession,
}

pub fn env() -> Env {
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
    pub fn call(&self, role: &str, verb: &str, args: Value) -> Value {
        self.b.call(&self.caps[role], verb, args)
    }
    pub fn ok(&self, role: &str, verb: &str, args: Value) -> Value {
        res(&self.call(role, verb, args)).clone()
    }
    pub fn op(&mut self, role: &str, mut op: Value) -> Value {
        op["cap"] = json!(self.caps[role]);
        self.b.op(op)
    }

    /// The human's request through the real `mosaic-human-cli`, started
    /// detached with a clean environment (the suite may run under an agent
    /// whose markers the proof refuses).
    pub fn human(&self, business: &str, verb: &str, args: Value) -> Value {
        self.human.call_in(business, verb, args)
    }

    /// Closes the broker and starts another on the same store with
    /// `business`, binding the same runs again (their claims are stored).
    pub fn restart(self, business: Value) -> Env {
        self.restart_after(business, true)
    }

    /// As [`Env::restart`], the broker closed (`clean`) or killed
    /// (SIGKILL, as a crash: the harness kills it on drop) and the crash
    /// procedure followed.
    pub fn restart_after(self, business: Value, clean: bool) -> Env {
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

    pub fn push(&mut self, role: &str, task: &str, commit: &str) {
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
    pub fn reviewed(&self, role: &str, task: &str, commit: &str, verdict: &str) -> Value {
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
    pub fn raise(&self, role: &str, action: &str, target: &str, extra: Value) -> Value {
        let mut args = json!({"action": action, "question": "Land it?", "target": target,
               "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "Not yet"}],
               "recommendation": "yes", "blocking": false});
        if let (Some(a), Value::Object(x)) = (args.as_object_mut(), extra) {
            a.extend(x);
        }
        self.ok(role, "decision.raise", args)["id"].clone()
    }

    pub fn check(&mut self, role: &str, args: Value) -> Value {
        self.op(role, json!({"op": "checkLand", "args": args}))
    }

    pub fn ticket(&mut self, role: &str, task: &str, decision: &Value) -> Value {
        let r = self.check(role, json!({"task_ref": task, "decision": decision}));
        res(&r)["ticket"].clone()
    }

    pub fn record(&mut self, ticket: &Value, land: Value) -> Value {
        self.b
            .op(json!({"op": "recordLand", "ticket": ticket, "land": land}))
    }

    /// Asks `landHeld` in both shapes, DESIGN.md's flat one and the spec's
    /// `record` (3i L53); they must agree.
    pub fn held(&mut self, role: &str, thread: Option<&str>) -> Value {
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

    pub fn count(&self, sql: &str, p: &str) -> i64 {
        db(self.root.path())
            .query_row(sql, [p], |r| r.get(0))
            .expect("count")
    }

    pub fn consumed(&self, decision: &Value) -> i64 {
        self.count(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            decision.as_str().expect("id"),
        )
    }

    /// The task's trail as the reader sees it.
    pub fn trail(&self, task: &str) -> Vec<Value> {
        let reader = self.b.reader_cap();
        let t = res(&self.b.call(&reader, "trail", json!({"subject": task}))).clone();
        t.as_array().expect("trail array").clone()
    }

    /// The task's `action.refused` events as `(op, code)`.
    pub fn refusals(&self, task: &str) -> Vec<(String, String)> {
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
    pub fn receive(&self, role: &str) -> Vec<Value> {
        self.ok(role, "message.receive", Value::Null)["messages"]
            .as_array()
            .expect("messages")
            .clone()
    }
}

pub fn res_launch(reply: &Value) -> String {
    assert_eq!(reply["ok"], json!(true), "bind: {reply}");
    reply["launch"]["cap"].as_str().expect("cap").to_string()
}

pub fn land(commit: &str, reviewed: &str) -> Value {
    json!({"commit": commit, "previous": MAIN0, "reviewed": reviewed, "base": MAIN0,
           "patch_id": PATCH})
}

pub fn pair(op: &str, code: &str) -> (String, String) {
    (op.to_string(), code.to_string())
}

/// `h` pushes C1 for TASK, asks pm to review it, pm approves; `h` raises
/// the cross-role `git.merge.protected` on TASK and pm resolves it `yes`:
/// the decision's id.
pub fn approved_merge(b: &mut Broker, h: &str, pm: &str) -> Value {
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
