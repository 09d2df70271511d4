//! `mosaic-proofd`: the process-proof helper and the broker's client for it.
//!
//! - [`proof`]: the checks, the helper's line protocol, its `/proc` table
//!   and the broker's side (spawn or adopt).
//! - [`fdstore`]: handing the helper to systemd's fd store (user units).
//! - [`procfs`], [`limits`]: re-exported from `mosaic-os` (`proofd/os/`),
//!   the OS layer the broker, the lease broker and the shims link too.
//!
//! The lease broker is its own crate, `mosaic-leased` (`proofd/leased/`).

#![deny(unsafe_op_in_unsafe_fn)]

pub mod fdstore;
pub mod proof;
pub use mosaic_os::{limits, procfs};
