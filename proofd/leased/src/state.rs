//! The persisted state: sessions keyed by (anchor_pid, anchor_starttime),
//! each with its tokens. Loaded once with full validation; replaced
//! atomically (0600 temp file, fsync, rename, parent-dir fsync).

use super::code::StartupError;
use super::request::{Binding, MAX_INT};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Largest state file accepted at startup.
pub const STATE_MAX: u64 = 4 * 1024 * 1024;
/// Schema version written and accepted.
pub const STATE_VERSION: u32 = 1;
/// Most sessions kept (sessions of dead anchors are dropped first).
pub const MAX_SESSIONS: usize = 128;
/// Most unconsumed tokens per session.
pub const MAX_LIVE_TOKENS: usize = 32;
/// Most consumed tokens remembered per session (older ones are forgotten;
/// a forgotten token is refused as unknown, so single use still holds).
pub const MAX_CONSUMED_TOKENS: usize = 32;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    pub sessions: Vec<Session>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub session_id: String,
    pub anchor_pid: i32,
    pub anchor_starttime: u64,
    pub uid: u32,
    pub runtime_generation: u64,
    pub tokens: Vec<TokenRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TokenRecord {
    pub token: String,
    pub runtime_generation: u64,
    pub binding: Binding,
    pub consumed: bool,
}

/// 256 random bits from the OS RNG, base64url without padding (43 chars).
pub fn random_id() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).ok()?;
    Some(URL_SAFE_NO_PAD.encode(bytes))
}

/// True when `s` is a canonical base64url (no padding) encoding of 32 bytes.
pub fn is_id(s: &str) -> bool {
    s.len() == 43
        && URL_SAFE_NO_PAD
            .decode(s)
            .map(|b| b.len() == 32)
            .unwrap_or(false)
}

/// Equality that does not stop at the first differing byte.
pub fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl State {
    pub fn empty() -> State {
        State {
            version: STATE_VERSION,
            sessions: Vec::new(),
        }
    }

    /// Index of the session with this id (every session compared).
    pub fn find(&self, session_id: &str) -> Option<usize> {
        let mut found = None;
        for (i, s) in self.sessions.iter().enumerate() {
            if ct_eq(&s.session_id, session_id) {
                found = Some(i);
            }
        }
        found
    }

    /// Schema ranges and invariants; the error is the startup code.
    pub fn validate(&self) -> Result<(), StartupError> {
        if self.version != STATE_VERSION || self.sessions.len() > MAX_SESSIONS {
            return Err(StartupError::StateInvalid);
        }
        let mut anchors = HashSet::new();
        let mut ids = HashSet::new();
        for s in &self.sessions {
            if !is_id(&s.session_id)
                || s.anchor_pid <= 0
                || s.runtime_generation > MAX_INT
                || !ids.insert(s.session_id.as_str())
            {
                return Err(StartupError::StateInvalid);
            }
            if !anchors.insert((s.anchor_pid, s.anchor_starttime)) {
                return Err(StartupError::StateDuplicateAnchor);
            }
            let live = s.tokens.iter().filter(|t| !t.consumed).count();
            if live > MAX_LIVE_TOKENS || s.tokens.len() - live > MAX_CONSUMED_TOKENS {
                return Err(StartupError::StateInvalid);
            }
            for t in &s.tokens {
                let bad = !is_id(&t.token)
                    || !ids.insert(t.token.as_str())
                    || !t.binding.is_valid()
                    || t.runtime_generation > s.runtime_generation
                    // A token of an older generation was consumed by the bump.
                    || (t.runtime_generation < s.runtime_generation && !t.consumed);
                if bad {
                    return Err(StartupError::StateInvalid);
                }
            }
        }
        Ok(())
    }
}

/// Load the state at `path`: missing file = empty state.
pub fn load(path: &Path) -> Result<State, StartupError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(State::empty()),
                Some(libc::ELOOP) => Err(StartupError::StateSymlink),
                // Something that is there but is no regular file (a socket
                // or a device that won't open) is that, not unreadable.
                _ => match std::fs::symlink_metadata(path) {
                    Ok(m) if !m.file_type().is_file() => Err(StartupError::StateNotRegular),
                    _ => Err(StartupError::StateUnreadable),
                },
            };
        }
    };
    let meta = file.metadata().map_err(|_| StartupError::StateUnreadable)?;
    if !meta.file_type().is_file() {
        return Err(StartupError::StateNotRegular);
    }
    if meta.permissions().mode() & 0o7777 != 0o600 {
        return Err(StartupError::StateMode);
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(StartupError::StateOwner);
    }
    if meta.len() > STATE_MAX {
        return Err(StartupError::StateTooLarge);
    }
    let mut bytes = Vec::new();
    file.take(STATE_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| StartupError::StateUnreadable)?;
    if bytes.len() as u64 > STATE_MAX {
        return Err(StartupError::StateTooLarge);
    }
    let state: State = serde_json::from_slice(&bytes).map_err(|_| StartupError::StateCorrupt)?;
    state.validate()?;
    Ok(state)
}

/// Replace the state at `path` durably and atomically.
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let bytes = serde_json::to_vec(state).map_err(io::Error::other)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let suffix = random_id().ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp.");
    tmp_name.push(suffix.get(..12).unwrap_or("x"));
    let tmp = dir.join(tmp_name);
    let result = write_then_rename(&tmp, path, dir, &bytes);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_then_rename(tmp: &Path, path: &Path, dir: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(tmp, path)?;
    let d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    d.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sess(pid: i32, start: u64) -> Session {
        Session {
            session_id: random_id().unwrap(),
            anchor_pid: pid,
            anchor_starttime: start,
            uid: 0,
            runtime_generation: 1,
            tokens: vec![],
        }
    }

    #[test]
    fn ids() {
        let id = random_id().unwrap();
        assert!(is_id(&id));
        assert!(!is_id(&id[..42]));
        assert!(!is_id(&format!("{}=", &id[..42])));
        assert!(ct_eq(&id, &id.clone()));
        assert!(!ct_eq(&id, &random_id().unwrap()));
    }

    #[test]
    fn invariants() {
        let mut s = State::empty();
        s.sessions.push(sess(10, 5));
        s.sessions.push(sess(10, 6));
        assert_eq!(s.validate(), Ok(()));
        s.sessions.push(sess(10, 5));
        assert_eq!(s.validate(), Err(StartupError::StateDuplicateAnchor));
        s.sessions.pop();
        let b = Binding {
            compaction_epoch: 1,
            request_epoch: 2,
            h_source: "a".into(),
            h_payload: "b".into(),
            schema_version: 1,
        };
        let tok = TokenRecord {
            token: random_id().unwrap(),
            runtime_generation: 0,
            binding: b,
            consumed: false,
        };
        s.sessions[0].tokens.push(tok.clone());
        assert_eq!(s.validate(), Err(StartupError::StateInvalid));
        s.sessions[0].tokens[0].consumed = true;
        assert_eq!(s.validate(), Ok(()));
        s.sessions[1].tokens.push(tok);
        s.sessions[1].tokens[0].consumed = true;
        assert_eq!(s.validate(), Err(StartupError::StateInvalid));
    }
}
