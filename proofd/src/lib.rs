//! `mosaic-proofd`: process-proof helper and the lease broker `mosaic-leased`.
//!
//! - [`procfs`], [`limits`]: re-exported from `mosaic-os` (`proofd/os/`),
//!   the OS layer the broker and the shims link too.
//! - [`json`]: JSON requests that refuse duplicate keys at any depth.
//! - [`fdstore`]: handing the helper to systemd's fd store (user units).
//! - [`leased`]: the lease broker of `lease-broker-protocol.txt`.

pub mod fdstore;
pub mod json;
pub mod leased;
pub use mosaic_os::{limits, procfs};
pub mod proof;
