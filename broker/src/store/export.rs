//! The rows `mosaic-bus export` prints: evidence rows of several tables
//! read side by side in `seq` order and merged into commit order.
//!
//! The broker's clock gives every row it writes an `at` later than any
//! before it, across all tables, so within one read the rows ordered by
//! `at` are in the order they were written; a table is read in `seq`
//! order, which is its `at` order (the timestamp triggers). The one table
//! without a timestamp (`task_comment_cursors`) comes after the rows with
//! one in the same read.

use super::Db;
use crate::error::Code;
use rusqlite::params;
use rusqlite::types::ValueRef;
use serde_json::{Map, Value};
use std::rc::Rc;

/// One row, its columns as JSON values.
#[derive(Debug, Clone)]
pub struct Row {
    pub table: &'static str,
    pub seq: i64,
    /// Its `at`, for the order (`None` for a table without one).
    pub at: Option<String>,
    names: Rc<[String]>,
    values: Vec<Value>,
}

impl Row {
    /// The row as a JSON object, column by column.
    pub fn to_object(&self) -> Map<String, Value> {
        self.names
            .iter()
            .cloned()
            .zip(self.values.iter().cloned())
            .collect()
    }

    /// The order of the merge: by `at` (none last), then table, then `seq`.
    fn before(&self, other: &Row) -> bool {
        match (&self.at, &other.at) {
            (Some(a), Some(b)) if a != b => a < b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            _ => (self.table, self.seq) < (other.table, other.seq),
        }
    }
}

fn unreadable(e: rusqlite::Error) -> Code {
    tracing::debug!(error = %e, "export read failed");
    Code::StoreUnreadable
}

/// A column's value as JSON: integers and reals as numbers, text as a
/// string, a blob as `{"blob": HEX}`, NULL as null.
fn json_value(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => {
            let mut m = Map::new();
            m.insert("blob".into(), Value::String(super::canonical::hex_bytes(b)));
            Value::Object(m)
        }
    }
}

/// Calls `f` with every row of the `(table, lo, hi)` ranges (`seq` from
/// `lo` to `hi`, both included) in commit order; `f` answers false to stop.
/// Returns how many rows it was given.
pub fn each_in_order(
    store: &Db,
    ranges: &[(&'static str, i64, i64)],
    f: &mut dyn FnMut(Row) -> bool,
) -> Result<u64, Code> {
    let mut stmts = Vec::with_capacity(ranges.len());
    for (t, _, _) in ranges {
        stmts.push(
            store
                .prepare_cached(&super::seals::rows_sql(t))
                .map_err(unreadable)?,
        );
    }
    let names: Vec<Rc<[String]>> = stmts
        .iter()
        .map(|s| s.column_names().iter().map(|n| n.to_string()).collect())
        .collect();
    let mut cursors = Vec::with_capacity(ranges.len());
    for (st, (_, lo, hi)) in stmts.iter_mut().zip(ranges) {
        cursors.push(st.query(params![lo, hi]).map_err(unreadable)?);
    }
    let read = |i: usize, r: &rusqlite::Row<'_>| -> Result<Row, Code> {
        let cols = &names[i];
        let mut values = Vec::with_capacity(cols.len());
        let mut seq = 0;
        let mut at = None;
        for (j, name) in cols.iter().enumerate() {
            let v = r.get_ref(j).map_err(unreadable)?;
            if name == "seq" {
                if let ValueRef::Integer(s) = v {
                    seq = s;
                }
            } else if name == "at" {
                if let ValueRef::Text(t) = v {
                    at = Some(String::from_utf8_lossy(t).into_owned());
                }
            }
            values.push(json_value(v));
        }
        Ok(Row {
            table: ranges[i].0,
            seq,
            at,
            names: cols.clone(),
            values,
        })
    };
    let mut heads: Vec<Option<Row>> = Vec::with_capacity(cursors.len());
    for (i, c) in cursors.iter_mut().enumerate() {
        heads.push(match c.next().map_err(unreadable)? {
            Some(r) => Some(read(i, r)?),
            None => None,
        });
    }
    let mut n = 0u64;
    loop {
        let mut pick: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            if let Some(r) = h {
                if pick.is_none_or(|p| heads[p].as_ref().is_some_and(|q| r.before(q))) {
                    pick = Some(i);
                }
            }
        }
        let Some(i) = pick else {
            return Ok(n);
        };
        let next = match cursors[i].next().map_err(unreadable)? {
            Some(r) => Some(read(i, r)?),
            None => None,
        };
        let Some(row) = std::mem::replace(&mut heads[i], next) else {
            return Ok(n);
        };
        n += 1;
        if !f(row) {
            return Ok(n);
        }
    }
}
