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
    /// The account the run spends on (3i row 126): written on its usage
    /// records, kept in memory, never in `session.launched`.
    pub account: Option<String>,
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
    #[serde(default)]
    account: Option<String>,
}

/// The longest account name a record may carry (the 3i CHECK on
/// `usage_records.account`).
pub const ACCOUNT_MAX: usize = 256;

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
        if let Some(a) = &raw.account {
            if a.is_empty() || a.len() > ACCOUNT_MAX || a.contains('\0') {
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
            account: raw.account,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> serde_json::Value {
        json!({"business": "acme", "role": "pm", "run": "run-1", "harness": "pi",
               "pid": 4242, "startTime": 17})
    }

    fn with_account(a: serde_json::Value) -> Result<LaunchRecord, Code> {
        let mut r = record();
        r["account"] = a;
        LaunchRecord::from_json(r)
    }

    #[test]
    fn account_is_an_optional_bounded_string() {
        assert_eq!(LaunchRecord::from_json(record()).unwrap().account, None);
        assert_eq!(with_account(json!(null)).unwrap().account, None);
        assert_eq!(
            with_account(json!("team@example"))
                .unwrap()
                .account
                .as_deref(),
            Some("team@example")
        );
        let longest = "a".repeat(ACCOUNT_MAX);
        assert_eq!(
            with_account(json!(longest)).unwrap().account,
            Some(longest.clone())
        );
        for bad in [
            json!(""),
            json!("a".repeat(ACCOUNT_MAX + 1)),
            json!("a\u{0}b"),
            json!(7),
            json!(["a"]),
            json!({"id": "a"}),
        ] {
            assert_eq!(with_account(bad.clone()), Err(Code::InvalidLaunch), "{bad}");
        }
    }

    #[test]
    fn identity_never_carries_the_account_or_the_transcript() {
        let mut r = record();
        r["account"] = json!("team@example");
        r["transcript"] = json!("/home/run/session");
        let rec = LaunchRecord::from_json(r).unwrap();
        let id = rec.identity_json();
        let text = id.to_string();
        assert!(
            id.get("account").is_none() && !text.contains("team@example"),
            "{id}"
        );
        assert!(
            id.get("transcript").is_none() && !text.contains("/home/run"),
            "{id}"
        );
        // The same run with another account or none is the same identity.
        let plain = LaunchRecord::from_json(record()).unwrap();
        assert_eq!(plain.identity_json(), id);
    }
}
