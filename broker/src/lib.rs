//! Mosaic bus: the single-writer broker, its store, its socket and its client.
//!
//! Start at `docs/architecture.md` for the map. In short:
//! [`config`] validates what the host hands over; [`store`] owns the SQLite
//! file; [`policy`] is pure rules; [`handlers`] is the one request model
//! (the table of every socket verb and host op, their handlers, the one
//! dispatch); [`server`] is framing, envelope and the staged path; [`host`] is the
//! trusted host's channel; [`runtime`] ties them together; [`client`] and
//! [`views`] are what other programs link against.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod authorize;
pub mod budget;
/// The client and its read views live in `mosaic-client` (no SQLite, no
/// tokio) for the programs that only talk to the bus; re-exported here.
pub use mosaic_client as client;
pub use mosaic_client::views;
pub mod config;
pub mod core;
pub mod credentials;
pub mod environ;
pub mod error;
/// Process hardening lives in the OS crate (`mosaic-os`), shared with the
/// proof helper and the shims.
pub use mosaic_os::hardening;
pub mod handlers;
pub mod host;
pub mod ids;

pub mod git;
pub mod orgfile;
pub mod policy;
pub mod proof;
pub mod runtime;
pub mod sealer;
pub mod server;
pub mod store;
pub mod time;
pub mod tokens;
pub mod tools;
pub mod transcripts;

pub mod writer;

pub use client::{BusError, Client};
pub use config::BootConfig;
pub use error::Code;
pub use runtime::{start_broker, Runtime};
