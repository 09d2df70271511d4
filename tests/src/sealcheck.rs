//! A second, independent reading of `docs/seals.md`: the canonical row
//! form and the seal roots written from the document alone (it shares no
//! code with the broker's `store::canonical`), so a test can hold the
//! broker's seals to what the document promises a third-party verifier.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// One seal as stored, and the root this module computes for it.
#[derive(Debug, Clone)]
pub struct Checked {
    pub seq: i64,
    pub stored: String,
    pub computed: String,
    pub upto: BTreeMap<String, i64>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The canonical bytes of one row (`docs/seals.md`, "The row").
pub fn row_bytes(table: &str, columns: &[String], values: &[ValueRef<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(table.len() as u32).to_be_bytes());
    out.extend_from_slice(table.as_bytes());
    let seq_i = columns.iter().position(|c| c == "seq").expect("seq column");
    let ValueRef::Integer(seq) = values[seq_i] else {
        panic!("seq is an integer")
    };
    out.extend_from_slice(&seq.to_be_bytes());
    let mut fields: Vec<(&String, ValueRef<'_>)> = columns
        .iter()
        .zip(values.iter().copied())
        .filter(|(c, v)| c.as_str() != "seq" && !matches!(v, ValueRef::Null))
        .collect();
    fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    for (name, v) in fields {
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        match v {
            ValueRef::Integer(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_be_bytes());
            }
            ValueRef::Real(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            ValueRef::Text(t) => {
                out.push(3);
                out.extend_from_slice(&(t.len() as u32).to_be_bytes());
                out.extend_from_slice(t);
            }
            ValueRef::Blob(b) => {
                out.push(4);
                out.extend_from_slice(&(b.len() as u32).to_be_bytes());
                out.extend_from_slice(b);
            }
            ValueRef::Null => unreachable!(),
        }
    }
    out
}

/// Every seal of the data root at `root`, each with the root computed
/// from the store's rows as the document says.
pub fn check(root: &Path) -> Vec<Checked> {
    let ro = OpenFlags::SQLITE_OPEN_READ_ONLY;
    let store = Connection::open_with_flags(root.join("bus/bus.sqlite"), ro).expect("store");
    let seals = Connection::open_with_flags(root.join("bus/seals.sqlite"), ro).expect("seals");
    let mut st = seals
        .prepare("SELECT seq, prev, root, upto FROM seals ORDER BY seq")
        .expect("seals query");
    let rows: Vec<(i64, String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("seals")
        .collect::<Result<_, _>>()
        .expect("seal rows");
    let mut before: BTreeMap<String, i64> = BTreeMap::new();
    let mut out = Vec::new();
    for (seq, prev, stored, upto) in rows {
        let upto: BTreeMap<String, i64> = serde_json::from_str(&upto).expect("upto");
        let mut sha = Sha256::new();
        let prev_bytes: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&prev[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        sha.update(&prev_bytes);
        // BTreeMap iterates in byte order of the name: the document's order.
        for (table, hi) in &upto {
            // One past the previous seal's, or no bound for the first.
            let lo = before.get(table).map_or(i64::MIN, |u| u + 1);
            let mut q = store
                .prepare(&format!(
                    "SELECT * FROM {table} WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq"
                ))
                .expect("rows");
            let columns: Vec<String> = q.column_names().iter().map(|s| s.to_string()).collect();
            let mut rs = q.query([lo, *hi]).expect("query");
            while let Some(r) = rs.next().expect("row") {
                let values: Vec<ValueRef<'_>> = (0..columns.len())
                    .map(|i| r.get_ref(i).expect("value"))
                    .collect();
                sha.update(row_bytes(table, &columns, &values));
            }
        }
        out.push(Checked {
            seq,
            stored,
            computed: hex(&sha.finalize()),
            upto: upto.clone(),
        });
        before = upto;
    }
    out
}
