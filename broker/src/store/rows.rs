//! The evidence rows as the reads get them back: plain structs, one per
//! shape a read returns, with JSON columns left as the text they are
//! stored as. What a session sees of them (key names, decoded columns, the
//! `record` tags of `trail`) is `handlers/views.rs`'s business, not the
//! store's.

use rusqlite::Row;

/// A `messages` row (every column but `business`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub seq: i64,
    pub id: String,
    pub from_role: String,
    pub from_run: String,
    pub to_role: String,
    pub class: String,
    pub body: String,
    pub in_reply_to: Option<String>,
    pub corrects: Option<String>,
    pub decision: Option<String>,
    pub request: Option<String>,
    pub at: String,
    pub to_name: Option<String>,
}

/// The columns [`MessageRow::read`] reads, in order (alias `m`).
pub const MESSAGE_COLUMNS: &str = "m.seq, m.id, m.from_role, m.from_run, m.to_role, m.class, \
     m.body, m.in_reply_to, m.corrects, m.decision, m.request, m.at, m.to_name";

/// How many columns [`MESSAGE_COLUMNS`] names: the index of the first
/// column a query selects after them.
pub const MESSAGE_COLUMN_COUNT: usize = 13;

impl MessageRow {
    /// From a row starting with [`MESSAGE_COLUMNS`].
    pub(super) fn read(r: &Row<'_>) -> rusqlite::Result<MessageRow> {
        Ok(MessageRow {
            seq: r.get(0)?,
            id: r.get(1)?,
            from_role: r.get(2)?,
            from_run: r.get(3)?,
            to_role: r.get(4)?,
            class: r.get(5)?,
            body: r.get(6)?,
            in_reply_to: r.get(7)?,
            corrects: r.get(8)?,
            decision: r.get(9)?,
            request: r.get(10)?,
            at: r.get(11)?,
            to_name: r.get(12)?,
        })
    }
}

/// A `decisions` row as the lists read it (no state: the lists know it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEntry {
    pub seq: i64,
    pub id: String,
    pub raised_by_role: String,
    pub raised_by_run: String,
    pub action: String,
    pub target: Option<String>,
    pub class: String,
    pub routed_to: String,
    pub domain: Option<String>,
    pub question: String,
    /// The options as stored (a JSON array of `{key,text}`; the schema
    /// checks it is one).
    pub options: String,
    pub recommendation: String,
    pub approval_choice: String,
    pub blocking: bool,
    pub project: Option<String>,
    pub task_ref: Option<String>,
    pub requirement_ref: Option<String>,
    pub supersedes: Option<String>,
    pub target_holder: Option<String>,
    pub at: String,
    pub spec_path: Option<String>,
    pub spec_commit: Option<String>,
}

/// The columns [`DecisionEntry::read`] reads, in order (alias `d`).
pub const DECISION_COLUMNS: &str = "d.seq, d.id, d.raised_by_role, d.raised_by_run, d.action, \
     d.target, d.class, d.routed_to, d.domain, d.question, d.options, d.recommendation, \
     d.approval_choice, d.blocking, d.project, d.task_ref, d.requirement_ref, d.supersedes, \
     d.target_holder, d.at, d.spec_path, d.spec_commit";

/// How many columns [`DECISION_COLUMNS`] names.
pub const DECISION_COLUMN_COUNT: usize = 22;

impl DecisionEntry {
    /// The options, decoded.
    pub fn options_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.options).unwrap_or(serde_json::Value::Array(Vec::new()))
    }

    /// The text of option `key`, if the decision has it.
    pub fn option_text(&self, key: &str) -> Option<String> {
        self.options_json().as_array().and_then(|opts| {
            opts.iter()
                .find(|o| o["key"].as_str() == Some(key))
                .and_then(|o| o["text"].as_str().map(str::to_string))
        })
    }

    pub(super) fn read(r: &Row<'_>) -> rusqlite::Result<DecisionEntry> {
        Ok(DecisionEntry {
            seq: r.get(0)?,
            id: r.get(1)?,
            raised_by_role: r.get(2)?,
            raised_by_run: r.get(3)?,
            action: r.get(4)?,
            target: r.get(5)?,
            class: r.get(6)?,
            routed_to: r.get(7)?,
            domain: r.get(8)?,
            question: r.get(9)?,
            options: r.get(10)?,
            recommendation: r.get(11)?,
            approval_choice: r.get(12)?,
            blocking: r.get::<_, i64>(13)? == 1,
            project: r.get(14)?,
            task_ref: r.get(15)?,
            requirement_ref: r.get(16)?,
            supersedes: r.get(17)?,
            target_holder: r.get(18)?,
            at: r.get(19)?,
            spec_path: r.get(20)?,
            spec_commit: r.get(21)?,
        })
    }
}

/// A `decision_events` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEventRow {
    pub seq: i64,
    pub decision: String,
    pub kind: String,
    pub by: String,
    pub run: Option<String>,
    pub choice: Option<String>,
    pub note: Option<String>,
    pub input: Option<String>,
    pub at: String,
}

/// The columns [`DecisionEventRow::read`] reads, in order.
pub const DECISION_EVENT_COLUMNS: &str = "seq, decision, kind, by, run, choice, note, input, at";

impl DecisionEventRow {
    pub(super) fn read(r: &Row<'_>) -> rusqlite::Result<DecisionEventRow> {
        Ok(DecisionEventRow {
            seq: r.get(0)?,
            decision: r.get(1)?,
            kind: r.get(2)?,
            by: r.get(3)?,
            run: r.get(4)?,
            choice: r.get(5)?,
            note: r.get(6)?,
            input: r.get(7)?,
            at: r.get(8)?,
        })
    }
}

/// An `events` row (every column but `business`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub seq: i64,
    pub id: String,
    pub kind: String,
    pub role: Option<String>,
    pub run: Option<String>,
    pub subject: Option<String>,
    /// The body as stored (JSON text).
    pub body: Option<String>,
    pub at: String,
}

/// The columns [`EventRow::read`] reads, in order.
pub const EVENT_COLUMNS: &str = "seq, id, kind, role, run, subject, body, at";

impl EventRow {
    pub(super) fn read(r: &Row<'_>) -> rusqlite::Result<EventRow> {
        Ok(EventRow {
            seq: r.get(0)?,
            id: r.get(1)?,
            kind: r.get(2)?,
            role: r.get(3)?,
            run: r.get(4)?,
            subject: r.get(5)?,
            body: r.get(6)?,
            at: r.get(7)?,
        })
    }
}

/// A `role_claims` row (or a thread claim standing in for one: `role` is
/// then the thread's instance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRow {
    pub seq: i64,
    pub role: String,
    pub run: String,
    pub op: String,
    pub decision: Option<String>,
    pub by: Option<String>,
    pub at: String,
}

/// The columns [`ClaimRow::read`] reads, in order.
pub const CLAIM_COLUMNS: &str = "seq, role, run, op, decision, by, at";

impl ClaimRow {
    pub(super) fn read(r: &Row<'_>) -> rusqlite::Result<ClaimRow> {
        Ok(ClaimRow {
            seq: r.get(0)?,
            role: r.get(1)?,
            run: r.get(2)?,
            op: r.get(3)?,
            decision: r.get(4)?,
            by: r.get(5)?,
            at: r.get(6)?,
        })
    }
}

/// A `task_snapshots` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSnapshotRow {
    pub seq: i64,
    pub task_ref: String,
    pub read_at: String,
    pub tombstone: bool,
    /// The fields as stored (JSON text; none for a tombstone).
    pub fields: Option<String>,
    pub at: String,
}

/// A `deliveries` or `read_receipts` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptRow {
    pub seq: i64,
    pub message: String,
    pub run: String,
    pub at: String,
}

/// One record `trail` may show, by the table it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrailRecord {
    Event(EventRow),
    Claim(ClaimRow),
    Task(TaskSnapshotRow),
    Decision(DecisionEntry),
    DecisionEvent(DecisionEventRow),
    Message(MessageRow),
    Delivery(ReceiptRow),
    Read(ReceiptRow),
}

/// An open decision a role raised that waits on the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputNeeded {
    pub id: String,
    pub question: String,
    pub class: String,
    pub blocking: bool,
    pub task_ref: Option<String>,
    pub at: String,
}

/// One thread as the launcher sees it (`threadsState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadState {
    pub thread: String,
    pub instance: String,
    pub pending: i64,
    pub unread: i64,
    pub last_message: Option<String>,
    pub last_open: Option<String>,
    pub last_claim: Option<String>,
    pub holder: Option<String>,
}

/// A held thread's latest claim (what `agents` lists for a thread instance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadClaimRow {
    pub seq: i64,
    pub thread: String,
    pub run: String,
    pub op: String,
    pub decision: Option<String>,
    pub by: Option<String>,
    pub at: String,
}
