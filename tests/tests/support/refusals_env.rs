//! Shared setup of `refusals.rs` and `argument_checks.rs`: a business of five roles bound and claimed on a real broker, and the refusal rows they leave.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;

pub const TASK: &str = "vikunja:3/41";
pub const C1: &str = "1111111111111111111111111111111111111111";
pub const NO_ID: &str = "00000000-0000-4000-8000-000000000000";

pub fn business() -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["message.send", "role.end"], "crossRole": []}},
            "cto": {"definition": "cto",
                    "authority": {"withinRole": ["message.send", "review.verdict"],
                                  "crossRole": []}},
            "dev": {"definition": "dev",
                    "authority": {"withinRole": ["message.send", "git.push.working",
                                                 "review.request", "record.write"],
                                  "crossRole": ["role.revoke", "task.close"]}},
            "qa": {"definition": "qa", "authority": {"withinRole": [], "crossRole": []}},
            "cos": {"definition": "chief-of-staff",
                    "authority": {"withinRole": ["role.end", "message.send"],
                                  "crossRole": []}},
            "aide": {"definition": "assistant",
                     "authority": {"withinRole": [], "crossRole": []}}
        },
        "launch": {"by": "pm", "instances": ["cto", "dev", "qa"]},
        "projects": {"site": {"repo": "/srv/records/site"}}
    })
}

/// The roles bound (runs `<role>-1`) and claimed. The assistant instance
/// `aide` is not: its runs are thread runs, and no test here needs one.
pub const ROLES: [&str; 5] = ["pm", "cto", "dev", "qa", "cos"];

pub struct Env {
    pub root: tempfile::TempDir,
    pub b: Broker,
    pub caps: HashMap<&'static str, String>,
    pub reader: String,
    pub _procs: Vec<Sleeper>,
}

pub fn env() -> Env {
    let root = data_root();
    let config = json!({"dataRoot": root.path(), "businesses": {"acme": business()},
                        "readers": ["acme"]});
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (caps, procs) = b.bind_each(&ROLES);
    let reader = b.reader_cap();
    let e = Env {
        root,
        b,
        caps,
        reader,
        _procs: procs,
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
    pub fn refused(&self, role: &str, verb: &str, args: Value) -> String {
        err(&self.call(role, verb, args)).to_string()
    }
    pub fn refusals(&self) -> Vec<Value> {
        refusals(self.root.path())
    }
    pub fn counts(&self) -> Vec<i64> {
        row_counts(self.root.path())
    }
    /// The task's `action.refused` events on its trail (as the reader reads
    /// it), as `[role, run, subject, action, code]`.
    pub fn trail_refusals(&self, task: &str) -> Vec<Value> {
        let t = res(&self.b.call(&self.reader, "trail", json!({"subject": task}))).clone();
        t.as_array()
            .expect("trail")
            .iter()
            .filter(|r| r["kind"] == json!("action.refused"))
            .map(|r| {
                json!([
                    r["role"],
                    r["run"],
                    r["subject"],
                    r["body"]["action"],
                    r["body"]["code"]
                ])
            })
            .collect()
    }
    pub fn count(&self, sql: &str) -> i64 {
        db(self.root.path())
            .query_row(sql, [], |r| r.get(0))
            .expect("count")
    }
    /// A role's refusal of `verb` with `args`: the code it gets, then the
    /// one new refusal row, which must be `[role, role-1, subject, verb,
    /// code]`; nothing else is written.
    pub fn refuses(&self, role: &str, verb: &str, args: Value, code: &str, subject: Option<&str>) {
        let (before, n) = (self.counts(), self.refusals().len());
        assert_eq!(
            self.refused(role, verb, args.clone()),
            code,
            "{verb} {args}"
        );
        let run = format!("{role}-1");
        assert_eq!(
            self.refusals()[n..],
            [json!([role, run, subject, verb, code])],
            "{verb} {args}"
        );
        assert_eq!(
            self.counts(),
            before,
            "{verb} {args}: nothing but the refusal"
        );
    }
}

pub fn row(role: &str, subject: Option<&str>, action: &str, code: &str) -> Value {
    json!([role, format!("{role}-1"), subject, action, code])
}
