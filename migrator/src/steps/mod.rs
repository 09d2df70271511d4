//! Migration steps, one module per step, named `s<from>_to_<to>`, each with
//! its statements in a `.sql` file beside it (the broker's `schema.sql` ends
//! with the same statements, so a new store and a migrated one match).
//!
//! A step gets the store inside the transaction the runner opened, with the
//! `meta` update guard lifted; it adds its DDL (and any rows its version
//! needs) and returns the lines it wants printed. The runner then writes the
//! new version and digest into `meta`, restores the guard and checks the
//! result against the next version's pin before it commits.

mod s3b_to_3c;
mod s3c_to_3d;
mod s3d_to_3e;
mod s3e_to_3f;
mod s3f_to_3g;
mod s3g_to_3h;
mod s3h_to_3i;

use rusqlite::Connection;

/// One step from a version to the next.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub from: &'static str,
    pub to: &'static str,
    pub name: &'static str,
    pub apply: fn(&Connection) -> rusqlite::Result<Vec<String>>,
}

/// Every step, in lineage order.
pub const STEPS: &[Step] = &[
    Step {
        from: "3b",
        to: "3c",
        name: "3b-to-3c",
        apply: s3b_to_3c::apply,
    },
    Step {
        from: "3c",
        to: "3d",
        name: "3c-to-3d",
        apply: s3c_to_3d::apply,
    },
    Step {
        from: "3d",
        to: "3e",
        name: "3d-to-3e",
        apply: s3d_to_3e::apply,
    },
    Step {
        from: "3e",
        to: "3f",
        name: "3e-to-3f",
        apply: s3e_to_3f::apply,
    },
    Step {
        from: "3f",
        to: "3g",
        name: "3f-to-3g",
        apply: s3f_to_3g::apply,
    },
    Step {
        from: "3g",
        to: "3h",
        name: "3g-to-3h",
        apply: s3g_to_3h::apply,
    },
    Step {
        from: "3h",
        to: "3i",
        name: "3h-to-3i",
        apply: s3h_to_3i::apply,
    },
];
