//! Migration steps, one module per step, named `<from>_to_<to>`.
//!
//! A step gets the store inside the transaction the runner opened, with the
//! `meta` update guard lifted; it adds its DDL (and any rows its version
//! needs) and returns the lines it wants printed. The runner then writes the
//! new version and digest into `meta`, restores the guard and checks the
//! result against the next version's pin before it commits.

use rusqlite::Connection;

/// One step from a version to the next.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub from: &'static str,
    pub to: &'static str,
    pub name: &'static str,
    pub apply: fn(&Connection) -> rusqlite::Result<Vec<String>>,
}

/// Every step, in lineage order. The broker runs the first version of the
/// lineage (3b), so there is none yet.
pub const STEPS: &[Step] = &[];
