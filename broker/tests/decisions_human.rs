//! Human-routed decisions, launch toggles and transaction rollback, in
//! process: a real temp store and a real `Core`, the human as
//! `Caller::Human` (the socket cannot prove a human session in a test).

use mosaic_bus::authorize::authorize_in_tx;
use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::{json, Map, Value};
use std::sync::Arc;

struct Env {
    _root: tempfile::TempDir,
    bus: BusDir,
    core: Option<Core>,
}

fn business() -> Value {
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"authority": {"withinRole": ["message.send"], "crossRole": ["git.merge.protected"]}},
            "cto": {"authority": {"withinRole": [], "crossRole": []}},
            "dev": {"authority": {"withinRole": [], "crossRole": ["git.merge.protected"]}}
        },
        "launch": {"by": "pm", "instances": ["cto", "dev"]}
    })
}

fn role(r: &str, run: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: run.into(),
    }
}

fn human() -> Caller {
    Caller::Human {
        business: "acme".into(),
    }
}

fn args(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

impl Env {
    fn new() -> Env {
        let root = tempfile::tempdir().expect("tempdir");
        let bus = BusDir::acquire(root.path()).expect("acquire");
        let mut e = Env {
            _root: root,
            bus,
            core: None,
        };
        e.open();
        for (r, run) in [("pm", "pm-1"), ("cto", "cto-1"), ("dev", "dev-1")] {
            e.ok(&role(r, run), "role.claim", Value::Null);
        }
        e
    }

    fn open(&mut self) {
        let store = Store::open(&self.bus.db_path()).expect("store");
        let config = BootConfig::from_json(json!({
            "dataRoot": self._root.path(), "businesses": {"acme": business()}
        }))
        .expect("config");
        self.core = Some(Core::new(store, Arc::new(config)));
    }

    /// Closes the store and opens it again (a restart of the writer).
    fn reopen(&mut self) {
        self.core = None;
        self.open();
    }

    fn core(&mut self) -> &mut Core {
        self.core.as_mut().expect("core")
    }

    fn call(&mut self, c: &Caller, verb: &str, a: Value) -> Result<Value, Code> {
        dispatch(self.core(), c, verb, args(a))
    }

    fn ok(&mut self, c: &Caller, verb: &str, a: Value) -> Value {
        match self.call(c, verb, a.clone()) {
            Ok(v) => v,
            Err(code) => panic!("{verb} {a}: {code}"),
        }
    }

    fn raise(&mut self, by: &Caller, extra: Value) -> Value {
        let mut a = json!({
            "action": "git.merge.protected", "question": "Merge?",
            "options": [{"key": "yes", "text": "Approve"}, {"key": "no", "text": "Reject"}],
            "recommendation": "yes", "blocking": false,
        });
        if let (Some(o), Value::Object(x)) = (a.as_object_mut(), extra) {
            o.extend(x);
        }
        self.ok(by, "decision.raise", a)
    }

    fn authorize(
        &mut self,
        r: &str,
        run: &str,
        action: &str,
        target: Option<&str>,
        d: Option<&str>,
    ) -> Result<String, Code> {
        let config = self.core().config.clone();
        let b = &config.businesses["acme"];
        self.core()
            .store
            .write(|t| authorize_in_tx(t, b, r, run, action, target, d).map(|o| o.event.id))
    }

    fn one<T: rusqlite::types::FromSql>(&mut self, sql: &str, p: &str) -> T {
        self.core()
            .store
            .db()
            .sql()
            .query_row(sql, [p], |r| r.get(0))
            .expect(sql)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.core = None;
        self.bus.release();
    }
}

#[test]
fn the_human_resolves_a_gated_decision_with_human_input_and_a_close_message() {
    let mut e = Env::new();
    let d = e.raise(
        &role("dev", "dev-1"),
        json!({"action": "prd.approve", "target": "prd-1.6"}),
    );
    assert_eq!(
        (d["class"].as_str(), d["routed_to"].as_str()),
        (Some("gated"), Some("human"))
    );
    let id = d["id"].as_str().unwrap().to_string();
    // No role resolves a human-routed decision, not even an arbiter.
    assert_eq!(
        e.call(
            &role("pm", "pm-1"),
            "decision.resolve",
            json!({"id": id, "choice": "yes"})
        ),
        Err(Code::NotResolver)
    );
    assert_eq!(
        e.call(&role("pm", "pm-1"), "decision.seen", json!({"id": id})),
        Err(Code::NotResolver)
    );
    // The human sees it (still open), then resolves it.
    e.ok(&human(), "decision.seen", json!({"id": id}));
    assert_eq!(
        e.call(
            &human(),
            "decision.resolve",
            json!({"id": id, "choice": "maybe"})
        ),
        Err(Code::InvalidChoice)
    );
    let r = e.ok(
        &human(),
        "decision.resolve",
        json!({"id": id, "choice": "yes", "note": "go ahead"}),
    );
    let input = r["input"].as_str().unwrap().to_string();
    assert_eq!(r["closed"]["by"], json!("Ada"));
    assert_eq!(r["closed"]["run"], json!("human-cli"));
    assert_eq!(r["closed"]["input"], json!(input));
    // The human.input event backs the resolution.
    let kind: String = e.one("SELECT kind FROM events WHERE id = ?1", &input);
    assert_eq!(kind, "human.input");
    let body: String = e.one("SELECT body FROM events WHERE id = ?1", &input);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"verb": "decision.resolve", "decision": id, "choice": "yes", "note": "go ahead"})
    );
    // One DECISION message to the raising role, from the human CLI, citing the input.
    let msg = r["message"].as_str().unwrap().to_string();
    let row: (String, String, String, String, String, Option<String>, Option<String>) = e
        .core()
        .store
        .db().sql()
        .query_row(
            "SELECT from_role, from_run, to_role, class, body, request, decision FROM messages WHERE id = ?1",
            [&msg],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
        )
        .unwrap();
    assert_eq!(
        row,
        (
            "human".into(),
            "human-cli".into(),
            "dev".into(),
            "DECISION".into(),
            format!(
                "Decision {id} on prd.approve was resolved by Ada: yes (Approve).\nNote: go ahead"
            ),
            Some(input.clone()),
            Some(id.clone()),
        )
    );
    // The gated approval authorizes the raiser once.
    assert!(e
        .authorize("dev", "dev-1", "prd.approve", Some("prd-1.6"), Some(&id))
        .is_ok());
    assert_eq!(
        e.authorize("dev", "dev-1", "prd.approve", Some("prd-1.6"), Some(&id)),
        Err(Code::DecisionConsumed)
    );
    // The human's list shows it among the recent closes.
    let recent = e.ok(&human(), "decisions", json!({"list": "recent"}));
    assert_eq!(recent[0]["id"], json!(id));
    assert_eq!(recent[0]["closed"]["input"], json!(input));
}

#[test]
fn an_arbiter_raising_a_cross_role_decision_is_resolved_by_the_human() {
    let mut e = Env::new();
    let d = e.raise(&role("pm", "pm-1"), json!({"target": "vikunja:3/41"}));
    assert_eq!(
        (d["class"].as_str(), d["routed_to"].as_str()),
        (Some("cross-role"), Some("human"))
    );
    let id = d["id"].as_str().unwrap().to_string();
    e.ok(
        &human(),
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    );
    assert!(e
        .authorize(
            "pm",
            "pm-1",
            "git.merge.protected",
            Some("vikunja:3/41"),
            Some(&id)
        )
        .is_ok());
    // A role-routed decision is the arbiter's and the human's (3i L71).
    let d = e.raise(&role("dev", "dev-1"), json!({}));
    assert_eq!(d["routed_to"], json!("pm"));
    let r = e.ok(
        &human(),
        "decision.resolve",
        json!({"id": d["id"], "choice": "yes"}),
    );
    assert_eq!(r["closed"]["by"], json!("Ada"));
    // The human raises nothing; readers list but resolve nothing.
    assert_eq!(
        e.call(&human(), "decision.raise", json!({})),
        Err(Code::AgentRequired)
    );
}

#[test]
fn withdraw_messages_go_out_for_the_human_and_other_runs_only() {
    let mut e = Env::new();
    let a = e.raise(&role("dev", "dev-1"), json!({}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = e.ok(&human(), "decision.withdraw", json!({"id": a}));
    let input = r["input"].as_str().unwrap().to_string();
    let (body, request): (String, Option<String>) = e
        .core()
        .store
        .db()
        .sql()
        .query_row(
            "SELECT body, request FROM messages WHERE decision = ?1",
            [&a],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        body,
        format!("Decision {a} on git.merge.protected was withdrawn by Ada.")
    );
    assert_eq!(request, Some(input));

    // The raising run's own withdraw sends none; another run of the same instance does.
    let b = e.raise(&role("dev", "dev-1"), json!({}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = e.raise(&role("dev", "dev-1"), json!({}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = e.ok(&role("dev", "dev-1"), "decision.withdraw", json!({"id": b}));
    assert_eq!(r["message"], Value::Null);
    e.ok(&role("dev", "dev-1"), "role.release", Value::Null);
    e.ok(&role("dev", "dev-2"), "role.claim", Value::Null);
    let r = e.ok(
        &role("dev", "dev-2"),
        "decision.withdraw",
        json!({"id": c, "note": "stale"}),
    );
    let msg = r["message"].as_str().unwrap().to_string();
    let (from_run, body): (String, String) = e
        .core()
        .store
        .db()
        .sql()
        .query_row(
            "SELECT from_run, body FROM messages WHERE id = ?1",
            [&msg],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(from_run, "dev-2");
    assert_eq!(
        body,
        format!("Decision {c} on git.merge.protected was withdrawn by dev-2.\nNote: stale")
    );
    let n: i64 = e.one("SELECT count(*) FROM messages WHERE decision = ?1", &b);
    assert_eq!(n, 0);
}

#[test]
fn launch_toggles_are_human_input_and_gate_role_launch() {
    let mut e = Env::new();
    assert!(e
        .authorize("pm", "pm-1", "role.launch", Some("dev"), None)
        .is_ok());
    let r = e.ok(&human(), "launch.revoke", Value::Null);
    assert_eq!(r["state"], json!("revoked"));
    let kind: String = e.one(
        "SELECT kind FROM events WHERE id = ?1",
        r["input"].as_str().unwrap(),
    );
    assert_eq!(kind, "human.input");
    assert_eq!(
        e.authorize("pm", "pm-1", "role.launch", Some("dev"), None),
        Err(Code::LaunchRevoked)
    );
    assert_eq!(
        e.call(
            &role("pm", "pm-1"),
            "decision.raise",
            json!({
            "action": "role.launch", "target": "dev", "question": "Launch?", "choice": "yes",
            "options": [{"key": "yes", "text": "Y"}, {"key": "no", "text": "N"}],
            "recommendation": "yes", "blocking": false})
        ),
        Err(Code::LaunchRevoked)
    );
    // Still revoked after a restart; restored by the human.
    e.reopen();
    assert_eq!(
        e.authorize("pm", "pm-1", "role.launch", Some("dev"), None),
        Err(Code::LaunchRevoked)
    );
    let r = e.ok(&human(), "launch.restore", Value::Null);
    assert_eq!(r["state"], json!("allowed"));
    assert!(e
        .authorize("pm", "pm-1", "role.launch", Some("dev"), None)
        .is_ok());
    // Not the human: refused.
    assert_eq!(
        e.call(&role("pm", "pm-1"), "launch.revoke", Value::Null),
        Err(Code::HumanRequired)
    );
    assert_eq!(
        e.call(&human(), "launch.revoke", json!({"x": 1})),
        Err(Code::InvalidRequest)
    );
}

#[test]
fn a_failed_transaction_leaves_the_approval_unspent() {
    let mut e = Env::new();
    let d = e.raise(&role("dev", "dev-1"), json!({"target": "vikunja:3/41"}));
    let id = d["id"].as_str().unwrap().to_string();
    e.ok(
        &role("pm", "pm-1"),
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    );
    let config = e.core().config.clone();
    let b = &config.businesses["acme"];
    // The consumption and event succeed, then the caller's effect fails.
    let failed = e.core().store.write(|t| {
        authorize_in_tx(
            t,
            b,
            "dev",
            "dev-1",
            "git.merge.protected",
            Some("vikunja:3/41"),
            Some(&id),
        )?;
        Err::<(), Code>(Code::StorageUnavailable)
    });
    assert_eq!(failed, Err(Code::StorageUnavailable));
    let consumed: i64 = e.one(
        "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
        &id,
    );
    assert_eq!(consumed, 0);
    let allowed: i64 = e.one("SELECT count(*) FROM events WHERE kind = 'action.allowed' AND json_extract(body, '$.action') = 'git.merge.protected' AND json_extract(body, '$.decision') = ?1", &id);
    assert_eq!(allowed, 0);
    // Unspent: it still authorizes, once, and stays spent after a reopen.
    assert!(e
        .authorize(
            "dev",
            "dev-1",
            "git.merge.protected",
            Some("vikunja:3/41"),
            Some(&id)
        )
        .is_ok());
    e.reopen();
    assert_eq!(
        e.authorize(
            "dev",
            "dev-1",
            "git.merge.protected",
            Some("vikunja:3/41"),
            Some(&id)
        ),
        Err(Code::DecisionConsumed)
    );
    // The store itself refuses a second use written past the broker's check:
    // its trigger aborts with `append-only`, which the broker answers as
    // `storage-unavailable` (no client code names a broken store rule).
    let mut raised = String::new();
    let direct = e.core().store.write(|t| {
        let at = t.now();
        t.db().sql().execute(
            "INSERT INTO decision_events(decision, kind, by, run, at) VALUES (?1, 'consumed', 'dev-1', 'dev-1', ?2)",
            [id.as_str(), at.as_str()],
        )
        .map_err(|e| {
            raised = e.to_string();
            mosaic_bus::store::map_sql_error(&e)
        })
    });
    assert_eq!(direct, Err(Code::StorageUnavailable));
    assert_eq!(raised, "append-only");
    let consumed: i64 = e.one(
        "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
        &id,
    );
    assert_eq!(consumed, 1);
}

#[test]
fn the_message_send_path_shares_consumption_and_writes_no_event_of_its_own() {
    use mosaic_bus::authorize::consume_in_tx;
    use mosaic_bus::policy::routing::Class;
    let mut e = Env::new();
    // dev may not message cto within its role: gated, to the human.
    let d = e.raise(
        &role("dev", "dev-1"),
        json!({"action": "message.send", "target": "cto"}),
    );
    assert_eq!(d["class"], json!("gated"));
    let id = d["id"].as_str().unwrap().to_string();
    e.ok(
        &human(),
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    );
    let config = e.core().config.clone();
    let b = &config.businesses["acme"];
    let events_before: i64 = e.one("SELECT count(*) FROM events WHERE business = ?1", "acme");
    let class = e
        .core()
        .store
        .write(|t| consume_in_tx(t, b, "dev", "dev-1", "message.send", Some("cto"), Some(&id)));
    assert_eq!(class, Ok(Class::Gated));
    let events_after: i64 = e.one("SELECT count(*) FROM events WHERE business = ?1", "acme");
    assert_eq!(
        events_after, events_before,
        "the caller writes its own action.allowed"
    );
    // Spent for every path: the send path again, and authorize.
    let again = e
        .core()
        .store
        .write(|t| consume_in_tx(t, b, "dev", "dev-1", "message.send", Some("cto"), Some(&id)));
    assert_eq!(again, Err(Code::DecisionConsumed));
    assert_eq!(
        e.authorize("dev", "dev-1", "message.send", Some("cto"), Some(&id)),
        Err(Code::DecisionConsumed)
    );
    // Within-role without a decision passes and consumes nothing.
    let pm = e
        .core()
        .store
        .write(|t| consume_in_tx(t, b, "pm", "pm-1", "message.send", Some("dev"), None));
    assert_eq!(pm, Ok(Class::WithinRole));
}

/// 3i L71 and L48: the human resolves, and marks seen, any decision of its
/// business, the ones routed to an arbiter role included; the arbiter keeps
/// its right; the close's row, its `human.input` and its message say who
/// resolved.
#[test]
fn the_human_resolves_and_sees_a_decision_routed_to_an_arbiter() {
    let mut e = Env::new();
    let d = e.raise(&role("dev", "dev-1"), json!({"target": "vikunja:3/41"}));
    assert_eq!(
        (d["class"].as_str(), d["routed_to"].as_str()),
        (Some("cross-role"), Some("pm"))
    );
    let id = d["id"].as_str().unwrap().to_string();
    // Seen by the human: an acknowledgement, the decision stays open.
    let seen = e.ok(
        &human(),
        "decision.seen",
        json!({"id": id, "note": "looking"}),
    );
    assert_eq!(
        (&seen["kind"], &seen["by"]),
        (&json!("seen"), &json!("Ada"))
    );
    // Another role is still no resolver.
    assert_eq!(
        e.call(
            &role("cto", "cto-1"),
            "decision.resolve",
            json!({"id": id, "choice": "yes"})
        ),
        Err(Code::NotResolver)
    );
    let r = e.ok(
        &human(),
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
    );
    let input = r["input"].as_str().unwrap().to_string();
    assert_eq!(
        (
            &r["closed"]["by"],
            &r["closed"]["run"],
            &r["closed"]["input"]
        ),
        (&json!("Ada"), &json!("human-cli"), &json!(input))
    );
    let kind: String = e.one("SELECT kind FROM events WHERE id = ?1", &input);
    assert_eq!(kind, "human.input");
    let (from, body): (String, String) = e
        .core()
        .store
        .db()
        .sql()
        .query_row(
            "SELECT from_run, body FROM messages WHERE id = ?1",
            [r["message"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(from, "human-cli");
    assert_eq!(
        body,
        format!("Decision {id} on git.merge.protected was resolved by Ada: yes (Approve).")
    );
    // Closed for the arbiter too, and the approval authorizes dev once.
    assert_eq!(
        e.call(
            &role("pm", "pm-1"),
            "decision.resolve",
            json!({"id": id, "choice": "no"})
        ),
        Err(Code::DecisionClosed)
    );
    assert!(e
        .authorize(
            "dev",
            "dev-1",
            "git.merge.protected",
            Some("vikunja:3/41"),
            Some(&id)
        )
        .is_ok());
    // The arbiter keeps its right, and its close names its run.
    let d2 = e.raise(&role("dev", "dev-1"), json!({"target": "vikunja:3/42"}));
    e.ok(
        &role("pm", "pm-1"),
        "decision.seen",
        json!({"id": d2["id"]}),
    );
    let r = e.ok(
        &role("pm", "pm-1"),
        "decision.resolve",
        json!({"id": d2["id"], "choice": "no"}),
    );
    assert_eq!(
        (&r["closed"]["by"], &r["closed"]["run"], &r["input"]),
        (&json!("pm-1"), &json!("pm-1"), &Value::Null)
    );
}
