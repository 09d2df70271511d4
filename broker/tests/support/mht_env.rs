//! Shared setup of `messages_human_and_tester.rs`, `known_tokens.rs` and `agent_state.rs`: the business, the callers (human, tester, reader, a role).
#![allow(dead_code)]

use crate::common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::store::evidence::{self, Actor};
use serde_json::{json, Value};

pub fn biz(id: &str) -> Value {
    json!({
        "id": id, "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"authority": {"withinRole": ["message.send"], "crossRole": []},
                   "tracker": {"bot": "acme-pm-bot"}},
            "cto": {"authority": {"withinRole": ["message.send"], "crossRole": []},
                    "tracker": {"bot": "acme-cto-bot"}},
            "dev": {"authority": {"withinRole": [], "crossRole": []}}
        },
        "vars": {"bus.tester": true}
    })
}

pub type Env = Inproc;

impl Env {
    pub fn new() -> Env {
        Env::with_requirements(None)
    }
    pub fn with_requirements(req: Option<Value>) -> Env {
        Env::build(biz("acme"), req)
    }
    pub fn build(acme: Value, req: Option<Value>) -> Env {
        let mut e = Inproc::boot(json!({
            "businesses": {"acme": acme, "beta": biz("beta")},
            "readers": ["acme"],
        }));
        e.core.requirements = req;
        e
    }
    /// The decision stored on the message a send answered `sent`.
    pub fn message_decision(&self, sent: &Value) -> Option<String> {
        self.core
            .store
            .db()
            .sql()
            .query_row(
                "SELECT decision FROM messages WHERE id = ?1",
                [sent["id"].as_str().unwrap()],
                |r| r.get(0),
            )
            .unwrap()
    }
    pub fn count(&self, sql: &str) -> i64 {
        self.core
            .store
            .db()
            .sql()
            .query_row(sql, [], |r| r.get(0))
            .unwrap()
    }
    /// Row counts of every evidence table, refusal evidence left out (see
    /// [`Env::refusals`], which the tests that refuse check exactly).
    pub fn counts(&self) -> Vec<i64> {
        [
            "events WHERE kind != 'action.refused'",
            "decisions",
            "decision_events",
            "role_claims",
            "messages",
            "deliveries",
            "read_receipts",
            "task_snapshots",
        ]
        .iter()
        .map(|t| self.count(&format!("SELECT count(*) FROM {t}")))
        .collect()
    }
    /// Every `action.refused` row, oldest first, as
    /// `[role, run, subject, action, code]`.
    pub fn refusals(&self) -> Vec<Value> {
        let conn = self.core.store.db().sql();
        let mut st = conn
            .prepare(
                "SELECT role, run, subject, json_extract(body, '$.action'),
                 json_extract(body, '$.code') FROM events
                 WHERE kind = 'action.refused' ORDER BY seq",
            )
            .unwrap();
        let rows = st
            .query_map([], |r| {
                let s = |i: usize| r.get::<_, Option<String>>(i);
                Ok(json!([s(0)?, s(1)?, s(2)?, s(3)?, s(4)?]))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    }
    /// A decision row as the decisions work would raise it.
    pub fn raise(&mut self, business: &str, role: &str, routed: &str, class: &str) -> String {
        let id = mosaic_bus::ids::uuid();
        let i = id.clone();
        let (b, r, rt, c) = (
            business.to_string(),
            role.to_string(),
            routed.to_string(),
            class.to_string(),
        );
        self.core
            .store
            .write(move |t| {
                let at = t.now();
                t.db()
                    .sql()
                    .execute(
                        "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action,
                       target, class, routed_to, question, options, recommendation,
                       approval_choice, blocking, task_ref, at)
                     VALUES (?1, ?2, ?3, 'run-x', 'prd.approve', NULL, ?4, ?5, 'Ship?',
                       '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
                       'yes', 'yes', 0, NULL, ?6)",
                        rusqlite::params![i, b, r, c, rt, at],
                    )
                    .map_err(|e| mosaic_bus::store::map_sql_error(&e))?;
                Ok(())
            })
            .unwrap();
        id
    }
    pub fn event(&mut self, business: &str, kind: &str, body: Value) -> String {
        let (b, k) = (business.to_string(), kind.to_string());
        self.core
            .store
            .write(move |t| {
                evidence::insert_event(
                    t,
                    &b,
                    &k,
                    Actor {
                        role: Some("human"),
                        run: Some("human-cli"),
                    },
                    None,
                    &body,
                )
            })
            .unwrap()
            .id
    }
}

pub fn human() -> Caller {
    Caller::Human {
        business: "acme".into(),
    }
}
pub fn tester() -> Caller {
    Caller::Tester {
        business: "acme".into(),
    }
}
/// The row of `role` in an `agents` reply.
pub fn agent_row(agents: &Value, role: &str) -> Value {
    agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == role)
        .unwrap()
        .clone()
}

pub fn reader() -> Caller {
    Caller::Reader {
        business: "acme".into(),
    }
}
pub fn role(r: &str, run: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: run.into(),
    }
}

/// The notices `pm` has been sent by the bus, oldest first.
pub fn bus_notices(e: &Env) -> Vec<(String, String, String, String, String)> {
    let conn = e.core.store.db().sql();
    let mut st = conn
        .prepare(
            "SELECT from_run, to_role, class, in_reply_to, body FROM messages
             WHERE from_role = '_bus' ORDER BY seq",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}
