//! The host channel: newline-delimited JSON with the trusted host, over an
//! inherited socketpair fd (`--host-fd`) or a private control socket
//! (`--control`). The first message boots; later ones are host ops.

pub mod bootlog;
pub mod channel;
pub mod control;
pub mod notify;
pub mod ops;
