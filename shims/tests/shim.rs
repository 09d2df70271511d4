//! The real shim binaries against a real Unix socket server.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

const HUMAN: &str = env!("CARGO_BIN_EXE_mosaic-human-cli");
const TESTER: &str = env!("CARGO_BIN_EXE_mosaic-tester-cli");

/// A private directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).unwrap();
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("mosaic-shim-{tag}-{name}"));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the server saw about one connection.
#[derive(Debug)]
struct Seen {
    request: Value,
    peer_pid: i32,
    /// The nonce variables found in the peer's /proc environ, as `K=V`.
    nonce_entries: Vec<String>,
    /// The peer's stat start time, read while it was connected.
    start_time: u64,
    /// Nothing followed the newline before the client's half-close.
    clean_eof: bool,
}

fn peer_pid(s: &UnixStream) -> i32 {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid socket fd and a properly sized out-buffer.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0);
    cred.pid
}

fn stat_start_time(pid: i32) -> u64 {
    let raw = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
    mosaic_shims::parse_stat_start_time(&raw).unwrap()
}

/// Serves one connection; `reply` of `None` closes without answering.
fn serve_one(listener: UnixListener, reply: Option<&'static str>) -> mpsc::Receiver<Seen> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let pid = peer_pid(&stream);
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        // Read the environ while the shim is still waiting for us.
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let start_time = stat_start_time(pid);
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        let nonce_entries = environ
            .split(|b| *b == 0)
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .filter(|e| e.starts_with("MOSAIC_BUS_") && e.contains("_NONCE="))
            .collect();
        if let Some(r) = reply {
            (&stream).write_all(r.as_bytes()).unwrap();
            (&stream).write_all(b"\n").unwrap();
        }
        drop(stream);
        tx.send(Seen {
            request: serde_json::from_str(&line).unwrap(),
            peer_pid: pid,
            nonce_entries,
            start_time,
            clean_eof: line.ends_with('\n') && rest.is_empty(),
        })
        .unwrap();
    });
    rx
}

fn run_shim(exe: &str, socket: &Path, stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.arg(socket)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // An oversized request may be cut short by the shim: ignore EPIPE.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn stdout_line(out: &Output) -> String {
    let s = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(s.ends_with('\n') && s.matches('\n').count() == 1, "{s:?}");
    s.trim_end().to_string()
}

fn assert_nonce_absent(out: &Output, nonce: &str) {
    let all = [&out.stdout[..], &out.stderr[..]].concat();
    assert!(!String::from_utf8_lossy(&all).contains(nonce));
}

#[test]
fn shims_are_statically_linked() {
    for exe in [HUMAN, TESTER] {
        let out = Command::new("file")
            .arg("-L")
            .arg(exe)
            .output()
            .expect("`file` is installed");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("statically linked"), "{text}");
        assert!(!text.contains("interpreter"), "{text}");
    }
}

fn happy_path(exe: &str, key: &str, var: &str, other_var: &str) {
    let dir = TempDir::new("ok");
    let sock = dir.0.join("bus.sock");
    let rx = serve_one(
        UnixListener::bind(&sock).unwrap(),
        Some(r#"{"ok":true,"result":{}}"#),
    );
    // A stale nonce under both variables must not survive the re-exec.
    let stale = "00000000000000000000000000000000";
    let out = run_shim(
        exe,
        &sock,
        br#"{"business":"acme","verb":"message.send","args":{"to":"pm","body":"hi"}}"#,
        &[(var, stale), (other_var, stale)],
    );
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stdout_line(&out), r#"{"ok":true,"result":{}}"#);
    assert!(out.stderr.is_empty());

    let req = &seen.request;
    let obj = req.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    let mut want = vec!["args", "business", "verb", key];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(req["business"], "acme");
    assert_eq!(req["verb"], "message.send");
    assert_eq!(req["args"], json!({"to": "pm", "body": "hi"}));
    let proof = req[key].as_object().unwrap();
    assert_eq!(proof.len(), 3);
    // The proof's pid is the connecting process (SO_PEERCRED) ...
    assert_eq!(proof["pid"].as_i64(), Some(i64::from(seen.peer_pid)));
    // ... with that process's own stat start time ...
    assert_eq!(proof["startTime"].as_u64(), Some(seen.start_time));
    // ... and the nonce is in its initial environ, once, under its variable.
    let nonce = proof["nonce"].as_str().unwrap();
    assert_eq!(nonce.len(), 32);
    assert_ne!(nonce, stale);
    assert_eq!(seen.nonce_entries, vec![format!("{var}={nonce}")]);
    assert!(
        seen.clean_eof,
        "the shim half-closes right after its newline"
    );
    assert_nonce_absent(&out, nonce);
}

#[test]
fn human_shim_sends_its_proof_and_exits_0_on_ok() {
    happy_path(
        HUMAN,
        "human",
        "MOSAIC_BUS_HUMAN_NONCE",
        "MOSAIC_BUS_TESTER_NONCE",
    );
}

#[test]
fn tester_shim_sends_its_proof_and_exits_0_on_ok() {
    happy_path(
        TESTER,
        "tester",
        "MOSAIC_BUS_TESTER_NONCE",
        "MOSAIC_BUS_HUMAN_NONCE",
    );
}

#[test]
fn refusal_exits_1_and_prints_the_reply() {
    let dir = TempDir::new("refuse");
    let sock = dir.0.join("bus.sock");
    let rx = serve_one(
        UnixListener::bind(&sock).unwrap(),
        Some(r#"{"ok":false,"error":"x"}"#),
    );
    let out = run_shim(HUMAN, &sock, br#"{"business":"acme","verb":"agents"}"#, &[]);
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_line(&out), r#"{"ok":false,"error":"x"}"#);
    // `args` omitted stays omitted.
    assert!(seen.request.get("args").is_none());
    assert_nonce_absent(&out, seen.request["human"]["nonce"].as_str().unwrap());
}

#[test]
fn nothing_listening_exits_2_outcome_unknown() {
    let dir = TempDir::new("none");
    let out = run_shim(
        HUMAN,
        &dir.0.join("bus.sock"),
        br#"{"business":"acme","verb":"agents"}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout_line(&out),
        r#"{"ok":false,"error":"outcome-unknown"}"#
    );
}

#[test]
fn connection_closed_without_reply_exits_2() {
    let dir = TempDir::new("hangup");
    let sock = dir.0.join("bus.sock");
    let rx = serve_one(UnixListener::bind(&sock).unwrap(), None);
    let out = run_shim(
        TESTER,
        &sock,
        br#"{"business":"acme","verb":"agents"}"#,
        &[],
    );
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout_line(&out),
        r#"{"ok":false,"error":"outcome-unknown"}"#
    );
    assert_nonce_absent(&out, seen.request["tester"]["nonce"].as_str().unwrap());
}

#[test]
fn garbage_reply_exits_2() {
    let dir = TempDir::new("garbage");
    let sock = dir.0.join("bus.sock");
    let rx = serve_one(UnixListener::bind(&sock).unwrap(), Some("not json"));
    let out = run_shim(HUMAN, &sock, br#"{"business":"acme","verb":"agents"}"#, &[]);
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout_line(&out),
        r#"{"ok":false,"error":"outcome-unknown"}"#
    );
}

#[test]
fn bad_stdin_or_argv_exits_1_invalid_request_without_connecting() {
    let dir = TempDir::new("bad");
    let sock = dir.0.join("bus.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let big = format!(
        r#"{{"business":"acme","verb":"x","args":{{"b":"{}"}}}}"#,
        "a".repeat(mosaic_shims::MAX_REQUEST)
    );
    for stdin in [
        &b"not json"[..],
        br#"{"business":"acme"}"#,
        br#"{"business":"acme","verb":"agents","cap":"c"}"#,
        br#"{"business":"acme","verb":"agents","args":[1]}"#,
        big.as_bytes(),
    ] {
        let out = run_shim(HUMAN, &sock, stdin, &[]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            stdout_line(&out),
            r#"{"ok":false,"error":"invalid-request"}"#
        );
    }
    let out = Command::new(HUMAN)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_line(&out),
        r#"{"ok":false,"error":"invalid-request"}"#
    );
    assert!(listener.accept().is_err(), "no connection was made");
}

#[test]
fn a_large_request_within_the_cap_is_passed_through() {
    let dir = TempDir::new("large");
    let sock = dir.0.join("bus.sock");
    let rx = serve_one(
        UnixListener::bind(&sock).unwrap(),
        Some(r#"{"ok":true,"result":{}}"#),
    );
    let body = "b".repeat(1024 * 1024);
    let req = format!(
        r#"{{"business":"acme","verb":"project.file.save","args":{{"content":"{body}"}}}}"#
    );
    let out = run_shim(HUMAN, &sock, req.as_bytes(), &[]);
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        seen.request["args"]["content"].as_str().map(str::len),
        Some(body.len())
    );
}

/// A listener that is never accepted from: `accept` failing afterwards shows
/// the shim did not connect.
fn idle_listener(sock: &Path) -> UnixListener {
    let listener = UnixListener::bind(sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

#[test]
fn empty_stdin_is_invalid_request_without_connecting() {
    let dir = TempDir::new("empty");
    let sock = dir.0.join("bus.sock");
    let listener = idle_listener(&sock);
    for exe in [HUMAN, TESTER] {
        for stdin in [&b""[..], b"\n", b"   "] {
            let out = run_shim(exe, &sock, stdin, &[]);
            assert_eq!(out.status.code(), Some(1), "{stdin:?}");
            assert_eq!(
                stdout_line(&out),
                r#"{"ok":false,"error":"invalid-request"}"#
            );
        }
    }
    assert!(listener.accept().is_err(), "no connection was made");
}

#[test]
fn a_request_over_its_verbs_envelope_is_refused_without_connecting() {
    let dir = TempDir::new("envelope");
    let sock = dir.0.join("bus.sock");
    let listener = idle_listener(&sock);
    // Every verb but project.file.save keeps the 64 KiB envelope.
    let body = "m".repeat(mosaic_shims::MAX_LINE);
    let send = json!({"business": "acme", "verb": "message.send",
                      "args": {"to": "pm", "body": body}});
    // project.file.save may reach 1 MiB + 64 KiB, proof included: stdin of
    // exactly that size leaves no room for the proof.
    let head = r#"{"business":"acme","verb":"project.file.save","args":{"content":""#;
    let pad = mosaic_shims::MAX_REQUEST - head.len() - 3;
    let save = format!(r#"{head}{}"}}}}"#, "s".repeat(pad));
    assert_eq!(save.len(), mosaic_shims::MAX_REQUEST);
    for (exe, stdin) in [
        (HUMAN, send.to_string().into_bytes()),
        (TESTER, send.to_string().into_bytes()),
        (HUMAN, save.into_bytes()),
    ] {
        let out = run_shim(exe, &sock, &stdin, &[]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(
            stdout_line(&out),
            r#"{"ok":false,"error":"request-too-large"}"#
        );
        assert!(out.stderr.is_empty());
    }
    assert!(listener.accept().is_err(), "no connection was made");
}

/// A reply line of `len` bytes before its newline: `{"ok":true,"result":"x…"}`.
fn reply_of_len(len: usize) -> &'static str {
    let head = r#"{"ok":true,"result":""#;
    let tail = r#""}"#;
    let line = format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()));
    assert_eq!(line.len(), len);
    Box::leak(line.into_boxed_str())
}

#[test]
fn the_reply_cap_is_4_mib_with_the_newline() {
    // Exactly 4 MiB with its newline: printed whole, exit 0.
    let dir = TempDir::new("cap");
    let sock = dir.0.join("bus.sock");
    let fits = reply_of_len(mosaic_shims::MAX_REPLY - 1);
    let rx = serve_one(UnixListener::bind(&sock).unwrap(), Some(fits));
    let out = run_shim(HUMAN, &sock, br#"{"business":"acme","verb":"agents"}"#, &[]);
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_line(&out), fits);
    // One byte more: the shim can't take it; outcome-unknown, exit 2.
    let sock = dir.0.join("bus2.sock");
    let over = reply_of_len(mosaic_shims::MAX_REPLY);
    let rx = serve_one(UnixListener::bind(&sock).unwrap(), Some(over));
    let out = run_shim(
        TESTER,
        &sock,
        br#"{"business":"acme","verb":"agents"}"#,
        &[],
    );
    // The server's write may fail once the shim has hung up: not waited on.
    drop(rx);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout_line(&out),
        r#"{"ok":false,"error":"outcome-unknown"}"#
    );
}
