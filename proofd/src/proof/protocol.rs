//! The `mosaic-proofd` wire protocol: newline-delimited JSON over the
//! socketpair the broker made, one reply per request, each line at most
//! [`MAX_LINE`] bytes with its newline. Serde stays at this edge: the
//! lines are parsed into [`Request`] here, and the proof never sees JSON.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::{verify, Kind, LaunchSet, ProcessTable, ProofCode, VerifyRequest};

/// Protocol version spoken by `hello`.
pub const VERSION: u64 = 1;
/// Longest line either side sends, newline included.
pub const MAX_LINE: usize = 64 * 1024;
/// Largest launch set accepted in one `launches` request.
pub const MAX_LAUNCHES: usize = 1024;
use mosaic_wire::int::{is_safe_i64, is_safe_u64};

/// A parsed request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Hello {
        id: Option<i64>,
    },
    Launches {
        id: Option<i64>,
        set: Vec<(i32, u64)>,
    },
    Verify {
        id: Option<i64>,
        req: VerifyRequest,
    },
    /// `peer`: `verify` without a nonce ([`super::verify_peer`]).
    Peer {
        id: Option<i64>,
        req: VerifyRequest,
    },
}

/// A request that could not be parsed; `id` when it was a safe integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRequest {
    pub id: Option<i64>,
}

fn safe_id(v: &Value) -> Option<i64> {
    let n = v.as_i64()?;
    is_safe_i64(n).then_some(n)
}

fn only_keys(obj: &Map<String, Value>, allowed: &[&str], required: &[&str]) -> bool {
    obj.keys().all(|k| allowed.contains(&k.as_str()))
        && required.iter().all(|k| obj.contains_key(*k))
}

fn get_pid(v: &Value) -> Option<i32> {
    let n = v.as_u64()?;
    i32::try_from(n).ok().filter(|p| *p > 0)
}

fn get_start(v: &Value) -> Option<u64> {
    v.as_u64().filter(|n| is_safe_u64(*n))
}

/// Parses one line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    let bad = BadRequest { id: None };
    let text = std::str::from_utf8(line).map_err(|_| bad)?;
    let value: Value = serde_json::from_str(text).map_err(|_| bad)?;
    let obj = value.as_object().ok_or(bad)?;
    let id = match obj.get("id") {
        None => None,
        Some(v) => Some(safe_id(v).ok_or(bad)?),
    };
    let bad = BadRequest { id };
    match obj.get("op").and_then(Value::as_str).ok_or(bad)? {
        "hello" => {
            if !only_keys(obj, &["op", "id", "version"], &["version"]) {
                return Err(bad);
            }
            if obj["version"].as_u64() != Some(VERSION) {
                return Err(bad);
            }
            Ok(Request::Hello { id })
        }
        "launches" => {
            if !only_keys(obj, &["op", "id", "set"], &["set"]) {
                return Err(bad);
            }
            let items = obj["set"].as_array().ok_or(bad)?;
            if items.len() > MAX_LAUNCHES {
                return Err(bad);
            }
            let mut set = Vec::with_capacity(items.len());
            for item in items {
                let o = item.as_object().ok_or(bad)?;
                if !only_keys(o, &["pid", "startTime"], &["pid", "startTime"]) {
                    return Err(bad);
                }
                set.push((
                    get_pid(&o["pid"]).ok_or(bad)?,
                    get_start(&o["startTime"]).ok_or(bad)?,
                ));
            }
            Ok(Request::Launches { id, set })
        }
        op @ ("verify" | "peer") => {
            let peer = op == "peer";
            let keys: &[&str] = if peer {
                &["kind", "pid", "startTime", "exe", "uid"]
            } else {
                &["kind", "pid", "startTime", "nonce", "exe", "uid"]
            };
            let mut allowed = vec!["op", "id"];
            allowed.extend(keys);
            if !only_keys(obj, &allowed, keys) {
                return Err(bad);
            }
            let kind = obj["kind"].as_str().and_then(Kind::parse).ok_or(bad)?;
            let pid = get_pid(&obj["pid"]).ok_or(bad)?;
            let start_time = get_start(&obj["startTime"]).ok_or(bad)?;
            let nonce = match obj.get("nonce") {
                Some(n) => n.as_str().ok_or(bad)?.to_owned(),
                None => String::new(),
            };
            let exe = PathBuf::from(obj["exe"].as_str().ok_or(bad)?);
            let uid = obj["uid"]
                .as_u64()
                .and_then(|u| u32::try_from(u).ok())
                .ok_or(bad)?;
            let req = VerifyRequest {
                kind,
                pid,
                start_time,
                nonce,
                expected_exe: exe,
                expected_uid: uid,
            };
            if peer {
                if !req.expected_exe.is_absolute() {
                    return Err(bad);
                }
                return Ok(Request::Peer { id, req });
            }
            if !super::request_well_formed(&req) {
                return Err(bad);
            }
            Ok(Request::Verify { id, req })
        }
        _ => Err(bad),
    }
}

fn with_id(mut v: Value, id: Option<i64>) -> String {
    if let (Some(id), Some(o)) = (id, v.as_object_mut()) {
        o.insert("id".into(), json!(id));
    }
    v.to_string()
}

/// The server state: a process table and the known-launch registry.
pub struct Server<T: ProcessTable> {
    pub table: T,
    pub launches: LaunchSet,
}

impl<T: ProcessTable> Server<T> {
    pub fn new(table: T) -> Server<T> {
        Server {
            table,
            launches: LaunchSet::new(),
        }
    }

    /// Answers one line (without its newline) with one reply line (without
    /// its newline).
    pub fn handle_line(&mut self, line: &[u8]) -> String {
        match parse_request(line) {
            Err(BadRequest { id }) => with_id(
                json!({"ok": false, "error": ProofCode::InvalidRequest.as_str()}),
                id,
            ),
            Ok(Request::Hello { id }) => with_id(json!({"ok": true, "version": VERSION}), id),
            Ok(Request::Launches { id, set }) => {
                self.launches = set.into_iter().collect();
                with_id(json!({"ok": true}), id)
            }
            Ok(Request::Verify { id, req }) => match verify(&self.table, &self.launches, &req) {
                Ok(()) => {
                    mosaic_os::pause::at(mosaic_os::pause::PROVEN);
                    with_id(json!({"ok": true}), id)
                }
                Err(code) => with_id(json!({"ok": false, "error": code.as_str()}), id),
            },
            Ok(Request::Peer { id, req }) => {
                match super::verify_peer(&self.table, &self.launches, &req) {
                    Ok(()) => with_id(json!({"ok": true}), id),
                    Err(code) => with_id(json!({"ok": false, "error": code.as_str()}), id),
                }
            }
        }
    }

    /// Serves requests until EOF. A line longer than [`MAX_LINE`] is
    /// answered `invalid-request` and skipped up to its newline.
    pub fn serve<R: BufRead, W: Write>(&mut self, mut input: R, mut output: W) -> io::Result<()> {
        loop {
            match read_line_bounded(&mut input, MAX_LINE)? {
                Line::Eof => return Ok(()),
                Line::TooLong => {
                    let reply = with_id(
                        json!({"ok": false, "error": ProofCode::InvalidRequest.as_str()}),
                        None,
                    );
                    writeln!(output, "{reply}")?;
                }
                Line::Data(bytes) => {
                    let reply = self.handle_line(&bytes);
                    writeln!(output, "{reply}")?;
                }
            }
            output.flush()?;
        }
    }
}

/// One bounded line read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The bytes before the newline.
    Data(Vec<u8>),
    /// The line exceeded the cap; it was consumed up to its newline (or EOF).
    TooLong,
    /// Clean EOF before any byte of a line. A partial last line without a
    /// newline is returned as `Data`.
    Eof,
}

/// Reads one `\n`-terminated line of at most `max` bytes including the newline.
pub fn read_line_bounded<R: BufRead>(r: &mut R, max: usize) -> io::Result<Line> {
    let mut out = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Data(out),
            });
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if out.len() + chunk.len() + 1 > max {
                too_long = true;
                out = Vec::new();
            } else {
                out.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Data(out)
            });
        }
    }
}
