//! Policy: pure functions over plain data (no socket, no database).

/// The action vocabulary lives in `config` (an authority map is checked against
/// it when the config loads); re-exported where the rules have always found it.
pub use crate::config::actions;
pub mod authority;
pub mod landing;
pub mod routing;
pub mod threads;
pub mod usage;
