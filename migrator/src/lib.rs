//! `mosaic-migrate`: the offline schema migration of a stopped bus's store.
//!
//! It takes the broker's own writer lock (so no broker runs on the store
//! meanwhile), checks the store at the version it says it is at exactly as
//! the broker checks its own at open (pinned source and `sqlite_master`
//! digests, WAL, `quick_check`, foreign keys, every row's timestamp), then
//! runs the named steps from that version to the newest one in
//! [`lineage::VERSIONS`], each as one transaction that ends by proving the
//! store now matches the next version's pin. A store already at the newest
//! version is checked and left alone. It never creates a store.
//!
//! Layout: [`lineage`] pins every version (its schema text lives under
//! `fixtures/`), [`steps`] holds one module per step, [`runner`] does the
//! checks and the transactions, `main.rs` is the command line.

pub mod lineage;
pub mod runner;
pub mod steps;

pub use runner::{migrate, migrate_with_backup, BackupPlan, Report};
