//! The trusted host's `recordEvent`, `recordTask`, `recordComments` and
//! `commentCursor` (the spec's in-process `broker.recordEvent`, S3's task
//! snapshots and the task sync's comment cursors), run on the writer thread.

use crate::core::{Caller, Core};
use crate::error::Code;
use crate::ids;
use crate::store::clock;
use crate::store::evidence::{self, Actor};
use crate::store::messages as msgs;
use serde_json::{json, Map, Value};

use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::host_op;

/// `recordEvent {cap, kind, body, subject?}`.
pub struct RecordEvent {
    pub cap: String,
    pub kind: String,
    pub body: Map<String, Value>,
    pub subject: Option<String>,
}

impl RecordEvent {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let kind = f.str("kind", HOST_MAX)?;
        let body = f.object("body")?;
        let subject = f.opt_str("subject", HOST_MAX)?;
        f.finish()?;
        Ok(RecordEvent {
            cap,
            kind,
            body,
            subject,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        record_event(
            core,
            &self.cap,
            &self.kind,
            self.body,
            self.subject.as_deref(),
        )
    }
}

/// `recordTask {business, task_ref, read_at, fields | tombstone: true}`.
pub struct RecordTask {
    pub business: String,
    pub task_ref: String,
    pub read_at: String,
    /// `None`: a tombstone.
    pub fields: Option<Map<String, Value>>,
}

impl RecordTask {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        let task_ref = f.str("task_ref", HOST_MAX)?;
        let read_at = f.str("read_at", HOST_MAX)?;
        let fields = match (f.take("fields"), f.take("tombstone")) {
            (Some(Value::Object(m)), None) => Some(m),
            (None, Some(Value::Bool(true))) => None,
            _ => return Err(Code::InvalidRequest),
        };
        f.finish()?;
        Ok(RecordTask {
            business,
            task_ref,
            read_at,
            fields,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        record_task(
            core,
            &self.business,
            &self.task_ref,
            &self.read_at,
            self.fields,
        )
    }
}

/// `recordComments {business, task_ref, cursor, comments: [{id, author, at, body}]}`.
pub struct RecordComments {
    pub business: String,
    pub task_ref: String,
    pub cursor: i64,
    pub comments: Vec<Comment>,
}

impl RecordComments {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        let task_ref = f.str("task_ref", HOST_MAX)?;
        let cursor = positive_id(f.take("cursor").as_ref())?;
        let Some(Value::Array(list)) = f.take("comments") else {
            return Err(Code::InvalidRequest);
        };
        f.finish()?;
        let comments = list
            .into_iter()
            .map(Comment::from_json)
            .collect::<Result<Vec<_>, Code>>()?;
        Ok(RecordComments {
            business,
            task_ref,
            cursor,
            comments,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        record_comments(
            core,
            &self.business,
            &self.task_ref,
            self.cursor,
            &self.comments,
        )
    }
}

/// `commentCursor {business, task_ref}`.
pub struct CommentCursor {
    pub business: String,
    pub task_ref: String,
}

impl CommentCursor {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        let task_ref = f.str("task_ref", HOST_MAX)?;
        f.finish()?;
        Ok(CommentCursor { business, task_ref })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        comment_cursor(core, &self.business, &self.task_ref)
    }
}

/// Kinds only verbs and host ops write: human input, human launch control,
/// the review loop, and the broker's own session records.
pub const RESERVED_KINDS: &[&str] = &[
    "human.input",
    "launch.revoked",
    "launch.restored",
    "review.requested",
    "review.verdict",
    "session.launched",
    "session.ended",
    "task.comment",
];

/// The deepest `recordEvent` body, in nesting levels (the body object is
/// level 1): the deepest JSON serde_json reads back (its recursion limit of
/// 128 counts the outermost value too). A host channel line can't carry a
/// deeper one; the embedded runtime's `record_event` could, and the store
/// would refuse one past SQLite's JSON depth limit (1000) as
/// `storage-unavailable`, or keep one the trail could not read back.
pub const MAX_BODY_DEPTH: usize = 127;

/// True when `v` nests deeper than `max` levels (a scalar is level 0, an
/// empty array or object level 1). Iterative: the value may be deep.
fn deeper_than(v: &Value, max: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        if d + 1 > max {
            return true;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    false
}

fn kind_ok(k: &str) -> bool {
    (3..=64).contains(&k.len())
        && k.bytes().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

/// `recordEvent {cap, kind, body, subject?}` → `{event, at}`: stamps the
/// capability's business, role and run, in one transaction.
pub fn record_event(
    core: &mut Core,
    cap: &str,
    kind: &str,
    body: Map<String, Value>,
    subject: Option<&str>,
) -> Result<Value, Code> {
    let (business, role, run) = match core.caller(cap) {
        Some(Caller::Role {
            business,
            role,
            run,
        }) => (business, role, run),
        Some(_) => return Err(Code::ReadOnly),
        None => return Err(Code::UnknownCapability),
    };
    record_event_as(core, &business, &role, &run, kind, body, subject)
}

/// [`record_event`] for an identity the trusted host already resolved (the
/// embedded runtime's in-process API).
pub fn record_event_as(
    core: &mut Core,
    business: &str,
    role: &str,
    run: &str,
    kind: &str,
    body: Map<String, Value>,
    subject: Option<&str>,
) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    if !kind_ok(kind) {
        return Err(Code::InvalidRequest);
    }
    // The push record and the landing record are written by their git
    // socket ops only (recordPush, and recordLand or authorize with the
    // decision that the action spends).
    let reserved_action = |a: &str| body.get("action") == Some(&Value::String(a.into()));
    if RESERVED_KINDS.contains(&kind)
        || (kind == "action.allowed"
            && (reserved_action("git.push.working") || reserved_action("git.merge.protected")))
    {
        return Err(Code::ReservedEvent);
    }
    if let Some(tr) = body.get("task_ref") {
        if tr.as_str() != subject {
            return Err(Code::TaskSubject);
        }
    }
    let body = Value::Object(body);
    if deeper_than(&body, MAX_BODY_DEPTH) {
        return Err(Code::InvalidRequest);
    }
    let r = core.store.write(|t| {
        if kind == "task.created" {
            if subject.is_none() {
                return Err(Code::InvalidRequest);
            }
            let req = body["requirement"].as_str().unwrap_or_default();
            if !crate::config::is_requirement_id(req) {
                return Err(Code::InvalidRequest);
            }
            let request = body["request"].as_str().unwrap_or_default();
            if !crate::store::reads::is_human_input(t.db(), business, request)? {
                return Err(Code::HumanInputRequired);
            }
        }
        let w = evidence::insert_event(t, business, kind, Actor::of(role, run), subject, &body)?;
        Ok(json!({"event": w.id, "at": w.at}))
    });
    token_refusal_recorded(core, business, Some(role), Some(run), "recordEvent", r)
}

/// `r` as it is, except that a known token refused by the write is
/// recorded as `action.refused {action: op}` against `role` and `run` (the
/// host's record ops leave evidence of that refusal alone).
fn token_refusal_recorded(
    core: &mut Core,
    business: &str,
    role: Option<&str>,
    run: Option<&str>,
    op: &str,
    r: Result<Value, Code>,
) -> Result<Value, Code> {
    match r {
        Err(Code::KnownToken) => Err(crate::handlers::refusal::record_code(
            core,
            business,
            crate::store::evidence::Actor { role, run },
            Some(op),
            None,
            Code::KnownToken,
        )),
        other => other,
    }
}

fn fields_ok(f: &Map<String, Value>) -> bool {
    let str_or_null = |v: &Value| v.is_string() || v.is_null();
    let id = |v: &Value| v.is_string() || v.as_i64().is_some() || v.is_null();
    f.iter().all(|(k, v)| match k.as_str() {
        "title" => v.is_string(),
        "done" => v.is_boolean(),
        "bucket" | "project" => id(v),
        "assignees" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        "labels" => v
            .as_array()
            .is_some_and(|a| a.iter().all(|l| l.is_string() || l.as_i64().is_some())),
        "priority" => v.as_i64().is_some() || v.is_null(),
        "description" => str_or_null(v),
        _ => false,
    })
}

/// `recordTask {business, task_ref, read_at, fields | tombstone:true}` →
/// `{task_ref, seq, at}`: one task snapshot as task sync stores it.
pub fn record_task(
    core: &mut Core,
    business: &str,
    task_ref: &str,
    read_at: &str,
    fields: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    if !ids::is_task_ref(task_ref) || clock::parse_canonical(read_at).is_none() {
        return Err(Code::InvalidRequest);
    }
    if let Some(f) = &fields {
        if !fields_ok(f) {
            return Err(Code::InvalidRequest);
        }
    }
    let fields = fields.map(Value::Object);
    let r = core.store.write(|t| {
        let (seq, at) =
            msgs::insert_task_snapshot(t, business, task_ref, read_at, fields.as_ref())?;
        Ok(json!({"task_ref": task_ref, "seq": seq, "at": at}))
    });
    token_refusal_recorded(core, business, None, None, "recordTask", r)
}

/// Longest comment body the sync may record, in bytes.
pub const COMMENT_BODY_MAX: usize = 64 * 1024;

/// Largest safe integer (2^53 - 1): ids and cursors stay exact in JSON.
const SAFE_MAX: i64 = (1 << 53) - 1;

/// One tracker comment as the sync reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The tracker's comment id (bots' comments included).
    pub id: i64,
    pub author: String,
    /// The tracker's timestamp, as the tracker wrote it.
    pub at: String,
    pub body: String,
}

/// A positive safe integer, else `invalid-request`.
fn positive_id(v: Option<&Value>) -> Result<i64, Code> {
    match v.and_then(Value::as_i64) {
        Some(n) if (1..=SAFE_MAX).contains(&n) => Ok(n),
        _ => Err(Code::InvalidRequest),
    }
}

impl Comment {
    /// `{id, author, at, body}`, exactly those keys.
    pub fn from_json(v: Value) -> Result<Comment, Code> {
        let Value::Object(m) = v else {
            return Err(Code::InvalidRequest);
        };
        let mut f = Fields::new(m);
        let id = positive_id(f.take("id").as_ref())?;
        let author = f.str("author", HOST_MAX)?;
        let at = f.str("at", 64)?;
        // The one string rule, save that a comment's body may be empty.
        let body = match f.take("body") {
            Some(Value::String(s)) if s.is_empty() => s,
            other => crate::handlers::fields::string(other, COMMENT_BODY_MAX)?,
        };
        f.finish()?;
        Ok(Comment {
            id,
            author,
            at,
            body,
        })
    }
}

/// The task id a cursor is kept under (task ids survive project moves).
fn task_id(task_ref: &str) -> Result<i64, Code> {
    if !ids::is_task_ref(task_ref) {
        return Err(Code::InvalidRequest);
    }
    task_ref
        .rsplit_once('/')
        .and_then(|(_, t)| t.parse::<i64>().ok())
        .filter(|t| *t > 0)
        .ok_or(Code::InvalidRequest)
}

/// `recordComments {business, task_ref, cursor, comments}` → `{cursor,
/// events}`: one `task.comment` event per comment (subject the task) and
/// the task's new cursor, in one transaction. The cursor must be above the
/// stored one (`cursor-not-increasing`), and the comments' ids strictly
/// increasing, above the stored cursor and at most the new one; any
/// refusal writes nothing. No comments at all is a baseline: the cursor
/// alone (the spec's historical comments, baselined without events).
pub fn record_comments(
    core: &mut Core,
    business: &str,
    task_ref: &str,
    cursor: i64,
    comments: &[Comment],
) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    let task = task_id(task_ref)?;
    if !(1..=SAFE_MAX).contains(&cursor) {
        return Err(Code::InvalidRequest);
    }
    let ascending = comments.windows(2).all(|w| w[0].id < w[1].id);
    if !ascending || comments.last().is_some_and(|c| c.id > cursor) {
        return Err(Code::InvalidRequest);
    }
    let r = core.store.write(|t| {
        let stored = crate::store::comments::latest_cursor(t.db(), business, task)?;
        if let Some(s) = stored {
            if cursor <= s || comments.first().is_some_and(|c| c.id <= s) {
                return Err(Code::CursorNotIncreasing);
            }
        }
        let mut events = Vec::with_capacity(comments.len());
        for c in comments {
            let body = json!({"task_ref": task_ref, "comment": c.id, "author": c.author,
                              "at": c.at, "body": c.body});
            let w = evidence::insert_event(
                t,
                business,
                "task.comment",
                Actor::NOBODY,
                Some(task_ref),
                &body,
            )?;
            events.push(w.id);
        }
        crate::store::comments::insert_cursor(t, business, task, cursor)?;
        Ok(json!({"cursor": cursor, "events": events}))
    });
    token_refusal_recorded(core, business, None, None, "recordComments", r)
}

/// `commentCursor {business, task_ref}` → `{cursor, epoch}`: the task's
/// latest cursor (null before its first) and the store's cursor epoch.
pub fn comment_cursor(core: &Core, business: &str, task_ref: &str) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    let task = task_id(task_ref)?;
    let conn = core.store.db();
    let cursor = crate::store::comments::latest_cursor(conn, business, task)?;
    let epoch = crate::store::comments::epoch(conn)?;
    Ok(json!({"cursor": cursor, "epoch": epoch}))
}

host_op!(RecordEvent, "recordEvent");
host_op!(RecordTask, "recordTask");
host_op!(RecordComments, "recordComments");
host_op!(CommentCursor, "commentCursor");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..levels {
            v = json!({ "a": v });
        }
        v
    }

    #[test]
    fn body_depth_is_what_serde_json_reads_back() {
        for (levels, deeper) in [(0, false), (1, false), (MAX_BODY_DEPTH, false)] {
            assert_eq!(deeper_than(&nested(levels), MAX_BODY_DEPTH), deeper);
        }
        assert!(deeper_than(&nested(MAX_BODY_DEPTH + 1), MAX_BODY_DEPTH));
        assert!(deeper_than(&json!({"a": [[], {"b": [[[]]]}]}), 5));
        assert!(!deeper_than(&json!({"a": [[], {"b": [[[]]]}]}), 6));
        // The limit is serde_json's: the deepest body parses back, one more level doesn't.
        let at = nested(MAX_BODY_DEPTH).to_string();
        assert!(serde_json::from_str::<Value>(&at).is_ok());
        let past = nested(MAX_BODY_DEPTH + 1).to_string();
        assert!(serde_json::from_str::<Value>(&past).is_err());
    }
}
