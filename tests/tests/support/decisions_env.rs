#![allow(dead_code)]
//! The decisions tests' shared business: pm, cto, dev and qa bound and
//! claimed on a real broker (used by decisions.rs and role_revoke.rs).

use mosaic_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pub const ROLES: [&str; 4] = ["pm", "cto", "dev", "qa"];

pub fn business() -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"authority": {"withinRole": ["message.send", "record.write"],
                                 "crossRole": ["git.merge.protected"]}},
            "cto": {"authority": {"withinRole": ["message.send", "review.verdict"],
                                  "crossRole": ["git.merge.protected"]}},
            "dev": {"authority": {"withinRole": ["record.write"],
                                  "crossRole": ["git.merge.protected", "role.revoke"]}},
            "qa": {"authority": {"withinRole": [], "crossRole": []}}
        },
        "launch": {"by": "pm", "instances": ["cto", "dev", "qa"]},
        "projects": {"site": {"repo": "/srv/records/site"}}
    })
}

pub fn config_with(root: &Path, business: Value) -> Value {
    json!({"dataRoot": root, "businesses": {"acme": business}, "readers": ["acme"]})
}

/// A broker with pm, cto, dev and qa bound (runs `<role>-1`) and claimed.
pub struct Env {
    pub root: tempfile::TempDir,
    pub b: Option<Broker>,
    pub procs: HashMap<&'static str, Sleeper>,
    pub caps: HashMap<&'static str, String>,
}

impl Env {
    pub fn new() -> Env {
        Env::with(business())
    }

    pub fn with(business: Value) -> Env {
        let root = data_root();
        let mut e = Env {
            root,
            b: None,
            procs: HashMap::new(),
            caps: HashMap::new(),
        };
        for r in ROLES {
            e.procs.insert(r, sleeper());
        }
        e.boot(business);
        for r in ROLES {
            let c = e.call(r, "role.claim", Value::Null);
            assert_eq!(c["ok"], json!(true), "{c}");
        }
        e
    }

    pub fn boot(&mut self, business: Value) {
        let (mut b, reply) =
            Broker::spawn(self.root.path(), config_with(self.root.path(), business));
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        for r in ROLES {
            let pid = self.procs[r].id();
            self.caps.insert(r, b.bind(r, &format!("{r}-1"), pid));
        }
        self.b = Some(b);
    }

    /// Close the broker and start a new one on the same data root.
    pub fn restart(&mut self, business: Value) {
        if let Some(b) = self.b.take() {
            b.close();
        }
        self.boot(business);
    }

    pub fn broker(&mut self) -> &mut Broker {
        self.b.as_mut().expect("broker running")
    }

    pub fn call(&self, role: &str, verb: &str, args: Value) -> Value {
        self.b
            .as_ref()
            .expect("broker")
            .call(&self.caps[role], verb, args)
    }

    pub fn reader(&self, verb: &str, args: Value) -> Value {
        let b = self.b.as_ref().expect("broker");
        b.call(&b.reader_cap(), verb, args)
    }

    pub fn raise(&self, role: &str, extra: Value) -> Value {
        let mut args = json!({
            "action": "git.merge.protected", "question": "Merge the work?",
            "options": [{"key": "yes", "text": "Merge it"}, {"key": "no", "text": "Not yet"}],
            "recommendation": "yes", "blocking": false,
        });
        if let (Some(a), Value::Object(x)) = (args.as_object_mut(), extra) {
            for (k, v) in x {
                if v.is_null() {
                    a.remove(&k);
                } else {
                    a.insert(k, v);
                }
            }
        }
        self.call(role, "decision.raise", args)
    }

    /// Raises and returns the decision (asserting success).
    pub fn raised(&self, role: &str, extra: Value) -> Value {
        let r = self.raise(role, extra);
        assert_eq!(r["ok"], json!(true), "raise: {r}");
        r["result"].clone()
    }

    pub fn resolve(&self, role: &str, id: &Value, choice: &str) -> Value {
        self.call(
            role,
            "decision.resolve",
            json!({"id": id, "choice": choice}),
        )
    }

    pub fn authorize(
        &mut self,
        role: &str,
        action: &str,
        target: Option<&str>,
        decision: Option<&Value>,
    ) -> Value {
        let cap = self.caps[role].clone();
        let mut op = json!({"op": "authorize", "cap": cap, "action": action});
        if let Some(t) = target {
            op["target"] = json!(t);
        }
        if let Some(d) = decision {
            op["decision"] = d.clone();
        }
        self.broker().op(op)
    }

    pub fn db(&self) -> rusqlite::Connection {
        db(self.root.path())
    }

    /// `kind, run, subject, body` of the event `id`, the body parsed.
    pub fn event_row(&self, id: &str) -> (String, String, Option<String>, Value) {
        let (kind, run, subject, body): (String, String, Option<String>, String) = self
            .db()
            .query_row(
                "SELECT kind, run, subject, body FROM events WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        (kind, run, subject, serde_json::from_str(&body).unwrap())
    }

    pub fn count(&self, sql: &str, p: &str) -> i64 {
        self.db().query_row(sql, [p], |r| r.get(0)).expect("count")
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(b) = self.b.take() {
            drop(b);
        }
        for (_, mut c) in self.procs.drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub const MERGE_TARGET: &str = "vikunja:3/41";
