//! One host channel connection: the boot, then ops until `close` or EOF.

use super::ops::{self, After};
use crate::config::BootConfig;
use crate::error::Code;
use crate::proof::VerifierFactory;
use crate::runtime::{self, Runtime};
use crate::server::envelope::{self, refusal};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// Largest boot message (a config with many businesses).
pub const MAX_BOOT: usize = 4 << 20;
/// Largest host op.
pub const MAX_OP: usize = 1 << 20;

/// The running broker, shared with the signal thread.
pub type Shared = Arc<Mutex<Option<Runtime>>>;

/// How a channel connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The host sent `close`.
    Closed,
    /// EOF or a read error.
    Lost,
    /// The boot was refused with this code.
    BootRefused(Code),
}

/// Reads one line of at most `max` bytes. `Ok(None)` is EOF before any byte.
pub fn read_line<R: BufRead>(r: &mut R, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if line.len() > max {
            return Err(io::ErrorKind::InvalidData.into());
        }
        if done {
            line.pop();
            return Ok(Some(line));
        }
    }
}

fn send(w: &mut UnixStream, v: &Value) -> io::Result<()> {
    let mut line = v.to_string().into_bytes();
    line.push(b'\n');
    w.write_all(&line)
}

/// Serves one connection. When `shared` holds no runtime yet, the first
/// message must be the boot.
pub fn serve(stream: UnixStream, shared: &Shared, verifier: VerifierFactory) -> End {
    let Ok(mut writer) = stream.try_clone() else {
        return End::Lost;
    };
    let mut reader = BufReader::new(stream);
    let booted = shared.lock().map(|g| g.is_some()).unwrap_or(false);
    if !booted {
        let line = match read_line(&mut reader, MAX_BOOT) {
            Ok(Some(l)) => l,
            // Too long to be a boot: still answerable, so answered.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = send(&mut writer, &refusal(Code::InvalidConfig, None));
                return End::BootRefused(Code::InvalidConfig);
            }
            Ok(None) | Err(_) => return End::Lost,
        };
        // Hold the slot while booting, so a signal that arrives meanwhile
        // waits and then closes the new runtime properly.
        let Ok(mut slot) = shared.lock() else {
            return End::Lost;
        };
        match boot(&line, verifier) {
            Ok((rt, id)) => {
                let mut reply = rt.boot_reply().clone();
                if let (Some(id), Some(o)) = (id, reply.as_object_mut()) {
                    o.insert("id".into(), Value::from(id));
                }
                super::notify::booted(&rt.socket_path());
                super::bootlog::release();
                *slot = Some(rt);
                drop(slot);
                if send(&mut writer, &reply).is_err() {
                    return End::Lost;
                }
            }
            Err((code, id)) => {
                drop(slot);
                let _ = send(&mut writer, &refusal(code, id));
                return End::BootRefused(code);
            }
        }
    }
    loop {
        let line = match read_line(&mut reader, MAX_OP) {
            Ok(Some(l)) => l,
            Ok(None) => return End::Lost,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = send(&mut writer, &refusal(Code::InvalidRequest, None));
                return End::Lost;
            }
            Err(_) => return End::Lost,
        };
        // Duplicate keys at any depth refuse, as on the client socket.
        let (reply, after) = match mosaic_client::json::from_slice(&line) {
            Err(_) => (refusal(Code::InvalidRequest, None), After::Continue),
            Ok(v) => match shared.lock() {
                Ok(g) => match g.as_ref() {
                    Some(rt) => ops::handle(rt, v),
                    None => (refusal(Code::ChannelLost, None), After::Close),
                },
                Err(_) => (refusal(Code::StorageUnavailable, None), After::Close),
            },
        };
        let sent = send(&mut writer, &reply);
        if let After::Close = after {
            return End::Closed;
        }
        if sent.is_err() {
            return End::Lost;
        }
    }
}

fn boot(
    line: &[u8],
    verifier: VerifierFactory,
) -> Result<(Runtime, Option<i64>), (Code, Option<i64>)> {
    let v: Value = match mosaic_client::json::from_slice(line) {
        Ok(v) => v,
        // Well-formed JSON that only the strict parse refuses repeats a key.
        Err(_) if serde_json::from_slice::<Value>(line).is_ok() => {
            return Err((Code::InvalidRequest, None))
        }
        Err(_) => return Err((Code::BootRequired, None)),
    };
    let id = envelope::safe_id(&v);
    let Value::Object(mut m) = v else {
        return Err((Code::BootRequired, None));
    };
    m.remove("id");
    if m.remove("op") != Some(Value::String("boot".into())) {
        return Err((Code::BootRequired, id));
    }
    let config = m.remove("config").ok_or((Code::InvalidConfig, id))?;
    if !m.is_empty() {
        return Err((Code::InvalidConfig, id));
    }
    let config = BootConfig::from_json(config).map_err(|c| (c, id))?;
    runtime::start_with(config, verifier())
        .map(|rt| (rt, id))
        .map_err(|c| (c, id))
}
