//! The human and tester transport shims (`mosaic-human-cli`,
//! `mosaic-tester-cli`), statically linked (see `build.rs`).
//!
//! `mosaic-human-cli <socket>` runs in two images of one process:
//!
//! 1. **First image.** Reads one JSON object `{business, verb, args?}` from
//!    stdin (at most [`MAX_REQUEST`] bytes) and checks its shape. It then
//!    copies the bytes into a memfd, makes that memfd
//!    its stdin, sheds every capability it holds ([`shed_capabilities`]:
//!    ambient, bounding, inheritable, permitted and effective sets, and
//!    `no_new_privs`), removes any inherited `MOSAIC_BUS_*_NONCE`, adds a fresh
//!    128-bit nonce (OS RNG, 32 lowercase hex digits) under its own variable
//!    and [`STAGE_VAR`]`=<own pid>`, and `execve`s `/proc/self/exe` with the
//!    same argv. The nonce is thus in the new image's initial environment,
//!    which is what `/proc/<pid>/environ` shows.
//! 2. **Second image** (recognised by [`STAGE_VAR`] equal to its own pid, so
//!    an inherited value never matches): reads the request again from stdin,
//!    connects to the socket, sends
//!    `{"human":{"pid","startTime","nonce"},"business","verb","args"}\n`
//!    (tester: key `tester`), half-closes, reads one reply line (at most
//!    [`MAX_REPLY`] bytes with its newline, within [`reply_timeout`] of the
//!    verb overall: 5 s, or the broker's job budget plus 5 s for a verb it
//!    may stage, so a slow Git write is answered, not guessed at) and
//!    prints it. A request line over its verb's envelope ([`max_line`]) is
//!    refused here, before connecting, as the broker would refuse it.
//!
//! `--help` and `--version` print on stdout and exit 0 before anything else
//! (no stdin read, no re-exec, no socket); an option the shim does not know
//! (an argument starting with `-`) is one line on stderr and exit 2.
//!
//! Exit codes: 0 `ok:true`; 1 `ok:false` (a refusal from the broker; a bad
//! stdin / argv, printed as `{"ok":false,"error":"invalid-request"}`; or a
//! request line over its envelope, printed as
//! `{"ok":false,"error":"request-too-large"}`; neither contacts the broker);
//! 2 a transport failure, printed as `{"ok":false,"error":"outcome-unknown"}`,
//! or an unknown option.
//! Nothing but the reply (or those fixed lines) is printed; the nonce appears
//! only inside the request.
//! The shim keeps the rest of its environment as it is: clearing it would
//! launder the run markers the broker's ancestry check looks for.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};

use mosaic_wire::cli;
use serde_json::{json, Map, Value};

/// The wire limits the shim keeps (from the wire crate): the longest
/// request on stdin ([`MAX_REQUEST`], 1 MiB + 64 KiB, the [`SAVE_VERB`]'s
/// envelope), the longest request line per verb ([`max_line`]), the longest
/// reply line ([`MAX_REPLY`], newline included, as the broker counts it) and
/// the overall deadline for connecting, sending and reading the reply
/// per verb ([`reply_timeout`]: [`REPLY_TIMEOUT`], or longer for a verb the
/// broker may stage).
/// [`MAX_LINE`] is every other verb's request line cap.
pub use mosaic_wire::limits::{
    call_timeout as reply_timeout, request_max as max_line, CALL_TIMEOUT as REPLY_TIMEOUT,
    REQUEST_MAX as MAX_LINE, RESPONSE_MAX as MAX_REPLY, SAVE_REQUEST_MAX as MAX_REQUEST, SAVE_VERB,
};
/// Marks the re-executed image; its value is the process's own pid.
pub const STAGE_VAR: &str = "MOSAIC_SHIM_STAGE";

pub const INVALID_REQUEST: &str = r#"{"ok":false,"error":"invalid-request"}"#;
pub const OUTCOME_UNKNOWN: &str = r#"{"ok":false,"error":"outcome-unknown"}"#;
pub const REQUEST_TOO_LARGE: &str = r#"{"ok":false,"error":"request-too-large"}"#;

/// Which shim this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Human,
    Tester,
}

impl Kind {
    pub fn nonce_var(self) -> &'static str {
        match self {
            Kind::Human => mosaic_wire::env::HUMAN_NONCE_VAR,
            Kind::Tester => mosaic_wire::env::TESTER_NONCE_VAR,
        }
    }

    /// The envelope key the proof goes under.
    pub fn proof_key(self) -> &'static str {
        match self {
            Kind::Human => "human",
            Kind::Tester => "tester",
        }
    }

    /// The binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Human => "mosaic-human-cli",
            Kind::Tester => "mosaic-tester-cli",
        }
    }

    /// What `--help` prints.
    pub fn help(self) -> &'static str {
        match self {
            Kind::Human => HUMAN_HELP,
            Kind::Tester => TESTER_HELP,
        }
    }
}

const HUMAN_HELP: &str = "\
mosaic-human-cli: the Mosaic bus's human transport shim

Usage:
  mosaic-human-cli SOCKET < REQUEST
  mosaic-human-cli --help | --version

Reads one JSON object {\"business\",\"verb\",\"args\"?} on stdin, proves
to the broker listening on SOCKET (its bus.sock) that a person's process
sent it, sends it and prints the broker's one reply line on stdout.

Exit status: 0 for ok:true; 1 for a refusal (the broker's, or
invalid-request / request-too-large before connecting); 2 for a transport
failure (outcome-unknown), or an unknown option (one line on stderr).
--help and --version connect to nothing.
";

const TESTER_HELP: &str = "\
mosaic-tester-cli: the Mosaic bus's PM tester transport shim

Usage:
  mosaic-tester-cli SOCKET < REQUEST
  mosaic-tester-cli --help | --version

Reads one JSON object {\"business\",\"verb\",\"args\"?} on stdin, proves
to the broker listening on SOCKET (its bus.sock) that the tester's process
sent it, sends it and prints the broker's one reply line on stdout. The
business must allow a tester (bus.tester).

Exit status: 0 for ok:true; 1 for a refusal (the broker's, or
invalid-request / request-too-large before connecting); 2 for a transport
failure (outcome-unknown), or an unknown option (one line on stderr).
--help and --version connect to nothing.
";

/// Every shim nonce variable; all are removed before a fresh one is added.
use mosaic_wire::env::NONCE_VARS;

/// How a run ends: the line printed and the exit code.
enum Outcome {
    Reply(String, bool),
    Invalid,
    TooLarge,
    Unknown,
}

fn finish(outcome: Outcome) -> ExitCode {
    let (line, code) = match outcome {
        Outcome::Reply(line, true) => (line, 0),
        Outcome::Reply(line, false) => (line, 1),
        Outcome::Invalid => (INVALID_REQUEST.to_string(), 1),
        Outcome::TooLarge => (REQUEST_TOO_LARGE.to_string(), 1),
        Outcome::Unknown => (OUTCOME_UNKNOWN.to_string(), 2),
    };
    let mut out = io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        return ExitCode::from(2);
    }
    ExitCode::from(code)
}

/// The shim's `main`.
pub fn run(kind: Kind) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Before stdin, the re-exec or any socket (`mosaic_wire::cli`).
    let given = args.get(1..).unwrap_or_default();
    if let Some(ask) = cli::asked(given) {
        return cli::answer(ask, kind.name(), env!("CARGO_PKG_VERSION"), kind.help());
    }
    if let Some(opt) = given.iter().find(|a| cli::is_option(a)) {
        return cli::unknown_option(kind.name(), opt);
    }
    if args.len() != 2 || args[1].is_empty() {
        return finish(Outcome::Invalid);
    }
    let Ok(raw) = read_bounded(io::stdin().lock(), MAX_REQUEST) else {
        return finish(Outcome::Invalid);
    };
    let Some(request) = parse_request(&raw) else {
        return finish(Outcome::Invalid);
    };
    let me = std::process::id();
    let second = std::env::var(STAGE_VAR).ok() == Some(me.to_string());
    if !second {
        // Only returns on failure.
        let _ = reexec(kind, &args, &raw);
        return finish(Outcome::Unknown);
    }
    let Ok(nonce) = std::env::var(kind.nonce_var()) else {
        return finish(Outcome::Unknown);
    };
    let Some(start_time) = own_start_time() else {
        return finish(Outcome::Unknown);
    };
    let mut envelope = request;
    let verb = envelope
        .get("verb")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let limit = max_line(&verb);
    envelope.insert(
        kind.proof_key().into(),
        json!({"pid": me, "startTime": start_time, "nonce": nonce}),
    );
    let mut line = Value::Object(envelope).to_string();
    line.push('\n');
    if line.len() > limit {
        return finish(Outcome::TooLarge);
    }
    finish(exchange(
        std::path::Path::new(&args[1]),
        line.as_bytes(),
        reply_timeout(&verb),
    ))
}

/// Reads everything up to `max` bytes; more is an error.
pub fn read_bounded<R: Read>(r: R, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(max as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "request too large",
        ));
    }
    Ok(buf)
}

/// `{business: string, verb: string, args?: object}` and nothing else.
pub fn parse_request(raw: &[u8]) -> Option<Map<String, Value>> {
    let text = std::str::from_utf8(raw).ok()?;
    let Value::Object(obj) = serde_json::from_str::<Value>(text).ok()? else {
        return None;
    };
    let shape_ok = obj
        .keys()
        .all(|k| matches!(k.as_str(), "business" | "verb" | "args"))
        && obj
            .get("business")
            .is_some_and(|b| b.as_str().is_some_and(|s| !s.is_empty()))
        && obj
            .get("verb")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        && obj.get("args").is_none_or(Value::is_object);
    shape_ok.then_some(obj)
}

/// 128 bits from the OS RNG as 32 lowercase hex digits.
pub fn fresh_nonce() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|_| io::Error::other("no OS randomness"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn memfd_with(bytes: &[u8]) -> io::Result<File> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    let mut file = File::from(memfd_create("mosaic-shim-request", MFdFlags::MFD_CLOEXEC)?);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
}

/// Re-executes `/proc/self/exe` with the same argv, the request on stdin
/// (a memfd) and a fresh nonce in the environment. Returns only on failure.
fn reexec(kind: Kind, args: &[OsString], raw: &[u8]) -> io::Error {
    let nonce = match fresh_nonce() {
        Ok(n) => n,
        Err(e) => return e,
    };
    let stdin = match memfd_with(raw) {
        Ok(f) => f,
        Err(e) => return e,
    };
    // A human's shell holds no capabilities; a root shell does, and the
    // capability-less proof helper may not read the environment of a
    // process whose permitted set is not a subset of its own. Shed them
    // all before the exec, so the image that sends the proof has none.
    shed_capabilities();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(&args[0])
        .args(&args[1..])
        .stdin(Stdio::from(stdin));
    for var in NONCE_VARS {
        cmd.env_remove(var);
    }
    cmd.env(kind.nonce_var(), nonce)
        .env(STAGE_VAR, std::process::id().to_string());
    cmd.exec()
}

/// Drops every capability this process holds, in an order that keeps the
/// rights each step needs until it has run: the ambient set; the bounding
/// set (needs `CAP_SETPCAP`, so while the effective set still has it), so
/// that an exec as root is not granted the full set again; then the
/// inheritable, permitted and effective sets. `no_new_privs` keeps the
/// exec from gaining any back through file capabilities or a setuid bit.
///
/// Best effort: an ordinary user's shim holds nothing and may not touch its
/// bounding set (`EPERM`), and its exec gains nothing either way. A step
/// that fails leaves the proof to the broker, which refuses a shim it cannot
/// read (`proof-unreadable`); the shim prints nothing of its own.
pub fn shed_capabilities() {
    let _ = mosaic_os::hardening::shed_capabilities();
    let _ = mosaic_os::hardening::no_new_privs();
}

/// Field 22 of `/proc/self/stat`, parsed after the last `)`.
fn own_start_time() -> Option<u64> {
    let raw = read_bounded(File::open("/proc/self/stat").ok()?, 4096).ok()?;
    parse_stat_start_time(&raw)
}

/// Start time (field 22) from `/proc/<pid>/stat` bytes.
pub fn parse_stat_start_time(raw: &[u8]) -> Option<u64> {
    let close = raw.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    // After ")": field 3 (state) is the first; field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Sends one request line and reads one reply line (the client crate's
/// round trip: the reply cap and the verb's overall deadline). Any failure,
/// an oversized reply included, is `outcome-unknown` to the shim's caller.
fn exchange(socket: &std::path::Path, line: &[u8], timeout: std::time::Duration) -> Outcome {
    match mosaic_client::round_trip(socket, line, timeout) {
        Ok(reply) => classify_reply(&reply),
        Err(_) => Outcome::Unknown,
    }
}

/// A reply must be one JSON object with a boolean `ok`.
fn classify_reply(reply: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(reply) else {
        return Outcome::Unknown;
    };
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(text) else {
        return Outcome::Unknown;
    };
    match obj.get("ok") {
        Some(Value::Bool(ok)) => Outcome::Reply(text.trim_end_matches('\r').to_string(), *ok),
        _ => Outcome::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_start_time_after_last_paren() {
        let line = b"42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_stat_start_time(line), Some(98765));
        assert_eq!(parse_stat_start_time(b"42 (x) S 1"), None);
    }

    #[test]
    fn request_shape() {
        assert!(parse_request(br#"{"business":"acme","verb":"agents"}"#).is_some());
        assert!(parse_request(br#"{"business":"acme","verb":"x","args":{"a":1}}"#).is_some());
        assert!(parse_request(br#"{"business":"acme","verb":"x","args":[]}"#).is_none());
        assert!(parse_request(br#"{"business":"acme","verb":"x","cap":"c"}"#).is_none());
        assert!(parse_request(br#"{"verb":"x"}"#).is_none());
        assert!(parse_request(b"[1]").is_none());
        assert!(parse_request(b"\xff").is_none());
    }

    #[test]
    fn nonce_is_32_hex_and_fresh() {
        let a = fresh_nonce().unwrap();
        let b = fresh_nonce().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn only_the_save_verb_gets_the_large_envelope() {
        assert_eq!(max_line("message.send"), 64 * 1024);
        assert_eq!(max_line("project.file"), 64 * 1024);
        assert_eq!(max_line("project.file.save"), 1024 * 1024 + 64 * 1024);
    }

    #[test]
    fn the_shim_waits_the_wire_crates_time_per_verb() {
        use std::time::Duration;
        assert_eq!(reply_timeout("agents"), REPLY_TIMEOUT);
        assert_eq!(reply_timeout("message.send"), Duration::from_secs(5));
        assert_eq!(reply_timeout("project.file.save"), Duration::from_secs(35));
        assert_eq!(reply_timeout("decision.raise"), Duration::from_secs(35));
    }

    #[test]
    fn bounded_read_refuses_oversize() {
        assert_eq!(read_bounded(&b"abcd"[..], 4).unwrap(), b"abcd");
        assert!(read_bounded(&b"abcde"[..], 4).is_err());
    }
}
