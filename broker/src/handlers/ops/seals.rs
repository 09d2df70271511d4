//! `seals {after?}`: the seals after `after` (from the first without it),
//! oldest first, `{seq, at, prev, root, upto}` each, at most [`PAGE`] per
//! answer; the host pages on with the last `seq` it got. Read from the
//! seals file off the writer thread (the runtime answers it before the op
//! would be queued): it is how anchors leave the data root.

use crate::core::Core;
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{Op, Outside};
use crate::store::seals::SealsReader;
use serde_json::Value;
use std::path::Path;

/// Most seals one answer lists.
pub const PAGE: i64 = 1000;

pub struct Seals {
    pub after: Option<i64>,
}

impl Seals {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let after = match f.take("after") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .filter(|n| *n >= 0 && mosaic_wire::int::is_safe_i64(*n))
                    .ok_or(Code::InvalidRequest)?,
            ),
        };
        f.finish()?;
        Ok(Seals { after })
    }

    /// The answer from the seals file at `path`.
    pub fn answer(&self, path: &Path) -> Result<Value, Code> {
        let reader = SealsReader::open(path).map_err(|_| Code::StorageUnavailable)?;
        self.from(&reader)
    }

    /// The answer from an open seals file (on the writer thread only when
    /// a core is driven without a runtime).
    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        let reader = core.seals.as_ref().ok_or(Code::StorageUnavailable)?;
        self.from(reader)
    }

    fn from(&self, reader: &SealsReader) -> Result<Value, Code> {
        let list = reader
            .after(self.after.unwrap_or(0), PAGE)
            .map_err(|_| Code::StorageUnavailable)?;
        Ok(Value::Array(
            list.iter().map(crate::handlers::views::seal).collect(),
        ))
    }
}

impl Op for Seals {
    const NAME: &'static str = "seals";

    fn parse(f: Fields) -> Result<Self, Code> {
        Seals::parse(f)
    }

    /// Answered from the seals file, never on the writer.
    fn observe(&mut self, outside: &Outside<'_>) -> Option<Result<Value, Code>> {
        Some(self.answer(outside.seals))
    }

    fn apply(self, core: &mut Core) -> Result<Value, Code> {
        Seals::apply(self, core)
    }
}
