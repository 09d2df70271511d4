//! Decision evidence: the writers and readers of `decisions` and
//! `decision_events`, a decision close's DECISION message and the launch
//! toggles' state. It decides nothing: the authority check that reads these
//! rows is `crate::authorize`, on the writer side.
//!
//! The close message is a plain INSERT into `messages` here, in the close's
//! own transaction (the messages store writers belong to the messages verbs;
//! this is the one other writer of that table, see docs/decisions.md).

use super::evidence::Written;
use super::rows::{
    DecisionEntry, DecisionEventRow, DECISION_COLUMNS, DECISION_COLUMN_COUNT,
    DECISION_EVENT_COLUMNS,
};
use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use crate::ids;
use crate::policy::routing::Class;
use rusqlite::{params, OptionalExtension};

fn sql(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// One `decision_state` row: the decision as the lists read it, and what
/// the state view adds (its business, how it closed, its choice, whether it
/// was spent).
#[derive(Debug, Clone)]
pub struct DecisionRow {
    pub entry: DecisionEntry,
    pub business: String,
    /// `resolved` or `withdrawn` once closed.
    pub closed_kind: Option<String>,
    /// The resolved option.
    pub choice: Option<String>,
    pub consumed: bool,
}

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DecisionRow> {
    let n = DECISION_COLUMN_COUNT;
    Ok(DecisionRow {
        entry: DecisionEntry::read(r)?,
        business: r.get(n)?,
        closed_kind: r.get(n + 1)?,
        choice: r.get(n + 2)?,
        consumed: r.get::<_, i64>(n + 3)? != 0,
    })
}

/// The columns [`from_row`] reads (alias `d`, over `decision_state`).
fn state_columns() -> String {
    format!("{DECISION_COLUMNS}, d.business, d.closed_kind, d.choice, d.consumed")
}

impl DecisionRow {
    pub fn is_open(&self) -> bool {
        self.closed_kind.is_none()
    }
}

/// The decision `id` of `business`, if any.
pub fn load(conn: &Db, business: &str, id: &str) -> Result<Option<DecisionRow>, Code> {
    conn.query_row(
        &format!(
            "SELECT {} FROM decision_state d WHERE d.id = ?1 AND d.business = ?2",
            state_columns()
        ),
        params![id, business],
        from_row,
    )
    .optional()
    .map_err(sql)
}

/// The `decision_state` rows matching `filter` (a WHERE clause over its
/// columns, with `?1`… bound to `params`), oldest first.
pub(crate) fn select_where(
    conn: &Db,
    filter: &str,
    params: &[&str],
) -> Result<Vec<DecisionRow>, Code> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {} FROM decision_state d WHERE {filter} ORDER BY d.seq",
            state_columns()
        ))
        .map_err(sql)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(params.iter()), from_row)
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// A decision to store.
#[derive(Debug, Clone)]
pub struct NewDecision<'a> {
    pub business: &'a str,
    pub raised_by_role: &'a str,
    pub raised_by_run: &'a str,
    pub action: &'a str,
    pub target: Option<&'a str>,
    pub class: Class,
    pub routed_to: &'a str,
    pub domain: Option<&'a str>,
    pub question: &'a str,
    /// The options array, serialized.
    pub options: &'a str,
    pub recommendation: &'a str,
    pub approval_choice: &'a str,
    pub blocking: bool,
    pub project: Option<&'a str>,
    pub task_ref: Option<&'a str>,
    pub requirement_ref: Option<&'a str>,
    pub supersedes: Option<&'a str>,
    pub target_holder: Option<&'a str>,
    pub spec_path: Option<&'a str>,
    pub spec_commit: Option<&'a str>,
}

pub fn insert_decision(t: &mut Tx<'_>, d: &NewDecision<'_>) -> Result<Written, Code> {
    t.tokens.check_all(&[
        Some(d.raised_by_role),
        Some(d.raised_by_run),
        Some(d.action),
        d.target,
        Some(d.routed_to),
        d.domain,
        Some(d.question),
        Some(d.options),
        Some(d.recommendation),
        Some(d.approval_choice),
        d.project,
        d.task_ref,
        d.requirement_ref,
        d.supersedes,
        d.target_holder,
        d.spec_path,
        d.spec_commit,
    ])?;
    let id = ids::uuid();
    let at = t.now();
    t.tx.execute(
        "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action, target,
           class, routed_to, domain, question, options, recommendation, approval_choice,
           blocking, project, task_ref, requirement_ref, supersedes, target_holder, at,
           spec_path, spec_commit)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
           ?18, ?19, ?20, ?21, ?22)",
        params![
            id,
            d.business,
            d.raised_by_role,
            d.raised_by_run,
            d.action,
            d.target,
            d.class.as_str(),
            d.routed_to,
            d.domain,
            d.question,
            d.options,
            d.recommendation,
            d.approval_choice,
            i64::from(d.blocking),
            d.project,
            d.task_ref,
            d.requirement_ref,
            d.supersedes,
            d.target_holder,
            at,
            d.spec_path,
            d.spec_commit
        ],
    )
    .map_err(sql)?;
    Ok(Written { id, at })
}

/// A `decision_events` row; `Written.id` is its `seq`.
#[allow(clippy::too_many_arguments)]
pub fn insert_decision_event(
    t: &mut Tx<'_>,
    decision: &str,
    kind: &str,
    by: &str,
    run: Option<&str>,
    choice: Option<&str>,
    note: Option<&str>,
    input: Option<&str>,
) -> Result<Written, Code> {
    t.tokens.check_all(&[
        Some(decision),
        Some(kind),
        Some(by),
        run,
        choice,
        note,
        input,
    ])?;
    let at = t.now();
    t.tx.execute(
        "INSERT INTO decision_events(decision, kind, by, run, choice, note, input, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![decision, kind, by, run, choice, note, input, at],
    )
    .map_err(sql)?;
    Ok(Written {
        id: t.tx.last_insert_rowid().to_string(),
        at,
    })
}

/// The body of a close message, exactly as "Decision close messages" gives it.
pub fn close_body(
    d: &DecisionRow,
    by: &str,
    resolved: Option<(&str, &str)>,
    note: Option<&str>,
) -> String {
    let mut s = match resolved {
        Some((choice, text)) => format!(
            "Decision {} on {} was resolved by {by}: {choice} ({text}).",
            d.entry.id, d.entry.action
        ),
        None => format!(
            "Decision {} on {} was withdrawn by {by}.",
            d.entry.id, d.entry.action
        ),
    };
    if let Some(n) = note {
        s.push_str("\nNote: ");
        s.push_str(n);
    }
    s
}

/// The closing `decision_events` row of a decision, if it is closed.
pub fn closing_event(conn: &Db, decision: &str) -> Result<Option<DecisionEventRow>, Code> {
    conn.query_row(
        &format!(
            "SELECT {DECISION_EVENT_COLUMNS} FROM decision_events
             WHERE decision = ?1 AND kind IN ('resolved', 'withdrawn')"
        ),
        [decision],
        DecisionEventRow::read,
    )
    .optional()
    .map_err(sql)
}

/// The business's latest launch toggle: `(kind, event id, at)`.
pub fn launch_latest(conn: &Db, business: &str) -> Result<Option<(String, String, String)>, Code> {
    conn.prepare_cached(concat!(
        "SELECT kind, id, at FROM events WHERE business = ?1
         AND kind IN ('launch.revoked', 'launch.restored') AND ",
        crate::store::not_a_send!(),
        " ORDER BY seq DESC LIMIT 1"
    ))
    .and_then(|mut s| {
        s.query_row([business], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
    })
    .map_err(sql)
}
