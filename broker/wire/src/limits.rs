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
/// How long a client waits for connect, send and reply together.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

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
}
