//! End to end: the real static shims talk to a Unix socket server that does
//! what the broker does with a proof — SO_PEERCRED pid first, then
//! `mosaic-proofd` (spawned through `ProofdClient`) for the rest.
//!
//! The shim binaries are taken from the same target directory as
//! `mosaic-proofd`; `cargo test -p mosaic-proofd -p mosaic-shims` (or the
//! README's `cargo build --workspace --bins`) builds them.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mosaic_proofd::procfs;
use mosaic_proofd::proof::client::{ProofdClient, ProofdError};
use mosaic_proofd::proof::Kind;
use serde_json::Value;

const PROOFD: &str = env!("CARGO_BIN_EXE_mosaic-proofd");
const REQUEST: &str = r#"{"business":"acme","verb":"agents"}"#;

fn shim(name: &str) -> PathBuf {
    let p = Path::new(PROOFD).parent().unwrap().join(name);
    assert!(
        p.exists(),
        "{} is not built: run `cargo test -p mosaic-proofd -p mosaic-shims`",
        p.display()
    );
    p
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).unwrap();
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("mosaic-e2e-{tag}-{name}"));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// See `proof_real.rs`: a root test runner's trees must hold no capabilities.
fn drop_bounding_set() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINVAL) && e.raw_os_error() != Some(libc::EPERM) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// What the broker-like server decided for one connection.
#[derive(Debug, PartialEq, Eq)]
struct Decision {
    /// `None` for accepted, else the refusal code sent back.
    code: Option<String>,
    claimed_pid: i64,
    peer_pid: i32,
    /// The peer's `Cap*:` lines from `/proc/<pid>/status`, read before
    /// the reply (the shim is still waiting for it, so still alive).
    caps: Vec<String>,
}

/// Accepts one connection and judges it like the broker does.
fn broker_like(
    listener: UnixListener,
    kind: Kind,
    expected_exe: PathBuf,
) -> mpsc::Receiver<Decision> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let (peer_pid, peer_uid, _) = procfs::peer_cred(&stream).unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        let req: Value = serde_json::from_str(&line).unwrap();
        let key = match kind {
            Kind::Human => "human",
            Kind::Tester => "tester",
        };
        let proof = &req[key];
        let claimed_pid = proof["pid"].as_i64().unwrap();
        let caps = std::fs::read_to_string(format!("/proc/{peer_pid}/status"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Cap"))
            .map(str::to_string)
            .collect();
        let code = if claimed_pid != i64::from(peer_pid) {
            Some("proof-pid".to_string())
        } else {
            let mut client = ProofdClient::spawn(Path::new(PROOFD)).unwrap();
            match client.verify(
                kind,
                peer_pid,
                proof["startTime"].as_u64().unwrap(),
                proof["nonce"].as_str().unwrap(),
                &expected_exe,
                peer_uid,
            ) {
                Ok(()) => None,
                Err(ProofdError::Refused(c)) => Some(c.as_str().to_string()),
                Err(ProofdError::Unavailable) => Some("proof-unavailable".to_string()),
            }
        };
        let reply = match &code {
            None => r#"{"ok":true,"result":{}}"#.to_string(),
            Some(c) => format!(r#"{{"ok":false,"error":"{c}"}}"#),
        };
        (&stream).write_all(reply.as_bytes()).unwrap();
        (&stream).write_all(b"\n").unwrap();
        tx.send(Decision {
            code,
            claimed_pid,
            peer_pid,
            caps,
        })
        .unwrap();
    });
    rx
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Runs the shim detached (`setsid -f env -i`), stdin/stdout through files;
/// returns its stdout line.
fn run_detached(dir: &TempDir, exe: &Path, sock: &Path, env: &[(&str, &str)]) -> String {
    run_detached_from(dir, exe, sock, env, true)
}

/// As [`run_detached`]; `shed` false starts the tree with every capability
/// the test runner holds (a root shell's).
fn run_detached_from(
    dir: &TempDir,
    exe: &Path,
    sock: &Path,
    env: &[(&str, &str)],
    shed: bool,
) -> String {
    let req = dir.0.join("req.json");
    let out = dir.0.join("out.json");
    std::fs::write(&req, REQUEST).unwrap();
    let mut cmd = Command::new("setsid");
    cmd.args(["-f", "/usr/bin/env", "-i"]);
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    // The shell holds the shim on a FIFO until `setsid` is reaped and the
    // shell reparented: a proof taken while `setsid` is still exiting sees
    // the shim's ancestry vanish, which no person's terminal shows.
    let go = dir.0.join("go");
    let _ = std::fs::remove_file(&go);
    let c = std::ffi::CString::new(go.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    cmd.arg("/bin/sh").arg("-c").arg(format!(
        "read _ < {}; exec {} {} < {} > {}.tmp; ",
        sh_quote(go.to_str().unwrap()),
        sh_quote(exe.to_str().unwrap()),
        sh_quote(sock.to_str().unwrap()),
        sh_quote(req.to_str().unwrap()),
        sh_quote(out.to_str().unwrap()),
    ));
    // The shell execs the shim, whose stdout file is complete once it exits;
    // a second detached shell can't tell us that, so poll for the newline.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if shed {
        // SAFETY: only prctl between fork and exec.
        unsafe {
            cmd.pre_exec(drop_bounding_set);
        }
    }
    assert!(cmd.status().unwrap().success());
    release(&go);
    let tmp = dir.0.join("out.json.tmp");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(&tmp) {
            if s.ends_with('\n') {
                return s.trim_end().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the detached shim did not answer"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Opens the FIFO `go` for writing once the waiting shell has it open for
/// reading (for up to 10 s) and writes one line: the shell goes on.
fn release(go: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut f = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(go)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("the detached shell never opened its FIFO: {e}"),
        }
    };
    f.write_all(b"\n").unwrap();
}

/// Runs the shim as the test's own child with exactly `env`; returns
/// (exit code, stdout line).
fn run_direct(exe: &Path, sock: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(exe);
    cmd.arg(sock)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: only prctl between fork and exec.
    unsafe {
        cmd.pre_exec(drop_bounding_set);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(REQUEST.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end()
            .to_string(),
    )
}

fn setup(
    tag: &str,
    kind: Kind,
    expected_exe: &Path,
) -> (TempDir, PathBuf, mpsc::Receiver<Decision>) {
    let dir = TempDir::new(tag);
    let sock = dir.0.join("bus.sock");
    let rx = broker_like(
        UnixListener::bind(&sock).unwrap(),
        kind,
        expected_exe.to_path_buf(),
    );
    (dir, sock, rx)
}

fn decided(rx: &mpsc::Receiver<Decision>) -> Decision {
    rx.recv_timeout(Duration::from_secs(15)).unwrap()
}

#[test]
fn detached_human_shim_is_accepted() {
    let exe = shim("mosaic-human-cli");
    let (dir, sock, rx) = setup("human-ok", Kind::Human, &exe);
    let out = run_detached(&dir, &exe, &sock, &[]);
    let d = decided(&rx);
    assert_eq!(d.code, None, "{d:?}");
    assert_eq!(out, r#"{"ok":true,"result":{}}"#);
}

/// The runner's own `CapEff` mask from `/proc/self/status`.
fn own_effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap()
}

/// A human's shim started from a root shell that holds capabilities (here:
/// a detached `/bin/sh` with the runner's full sets, bounding set included)
/// sheds them all before its nonce re-exec, so the capability-less proof
/// helper can read it and proves it. Before the shim shed them, this was
/// `proof-unreadable`.
#[test]
#[ignore = "needs root"]
fn a_human_shim_started_from_a_root_shell_with_capabilities_is_proven() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test needs a root runner holding capabilities (as CI runs; README, \"Test\")"
    );
    const CAP_SETPCAP: u64 = 1 << 8;
    assert_ne!(
        own_effective_caps() & CAP_SETPCAP,
        0,
        "this root runner holds no CAP_SETPCAP: the case needs a root shell's capabilities"
    );
    for (name, kind) in [
        ("mosaic-human-cli", Kind::Human),
        ("mosaic-tester-cli", Kind::Tester),
    ] {
        let exe = shim(name);
        let (dir, sock, rx) = setup("root-caps", kind, &exe);
        let out = run_detached_from(&dir, &exe, &sock, &[], false);
        let d = decided(&rx);
        assert_eq!(d.code, None, "{name}: {d:?}");
        assert_eq!(out, r#"{"ok":true,"result":{}}"#, "{name}");
        // Every set empty, the bounding set included (an exec as root
        // would otherwise be granted the full set again).
        let names = ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"];
        for n in names {
            let line = d.caps.iter().find(|l| l.starts_with(n));
            let mask = line.and_then(|l| u64::from_str_radix(l[n.len()..].trim(), 16).ok());
            assert_eq!(mask, Some(0), "{name}: {n} {:?}", d.caps);
        }
    }
}

#[test]
fn human_shim_under_an_agent_marker_is_refused() {
    let exe = shim("mosaic-human-cli");
    let (_dir, sock, rx) = setup("human-marker", Kind::Human, &exe);
    let (code, out) = run_direct(&exe, &sock, &[("CLAUDECODE", "1")]);
    assert_eq!(decided(&rx).code.as_deref(), Some("proof-run-marker"));
    assert_eq!(code, Some(1));
    assert_eq!(out, r#"{"ok":false,"error":"proof-run-marker"}"#);
}

#[test]
fn tester_shim_passes_an_agent_marker_but_not_a_managed_run() {
    let exe = shim("mosaic-tester-cli");
    let (dir, sock, rx) = setup("tester-agent", Kind::Tester, &exe);
    let out = run_detached(
        &dir,
        &exe,
        &sock,
        &[("CLAUDECODE", "1"), ("CODEX_SANDBOX", "seatbelt")],
    );
    assert_eq!(decided(&rx).code, None);
    assert_eq!(out, r#"{"ok":true,"result":{}}"#);

    let (_dir, sock, rx) = setup("tester-run", Kind::Tester, &exe);
    let (code, out) = run_direct(&exe, &sock, &[("MOSAIC_RUN_ID", "run-7")]);
    assert_eq!(decided(&rx).code.as_deref(), Some("tester-required"));
    assert_eq!(code, Some(1));
    assert_eq!(out, r#"{"ok":false,"error":"tester-required"}"#);
}

#[test]
fn a_copy_of_the_shim_elsewhere_is_refused() {
    let exe = shim("mosaic-human-cli");
    let (dir, sock, rx) = setup("copy", Kind::Human, &exe);
    let copy = dir.0.join("mosaic-human-cli");
    std::fs::copy(&exe, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_detached(&dir, &copy, &sock, &[]);
    assert_eq!(decided(&rx).code.as_deref(), Some("proof-exe"));
    assert_eq!(out, r#"{"ok":false,"error":"proof-exe"}"#);
}

#[test]
fn the_human_shim_cannot_pass_the_tester_proof() {
    // The tester server expects the tester shim; the human shim sends a
    // `human` proof, so judge the tester shim's proof against the human exe.
    let human = shim("mosaic-human-cli");
    let tester = shim("mosaic-tester-cli");
    let (dir, sock, rx) = setup("cross", Kind::Tester, &human);
    let out = run_detached(&dir, &tester, &sock, &[]);
    assert_eq!(decided(&rx).code.as_deref(), Some("proof-exe"));
    assert_eq!(out, r#"{"ok":false,"error":"proof-exe"}"#);
}

#[test]
fn a_shim_in_its_own_pid_namespace_is_refused() {
    common::require_pid_namespace();
    let exe = shim("mosaic-human-cli");
    let (_dir, sock, rx) = setup("pidns", Kind::Human, &exe);
    let mut child = Command::new("unshare")
        .args(["-p", "-f", "--mount-proc", "/usr/bin/env", "-i"])
        .arg(&exe)
        .arg(&sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(REQUEST.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let d = decided(&rx);
    // The shim reports its namespace's pid, which is not the kernel's.
    assert_eq!(d.claimed_pid, 1);
    assert_ne!(d.peer_pid, 1);
    assert_eq!(d.code.as_deref(), Some("proof-pid"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim_end(),
        r#"{"ok":false,"error":"proof-pid"}"#
    );
}
