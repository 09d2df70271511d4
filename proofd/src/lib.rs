//! `mosaic-proofd`: process-proof helper and the lease broker `mosaic-leased`.
//!
//! - [`procfs`]: the bounded `/proc` layer (pure parsers + thin readers, pidfd).
//! - [`json`]: JSON requests that refuse duplicate keys at any depth.
//! - [`fdstore`]: handing the helper to systemd's fd store (user units).
//! - [`leased`]: the lease broker of `lease-broker-protocol.txt`.
//! - [`limits`]: `RLIMIT_NOFILE` and the connection caps sized from it.

pub mod fdstore;
pub mod json;
pub mod leased;
pub mod limits;
pub mod procfs;
pub mod proof;
