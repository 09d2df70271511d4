//! Reads: they write nothing. Every read is scoped to the caller's business.
//!
//! `trail` joins every record linked to a subject in broker write order
//! (timestamps strictly increase across all writes). `inbox`, `agents`,
//! `replies`, `messages`, `state`, `requirements` and `tasks` are the shared
//! reads of the spec's "Shared reads and adapter boundary".

use super::messages::HUMAN;
use super::{Args, Verb};
use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::store::decisions::{decision_event_json, DECISION_EVENT_COLUMNS};
use crate::store::map_sql_error;
use crate::store::messages::{self as msgs, message_json, MESSAGE_COLUMNS};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};

/// `replies` page size (REPLIES).
pub const REPLIES: i64 = 50;
/// `messages` default and largest page.
pub const MESSAGES_PAGE: i64 = 50;
pub const MESSAGES_PAGE_MAX: i64 = 200;
/// `tasks` short-form default and largest page (TASK_PAGE, TASK_PAGE_MAX); `state`'s cap.
pub const TASK_PAGE: usize = 50;
pub const TASK_PAGE_MAX: usize = 200;
/// Most stranded messages `agents` lists per role.
pub const STRANDED: usize = 50;
/// Most messages an `inbox` lists.
pub const INBOX_MESSAGES: i64 = 100;

fn sql_err(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

fn json_col(s: Option<String>) -> Value {
    s.and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

fn business<'a>(core: &'a Core, caller: &Caller) -> Result<&'a Business, Code> {
    core.config
        .businesses
        .get(caller.business())
        .ok_or(Code::UnknownBusiness)
}

/// A verb with no arguments.
macro_rules! no_args {
    ($name:ident, $f:ident) => {
        pub struct $name;

        impl Verb for $name {
            fn parse(args: Args) -> Result<Self, Code> {
                args.finish()?;
                Ok($name)
            }

            fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
                $f(core, caller)
            }
        }
    };
}

no_args!(Inbox, inbox);
no_args!(Agents, agents);
no_args!(Requirements, requirements);
no_args!(State, state);
no_args!(Credentials, credentials);

fn collect(
    conn: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<Value>,
) -> Result<Vec<Value>, Code> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt.query_map(p, f).map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

// --- decisions as the inbox shows them ------------------------------------

const DECISION_COLUMNS: &str = "d.seq, d.id, d.raised_by_role, d.raised_by_run, d.action, \
     d.target, d.class, d.routed_to, d.domain, d.question, d.options, d.recommendation, \
     d.approval_choice, d.blocking, d.project, d.task_ref, d.requirement_ref, d.supersedes, \
     d.target_holder, d.at";

const OPEN: &str = "NOT EXISTS (SELECT 1 FROM decision_events e WHERE e.decision = d.id \
     AND e.kind IN ('resolved', 'withdrawn'))";

/// A `decisions` row as the inbox shows it: decoded options, `blocking` as a
/// boolean and the authorization context S4 must display.
fn decision_json(r: &rusqlite::Row<'_>) -> rusqlite::Result<Value> {
    let action: String = r.get(4)?;
    let target: Option<String> = r.get(5)?;
    let approval: String = r.get(12)?;
    Ok(json!({
        "record": "decision",
        "seq": r.get::<_, i64>(0)?,
        "id": r.get::<_, String>(1)?,
        "raised_by_role": r.get::<_, String>(2)?,
        "raised_by_run": r.get::<_, String>(3)?,
        "action": action,
        "target": target,
        "class": r.get::<_, String>(6)?,
        "routed_to": r.get::<_, String>(7)?,
        "domain": r.get::<_, Option<String>>(8)?,
        "question": r.get::<_, String>(9)?,
        "options": json_col(r.get(10)?),
        "recommendation": r.get::<_, String>(11)?,
        "approvalChoice": approval,
        "blocking": r.get::<_, i64>(13)? == 1,
        "project": r.get::<_, Option<String>>(14)?,
        "task_ref": r.get::<_, Option<String>>(15)?,
        "requirement_ref": r.get::<_, Option<String>>(16)?,
        "supersedes": r.get::<_, Option<String>>(17)?,
        "target_holder": r.get::<_, Option<String>>(18)?,
        "at": r.get::<_, String>(19)?,
        "authorization": {"action": action, "target": target, "approvalChoice": approval},
    }))
}

/// Open decisions routed to `route`, gated first and then oldest.
fn open_decisions(conn: &Connection, business: &str, route: &str) -> Result<Vec<Value>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d
         WHERE d.business = ?1 AND d.routed_to = ?2 AND {OPEN}
         ORDER BY d.class = 'gated' DESC, d.seq"
    );
    collect(conn, &sql, params![business, route], decision_json)
}

/// `decisions {list:'roles'}`: the business's open decisions routed to a
/// role (never the human), oldest first. Each row is the decision row
/// `trail` and `inbox` give for its id.
pub(crate) fn open_for_roles(conn: &Connection, business: &str) -> Result<Vec<Value>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d
         WHERE d.business = ?1 AND d.routed_to <> 'human' AND {OPEN}
         ORDER BY d.seq"
    );
    collect(conn, &sql, params![business], decision_json)
}

/// `decisions {list:'recent'}`: the business's last `limit` closed decisions
/// of every route, newest close first, each the decision row `trail` gives
/// plus `closed`, its closing `decision_events` row.
pub(crate) fn recent_closed(
    conn: &Connection,
    business: &str,
    limit: i64,
) -> Result<Vec<Value>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d JOIN decision_events e
           ON e.decision = d.id AND e.kind IN ('resolved', 'withdrawn')
         WHERE d.business = ?1 ORDER BY e.seq DESC LIMIT ?2"
    );
    let mut rows = collect(conn, &sql, params![business, limit], decision_json)?;
    for row in &mut rows {
        let id = row["id"].as_str().unwrap_or_default().to_string();
        row["closed"] = crate::store::decisions::closing_event(conn, &id)?;
    }
    Ok(rows)
}

// --- inbox ----------------------------------------------------------------

/// `inbox`: for human, reader and tester sessions the human's inbox (open
/// decisions routed to the human, then messages to the human it received and
/// hasn't read, then those not yet received); for a role session its own
/// (open decisions routed to the role, then its messages its run received and
/// hasn't read, then those not yet received). At most 100 messages, oldest
/// first within each part, each with `delivered_at` (null when waiting).
fn inbox(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let b = caller.business();
    let (address, run) = match caller {
        Caller::Role { role, run, .. } => (role.as_str(), run.as_str()),
        _ => (HUMAN, super::messages::HUMAN_RUN),
    };
    let store = &core.store;
    let conn = store.conn();
    let decisions = open_decisions(conn, b, address)?;
    let cap = usize::try_from(INBOX_MESSAGES).unwrap_or(100);
    let mut messages = Vec::new();
    // Received and unread, from the writer's unread index (costs the unread set).
    let by_id = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?1");
    let mut stmt = conn.prepare_cached(&by_id).map_err(sql_err)?;
    for e in store
        .unread
        .of_role(b, address)
        .filter(|e| e.run == run)
        .take(cap)
    {
        let mut m = stmt
            .query_row([&e.message], message_json)
            .map_err(sql_err)?;
        m["delivered_at"] = json!(e.at);
        messages.push(m);
    }
    let room = cap.saturating_sub(messages.len());
    for mut m in msgs::undelivered(conn, b, address, room)? {
        m["delivered_at"] = Value::Null;
        messages.push(m);
    }
    Ok(json!({"role": address, "decisions": decisions, "messages": messages}))
}

// --- agents ---------------------------------------------------------------

/// `agents`: each held role's latest claim row; human, reader and tester
/// sessions also get `state`, `working`, `inputNeeded` and `stranded`.
fn agents(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let biz = business(core, caller)?;
    let b = biz.id.as_str();
    let conn = core.store.conn();
    let full = !matches!(caller, Caller::Role { .. });
    let mut out = Vec::new();
    for role in biz.roles.keys() {
        let row = conn
            .prepare_cached(
                "SELECT seq, role, run, op, decision, by, at FROM role_claims
                 WHERE business = ?1 AND role = ?2 ORDER BY seq DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![b, role], |r| {
                    Ok(json!({
                        "seq": r.get::<_, i64>(0)?,
                        "business": b,
                        "role": r.get::<_, String>(1)?,
                        "run": r.get::<_, String>(2)?,
                        "op": r.get::<_, String>(3)?,
                        "decision": r.get::<_, Option<String>>(4)?,
                        "by": r.get::<_, Option<String>>(5)?,
                        "at": r.get::<_, String>(6)?,
                    }))
                })
                .optional()
            })
            .map_err(sql_err)?;
        let Some(mut row) = row else { continue };
        if row["op"] != json!("claim") {
            continue;
        }
        if full {
            let run = row["run"].as_str().unwrap_or_default().to_string();
            agent_state(&core.store, b, role, &run, &mut row)?;
        }
        out.push(row);
    }
    Ok(Value::Array(out))
}

/// The spec's "Agent state" for one held role.
fn agent_state(
    store: &crate::store::Store,
    b: &str,
    role: &str,
    run: &str,
    row: &mut Value,
) -> Result<(), Code> {
    let conn = store.conn();
    // Working and stranded come from the writer's unread index (delivered,
    // no receipt, in delivery order), so they cost the unread set, not the
    // delivery history.
    let mut n = 0usize;
    let mut since: Option<&str> = None;
    let mut stranded = Vec::new();
    for e in store.unread.of_role(b, role) {
        if e.run == run {
            n += 1;
            since = since.or(Some(e.at.as_str()));
        } else if stranded.len() < STRANDED {
            stranded.push(json!({"id": e.message, "from": e.from_role, "run": e.run, "at": e.at}));
        }
    }
    let working = if n > 0 {
        json!({"messages": n, "since": since})
    } else {
        Value::Null
    };
    let input_needed = collect(
        conn,
        &format!(
            "SELECT d.id, d.question, d.class, d.blocking, d.task_ref, d.at FROM decisions d
             WHERE d.business = ?1 AND d.routed_to = 'human' AND d.raised_by_role = ?2 AND {OPEN}
             ORDER BY d.class = 'gated' DESC, d.seq"
        ),
        params![b, role],
        |r| {
            Ok(json!({
                "id": r.get::<_, String>(0)?,
                "question": r.get::<_, String>(1)?,
                "class": r.get::<_, String>(2)?,
                "blocking": r.get::<_, i64>(3)? == 1,
                "task_ref": r.get::<_, Option<String>>(4)?,
                "at": r.get::<_, String>(5)?,
            }))
        },
    )?;
    let state = if !working.is_null() {
        "working"
    } else if !input_needed.is_empty() {
        "waiting"
    } else {
        "idle"
    };
    row["state"] = json!(state);
    row["working"] = working;
    row["inputNeeded"] = Value::Array(input_needed);
    row["stranded"] = Value::Array(stranded);
    Ok(())
}

// --- trail ----------------------------------------------------------------

fn event_json(r: &rusqlite::Row<'_>) -> rusqlite::Result<Value> {
    Ok(json!({
        "record": "event",
        "seq": r.get::<_, i64>(0)?,
        "id": r.get::<_, String>(1)?,
        "kind": r.get::<_, String>(2)?,
        "role": r.get::<_, Option<String>>(3)?,
        "run": r.get::<_, Option<String>>(4)?,
        "subject": r.get::<_, Option<String>>(5)?,
        "body": json_col(r.get(6)?),
        "at": r.get::<_, String>(7)?,
    }))
}

const EVENT_COLUMNS: &str = "seq, id, kind, role, run, subject, body, at";

/// Collects trail records, each once, and sorts them into broker write order.
#[derive(Default)]
struct TrailRecords {
    seen: HashSet<(String, String)>,
    out: Vec<Value>,
}

impl TrailRecords {
    fn add(&mut self, v: Value) {
        let record = v["record"].as_str().unwrap_or_default().to_string();
        let key = match v.get("id") {
            Some(Value::String(s)) => s.clone(),
            _ => v["seq"].to_string(),
        };
        if self.seen.insert((record, key)) {
            self.out.push(v);
        }
    }
    fn extend(&mut self, vs: Vec<Value>) {
        for v in vs {
            self.add(v);
        }
    }
    fn finish(mut self) -> Value {
        self.out.sort_by(|a, b| {
            a["at"]
                .as_str()
                .unwrap_or_default()
                .cmp(b["at"].as_str().unwrap_or_default())
        });
        Value::Array(self.out)
    }
}

/// `trail {subject}`: a task ref, decision id, message id or run id; every
/// linked record of the caller's business in broker write order. An unknown
/// subject is an empty list.
pub struct Trail {
    subject: String,
}

impl Verb for Trail {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let subject = args.str("subject", 256)?;
        args.finish()?;
        Ok(Trail { subject })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        trail(core, caller, self.subject)
    }
}

fn trail(core: &mut Core, caller: &Caller, subject: String) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.conn();
    let mut t = TrailRecords::default();

    // Events about the subject, the subject event itself, a run's session events.
    for sql in [
        "SELECT seq, id, kind, role, run, subject, body, at FROM events
         WHERE subject = ?2 AND business = ?1",
        "SELECT seq, id, kind, role, run, subject, body, at FROM events
         WHERE id = ?2 AND business = ?1",
        "SELECT seq, id, kind, role, run, subject, body, at FROM events
         WHERE business = ?1 AND run = ?2 AND kind IN ('session.launched', 'session.ended')",
    ] {
        t.extend(collect(conn, sql, params![b, subject], event_json)?);
    }

    // Claim evidence of a run, and claims citing a decision.
    let claim = |r: &rusqlite::Row<'_>| {
        Ok(json!({
            "record": "claim",
            "seq": r.get::<_, i64>(0)?,
            "role": r.get::<_, String>(1)?,
            "run": r.get::<_, String>(2)?,
            "op": r.get::<_, String>(3)?,
            "decision": r.get::<_, Option<String>>(4)?,
            "by": r.get::<_, Option<String>>(5)?,
            "at": r.get::<_, String>(6)?,
        }))
    };
    t.extend(collect(
        conn,
        "SELECT seq, role, run, op, decision, by, at FROM role_claims
         WHERE run = ?2 AND business = ?1",
        params![b, subject],
        claim,
    )?);

    // Task snapshots, and decisions held on the task.
    t.extend(collect(
        conn,
        "SELECT seq, task_ref, read_at, tombstone, fields, at FROM task_snapshots
         WHERE business = ?1 AND task_ref = ?2 ORDER BY seq",
        params![b, subject],
        |r| {
            Ok(json!({
                "record": "task",
                "seq": r.get::<_, i64>(0)?,
                "task_ref": r.get::<_, String>(1)?,
                "read_at": r.get::<_, String>(2)?,
                "tombstone": r.get::<_, i64>(3)? == 1,
                "fields": json_col(r.get(4)?),
                "at": r.get::<_, String>(5)?,
            }))
        },
    )?);
    let by_task = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d WHERE d.task_ref = ?2 AND d.business = ?1"
    );
    t.extend(collect(conn, &by_task, params![b, subject], decision_json)?);

    // A decision: its row, its events, the human inputs they cite, claims and
    // messages citing it.
    let by_id =
        format!("SELECT {DECISION_COLUMNS} FROM decisions d WHERE d.id = ?2 AND d.business = ?1");
    let decision = collect(conn, &by_id, params![b, subject], decision_json)?;
    if !decision.is_empty() {
        t.extend(decision);
        let events = format!(
            "SELECT {} FROM decision_events WHERE decision = ?1 ORDER BY seq",
            DECISION_EVENT_COLUMNS
        );
        t.extend(collect(conn, &events, params![subject], |r| {
            let mut v = decision_event_json(r)?;
            v["record"] = json!("decision_event");
            Ok(v)
        })?);
        t.extend(collect(
            conn,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE business = ?1 AND id IN
                 (SELECT input FROM decision_events WHERE decision = ?2 AND input IS NOT NULL)"
            ),
            params![b, subject],
            event_json,
        )?);
        t.extend(collect(
            conn,
            "SELECT seq, role, run, op, decision, by, at FROM role_claims
             WHERE decision = ?2 AND business = ?1",
            params![b, subject],
            claim,
        )?);
        let citing = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.decision = ?2 AND m.business = ?1"
        );
        t.extend(tag(
            collect(conn, &citing, params![b, subject], message_json)?,
            "message",
        ));
    }

    // A message: its row, the request behind it, the send's authorization,
    // its delivery and its read receipt.
    let by_id =
        format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?2 AND m.business = ?1");
    if let Some(m) = collect(conn, &by_id, params![b, subject], message_json)?
        .into_iter()
        .next()
    {
        if let Some(req) = m["request"].as_str() {
            t.extend(collect(
                conn,
                &format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?2 AND business = ?1"),
                params![b, req],
                event_json,
            )?);
        }
        t.extend(collect(
            conn,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events
                 WHERE business = ?1 AND run = ?2 AND kind = 'action.allowed' AND subject = ?3
                   AND json_extract(body, '$.message') = ?4"
            ),
            params![
                b,
                m["from_run"].as_str().unwrap_or_default(),
                m["to_role"].as_str().unwrap_or_default(),
                subject
            ],
            event_json,
        )?);
        for (table, record) in [("deliveries", "delivery"), ("read_receipts", "read")] {
            t.extend(collect(
                conn,
                &format!("SELECT seq, message, run, at FROM {table} WHERE message = ?1"),
                params![subject],
                |r| {
                    Ok(json!({"record": record, "seq": r.get::<_, i64>(0)?,
                        "message": r.get::<_, String>(1)?, "run": r.get::<_, String>(2)?,
                        "at": r.get::<_, String>(3)?}))
                },
            )?);
        }
        t.extend(tag(vec![m], "message"));
    }
    Ok(t.finish())
}

fn tag(mut vs: Vec<Value>, record: &str) -> Vec<Value> {
    for v in &mut vs {
        v["record"] = json!(record);
    }
    vs
}

// --- replies and messages -------------------------------------------------

/// `replies {id}`: messages in reply to a message of the business, oldest
/// first, each the `messages` row `trail` gives for its id.
pub struct Replies {
    id: String,
}

impl Verb for Replies {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let id = args.str("id", 64)?;
        args.finish()?;
        Ok(Replies { id })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        replies(core, caller, self.id)
    }
}

fn replies(core: &mut Core, caller: &Caller, id: String) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.conn();
    if msgs::message_facts(conn, b, &id)?.is_none() {
        return Err(Code::MessageNotFound);
    }
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.in_reply_to = ?1 AND m.business = ?2
         ORDER BY m.seq LIMIT ?3"
    );
    // Each row is the message row `trail` gives for the reply's id.
    Ok(Value::Array(tag(
        collect(conn, &sql, params![id, b, REPLIES], message_json)?,
        "message",
    )))
}

/// `messages {limit?, after?}`: the human's feed, newest first.
pub struct Messages {
    limit: i64,
    after: Option<String>,
}

impl Verb for Messages {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let limit = match args.take_present("limit") {
            None => MESSAGES_PAGE,
            Some(Value::Number(n)) => n
                .as_i64()
                .filter(|l| (1..=MESSAGES_PAGE_MAX).contains(l))
                .ok_or(Code::InvalidRequest)?,
            Some(_) => return Err(Code::InvalidRequest),
        };
        let after = args.opt_str("after", 64)?;
        args.finish()?;
        Ok(Messages { limit, after })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        messages(core, caller, self)
    }
}

fn messages(core: &mut Core, caller: &Caller, args: Messages) -> Result<Value, Code> {
    let Messages { limit, after } = args;
    let b = caller.business();
    let conn = core.store.conn();
    let before = match &after {
        None => i64::MAX,
        Some(a) => match msgs::message_facts(conn, b, a)? {
            Some(f) if f.to_role == HUMAN => f.seq,
            _ => return Err(Code::MessageNotFound),
        },
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, EXISTS (SELECT 1 FROM read_receipts r WHERE r.message = m.id)
         FROM messages m WHERE m.business = ?1 AND m.to_role = 'human' AND m.seq < ?2
         ORDER BY m.seq DESC LIMIT ?3"
    );
    let mut page = collect(conn, &sql, params![b, before, limit + 1], |r| {
        let mut m = message_json(r)?;
        m["read"] = json!(r.get::<_, bool>(12)?);
        Ok(m)
    })?;
    let more = page.len() > usize::try_from(limit).unwrap_or(0);
    page.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        page.last().map(|m| m["id"].clone()).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let (total, read): (i64, i64) = conn
        .prepare_cached(
            "SELECT count(*), count(r.message) FROM messages m
             LEFT JOIN read_receipts r ON r.message = m.id
             WHERE m.business = ?1 AND m.to_role = 'human'",
        )
        .and_then(|mut s| s.query_row(params![b], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(sql_err)?;
    Ok(json!({"messages": page, "total": total, "unread": total - read, "next": next}))
}

// --- requirements and state -----------------------------------------------

/// `requirements`: the requirements file loaded at start, role sessions only.
/// With no file configured: `{prd: null, version: null, requirements: []}`.
fn requirements(core: &mut Core, _caller: &Caller) -> Result<Value, Code> {
    Ok(core
        .requirements
        .clone()
        .unwrap_or_else(|| json!({"prd": null, "version": null, "requirements": []})))
}

/// `state`: launch state and the tracker snapshot's open tasks.
fn state(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.conn();
    let mut latest: Option<(i64, String, String, String)> = None;
    for kind in ["launch.revoked", "launch.restored"] {
        let row = conn
            .prepare_cached(
                "SELECT seq, id, kind, at FROM events WHERE business = ?1 AND kind = ?2
                 ORDER BY seq DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![b, kind], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()
            })
            .map_err(sql_err)?;
        if let Some(r) = row {
            if latest.as_ref().is_none_or(|l| r.0 > l.0) {
                latest = Some(r);
            }
        }
    }
    let launch = match latest {
        Some((_, id, kind, at)) => json!({
            "state": if kind == "launch.revoked" { "revoked" } else { "allowed" },
            "at": at, "event": id,
        }),
        None => json!({"state": "allowed", "at": null, "event": null}),
    };
    let tasks = current_tasks(conn, b)?;
    let open: Vec<&TaskRow> = tasks
        .iter()
        .filter(|t| !t.tombstone && t.fields.get("done") != Some(&Value::Bool(true)))
        .collect();
    let listed: Vec<Value> = open
        .iter()
        .take(TASK_PAGE)
        .map(|t| json!({"task_ref": t.task_ref, "title": t.fields.get("title").cloned().unwrap_or(Value::Null)}))
        .collect();
    Ok(json!({
        "launch": launch,
        "tasks": {"open": listed, "total": open.len(), "cap": TASK_PAGE},
    }))
}

// --- tasks ----------------------------------------------------------------

struct TaskRow {
    seq: i64,
    task_ref: String,
    read_at: String,
    tombstone: bool,
    fields: Map<String, Value>,
    at: String,
}

/// One snapshot row selected as `seq, task_ref, read_at, tombstone, fields, at`.
fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    let fields: Option<String> = r.get(4)?;
    Ok(TaskRow {
        seq: r.get(0)?,
        task_ref: r.get(1)?,
        read_at: r.get(2)?,
        tombstone: r.get::<_, i64>(3)? == 1,
        fields: fields
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        at: r.get(5)?,
    })
}

/// The `task_current` projection of a business, in `task_ref` text order.
fn current_tasks(conn: &Connection, b: &str) -> Result<Vec<TaskRow>, Code> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT s.seq, s.task_ref, s.read_at, s.tombstone, s.fields, s.at
             FROM (SELECT max(seq) AS mx FROM task_snapshots WHERE business = ?1 GROUP BY task_ref) c
             JOIN task_snapshots s ON s.seq = c.mx
             ORDER BY s.task_ref",
        )
        .map_err(sql_err)?;
    let rows = stmt.query_map(params![b], task_row).map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

/// The Vikunja task id of a task ref: the part after the last `/`.
fn vikunja_id(task_ref: &str) -> Option<&str> {
    task_ref.rsplit_once('/').map(|(_, id)| id)
}

/// Requirement of the first `task.created` per Vikunja task id.
fn requirements_by_task(conn: &Connection, b: &str) -> Result<BTreeMap<String, Value>, Code> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT subject, json_extract(body, '$.requirement') FROM events
             WHERE business = ?1 AND kind = 'task.created' ORDER BY seq",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![b], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
            ))
        })
        .map_err(sql_err)?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (subject, req) = row.map_err(sql_err)?;
        if let (Some(id), Some(req)) = (subject.as_deref().and_then(vikunja_id), req) {
            out.entry(id.to_string()).or_insert(json!(req));
        }
    }
    Ok(out)
}

fn priority(t: &TaskRow) -> Value {
    if t.tombstone {
        return Value::Null;
    }
    t.fields.get("priority").cloned().unwrap_or(Value::Null)
}

fn requirement(reqs: &BTreeMap<String, Value>, t: &TaskRow) -> Value {
    vikunja_id(&t.task_ref)
        .and_then(|id| reqs.get(id).cloned())
        .unwrap_or(Value::Null)
}

fn full_row(b: &str, reqs: &BTreeMap<String, Value>, t: &TaskRow) -> Value {
    json!({
        "seq": t.seq,
        "business": b,
        "task_ref": t.task_ref,
        "read_at": t.read_at,
        "tombstone": t.tombstone,
        "fields": if t.tombstone { Value::Null } else { Value::Object(t.fields.clone()) },
        "at": t.at,
        "priority": priority(t),
        "requirement": requirement(reqs, t),
    })
}

/// Roles whose tracker bot is among the task's assignees, sorted.
fn assignee_roles(biz: &Business, t: &TaskRow) -> Vec<String> {
    let names: Vec<&str> = t
        .fields
        .get("assignees")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut roles: Vec<String> = biz
        .roles
        .iter()
        .filter(|(_, r)| {
            r.tracker_bot
                .as_deref()
                .is_some_and(|bot| names.contains(&bot))
        })
        .map(|(k, _)| k.clone())
        .collect();
    roles.sort();
    roles
}

/// `tasks`: none → the whole projection; `{task_ref}` → one row; any of
/// `{done, assignee, label, requirement, limit, after}` → `{tasks, total, next}`.
pub enum Tasks {
    All,
    One(String),
    Page(TaskFilter),
}

/// The filters and page of `tasks`' short form.
pub struct TaskFilter {
    done: Option<bool>,
    assignee: Option<String>,
    label: Option<Value>,
    requirement: Option<String>,
    limit: usize,
    after: Option<String>,
}

impl Verb for Tasks {
    fn parse(mut args: Args) -> Result<Self, Code> {
        if args.is_empty() {
            return Ok(Tasks::All);
        }
        if let Some(task_ref) = args.opt_str("task_ref", 256)? {
            args.finish()?;
            return Ok(Tasks::One(task_ref));
        }
        let done = match args.take_present("done") {
            None => None,
            Some(Value::Bool(d)) => Some(d),
            Some(_) => return Err(Code::InvalidRequest),
        };
        let assignee = args.opt_str("assignee", 64)?;
        let label = match args.take_present("label") {
            None => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => Some(Value::Number(n)),
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Some(Value::String(s)),
            Some(_) => return Err(Code::InvalidRequest),
        };
        let requirement = args.opt_str("requirement", 64)?;
        if let Some(r) = &requirement {
            if !crate::config::is_requirement_id(r) {
                return Err(Code::InvalidRequest);
            }
        }
        let limit = match args.take_present("limit") {
            None => TASK_PAGE,
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| (1..=TASK_PAGE_MAX).contains(l))
                .ok_or(Code::InvalidRequest)?,
            Some(_) => return Err(Code::InvalidRequest),
        };
        let after = args.opt_str("after", 256)?;
        args.finish()?;
        Ok(Tasks::Page(TaskFilter {
            done,
            assignee,
            label,
            requirement,
            limit,
            after,
        }))
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let biz = business(core, caller)?;
        let b = biz.id.as_str();
        let conn = core.store.conn();
        match self {
            Tasks::All => {
                let reqs = requirements_by_task(conn, b)?;
                let rows = current_tasks(conn, b)?;
                Ok(Value::Array(
                    rows.iter().map(|t| full_row(b, &reqs, t)).collect(),
                ))
            }
            Tasks::One(task_ref) => {
                let reqs = requirements_by_task(conn, b)?;
                let row = conn
                    .prepare_cached(
                        "SELECT seq, task_ref, read_at, tombstone, fields, at FROM task_snapshots
                         WHERE business = ?1 AND task_ref = ?2 ORDER BY seq DESC LIMIT 1",
                    )
                    .and_then(|mut s| s.query_row(params![b, task_ref], task_row).optional())
                    .map_err(sql_err)?
                    .ok_or(Code::TaskNotFound)?;
                Ok(full_row(b, &reqs, &row))
            }
            Tasks::Page(filter) => task_page(conn, biz, filter),
        }
    }
}

/// `tasks`' short form: the open tasks that pass every filter, a page of
/// them after `after` (in `task_ref` order), the total and the next cursor.
fn task_page(conn: &Connection, biz: &Business, filter: TaskFilter) -> Result<Value, Code> {
    let b = biz.id.as_str();
    let TaskFilter {
        done,
        assignee,
        label,
        requirement: requirement_filter,
        limit,
        after,
    } = filter;
    if let Some(a) = &assignee {
        if !biz.roles.contains_key(a) {
            return Err(Code::InvalidRequest);
        }
    }
    let reqs = requirements_by_task(conn, b)?;
    let rows = current_tasks(conn, b)?;
    let mut matches = Vec::new();
    for t in rows.iter().filter(|t| !t.tombstone) {
        let assignees = assignee_roles(biz, t);
        if let Some(d) = done {
            if t.fields
                .get("done")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                != d
            {
                continue;
            }
        }
        if let Some(a) = &assignee {
            if !assignees.contains(a) {
                continue;
            }
        }
        if let Some(l) = &label {
            let has = t
                .fields
                .get("labels")
                .and_then(Value::as_array)
                .is_some_and(|ls| ls.contains(l));
            if !has {
                continue;
            }
        }
        let req = requirement(&reqs, t);
        if let Some(r) = &requirement_filter {
            if req.as_str() != Some(r.as_str()) {
                continue;
            }
        }
        matches.push((t, assignees, req));
    }
    let total = matches.len();
    let page: Vec<_> = matches
        .iter()
        .filter(|(t, _, _)| after.as_deref().is_none_or(|a| t.task_ref.as_str() > a))
        .take(limit + 1)
        .collect();
    let more = page.len() > limit;
    let page = &page[..page.len().min(limit)];
    let next = if more {
        page.last()
            .map(|(t, _, _)| json!(t.task_ref))
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let tasks: Vec<Value> = page
        .iter()
        .map(|(t, assignees, req)| {
            let f = |k: &str| t.fields.get(k).cloned().unwrap_or(Value::Null);
            json!({
                "task_ref": t.task_ref,
                "title": f("title"),
                "done": f("done"),
                "bucket": f("bucket"),
                "assignees": assignees,
                "labels": t.fields.get("labels").cloned().unwrap_or_else(|| json!([])),
                "priority": priority(t),
                "requirement": req,
                "changed_at": t.at,
            })
        })
        .collect();
    Ok(json!({"tasks": tasks, "total": total, "next": next}))
}

/// `credentials`: what the host loaded for the business, never a token,
/// path or variable name. Human and reader sessions only.
fn credentials(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let now = crate::store::clock::now_ms();
    Ok(Value::Array(core.credentials.rows(caller.business(), now)))
}
