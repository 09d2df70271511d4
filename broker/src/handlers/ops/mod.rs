//! Host ops on the writer side: the trusted host's requests after boot,
//! one module per family. Each op is an [`Op`](super::handler::Op) the
//! table lists (`super::table::HOST_OPS`), parsed at the edge through the
//! one argument reader (host strings: 1 to 256 bytes, no NUL) and applied
//! to the `Core` on the writer thread.
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

pub mod authority;
pub mod credentials;
pub mod landing;
pub mod launches;
pub mod pushes;
pub mod records;
pub mod seals;
pub mod threads;

#[cfg(test)]
mod tests {
    use crate::error::Code;
    use crate::handlers::fields::Fields;
    use crate::handlers::HostOp;
    use serde_json::{json, Map, Value};

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
        let Ok(p) = super::pushes::RecordPush::parse(Fields::new(m)) else {
            panic!("recordPush parses")
        };
        assert!(p.nested_refusal() == Some(Code::InvalidRequest));
        let Value::Object(m) =
            json!({"cap": "c", "args": {"task_ref": "vikunja:1/1", "request": nul}})
        else {
            unreachable!()
        };
        let Ok(r) = super::pushes::ReviewFetch::parse(Fields::new(m)) else {
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
