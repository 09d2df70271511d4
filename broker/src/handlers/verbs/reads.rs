//! Reads: they write nothing. Every read is scoped to the caller's business.
//!
//! `trail` joins every record linked to a subject in broker write order
//! (timestamps strictly increase across all writes). `inbox`, `agents`,
//! `replies`, `messages`, `state`, `requirements` and `tasks` are the shared
//! reads of the spec's "Shared reads and adapter boundary"; `usage` sums the
//! business's token readings; `seal` answers the newest seal.

use crate::config::Business;
use crate::core::HUMAN;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::ReadVerb;
use crate::handlers::views;
use crate::store::messages as msgs;
use crate::store::reads::{self, TaskRow};
use crate::store::threads;
use crate::store::Db;
use serde_json::{json, Value};
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

// --- pages of reads that grow with history (issue 34) ----------------------
//
// A read whose answer grows with the business's history (a busy subject's
// trail, usage by run, open decisions) answers one page when the whole
// answer doesn't fit, never `response-too-large`. Without the extension's
// arguments, an answer that fits one page is exactly the spec's shape; a
// longer one is the first page in a paged shape with `next` (docs/contract.md).

/// Most bytes of items a page holds: the reply cap (4 MiB with its
/// newline) less room for everything around the items.
pub const PAGE_BYTES: usize = 3 << 20;
/// `usage` runs per page of `byRun` by default, and at most.
pub const USAGE_RUNS: usize = 1000;
pub const USAGE_RUNS_MAX: usize = 5000;
/// Open decisions per page of `decisions {list:'roles'}` and of an
/// `inbox`'s decisions, by default and at most.
pub const DECISIONS_PAGE: usize = 500;
pub const DECISIONS_PAGE_MAX: usize = 2000;
/// Most open decisions `agents` lists under a role's `inputNeeded` (the
/// human's `inbox` has them all).
pub const INPUT_NEEDED: i64 = 50;
/// `trail` records per page by default, and at most.
pub const TRAIL_PAGE: usize = 1000;
pub const TRAIL_PAGE_MAX: usize = 5000;

/// The optional `limit` and `after` of a paged read (an extension).
#[derive(Debug, Default, Clone)]
pub struct PageArgs {
    pub limit: Option<usize>,
    pub after: Option<String>,
}

impl PageArgs {
    /// Takes `limit` (an integer from 1 to `max`) and `after` (a string of
    /// at most 256 bytes) when present; anything else is `invalid-request`.
    pub fn take(args: &mut Fields, max: usize) -> Result<PageArgs, Code> {
        let limit = match args.take_present("limit") {
            None => None,
            Some(Value::Number(n)) => Some(
                n.as_u64()
                    .and_then(|l| usize::try_from(l).ok())
                    .filter(|l| (1..=max).contains(l))
                    .ok_or(Code::InvalidRequest)?,
            ),
            Some(_) => return Err(Code::InvalidRequest),
        };
        let after = args.opt_str("after", 256)?;
        Ok(PageArgs { limit, after })
    }

    /// Whether the caller asked for a page (then the answer is always paged).
    pub fn asked(&self) -> bool {
        self.limit.is_some() || self.after.is_some()
    }
}

/// The first `limit` of `items` (already in order) that fit in
/// [`PAGE_BYTES`] (always at least one), and whether any is left out.
pub fn fit(mut items: Vec<Value>, limit: usize) -> (Vec<Value>, bool) {
    let mut bytes = 0usize;
    let mut keep = 0usize;
    for item in items.iter().take(limit) {
        bytes += serde_json::to_vec(item).map(|v| v.len() + 1).unwrap_or(0);
        if bytes > PAGE_BYTES && keep > 0 {
            break;
        }
        keep += 1;
    }
    let more = items.len() > keep;
    items.truncate(keep);
    (items, more)
}

/// A verb with no arguments.
macro_rules! no_args {
    ($name:ident, $f:ident) => {
        pub struct $name;

        impl ReadVerb for $name {
            fn parse(args: Fields) -> Result<Self, Code> {
                args.finish()?;
                Ok($name)
            }

            fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
                $f(core, caller)
            }
        }
    };
}

no_args!(Agents, agents);
no_args!(Requirements, requirements);
no_args!(State, state);
no_args!(Credentials, credentials);
no_args!(Seal, seal);

// --- seal -------------------------------------------------------------------

/// `seal`: the newest seal `{seq, at, root, upto}` (null before the first),
/// read from the seals file. It covers the whole store, not one business:
/// the anchor an auditor keeps (`docs/seals.md`).
fn seal(core: &Core, _caller: &Caller) -> Result<Value, Code> {
    let seals = core.seals.as_ref().ok_or(Code::StorageUnavailable)?;
    let newest = seals.newest().map_err(|_| Code::StorageUnavailable)?;
    Ok(newest.map_or(Value::Null, |s| views::newest_seal(&s)))
}

// --- usage ----------------------------------------------------------------

/// `usage {limit?, after?}` (3i rows 124, 126): the business's token
/// readings, summed exactly per run, instance, provider, model and account,
/// with the unknown turns beside every total (`policy::usage`). The human
/// and readers see the whole business; a role only while its run holds the
/// role (`not-holder`). `byRun` grows with every run the business ever had,
/// so it is paged (issue 34): at most [`USAGE_RUNS`] runs (`limit`, 1 to
/// [`USAGE_RUNS_MAX`]) after `after` (a run id), in key order; when runs are
/// left out the reply adds `next`, the last run it gives. Every other field
/// counts every reading on every page. A business with fewer runs than a
/// page, asked without arguments, gets exactly the spec's shape.
pub struct Usage {
    page: PageArgs,
}

impl ReadVerb for Usage {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let page = PageArgs::take(&mut args, USAGE_RUNS_MAX)?;
        args.finish()?;
        Ok(Usage { page })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        usage(core, caller, self.page)
    }
}

fn usage(core: &Core, caller: &Caller, page: PageArgs) -> Result<Value, Code> {
    let conn = core.store.db();
    if let Caller::Role {
        business,
        role,
        run,
    } = caller
    {
        if !crate::store::evidence::holds(conn, business, role, run)? {
            return Err(Code::NotHolder);
        }
    }
    let asked = page.asked();
    let mut sums = crate::policy::usage::Aggregate::paged(crate::policy::usage::RunWindow {
        after: page.after,
        limit: page.limit.unwrap_or(USAGE_RUNS),
        more: false,
    });
    crate::store::usage::each_usage_reading(conn, caller.business(), &mut |r| sums.add(r))?;
    let more = sums.more_runs();
    let mut reply = sums.finish().to_json();
    if more || asked {
        let next = if more {
            reply["byRun"]
                .as_array()
                .and_then(|runs| runs.last())
                .map(|r| r["run"].clone())
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        reply["next"] = next;
    }
    Ok(reply)
}

// --- inbox ----------------------------------------------------------------

/// `inbox {limit?, after?}`: for human, reader and tester sessions the
/// human's inbox (open decisions routed to the human, then messages to the
/// human it received and hasn't read, then those not yet received); for a
/// role session its own (open decisions routed to the role, then its
/// messages its run received and hasn't read, then those not yet received).
/// At most 100 messages, oldest first within each part, each with
/// `delivered_at` (null when waiting), and no more than fit in
/// [`PAGE_BYTES`] beside the decisions. The open decisions pile up with
/// the business's history, so they are paged (issue 34): at most
/// [`DECISIONS_PAGE`] (`limit`, 1 to [`DECISIONS_PAGE_MAX`]) after
/// `after` (a decision id), gated first and then oldest; when some are left
/// out the reply adds `next`, the last decision it gives. An inbox whose
/// decisions fit, asked without arguments, has exactly the spec's shape.
pub struct Inbox {
    page: PageArgs,
}

impl ReadVerb for Inbox {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let page = PageArgs::take(&mut args, DECISIONS_PAGE_MAX)?;
        args.finish()?;
        Ok(Inbox { page })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        inbox(core, caller, self.page)
    }
}

fn inbox(core: &Core, caller: &Caller, page: PageArgs) -> Result<Value, Code> {
    let b = caller.business();
    let (address, run) = match caller {
        Caller::Role { role, run, .. } => (role.as_str(), run.as_str()),
        _ => (HUMAN, crate::core::HUMAN_RUN),
    };
    let store = &core.store;
    let conn = store.db();
    let after = match &page.after {
        None => None,
        Some(id) => Some(reads::decision_cursor(conn, b, id)?.ok_or(Code::DecisionNotFound)?),
    };
    let limit = page.limit.unwrap_or(DECISIONS_PAGE);
    let found: Vec<Value> = reads::open_decisions(
        conn,
        b,
        address,
        after,
        i64::try_from(limit + 1).unwrap_or(i64::MAX),
    )?
    .iter()
    .map(views::decision_entry)
    .collect();
    let (decisions, more) = fit(found, limit);
    let mut room = PAGE_BYTES.saturating_sub(
        decisions
            .iter()
            .map(|d| serde_json::to_vec(d).map(|v| v.len() + 1).unwrap_or(0))
            .sum(),
    );
    let mut fits = |m: &Value| {
        let n = serde_json::to_vec(m).map(|v| v.len() + 1).unwrap_or(0);
        let ok = n <= room;
        room = room.saturating_sub(n);
        ok
    };
    let cap = usize::try_from(INBOX_MESSAGES).unwrap_or(100);
    let mut messages = Vec::new();
    // Received and unread, from the writer's unread index (costs the unread set).
    for e in store
        .unread
        .of_role(b, address)
        .filter(|e| e.run == run)
        .take(cap)
    {
        let mut m = views::message(&reads::message_by_id(conn, &e.message)?);
        m["delivered_at"] = json!(e.at);
        if !fits(&m) {
            break;
        }
        messages.push(m);
    }
    let left = cap.saturating_sub(messages.len());
    for row in msgs::undelivered(conn, b, address, left)? {
        let mut m = views::message(&row);
        m["delivered_at"] = Value::Null;
        if !fits(&m) {
            break;
        }
        messages.push(m);
    }
    let mut reply = json!({"role": address, "decisions": decisions, "messages": messages});
    if more || page.asked() {
        reply["next"] = match decisions_last(&reply, more) {
            Some(id) => id,
            None => Value::Null,
        };
    }
    Ok(reply)
}

/// The id of the last decision of `reply["decisions"]` when more follow.
fn decisions_last(reply: &Value, more: bool) -> Option<Value> {
    if !more {
        return None;
    }
    reply["decisions"]
        .as_array()
        .and_then(|d| d.last())
        .map(|d| d["id"].clone())
}

/// `decisions {list:'roles', limit?, after?}`: the business's open
/// decisions routed to a role, oldest first. They pile up with the
/// business's history, so they are paged (issue 34): at most
/// [`DECISIONS_PAGE`] (`limit`, 1 to [`DECISIONS_PAGE_MAX`]) after `after`
/// (a decision id). The whole list when it fits one page and no argument
/// asked for one, as the spec has it; otherwise `{decisions, next}`, `next`
/// null on the last page.
pub fn open_for_roles_page(core: &Core, caller: &Caller, page: PageArgs) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.db();
    let after = match &page.after {
        None => i64::MIN,
        Some(id) => {
            reads::decision_cursor(conn, b, id)?
                .ok_or(Code::DecisionNotFound)?
                .seq
        }
    };
    let limit = page.limit.unwrap_or(DECISIONS_PAGE);
    let found: Vec<Value> =
        reads::open_for_roles(conn, b, after, i64::try_from(limit + 1).unwrap_or(i64::MAX))?
            .iter()
            .map(views::decision_entry)
            .collect();
    let (decisions, more) = fit(found, limit);
    if !more && !page.asked() {
        return Ok(Value::Array(decisions));
    }
    let next = if more {
        decisions
            .last()
            .map(|d| d["id"].clone())
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    Ok(json!({"decisions": decisions, "next": next}))
}

// --- agents ---------------------------------------------------------------

/// `agents`: each held role's latest claim row; human, reader and tester
/// sessions also get `state`, `working`, `inputNeeded` and `stranded`.
fn agents(core: &Core, caller: &Caller) -> Result<Value, Code> {
    let biz = core.config.business(caller.business())?;
    let b = biz.id.as_str();
    let conn = core.store.db();
    let full = !matches!(caller, Caller::Role { .. });
    let mut out = Vec::new();
    for role in biz.roles.keys() {
        if crate::policy::threads::is_thread_instance(biz, role) {
            // No role claim: one row per held thread (decisions.md).
            let mut rows: Vec<Value> = threads::held_claim_rows(conn, b, role)?
                .iter()
                .map(|c| views::thread_claim(b, role, c))
                .collect();
            let holders: HashSet<String> = rows
                .iter()
                .filter_map(|r| r["run"].as_str().map(str::to_string))
                .collect();
            for row in rows.iter_mut() {
                if full {
                    let run = row["run"].as_str().unwrap_or_default().to_string();
                    let thread = row["thread"].as_str().unwrap_or_default().to_string();
                    let of = Some((thread.as_str(), &holders));
                    agent_state(&core.store, b, role, &run, of, row)?;
                }
            }
            out.extend(rows);
            continue;
        }
        let row = reads::latest_claim(conn, b, role)?;
        let Some(mut row) = row.map(|c| views::claim_of(b, &c)) else {
            continue;
        };
        if row["op"] != json!("claim") {
            continue;
        }
        if full {
            let run = row["run"].as_str().unwrap_or_default().to_string();
            agent_state(&core.store, b, role, &run, None, &mut row)?;
        }
        out.push(row);
    }
    Ok(Value::Array(out))
}

/// The spec's "Agent state" for one held role, or for one held `thread`
/// of a thread instance (with the runs holding its threads now): then only
/// that thread's deliveries are stranded. A run holds one thread, so what
/// another holder received is in its own thread, never stranded here.
fn agent_state(
    store: &crate::store::Store,
    b: &str,
    role: &str,
    run: &str,
    thread: Option<(&str, &HashSet<String>)>,
    row: &mut Value,
) -> Result<(), Code> {
    let conn = store.db();
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
            if let Some((t, holders)) = thread {
                if holders.contains(&e.run)
                    || threads::of_message(conn, &e.message)?.as_deref() != Some(t)
                {
                    continue;
                }
            }
            stranded.push(json!({"id": e.message, "from": e.from_role, "run": e.run, "at": e.at}));
        }
    }
    let working = if n > 0 {
        json!({"messages": n, "since": since})
    } else {
        Value::Null
    };
    let input_needed = reads::input_needed(conn, b, role, INPUT_NEEDED)?;
    let state = if !working.is_null() {
        "working"
    } else if !input_needed.is_empty() {
        "waiting"
    } else {
        "idle"
    };
    row["state"] = json!(state);
    row["working"] = working;
    row["inputNeeded"] = input_needed.iter().map(views::input_needed).collect();
    row["stranded"] = Value::Array(stranded);
    Ok(())
}

// --- trail ----------------------------------------------------------------

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
    fn extend(&mut self, vs: impl IntoIterator<Item = Value>) {
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

/// `trail {subject, limit?, after?}`: a task ref, decision id, message id
/// or run id; every linked record of the caller's business in broker write
/// order. An unknown subject is an empty list. The whole trail when it fits
/// one page (at most [`TRAIL_PAGE`] records and [`PAGE_BYTES`]), as the spec
/// has it; a longer one, or any call with `limit` (1 to
/// [`TRAIL_PAGE_MAX`]) or `after` (the `next` of the page before: the `at`
/// of its last record), is `{records, next}`, `next` null on the last page.
pub struct Trail {
    subject: String,
    page: PageArgs,
}

impl ReadVerb for Trail {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let subject = args.str("subject", 256)?;
        let page = PageArgs::take(&mut args, TRAIL_PAGE_MAX)?;
        if let Some(a) = &page.after {
            // A cursor is a broker timestamp.
            crate::store::clock::parse_canonical(a).ok_or(Code::InvalidRequest)?;
        }
        args.finish()?;
        Ok(Trail { subject, page })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        trail(core, caller, self.subject, self.page)
    }
}

fn trail(core: &Core, caller: &Caller, subject: String, page: PageArgs) -> Result<Value, Code> {
    let b = caller.business();
    let limit = page.limit.unwrap_or(TRAIL_PAGE);
    let after = page.after.as_deref();
    let window = reads::TrailWindow {
        after,
        // One more than the page from each source: whether any is left.
        limit: i64::try_from(limit + 1).unwrap_or(i64::MAX),
    };
    let mut t = TrailRecords::default();
    t.extend(
        reads::trail_records(core.store.db(), b, &subject, window)?
            .iter()
            .map(views::trail_record)
            .filter(|r| after.is_none_or(|a| r["at"].as_str().is_some_and(|at| at > a))),
    );
    let Value::Array(all) = t.finish() else {
        return Err(Code::StorageUnavailable);
    };
    let (records, more) = fit(all, limit);
    if !more && !page.asked() {
        return Ok(Value::Array(records));
    }
    let next = if more {
        records
            .last()
            .map(|r| r["at"].clone())
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    Ok(json!({"records": records, "next": next}))
}

// --- replies and messages -------------------------------------------------

/// `replies {id}`: messages in reply to a message of the business, oldest
/// first, each the `messages` row `trail` gives for its id.
pub struct Replies {
    id: String,
}

impl ReadVerb for Replies {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let id = args.str("id", 64)?;
        args.finish()?;
        Ok(Replies { id })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        replies(core, caller, self.id)
    }
}

fn replies(core: &Core, caller: &Caller, id: String) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.db();
    if msgs::message_facts(conn, b, &id)?.is_none() {
        return Err(Code::MessageNotFound);
    }
    // Each row is the message row `trail` gives for the reply's id.
    Ok(Value::Array(
        reads::replies(conn, b, &id, REPLIES)?
            .iter()
            .map(views::tagged_message)
            .collect(),
    ))
}

/// `messages {limit?, after?}`: the human's feed, newest first.
pub struct Messages {
    limit: i64,
    after: Option<String>,
}

impl ReadVerb for Messages {
    fn parse(mut args: Fields) -> Result<Self, Code> {
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

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        messages(core, caller, self)
    }
}

fn messages(core: &Core, caller: &Caller, args: Messages) -> Result<Value, Code> {
    let Messages { limit, after } = args;
    let b = caller.business();
    let conn = core.store.db();
    let before = match &after {
        None => i64::MAX,
        Some(a) => match msgs::message_facts(conn, b, a)? {
            Some(f) if f.to_role == HUMAN => f.seq,
            _ => return Err(Code::MessageNotFound),
        },
    };
    let mut page: Vec<Value> = reads::human_feed(conn, b, before, limit + 1)?
        .iter()
        .map(|(m, read)| views::human_message(m, *read))
        .collect();
    let more = page.len() > usize::try_from(limit).unwrap_or(0);
    page.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        page.last().map(|m| m["id"].clone()).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let (total, read) = reads::human_counts(conn, b)?;
    Ok(json!({"messages": page, "total": total, "unread": total - read, "next": next}))
}

// --- requirements and state -----------------------------------------------

/// `requirements`: the requirements file loaded at start, role sessions only.
/// With no file configured: `{prd: null, version: null, requirements: []}`.
fn requirements(core: &Core, _caller: &Caller) -> Result<Value, Code> {
    Ok(core
        .requirements
        .clone()
        .unwrap_or_else(|| json!({"prd": null, "version": null, "requirements": []})))
}

/// `state`: launch state and the tracker snapshot's open tasks.
fn state(core: &Core, caller: &Caller) -> Result<Value, Code> {
    let b = caller.business();
    let conn = core.store.db();
    let mut latest: Option<(i64, String, String, String)> = None;
    for kind in ["launch.revoked", "launch.restored"] {
        let row = reads::latest_event_of_kind(conn, b, kind)?;
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
    let tasks = reads::current_tasks(conn, b)?;
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

/// The Vikunja task id of a task ref: the part after the last `/`.
fn vikunja_id(task_ref: &str) -> Option<&str> {
    task_ref.rsplit_once('/').map(|(_, id)| id)
}

/// Requirement of the first `task.created` per Vikunja task id.
fn requirements_by_task(conn: &Db, b: &str) -> Result<BTreeMap<String, Value>, Code> {
    let mut out = BTreeMap::new();
    for (subject, req) in reads::task_created_requirements(conn, b)? {
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

/// Largest integer JSON carries exactly (2^53 - 1).
const SAFE_INTEGER_MAX: i64 = (1 << 53) - 1;

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
    label: Option<i64>,
    requirement: Option<String>,
    limit: usize,
    after: Option<String>,
}

impl ReadVerb for Tasks {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        if args.is_empty() {
            return Ok(Tasks::All);
        }
        if let Some(task_ref) = args.opt_str("task_ref", 256)? {
            args.finish()?;
            if !crate::ids::is_task_ref(&task_ref) {
                return Err(Code::InvalidRequest);
            }
            return Ok(Tasks::One(task_ref));
        }
        let done = match args.take_present("done") {
            None => None,
            Some(Value::Bool(d)) => Some(d),
            Some(_) => return Err(Code::InvalidRequest),
        };
        let assignee = args.opt_str("assignee", 64)?;
        // A label id: a non-negative safe integer, nothing else (a label's
        // name, a float or a numeric string is invalid-request).
        let label = match args.take_present("label") {
            None => None,
            Some(Value::Number(n)) => Some(
                n.as_i64()
                    .filter(|l| (0..=SAFE_INTEGER_MAX).contains(l))
                    .ok_or(Code::InvalidRequest)?,
            ),
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

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let biz = core.config.business(caller.business())?;
        let b = biz.id.as_str();
        let conn = core.store.db();
        match self {
            Tasks::All => {
                let reqs = requirements_by_task(conn, b)?;
                let rows = reads::current_tasks(conn, b)?;
                Ok(Value::Array(
                    rows.iter().map(|t| full_row(b, &reqs, t)).collect(),
                ))
            }
            Tasks::One(task_ref) => {
                let reqs = requirements_by_task(conn, b)?;
                let row = reads::latest_task(conn, b, &task_ref)?.ok_or(Code::TaskNotFound)?;
                Ok(full_row(b, &reqs, &row))
            }
            Tasks::Page(filter) => task_page(conn, biz, filter),
        }
    }
}

/// `tasks`' short form: the open tasks that pass every filter, a page of
/// them after `after` (in `task_ref` order), the total and the next cursor.
fn task_page(conn: &Db, biz: &Business, filter: TaskFilter) -> Result<Value, Code> {
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
    let rows = reads::current_tasks(conn, b)?;
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
                .is_some_and(|ls| ls.iter().any(|x| x.as_i64() == Some(*l)));
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
fn credentials(core: &Core, caller: &Caller) -> Result<Value, Code> {
    let now = crate::store::clock::now_ms();
    Ok(Value::Array(core.credentials.rows(caller.business(), now)))
}
