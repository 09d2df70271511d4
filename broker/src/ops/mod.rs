//! Host ops on the writer side: the trusted host's requests after boot, one
//! module per family. Each op is a typed struct parsed at the edge (the
//! host channel's [`HostOp::parse`], or the embedded runtime's methods)
//! and applied to the [`Core`] on the writer thread.
//!
//! - `launches`: `bindLaunch`, `identity`, `endLaunch`
//! - `authority`: `authorize`, `authorizeLaunch`, `refuse`
//! - `credentials`: `credentialStatus`
//! - `records`: `recordEvent`, `recordTask`, `recordComments`, `commentCursor`
//! - `pushes`: the git socket's `checkPush`, `recordPush`, `reviewFetch`
//! - `threads`: the thread launcher's `threadsState`, `threadIdle`
//! - `landing`: its landing ops `checkLand`, `recordLand`, `landRefused`,
//!   `landHeld`
//! - `seals`: `seals`, the anchors (read off the writer)
//!
//! One string rule for every string argument: 1 to 256 bytes and no NUL,
//! as the client socket's verbs refuse them.

pub mod authority;
pub mod credentials;
pub mod landing;
pub mod launches;
pub mod pushes;
pub mod records;
pub mod seals;
pub mod threads;

use crate::core::Core;
use crate::error::Code;
use serde_json::{json, Map, Value};

/// Longest host op string argument, in bytes.
pub const MAX_STR: usize = 256;

/// The one string rule: a string of 1 to [`MAX_STR`] bytes with no NUL.
pub fn host_str(v: Option<Value>) -> Result<String, Code> {
    match v {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_STR && !s.contains('\0') => Ok(s),
        _ => Err(Code::InvalidRequest),
    }
}

/// [`host_str`] for an optional argument: absent or null is `None`.
pub fn host_opt_str(v: Option<Value>) -> Result<Option<String>, Code> {
    match v {
        None | Some(Value::Null) => Ok(None),
        other => host_str(other).map(Some),
    }
}

/// An op's (or a nested object's) arguments: take what it knows, then
/// refuse anything left over.
pub struct Fields(Map<String, Value>);

impl Fields {
    pub fn new(m: Map<String, Value>) -> Fields {
        Fields(m)
    }

    pub fn str(&mut self, key: &str) -> Result<String, Code> {
        host_str(self.0.remove(key))
    }

    pub fn opt_str(&mut self, key: &str) -> Result<Option<String>, Code> {
        host_opt_str(self.0.remove(key))
    }

    /// A required JSON object.
    pub fn object(&mut self, key: &str) -> Result<Map<String, Value>, Code> {
        match self.0.remove(key) {
            Some(Value::Object(m)) => Ok(m),
            _ => Err(Code::InvalidRequest),
        }
    }

    /// A raw value (absent: `None`), for arguments with their own rules.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    /// Refuses any key not taken.
    pub fn finish(self) -> Result<(), Code> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Code::InvalidRequest)
        }
    }
}

/// One parsed host op (`close` and `boot` are the channel's own).
pub enum HostOp {
    BindLaunch(launches::BindLaunch),
    Identity(launches::Identity),
    EndLaunch(launches::EndLaunch),
    Authorize(authority::Authorize),
    AuthorizeLaunch(authority::AuthorizeLaunch),
    Refuse(authority::Refuse),
    CredentialStatus(credentials::CredentialStatus),
    RecordEvent(records::RecordEvent),
    RecordTask(records::RecordTask),
    RecordComments(records::RecordComments),
    CommentCursor(records::CommentCursor),
    CheckPush(pushes::CheckPush),
    RecordPush(pushes::RecordPush),
    ReviewFetch(pushes::ReviewFetch),
    ThreadsState(threads::ThreadsState),
    ThreadIdle(threads::ThreadIdle),
    CheckLand(landing::CheckLand),
    RecordLand(landing::RecordLand),
    LandRefused(landing::LandRefused),
    LandHeld(landing::LandHeld),
    Seals(seals::Seals),
}

impl HostOp {
    /// Parses op `op` with its arguments `m` (the request without `op` and
    /// `id`). An unknown op is `unknown-op`.
    pub fn parse(op: &str, m: Map<String, Value>) -> Result<HostOp, Code> {
        let f = Fields::new(m);
        Ok(match op {
            "bindLaunch" => HostOp::BindLaunch(launches::BindLaunch::parse(f)?),
            "identity" => HostOp::Identity(launches::Identity::parse(f)?),
            "endLaunch" => HostOp::EndLaunch(launches::EndLaunch::parse(f)?),
            "authorize" => HostOp::Authorize(authority::Authorize::parse(f)?),
            "authorizeLaunch" => HostOp::AuthorizeLaunch(authority::AuthorizeLaunch::parse(f)?),
            "refuse" => HostOp::Refuse(authority::Refuse::parse(f)?),
            "credentialStatus" => {
                HostOp::CredentialStatus(credentials::CredentialStatus::parse(f)?)
            }
            "recordEvent" => HostOp::RecordEvent(records::RecordEvent::parse(f)?),
            "recordTask" => HostOp::RecordTask(records::RecordTask::parse(f)?),
            "recordComments" => HostOp::RecordComments(records::RecordComments::parse(f)?),
            "commentCursor" => HostOp::CommentCursor(records::CommentCursor::parse(f)?),
            "checkPush" => HostOp::CheckPush(pushes::CheckPush::parse(f)?),
            "recordPush" => HostOp::RecordPush(pushes::RecordPush::parse(f)?),
            "reviewFetch" => HostOp::ReviewFetch(pushes::ReviewFetch::parse(f)?),
            "threadsState" => HostOp::ThreadsState(threads::ThreadsState::parse(f)?),
            "threadIdle" => HostOp::ThreadIdle(threads::ThreadIdle::parse(f)?),
            "checkLand" => HostOp::CheckLand(landing::CheckLand::parse(f)?),
            "recordLand" => HostOp::RecordLand(landing::RecordLand::parse(f)?),
            "landRefused" => HostOp::LandRefused(landing::LandRefused::parse(f)?),
            "landHeld" => HostOp::LandHeld(landing::LandHeld::parse(f)?),
            "seals" => HostOp::Seals(seals::Seals::parse(f)?),
            _ => return Err(Code::UnknownOp),
        })
    }

    /// The key the op's answer goes under in the channel's reply.
    pub fn reply_key(&self) -> &'static str {
        match self {
            HostOp::BindLaunch(_) => "launch",
            _ => "result",
        }
    }

    /// Runs the op on the writer thread.
    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        match self {
            HostOp::BindLaunch(o) => o.apply(core),
            HostOp::Identity(o) => o.apply(core),
            HostOp::EndLaunch(o) => o.apply(core),
            HostOp::Authorize(o) => o.apply(core),
            HostOp::AuthorizeLaunch(o) => o.apply(core),
            HostOp::Refuse(o) => o.apply(core),
            HostOp::CredentialStatus(o) => o.apply(core),
            HostOp::RecordEvent(o) => o.apply(core),
            HostOp::RecordTask(o) => o.apply(core),
            HostOp::RecordComments(o) => o.apply(core),
            HostOp::CommentCursor(o) => o.apply(core),
            HostOp::CheckPush(o) => o.apply(core),
            HostOp::RecordPush(o) => o.apply(core),
            HostOp::ReviewFetch(o) => o.apply(core),
            HostOp::ThreadsState(o) => o.apply(core),
            HostOp::ThreadIdle(o) => o.apply(core),
            HostOp::CheckLand(o) => o.apply(core),
            HostOp::RecordLand(o) => o.apply(core),
            HostOp::LandRefused(o) => o.apply(core),
            HostOp::LandHeld(o) => o.apply(core),
            HostOp::Seals(o) => o.apply(core),
        }
    }
}

/// The channel's success reply for an op's answer.
pub fn ok_reply(key: &str, v: Value) -> Value {
    let mut reply = json!({"ok": true});
    reply[key] = v;
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_string_rule() {
        let ok = |s: &str| host_str(Some(json!(s)));
        assert_eq!(ok("a"), Ok("a".to_string()));
        assert_eq!(ok(&"x".repeat(MAX_STR)).map(|s| s.len()), Ok(MAX_STR));
        assert_eq!(ok(&"x".repeat(MAX_STR + 1)), Err(Code::InvalidRequest));
        assert_eq!(ok(""), Err(Code::InvalidRequest));
        assert_eq!(ok("a\0b"), Err(Code::InvalidRequest));
        assert_eq!(host_str(Some(json!(1))), Err(Code::InvalidRequest));
        assert_eq!(host_str(None), Err(Code::InvalidRequest));
        assert_eq!(host_opt_str(None), Ok(None));
        assert_eq!(host_opt_str(Some(Value::Null)), Ok(None));
        assert_eq!(host_opt_str(Some(json!("a\0"))), Err(Code::InvalidRequest));
    }

    /// Every op's string arguments follow the rule, nested ones included.
    #[test]
    fn host_strings_with_nul_refuse_in_every_op() {
        let nul = "a\0b";
        let cases = [
            ("identity", json!({"cap": nul})),
            (
                "endLaunch",
                json!({"record": {"business": nul, "run": "r", "reason": "done"}}),
            ),
            (
                "authorize",
                json!({"cap": "c", "action": "a", "target": nul}),
            ),
            ("authorizeLaunch", json!({"cap": "c", "instance": nul})),
            ("refuse", json!({"cap": "c", "code": nul})),
            ("credentialStatus", json!({"business": "b", "role": nul})),
            (
                "recordEvent",
                json!({"cap": "c", "kind": "k.k", "body": {}, "subject": nul}),
            ),
            (
                "recordTask",
                json!({"business": "b", "task_ref": nul, "read_at": "t", "tombstone": true}),
            ),
            ("checkPush", json!({"cap": nul, "task_ref": "vikunja:1/1"})),
            ("threadsState", json!({"business": nul})),
            (
                "threadIdle",
                json!({"business": "b", "thread": nul, "run": "r"}),
            ),
            ("checkLand", json!({"cap": nul, "args": {}})),
            ("recordLand", json!({"ticket": nul, "land": {}})),
            ("recordLand", json!({"ticket": {"id": nul}, "land": {}})),
            ("landRefused", json!({"ticket": nul, "args": {}})),
            (
                "landHeld",
                json!({"business": "b", "role": "r", "thread": nul}),
            ),
        ];
        for (op, args) in cases {
            let Value::Object(m) = args else {
                unreachable!()
            };
            assert!(
                matches!(HostOp::parse(op, m), Err(Code::InvalidRequest)),
                "{op}"
            );
        }
        // recordPush and reviewFetch keep the nested refusal for the writer,
        // which records it on the capability's run.
        let Value::Object(m) = json!({"cap": "c", "push": {"task_ref": "vikunja:1/1",
            "project": "p", "branch": "b", "ref": "r", "commit": "c", "previous": nul}})
        else {
            unreachable!()
        };
        let Ok(HostOp::RecordPush(p)) = HostOp::parse("recordPush", m) else {
            panic!("recordPush parses")
        };
        assert!(p.nested_refusal() == Some(Code::InvalidRequest));
        let Value::Object(m) =
            json!({"cap": "c", "args": {"task_ref": "vikunja:1/1", "request": nul}})
        else {
            unreachable!()
        };
        let Ok(HostOp::ReviewFetch(r)) = HostOp::parse("reviewFetch", m) else {
            panic!("reviewFetch parses")
        };
        assert!(r.nested_refusal() == Some(Code::InvalidRequest));
    }

    #[test]
    fn unknown_ops_and_the_landing_ops_without_arguments() {
        let none = Map::new;
        for op in ["checkLand", "recordLand", "landRefused", "landHeld"] {
            assert!(
                matches!(HostOp::parse(op, none()), Err(Code::InvalidRequest)),
                "{op}"
            );
        }
        assert!(matches!(
            HostOp::parse("nope", none()),
            Err(Code::UnknownOp)
        ));
    }
}
