//! Policy: pure functions over plain data (no socket, no database).

pub mod actions;
pub mod authority;
pub mod landing;
pub mod routing;
pub mod threads;
pub mod usage;
