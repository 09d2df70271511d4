//! Mosaic bus: the single-writer broker, its store, its socket and its client.
//!
//! Start at `docs/architecture.md` for the map. In short:
//! [`config`] validates what the host hands over; [`store`] owns the SQLite
//! file; [`policy`] is pure rules; [`verbs`] are the socket verbs, one module
//! per family; [`server`] is framing, envelope and dispatch; [`host`] is the
//! trusted host's channel; [`runtime`] ties them together; [`client`] and
//! [`views`] are what other programs link against.

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
/// The refusal codes. `Code` is defined in the std-only wire crate
/// (`mosaic-wire`, `broker/wire/src/code.rs`) so the client, the shims and
/// the proof helper share the one list; it is re-exported here so the
/// broker's call sites keep saying `crate::error::Code`.
pub mod error {
    pub use mosaic_wire::code::*;
}
/// Process hardening lives in the OS crate (`mosaic-os`), shared with the
/// proof helper and the shims.
pub use mosaic_os::hardening;
pub mod host;
pub mod ids;
pub mod ops;
pub mod organization;
pub mod policy;
pub mod project;
pub mod proof;
pub mod runtime;
pub mod sealer;
pub mod server;
pub mod store;
pub mod tokens;
pub mod tools;
pub mod usage;
pub mod verbs;
pub mod writer;

pub use client::{BusError, Client};
pub use config::BootConfig;
pub use error::Code;
pub use runtime::{start_broker, Runtime};
