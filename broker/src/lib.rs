//! Mosaic bus: the single-writer broker, its store, its socket and its client.
//!
//! Start at `docs/architecture.md` for the map. In short:
//! [`config`] validates what the host hands over; [`store`] owns the SQLite
//! file; [`policy`] is pure rules; [`verbs`] are the socket verbs, one module
//! per family; [`server`] is framing, envelope and dispatch; [`host`] is the
//! trusted host's channel; [`runtime`] ties them together; [`client`] and
//! [`views`] are what other programs link against.

pub mod authorize;
pub mod client;
pub mod config;
pub mod core;
pub mod credentials;
pub mod error;
pub mod hardening;
pub mod host;
pub mod ids;
pub mod ops;
pub mod policy;
pub mod proof;
pub mod runtime;
pub mod server;
pub mod store;
pub mod tokens;
pub mod verbs;
pub mod views;
pub mod writer;

pub use client::{BusError, Client};
pub use config::BootConfig;
pub use error::Code;
pub use runtime::{start_broker, Runtime};
