//! What a session sees of a stored row: the wire's key names, the JSON
//! columns decoded, `blocking` as a boolean, the `record` tags of `trail`.
//! The store returns plain rows (`store::rows`); every verb that shows one
//! builds it here, so the same row reads the same in every reply.

use crate::store::canonical;
use crate::store::decisions::DecisionRow;
use crate::store::rows::{
    ClaimRow, DecisionEntry, DecisionEventRow, EventRow, InputNeeded, MessageRow, ReceiptRow,
    TaskSnapshotRow, ThreadClaimRow, ThreadState, TrailRecord,
};
use crate::store::seals::Seal;
use serde_json::{json, Value};

/// A stored JSON column, decoded (null when absent or not JSON).
fn json_col(s: Option<&str>) -> Value {
    s.and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// A message: the shape `trail`, `replies`, `messages`, `thread.messages`
/// and `message.receive` share.
pub fn message(m: &MessageRow) -> Value {
    json!({
        "id": m.id,
        "seq": m.seq,
        "from_role": m.from_role,
        "from_run": m.from_run,
        "to_role": m.to_role,
        "class": m.class,
        "body": m.body,
        "in_reply_to": m.in_reply_to,
        "corrects": m.corrects,
        "decision": m.decision,
        "request": m.request,
        "at": m.at,
        "to_name": m.to_name,
    })
}

/// A message with `record: "message"`, as `trail` and `replies` show it.
pub fn tagged_message(m: &MessageRow) -> Value {
    with_record(message(m), "message")
}

/// A message to the human, with whether it was read (`messages`).
pub fn human_message(m: &MessageRow, read: bool) -> Value {
    let mut v = message(m);
    v["read"] = json!(read);
    v
}

/// A thread's message, with its thread (`thread.messages`).
pub fn thread_message(m: &MessageRow, thread: &str) -> Value {
    let mut v = message(m);
    v["thread"] = json!(thread);
    v
}

fn with_record(mut v: Value, record: &str) -> Value {
    v["record"] = json!(record);
    v
}

/// A decision as the inbox and the lists show it: decoded options,
/// `blocking` as a boolean, and the authorization context S4 displays.
pub fn decision_entry(d: &DecisionEntry) -> Value {
    json!({
        "record": "decision",
        "seq": d.seq,
        "id": d.id,
        "raised_by_role": d.raised_by_role,
        "raised_by_run": d.raised_by_run,
        "action": d.action,
        "target": d.target,
        "class": d.class,
        "routed_to": d.routed_to,
        "domain": d.domain,
        "question": d.question,
        "options": d.options_json(),
        "recommendation": d.recommendation,
        "approvalChoice": d.approval_choice,
        "blocking": d.blocking,
        "project": d.project,
        "task_ref": d.task_ref,
        "requirement_ref": d.requirement_ref,
        "supersedes": d.supersedes,
        "target_holder": d.target_holder,
        "at": d.at,
        // The spec a cited raise stands on (what routed it to an arbiter).
        "spec_path": d.spec_path,
        "spec_commit": d.spec_commit,
        "authorization": {
            "action": d.action,
            "target": d.target,
            "approvalChoice": d.approval_choice,
        },
    })
}

/// A closed decision of `decisions {list:'recent'}`: its entry plus
/// `closed`, its closing event (null if it has none).
pub fn closed_decision(d: &DecisionEntry, closed: Option<&DecisionEventRow>) -> Value {
    let mut v = decision_entry(d);
    v["closed"] = closed.map_or(Value::Null, decision_event);
    v
}

/// A decision with its state (the `decision.*` verbs' replies): the lists'
/// shape ([`decision_entry`]) without their `record` and `seq`, plus its
/// business, `state`, `choice` and `consumed`.
pub fn decision(d: &DecisionRow) -> Value {
    let mut v = decision_entry(&d.entry);
    if let Some(o) = v.as_object_mut() {
        // The lists' tags, which a single decision's reply does not carry.
        o.remove("record");
        o.remove("seq");
    }
    v["business"] = json!(d.business);
    v["state"] = json!(d.closed_kind.as_deref().unwrap_or("open"));
    v["choice"] = json!(d.choice);
    v["consumed"] = json!(d.consumed);
    v
}

/// A `decision_events` row.
pub fn decision_event(e: &DecisionEventRow) -> Value {
    json!({
        "seq": e.seq,
        "decision": e.decision,
        "kind": e.kind,
        "by": e.by,
        "run": e.run,
        "choice": e.choice,
        "note": e.note,
        "input": e.input,
        "at": e.at,
    })
}

/// An event, with its body decoded.
pub fn event(e: &EventRow) -> Value {
    json!({
        "record": "event",
        "seq": e.seq,
        "id": e.id,
        "kind": e.kind,
        "role": e.role,
        "run": e.run,
        "subject": e.subject,
        "body": json_col(e.body.as_deref()),
        "at": e.at,
    })
}

/// A claim row's own fields, as both views below show them.
fn claim_fields(c: &ClaimRow) -> Value {
    json!({
        "seq": c.seq,
        "role": c.role,
        "run": c.run,
        "op": c.op,
        "decision": c.decision,
        "by": c.by,
        "at": c.at,
    })
}

/// A role claim as `trail` shows it.
pub fn claim(c: &ClaimRow) -> Value {
    let mut v = claim_fields(c);
    v["record"] = json!("claim");
    v
}

/// A role's latest claim as `agents` shows it (with its business).
pub fn claim_of(business: &str, c: &ClaimRow) -> Value {
    let mut v = claim_fields(c);
    v["business"] = json!(business);
    v
}

/// A thread instance's held thread, shaped as a role claim with `thread`
/// added (what `agents` lists for an instance that has no role claim).
pub fn thread_claim(business: &str, instance: &str, c: &ThreadClaimRow) -> Value {
    json!({
        "seq": c.seq,
        "business": business,
        "role": instance,
        "run": c.run,
        "thread": c.thread,
        "op": c.op,
        "decision": c.decision,
        "by": c.by,
        "at": c.at,
    })
}

fn task(t: &TaskSnapshotRow) -> Value {
    json!({
        "record": "task",
        "seq": t.seq,
        "task_ref": t.task_ref,
        "read_at": t.read_at,
        "tombstone": t.tombstone,
        "fields": json_col(t.fields.as_deref()),
        "at": t.at,
    })
}

fn receipt(record: &str, r: &ReceiptRow) -> Value {
    json!({"record": record, "seq": r.seq, "message": r.message, "run": r.run, "at": r.at})
}

/// One `trail` record, tagged with the table it comes from.
pub fn trail_record(t: &TrailRecord) -> Value {
    match t {
        TrailRecord::Event(e) => event(e),
        TrailRecord::Claim(c) => claim(c),
        TrailRecord::Task(s) => task(s),
        TrailRecord::Decision(d) => decision_entry(d),
        TrailRecord::DecisionEvent(e) => with_record(decision_event(e), "decision_event"),
        TrailRecord::Message(m) => tagged_message(m),
        TrailRecord::Delivery(r) => receipt("delivery", r),
        TrailRecord::Read(r) => receipt("read", r),
    }
}

/// An open decision waiting on the human, as a role's `inbox` lists it.
pub fn input_needed(i: &InputNeeded) -> Value {
    json!({
        "id": i.id,
        "question": i.question,
        "class": i.class,
        "blocking": i.blocking,
        "task_ref": i.task_ref,
        "at": i.at,
    })
}

/// One thread of `threadsState`.
pub fn thread_state(s: &ThreadState) -> Value {
    json!({
        "thread": s.thread,
        "instance": s.instance,
        "pending": s.pending,
        "unread": s.unread,
        "lastMessage": s.last_message,
        "lastOpen": s.last_open,
        "lastClaim": s.last_claim,
        "holder": s.holder,
    })
}

/// A seal as the `seals` host op lists it: `{seq, at, prev, root, upto}`.
pub fn seal(s: &Seal) -> Value {
    json!({
        "seq": s.seq,
        "at": s.at,
        "prev": canonical::hex(&s.prev),
        "root": canonical::hex(&s.root),
        "upto": s.upto,
    })
}

/// The newest seal as the `seal` verb shows it: `{seq, at, root, upto}`.
pub fn newest_seal(s: &Seal) -> Value {
    json!({
        "seq": s.seq,
        "at": s.at,
        "root": canonical::hex(&s.root),
        "upto": s.upto,
    })
}
