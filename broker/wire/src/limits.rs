//! Sizes and deadlines of the client socket (`bus.sock`), the one place
//! they are written down. The broker's framing, the Rust client and the
//! shims all read them from here.

use std::time::Duration;

/// The longest request line the socket takes, newline included.
pub const REQUEST_MAX: usize = 64 * 1024;
/// The one verb whose request line may be longer: it carries a file.
pub const SAVE_VERB: &str = "project.file.save";
/// The longest [`SAVE_VERB`] request line, newline included: 1 MiB of file
/// plus an ordinary envelope.
pub const SAVE_REQUEST_MAX: usize = 1024 * 1024 + REQUEST_MAX;
/// The longest reply line, newline included. A read that would pass it is
/// answered `response-too-large` instead.
pub const RESPONSE_MAX: usize = 4 * 1024 * 1024;
/// How long a client has to deliver its whole request frame.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(5);
/// How long a client waits for connect, send and reply together, for
/// every verb but the [`STAGED_VERBS`].
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The broker's whole-job budget for one staged request: everything its
/// slow part runs (every `git` child of it, or the whole transcript read)
/// must fit in it, counted from when the broker has the request; past it
/// the job ends with its refusal and nothing written.
pub const STAGED_BUDGET: Duration = Duration::from_secs(30);
/// The verbs the broker may run as a staged job (a Git side or a transcript
/// to read). `decision.raise` is one only when it cites the spec; a client
/// treats every raise as one (it waits longer than an uncited raise needs,
/// never shorter than a cited one does).
pub const STAGED_VERBS: &[&str] = &[
    "spec.read",
    "record.write",
    "project.files",
    "project.file",
    "project.file.save",
    "decision.raise",
    "usage.begin",
    "usage.end",
];

/// How long a client waits for `verb`'s reply (connect, send and reply
/// together): a staged verb the broker's [`STAGED_BUDGET`] plus the
/// ordinary [`CALL_TIMEOUT`] as margin (for the frame, the writer's finish
/// and the reply), every other verb [`CALL_TIMEOUT`]. So the broker always
/// answers a staged job, refusal or not, before its client gives up on it.
pub fn call_timeout(verb: &str) -> Duration {
    if STAGED_VERBS.contains(&verb) {
        STAGED_BUDGET + CALL_TIMEOUT
    } else {
        CALL_TIMEOUT
    }
}

/// The longest request line (newline included) the socket takes for `verb`.
pub fn request_max(verb: &str) -> usize {
    if verb == SAVE_VERB {
        SAVE_REQUEST_MAX
    } else {
        REQUEST_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_save_verb_gets_the_large_envelope() {
        assert_eq!(request_max("message.send"), 64 * 1024);
        assert_eq!(request_max("project.file"), 64 * 1024);
        assert_eq!(request_max("project.file.save"), 1024 * 1024 + 64 * 1024);
        assert_eq!(RESPONSE_MAX, 4 << 20);
    }

    #[test]
    fn staged_verbs_wait_the_job_budget_and_a_margin_others_keep_five_seconds() {
        for v in STAGED_VERBS {
            assert_eq!(call_timeout(v), Duration::from_secs(35), "{v}");
        }
        for v in [
            "message.send",
            "message.receive",
            "role.claim",
            "decision.decide",
            "project.list",
            "spec",
            "",
            "project.file.save ",
        ] {
            assert_eq!(call_timeout(v), Duration::from_secs(5), "{v:?}");
            assert_eq!(call_timeout(v), CALL_TIMEOUT);
        }
    }
}
