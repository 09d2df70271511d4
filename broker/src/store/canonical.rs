//! The canonical byte form of an evidence row, which seals hash
//! (`docs/seals.md` is the definition; this is the one implementation).
//!
//! A row is its table's name, its `seq`, and its other columns as
//! `(name, value)` pairs in ascending byte order of the name, NULLs left
//! out. It depends on column names and stored values only: not on column
//! order, indexes, `AUTOINCREMENT` or page layout, so a table rebuilt with
//! the same rows, or a column added as nullable without a default, keeps
//! every old row's bytes.
//!
//! ```text
//! row   = u32be(len table) table  i64be(seq)  u32be(n)  field{n}
//! field = u32be(len name) name  value
//! value = 0x01 i64be(integer)
//!       | 0x02 u64be(IEEE-754 bits of a real)
//!       | 0x03 u32be(len) utf-8 bytes (text)
//!       | 0x04 u32be(len) bytes (blob)
//! ```

use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

/// The tag byte of each storage class.
pub const TAG_INTEGER: u8 = 0x01;
pub const TAG_REAL: u8 = 0x02;
pub const TAG_TEXT: u8 = 0x03;
pub const TAG_BLOB: u8 = 0x04;

/// A SHA-256 digest.
pub type Digest32 = [u8; 32];

/// The `prev` of the first seal.
pub const ZERO: Digest32 = [0u8; 32];

fn put_len(out: &mut Vec<u8>, n: usize) {
    // A SQLite value is at most 2^31 - 1 bytes (SQLITE_MAX_LENGTH's ceiling).
    out.extend_from_slice(&(n as u32).to_be_bytes());
}

/// Appends one value's bytes (a NULL is never encoded: its field is left out).
pub fn put_value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => {}
        ValueRef::Integer(i) => {
            out.push(TAG_INTEGER);
            out.extend_from_slice(&i.to_be_bytes());
        }
        ValueRef::Real(f) => {
            out.push(TAG_REAL);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        ValueRef::Text(b) => {
            out.push(TAG_TEXT);
            put_len(out, b.len());
            out.extend_from_slice(b);
        }
        ValueRef::Blob(b) => {
            out.push(TAG_BLOB);
            put_len(out, b.len());
            out.extend_from_slice(b);
        }
    }
}

/// How to encode the rows of one table as `SELECT *` returns them: the
/// header prefix and, for every column but `seq`, its index and its
/// encoded name, in ascending byte order of the name.
#[derive(Debug, Clone)]
pub struct RowForm {
    prefix: Vec<u8>,
    seq_index: usize,
    fields: Vec<(usize, Vec<u8>)>,
}

impl RowForm {
    /// The form for `table` whose query returns `columns` in this order;
    /// `None` when no column is named `seq`.
    pub fn new(table: &str, columns: &[&str]) -> Option<RowForm> {
        let seq_index = columns.iter().position(|c| *c == "seq")?;
        let mut prefix = Vec::with_capacity(4 + table.len());
        put_len(&mut prefix, table.len());
        prefix.extend_from_slice(table.as_bytes());
        let mut fields: Vec<(usize, Vec<u8>)> = columns
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != seq_index)
            .map(|(i, name)| {
                let mut enc = Vec::with_capacity(4 + name.len());
                put_len(&mut enc, name.len());
                enc.extend_from_slice(name.as_bytes());
                (i, enc)
            })
            .collect();
        fields.sort_by(|a, b| a.1[4..].cmp(&b.1[4..]));
        Some(RowForm {
            prefix,
            seq_index,
            fields,
        })
    }

    /// The index of `seq` in the query's columns.
    pub fn seq_index(&self) -> usize {
        self.seq_index
    }

    /// Appends one row's canonical bytes; `value(i)` is column `i`.
    pub fn encode<'a>(
        &self,
        seq: i64,
        mut value: impl FnMut(usize) -> rusqlite::Result<ValueRef<'a>>,
        out: &mut Vec<u8>,
    ) -> rusqlite::Result<()> {
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(&seq.to_be_bytes());
        let count_at = out.len();
        out.extend_from_slice(&[0u8; 4]);
        let mut n: u32 = 0;
        for (i, name) in &self.fields {
            let v = value(*i)?;
            if matches!(v, ValueRef::Null) {
                continue;
            }
            out.extend_from_slice(name);
            put_value(out, v);
            n += 1;
        }
        out[count_at..count_at + 4].copy_from_slice(&n.to_be_bytes());
        Ok(())
    }
}

/// Feeds row bytes to SHA-256 in large pieces: rows are encoded into one
/// buffer, and the buffer is hashed whenever it passes 64 KiB.
pub struct Hasher {
    sha: Sha256,
    buf: Vec<u8>,
}

const FLUSH_AT: usize = 64 * 1024;

impl Hasher {
    /// A hasher that starts with `prev` (a seal's root), or with nothing.
    pub fn new(prev: Option<&Digest32>) -> Hasher {
        let mut sha = Sha256::new();
        if let Some(p) = prev {
            sha.update(p);
        }
        Hasher {
            sha,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
        }
    }

    /// The buffer to append the next row's bytes to.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Appends bytes already encoded elsewhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.row_done();
    }

    /// Hashes the buffer if it is big enough (call after each row).
    pub fn row_done(&mut self) {
        if self.buf.len() >= FLUSH_AT {
            self.sha.update(&self.buf);
            self.buf.clear();
        }
    }

    pub fn finish(mut self) -> Digest32 {
        self.sha.update(&self.buf);
        self.sha.finalize().into()
    }
}

/// Lowercase hex of a digest.
pub fn hex(d: &Digest32) -> String {
    hex_bytes(d)
}

/// Lowercase hex of any bytes.
pub fn hex_bytes(d: &[u8]) -> String {
    let mut s = String::with_capacity(2 * d.len());
    for b in d {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    s
}

/// A digest from 64 lowercase hex digits; `None` for anything else.
pub fn from_hex(s: &str) -> Option<Digest32> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut d = [0u8; 32];
    for (i, out) in d.iter_mut().enumerate() {
        *out = (nibble(b[2 * i])? << 4) | nibble(b[2 * i + 1])?;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_storage_class_and_null() {
        let form = RowForm::new("t", &["seq", "b", "a", "z", "r", "n"]).unwrap();
        let vals = [
            ValueRef::Integer(7),
            ValueRef::Text(b"hi"),
            ValueRef::Integer(-1),
            ValueRef::Blob(&[0xff]),
            ValueRef::Real(1.5),
            ValueRef::Null,
        ];
        let mut out = Vec::new();
        form.encode(7, |i| Ok(vals[i]), &mut out).unwrap();
        let mut want = vec![0, 0, 0, 1, b't'];
        want.extend_from_slice(&7i64.to_be_bytes());
        want.extend_from_slice(&4u32.to_be_bytes());
        // a = -1
        want.extend_from_slice(&[0, 0, 0, 1, b'a', TAG_INTEGER]);
        want.extend_from_slice(&(-1i64).to_be_bytes());
        // b = "hi"
        want.extend_from_slice(&[0, 0, 0, 1, b'b', TAG_TEXT, 0, 0, 0, 2, b'h', b'i']);
        // r = 1.5
        want.extend_from_slice(&[0, 0, 0, 1, b'r', TAG_REAL]);
        want.extend_from_slice(&1.5f64.to_bits().to_be_bytes());
        // z = x'ff'; n is NULL and left out
        want.extend_from_slice(&[0, 0, 0, 1, b'z', TAG_BLOB, 0, 0, 0, 1, 0xff]);
        assert_eq!(out, want);
    }

    #[test]
    fn column_order_does_not_matter_and_null_columns_are_absent() {
        let a = RowForm::new("t", &["seq", "x", "y"]).unwrap();
        let b = RowForm::new("t", &["y", "x", "seq", "added"]).unwrap();
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        let va = [ValueRef::Integer(1), ValueRef::Text(b"x"), ValueRef::Null];
        let vb = [
            ValueRef::Null,
            ValueRef::Text(b"x"),
            ValueRef::Integer(1),
            ValueRef::Null,
        ];
        a.encode(1, |i| Ok(va[i]), &mut ra).unwrap();
        b.encode(1, |i| Ok(vb[i]), &mut rb).unwrap();
        assert_eq!(ra, rb);
        assert!(RowForm::new("t", &["id"]).is_none());
    }

    #[test]
    fn hex_round_trip() {
        let d: Digest32 = core::array::from_fn(|i| i as u8 * 7);
        assert_eq!(from_hex(&hex(&d)), Some(d));
        assert_eq!(from_hex(&"A".repeat(64)), None);
        assert_eq!(from_hex("00"), None);
    }
}
