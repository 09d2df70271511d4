//! Every schema version a store may be at, oldest first, each pinned: the
//! schema text it was made from (a fixture under `fixtures/`, never edited
//! once released), that text's SHA-256 and the digest of the
//! `sqlite_master` it produces. The newest is the one the broker runs.

use mosaic_bus::store::schema::Pin;

/// The lineage. A new version appends a pin here and a step in
/// [`crate::steps::STEPS`] from the one before it.
pub const VERSIONS: &[Pin<'static>] = &[Pin {
    version: "3b",
    sql: include_str!("../fixtures/schema-3b.sql"),
    sha256: "6c5f5f1f8cd72aa447b7839a3bf69bf1108cdbaa55245426e328b32918e3e059",
    master: "5d53bc58870af536406d5a7f6a718cf6d649e3fde5b9ca59671e11201a8c75f6",
}];
