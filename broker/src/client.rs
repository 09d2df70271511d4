//! The Rust client: one Unix socket connection per call, one JSON line each
//! way, no retry. A transport failure after the request may have reached the
//! broker is `outcome-unknown`: inspect the evidence before doing it again.

use crate::error::Code;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

pub use mosaic_wire::limits::{
    CALL_TIMEOUT as TIMEOUT, REQUEST_MAX as MAX_REQUEST, RESPONSE_MAX as MAX_RESPONSE,
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

/// Sends one request line and reads one reply line under the caps and timeout.
pub fn exchange(path: &std::path::Path, req: &Value) -> Result<Value, BusError> {
    let mut line = req.to_string().into_bytes();
    line.push(b'\n');
    if line.len() > MAX_REQUEST {
        return Err(Code::RequestTooLarge.into());
    }
    // Failing to connect means nothing was sent: still reported as
    // outcome-unknown, since the caller cannot tell the cases apart safely.
    let mut s = UnixStream::connect(path).map_err(|_| BusError::from(Code::OutcomeUnknown))?;
    let unknown = |_| BusError::from(Code::OutcomeUnknown);
    s.set_read_timeout(Some(TIMEOUT)).map_err(unknown)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(unknown)?;
    s.write_all(&line).map_err(unknown)?;
    let _ = s.shutdown(Shutdown::Write);
    let mut buf = Vec::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if std::time::Instant::now() > deadline {
            return Err(Code::OutcomeUnknown.into());
        }
        let n = s.read(&mut chunk).map_err(unknown)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_RESPONSE {
            return Err(Code::ResponseTooLarge.into());
        }
        if buf.last() == Some(&b'\n') {
            break;
        }
    }
    if buf.last() != Some(&b'\n') {
        return Err(Code::OutcomeUnknown.into());
    }
    serde_json::from_slice(&buf[..buf.len() - 1]).map_err(|_| Code::OutcomeUnknown.into())
}
