//! Instance names (schema 3g, 3i row 141): the append-only
//! `instance_names`, whose latest row per instance is that instance's name.

use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use rusqlite::{params, OptionalExtension};

/// One instance's current name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub instance: String,
    pub name: String,
    pub at: String,
}

/// Names `instance` (again: its latest row is its name). The store's
/// `instance_names_taken` refuses a name another instance holds now.
pub fn insert_name(
    t: &mut Tx<'_>,
    business: &str,
    instance: &str,
    name: &str,
    by_role: &str,
    by_run: &str,
) -> Result<String, Code> {
    t.tokens
        .check_all(&[Some(instance), Some(name), Some(by_role), Some(by_run)])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO instance_names(business, instance, name, by_role, by_run, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![business, instance, name, by_role, by_run, at]))
    .map_err(|e| map_sql_error(&e))?;
    Ok(at)
}

/// Every instance's current name in the business, by instance key.
pub fn current(conn: &Db, business: &str) -> Result<Vec<Name>, Code> {
    let mut st = conn
        .prepare_cached(
            "SELECT n.instance, n.name, n.at FROM instance_names n
             WHERE n.business = ?1 AND n.seq = (SELECT max(seq) FROM instance_names
               WHERE business = n.business AND instance = n.instance)
             ORDER BY n.instance",
        )
        .map_err(|e| map_sql_error(&e))?;
    let rows = st
        .query_map([business], |r| {
            Ok(Name {
                instance: r.get(0)?,
                name: r.get(1)?,
                at: r.get(2)?,
            })
        })
        .map_err(|e| map_sql_error(&e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| map_sql_error(&e))
}

/// The instance that holds `name` now, if any.
pub fn holder(conn: &Db, business: &str, name: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT n.instance FROM instance_names n
         WHERE n.business = ?1 AND n.name = ?2 AND n.seq = (SELECT max(seq) FROM instance_names
           WHERE business = n.business AND instance = n.instance)",
    )
    .and_then(|mut s| s.query_row([business, name], |r| r.get(0)).optional())
    .map_err(|e| map_sql_error(&e))
}
