//! The Rust client: one Unix socket connection per call, one JSON line each
//! way, no retry. A transport failure after the request may have reached the
//! broker is `outcome-unknown`: inspect the evidence before doing it again.
//!
//! [`round_trip`] is the one socket exchange under the wire caps; the
//! capability [`Client`] and the shims both go through it. [`views`] are
//! the read verbs as methods. [`json`] is the strict JSON parse (no key
//! twice in one object) every request read from a socket goes through, in
//! the broker and in `mosaic-leased`. Links neither SQLite nor an async runtime.

pub mod json;
pub mod views;

pub use mosaic_wire::Code;
use serde_json::{json, Value};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use mosaic_wire::limits::{
    call_timeout, CALL_TIMEOUT as TIMEOUT, REQUEST_MAX as MAX_REQUEST, RESPONSE_MAX as MAX_RESPONSE,
};

/// A refusal or a transport failure, always with a static code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusError {
    /// The broker's code, or one of the client's own
    /// (`outcome-unknown`, `request-too-large`, `response-too-large`).
    pub code: String,
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.code)
    }
}

impl std::error::Error for BusError {}

impl From<Code> for BusError {
    fn from(c: Code) -> BusError {
        BusError {
            code: c.as_str().to_string(),
        }
    }
}

/// A capability-bearing client.
#[derive(Clone)]
pub struct Client {
    pub path: PathBuf,
    cap: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The capability is a secret: never printed.
        f.debug_struct("Client")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(path: impl Into<PathBuf>, cap: impl Into<String>) -> Client {
        Client {
            path: path.into(),
            cap: cap.into(),
        }
    }

    /// Calls `verb` with `args` (`Value::Null` for none) and returns its result.
    pub fn call(&self, verb: &str, args: Value) -> Result<Value, BusError> {
        let mut req = json!({"cap": self.cap, "verb": verb});
        if !args.is_null() {
            req["args"] = args;
        }
        let reply = exchange(&self.path, &req)?;
        match reply.get("ok") {
            Some(Value::Bool(true)) => Ok(reply.get("result").cloned().unwrap_or(Value::Null)),
            Some(Value::Bool(false)) => Err(BusError {
                code: reply
                    .get("error")
                    .and_then(Value::as_str)
                    .and_then(Code::parse)
                    .map(|c| c.as_str())
                    .unwrap_or("outcome-unknown")
                    .to_string(),
            }),
            _ => Err(Code::OutcomeUnknown.into()),
        }
    }
}

/// Why a round trip gave no reply line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Connect, send or read failed, the deadline passed, or the broker
    /// closed before a newline: the request may or may not have been done.
    Unknown,
    /// The reply line would pass [`MAX_RESPONSE`] (newline included).
    ResponseTooLarge,
}

/// Sends `line` (newline included) on a fresh connection to `socket`,
/// half-closes, and reads one reply line, returned without its newline.
/// `timeout` bounds connect, send and read together (the verb's
/// [`call_timeout`]); the reply's cap counts the newline, whichever read
/// brings it.
pub fn round_trip(socket: &Path, line: &[u8], timeout: Duration) -> Result<Vec<u8>, Transport> {
    let deadline = Instant::now() + timeout;
    let mut stream = UnixStream::connect(socket).map_err(|_| Transport::Unknown)?;
    if stream.set_write_timeout(Some(timeout)).is_err()
        || stream.write_all(line).is_err()
        || stream.shutdown(std::net::Shutdown::Write).is_err()
    {
        return Err(Transport::Unknown);
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(Transport::Unknown);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(Transport::Unknown),
            Ok(n) => {
                let start = reply.len();
                reply.extend_from_slice(buf.get(..n).unwrap_or_default());
                if let Some(i) = reply[start..].iter().position(|b| *b == b'\n') {
                    let end = start + i;
                    if end + 1 > MAX_RESPONSE {
                        return Err(Transport::ResponseTooLarge);
                    }
                    reply.truncate(end);
                    return Ok(reply);
                }
                // Even a newline next would take the line past the cap.
                if reply.len() >= MAX_RESPONSE {
                    return Err(Transport::ResponseTooLarge);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Transport::Unknown),
        }
    }
}

/// Sends one request and reads one reply under the caps and the verb's
/// timeout.
pub fn exchange(path: &Path, req: &Value) -> Result<Value, BusError> {
    let mut line = req.to_string().into_bytes();
    line.push(b'\n');
    let verb = req.get("verb").and_then(Value::as_str).unwrap_or("");
    // Every verb keeps the ordinary envelope but the save verb.
    if line.len() > mosaic_wire::limits::request_max(verb) {
        return Err(Code::RequestTooLarge.into());
    }
    // Failing to connect means nothing was sent: still reported as
    // outcome-unknown, since the caller cannot tell the cases apart safely.
    let reply = round_trip(path, &line, call_timeout(verb)).map_err(|e| match e {
        Transport::Unknown => BusError::from(Code::OutcomeUnknown),
        Transport::ResponseTooLarge => BusError::from(Code::ResponseTooLarge),
    })?;
    serde_json::from_slice(&reply).map_err(|_| Code::OutcomeUnknown.into())
}
