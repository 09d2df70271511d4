//! Environment variables that carry a caller's identity: the nonce a shim
//! puts in its own environment for the proof helper to find, and the
//! capability the host hands a managed run.

/// The human shim's nonce variable (`mosaic-human-cli`).
pub const HUMAN_NONCE_VAR: &str = "MOSAIC_BUS_HUMAN_NONCE";
/// The tester shim's nonce variable (`mosaic-tester-cli`).
pub const TESTER_NONCE_VAR: &str = "MOSAIC_BUS_TESTER_NONCE";
/// Every shim nonce variable: a shim removes them all before it adds its
/// own fresh one.
pub const NONCE_VARS: &[&str] = &[HUMAN_NONCE_VAR, TESTER_NONCE_VAR];
/// Where the host puts a managed run's capability.
pub const CAP_VAR: &str = "MOSAIC_BUS_CAP";
