//! The refusal codes. `Code` is defined in the std-only wire crate
//! (`mosaic-wire`, `broker/wire/src/code.rs`) so the client, the shims and
//! the proof helper share the one list; it is re-exported here so the
//! broker's call sites keep saying `crate::error::Code`.

pub use mosaic_wire::code::*;
