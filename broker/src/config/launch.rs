//! Launch records: what the trusted host says it launched.

use super::is_id;
use crate::error::Code;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRecord {
    pub business: String,
    pub role: String,
    pub run: String,
    pub harness: String,
    pub address: Option<String>,
    pub pid: i32,
    pub start_time: u64,
    /// Where the harness keeps the run's session files; memory only.
    pub transcript: Option<String>,
    /// The thread a run of the thread instance serves (3i row 121).
    pub thread: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawLaunch {
    business: String,
    role: String,
    run: String,
    harness: String,
    #[serde(default)]
    address: Option<String>,
    pid: i64,
    start_time: u64,
    #[serde(default)]
    transcript: Option<String>,
    #[serde(default)]
    thread: Option<String>,
}

/// Run ids: 1 to 128 of `[A-Za-z0-9._:-]`.
pub fn is_run_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// Harness names are plug-in module names: the identifier pattern.
pub fn is_harness(s: &str) -> bool {
    is_id(s)
}

impl LaunchRecord {
    pub fn from_json(v: serde_json::Value) -> Result<LaunchRecord, Code> {
        let raw: RawLaunch = serde_json::from_value(v).map_err(|_| Code::InvalidLaunch)?;
        if !is_id(&raw.business) || !is_id(&raw.role) || !is_run_id(&raw.run) {
            return Err(Code::InvalidLaunch);
        }
        if !is_harness(&raw.harness) {
            return Err(Code::InvalidHarness);
        }
        let pid = i32::try_from(raw.pid)
            .ok()
            .filter(|p| *p > 0)
            .ok_or(Code::InvalidLaunch)?;
        if let Some(a) = &raw.address {
            if a.is_empty() || a.len() > 256 || a.contains('\0') {
                return Err(Code::InvalidLaunch);
            }
        }
        if let Some(t) = &raw.transcript {
            if !t.starts_with('/') || t.len() > 4096 || t.contains('\0') {
                return Err(Code::InvalidLaunch);
            }
        }
        if let Some(t) = &raw.thread {
            if t.is_empty() || t.len() > 64 {
                return Err(Code::InvalidLaunch);
            }
        }
        Ok(LaunchRecord {
            business: raw.business,
            role: raw.role,
            run: raw.run,
            harness: raw.harness,
            address: raw.address,
            pid,
            start_time: raw.start_time,
            transcript: raw.transcript,
            thread: raw.thread,
        })
    }

    /// The identity recorded in `session.launched` (no transcript, no
    /// account); a thread run's thread is part of it, so a rebind can't
    /// move the run to another thread.
    pub fn identity_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "role": self.role,
            "harness": self.harness,
            "address": self.address,
            "pid": self.pid,
            "startTime": self.start_time,
        });
        if let Some(t) = &self.thread {
            v["thread"] = serde_json::json!(t);
        }
        v
    }
}
