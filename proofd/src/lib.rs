//! `mosaic-proofd`: process-proof helper and the lease broker `mosaic-leased`.
//!
//! - [`procfs`]: the bounded `/proc` layer (pure parsers + thin readers, pidfd).
//! - [`leased`]: the lease broker of `lease-broker-protocol.txt`.

pub mod leased;
pub mod procfs;
pub mod proof;
