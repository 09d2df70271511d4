//! The operating-system layer every Mosaic process shares, one home per
//! concern:
//!
//! - [`procfs`]: the bounded `/proc` readers and their pure parsers, a
//!   socket peer's identity (`SO_PEERCRED`) and pidfds (`pidfd_open`,
//!   `SO_PEERPIDFD`).
//! - [`notify`]: `sd_notify` (readiness, status, `FDSTORE=1` with the
//!   descriptors attached, `BARRIER=1`).
//! - [`hardening`]: no new privileges, empty capability sets, not
//!   dumpable, die with the parent.
//! - [`limits`]: `RLIMIT_NOFILE` and the connection caps sized from it.
//! - [`pause`]: debug builds only, the named points where a test holds a
//!   race window open (compiled to nothing in a release build).
//!
//! System calls go through `nix`, capability sets through `caps`; the few
//! raw calls left are the ones neither covers, each with its `SAFETY` line.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod hardening;
pub mod limits;
pub mod notify;
pub mod pause;
pub mod procfs;
