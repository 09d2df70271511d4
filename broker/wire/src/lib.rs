//! The Mosaic bus's wire vocabulary, shared by everything that speaks to the
//! bus or hears from it: the broker, the client, the shims, the proof helper
//! and the lease broker.
//!
//! - [`code`]: every refusal as a static kebab-case string ([`Code`]).
//! - [`limits`]: frame and reply caps and the deadlines around them.
//! - [`int`]: the JSON safe-integer range (ids echoed, start times,
//!   generations).
//! - [`env`]: the environment variables a shim's proof and a run's
//!   capability travel in.
//! - [`cli`]: the command-line conventions of every binary (`--help`,
//!   `--version`, the unknown-option line).
//!
//! Plain `std` and no dependency, so a statically linked shim can link it
//! without pulling anything else in.

pub mod cli;
pub mod code;
pub mod env;
pub mod int;
pub mod limits;

pub use code::Code;
