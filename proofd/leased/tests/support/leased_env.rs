//! Shared setup of the lease broker's tests (`peer_identity.rs`, `request_refusals.rs`, `floods.rs`, `sessions_and_tokens.rs`, `startup.rs`): the Python agent that plays anchor, descendant and stranger, a daemon started on a private socket, requests and their replies, and the root-only child setups.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// The helper that plays anchor / descendant / stranger (Python 3, stdlib only).
pub const AGENT: &str = r##"
# Test helper for proofd/leased/tests/support/leased_env.rs: a real process that talks to
# mosaic-leased. `agent SOCK` reads one JSON command per stdin line and
# answers one JSON line on stdout; `nested SOCK DEPTH HEXREQ [KILLPARENT]`
# runs the request DEPTH processes further down the tree.
import json, os, select, signal, socket, subprocess, sys, time

SCRIPT = os.path.abspath(__file__)


def request(sock, raw, kill_parent_after=None):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sock)
    s.sendall(raw)
    s.shutdown(socket.SHUT_WR)
    if kill_parent_after is not None:
        time.sleep(kill_parent_after)
        os.kill(os.getppid(), signal.SIGKILL)
    return read_all(s)


def read_all(s):
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    return data.decode()


def nested(sock, depth, hexreq, kill=None):
    if depth > 0:
        args = [sys.executable, SCRIPT, "nested", sock, str(depth - 1), hexreq]
        if kill is not None:
            args.append(kill)
        # stdout is inherited: the innermost process writes straight to the
        # agent, even if an intermediate process is killed.
        subprocess.run(args, check=False)
        return
    k = float(kill) if kill is not None else None
    sys.stdout.write(request(sock, bytes.fromhex(hexreq), k))
    sys.stdout.flush()


def stranger(sock, raw):
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:
        mid = os.getpid()
        if os.fork() == 0:
            os.close(r)
            deadline = time.time() + 5
            while os.getppid() == mid and time.time() < deadline:
                time.sleep(0.01)
            try:
                out = request(sock, raw)
            except Exception as e:
                out = "client-error " + str(e)
            os.write(w, out.encode())
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(mid, 0)
    data = b""
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        data += c
    os.close(r)
    return data.decode()


def peer_gone(sock, raw):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(raw)
        socket.send_fds(b, [b"x"], [s.fileno()])
        os._exit(0)
    _, fds, _, _ = socket.recv_fds(a, 1, 1)
    os.waitpid(pid, 0)
    s = socket.socket(fileno=fds[0])
    s.settimeout(5)
    s.shutdown(socket.SHUT_WR)
    return read_all(s)


HELD = []


def many(sock, n, raw):
    # n forked anchors, each registers and stays alive until `release`.
    hold_r, hold_w = os.pipe()
    # One after another: each child registers, reports, then waits.
    pids = []
    codes = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(hold_w)
            out = request(sock, raw)
            os.write(w, json.dumps(json.loads(out).get("code", "ok")).encode())
            os.close(w)
            os.read(hold_r, 1)
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            c = os.read(r, 65536)
            if not c:
                break
            data += c
        os.close(r)
        codes.append(json.loads(data))
        pids.append(pid)
    os.close(hold_r)
    HELD.append((hold_w, pids))
    return codes


def release():
    for hold_w, pids in HELD:
        os.close(hold_w)
        for p in pids:
            os.waitpid(p, 0)
    HELD.clear()


def agent(sock):
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        raw = (json.dumps(cmd["obj"]) + "\n").encode() if "obj" in cmd else b""
        if op == "pid":
            out = str(os.getpid())
        elif op == "req":
            out = request(sock, raw)
        elif op == "nested":
            args = [sys.executable, SCRIPT, "nested", sock, str(cmd["depth"]), raw.hex()]
            if "kill_parent_after" in cmd:
                args.append(str(cmd["kill_parent_after"]))
            out = subprocess.run(args, stdout=subprocess.PIPE, check=False).stdout.decode()
        elif op == "stranger":
            out = stranger(sock, raw)
        elif op == "peer_gone":
            out = peer_gone(sock, raw)
        elif op == "many":
            out = json.dumps(many(sock, cmd["n"], raw))
        elif op == "release":
            release()
            out = "released"
        else:
            out = "bad-op"
        sys.stdout.write(json.dumps({"out": out.strip()}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        agent(sys.argv[2])
    else:
        nested(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
"##;

pub const BIN: &str = env!("CARGO_BIN_EXE_mosaic-leased");

/// A private directory (0700), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "mosaic-leased-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempDir(p)
    }
    pub fn path(&self, leaf: &str) -> PathBuf {
        self.0.join(leaf)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Daemon {
    pub child: Option<Child>,
    pub sock: PathBuf,
}

pub fn daemon_command(sock: &Path, state: &Path, env: &[(&str, &str)]) -> Command {
    daemon_command_of(Path::new(BIN), sock, state, env)
}

/// [`daemon_command`] running the daemon at `bin`.
pub fn daemon_command_of(bin: &Path, sock: &Path, state: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--socket")
        .arg(sock)
        .arg("--state")
        .arg(state)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

pub fn spawn_daemon(sock: &Path, state: &Path, env: &[(&str, &str)]) -> Child {
    daemon_command(sock, state, env).spawn().unwrap()
}

impl Daemon {
    pub fn start(dir: &TempDir) -> Daemon {
        Daemon::start_with(dir, &dir.path("state.json"), &[])
    }

    pub fn start_with(dir: &TempDir, state: &Path, env: &[(&str, &str)]) -> Daemon {
        let sock = dir.path("leased.sock");
        let mut child = spawn_daemon(&sock, state, env);
        let until = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&sock).is_err() {
            if let Ok(Some(st)) = child.try_wait() {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("daemon exited early: {st:?} {err}");
            }
            assert!(Instant::now() < until, "daemon did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Daemon {
            child: Some(child),
            sock,
        }
    }

    /// SIGTERM and wait; also returns everything the daemon wrote on stderr.
    pub fn stop_with_stderr(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid, plain integers.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (st, err)
    }

    /// SIGTERM and wait.
    pub fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid, plain integers.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The exact outcome of a startup refusal: exit 2, one line `{"error":CODE}`.
pub fn refusal(code: &str) -> (Option<i32>, String) {
    (Some(2), format!("{{\"error\":\"{code}\"}}\n"))
}

/// Fails the test unless it runs as root, saying what for. Every test that
/// calls it is `#[ignore = "needs root"]`: a plain run lists it as skipped,
/// the README's command (`--run-ignored all`) runs it.
pub fn require_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root to {why}: run it as root (README, \"Test\")"
    );
}

/// A private directory owned by the unprivileged user 65534 (needs root).
pub fn nobody_dir() -> TempDir {
    let dir = TempDir::new();
    std::os::unix::fs::chown(&dir.0, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

/// A copy of the daemon user 65534 may run, in a directory of its own (0755,
/// removed on drop): the build's own may sit under a directory only its
/// owner may enter (a checkout in a 0700 home), where that user's exec
/// fails.
pub struct NobodyBin(pub TempDir);

impl NobodyBin {
    pub fn new() -> NobodyBin {
        let dir = TempDir::new();
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(BIN, dir.path("mosaic-leased")).unwrap();
        std::fs::set_permissions(
            dir.path("mosaic-leased"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        NobodyBin(dir)
    }

    pub fn path(&self) -> PathBuf {
        self.0.path("mosaic-leased")
    }
}

pub fn connect(sock: &Path) -> UnixStream {
    let s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

pub fn read_reply(mut s: UnixStream) -> String {
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Write raw bytes, half-close, read the reply.
pub fn raw(sock: &Path, bytes: &[u8]) -> String {
    let mut s = connect(sock);
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_reply(s)
}

pub fn parse_reply(text: &str) -> Value {
    assert!(
        text.ends_with('\n'),
        "reply not newline-terminated: {text:?}"
    );
    assert_eq!(text.matches('\n').count(), 1, "more than one reply line");
    serde_json::from_str(text.trim_end()).unwrap()
}

/// One request from the test process itself.
pub fn req(sock: &Path, v: &Value) -> Value {
    let mut bytes = serde_json::to_vec(v).unwrap();
    bytes.push(b'\n');
    parse_reply(&raw(sock, &bytes))
}

/// The refusal code of a reply (asserts it is a refusal with only ok+code).
pub fn code(v: &Value) -> String {
    assert_eq!(v["ok"], json!(false), "expected refusal, got {v}");
    assert_eq!(
        v.as_object().unwrap().len(),
        2,
        "refusal carries extra keys: {v}"
    );
    v["code"].as_str().unwrap().to_owned()
}

pub fn ok(v: &Value) -> &Value {
    assert_eq!(v["ok"], json!(true), "expected success, got {v}");
    v
}

pub fn register(generation: u64) -> Value {
    json!({"action":"register_anchor","runtime_generation":generation})
}

pub fn auth(sid: &str, generation: u64) -> Value {
    json!({"action":"authenticate","session_id":sid,"runtime_generation":generation})
}

pub fn binding(n: u64) -> Value {
    json!({"compaction_epoch":n,"request_epoch":n + 1,"h_source":"sha256:aa","h_payload":"sha256:bb","schema_version":1})
}

pub fn mint(sid: &str, generation: u64, n: u64) -> Value {
    json!({"action":"mint_token","session_id":sid,"runtime_generation":generation,"binding":binding(n)})
}

pub fn consume(sid: &str, generation: u64, token: &str) -> Value {
    json!({"action":"consume_token","session_id":sid,"runtime_generation":generation,"token":token})
}

/// A Python process outside the test's own identity: it is the anchor, and
/// spawns descendants and strangers on command.
pub struct Agent {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
}

impl Agent {
    pub fn spawn(dir: &TempDir, sock: &Path) -> Agent {
        let script = dir.path("agent.py");
        if !script.exists() {
            std::fs::write(&script, AGENT).unwrap();
        }
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("agent")
            .arg(sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Agent {
            child,
            stdin,
            stdout,
        }
    }

    pub fn cmd(&mut self, cmd: Value) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        v["out"].as_str().unwrap().to_owned()
    }

    pub fn reply(&mut self, cmd: Value) -> Value {
        let out = self.cmd(cmd);
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("bad reply {out:?}"))
    }

    /// Request from the agent itself.
    pub fn req(&mut self, obj: Value) -> Value {
        self.reply(json!({"op":"req","obj":obj}))
    }

    /// Request from a process `depth` levels below the agent.
    pub fn nested(&mut self, depth: u32, obj: Value) -> Value {
        self.reply(json!({"op":"nested","depth":depth,"obj":obj}))
    }

    /// Request from a process re-parented away from the agent's tree.
    pub fn stranger(&mut self, obj: Value) -> Value {
        self.reply(json!({"op":"stranger","obj":obj}))
    }

    /// The token the agent itself mints for `binding(n)`.
    pub fn token(&mut self, sid: &str, generation: u64, n: u64) -> String {
        self.req(mint(sid, generation, n))["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub fn register(&mut self, generation: u64) -> String {
        let r = self.req(register(generation));
        ok(&r)["session_id"].as_str().unwrap().to_owned()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn is_id(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub fn write_state(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn valid_state(sessions: &[(i32, u64)]) -> Value {
    let sessions: Vec<Value> = sessions
        .iter()
        .enumerate()
        .map(|(i, (pid, start))| {
            json!({"session_id": format!("{}{}", "B".repeat(42), ["A","Q","g","w"][i % 4]),
                   "anchor_pid": pid, "anchor_starttime": start, "uid": 0,
                   "runtime_generation": 0, "tokens": []})
        })
        .collect();
    json!({"version":1,"sessions":sessions})
}

/// Spawns the daemon with `setup` run in the child between fork and exec
/// (async-signal-safe syscalls only) and waits for its socket. A setup the
/// environment refuses fails the test.
pub fn spawn_daemon_in(
    bin: &Path,
    dir: &TempDir,
    setup: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) -> Daemon {
    use std::os::unix::process::CommandExt;
    let sock = dir.path("leased.sock");
    let mut cmd = daemon_command_of(bin, &sock, &dir.path("state.json"), &[]);
    // SAFETY: `setup` makes plain syscalls on memory prepared before fork.
    unsafe { cmd.pre_exec(setup) };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("the test setup failed in the child: {e}"),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&sock).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("daemon exited early: {st:?} {err}");
        }
        assert!(Instant::now() < until, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    Daemon {
        child: Some(child),
        sock,
    }
}

pub fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The unprivileged user root-only tests run the daemon as.
pub const NOBODY: u32 = 65534;

/// Drop the child to `NOBODY` (no supplementary groups).
pub fn become_nobody() -> std::io::Result<()> {
    // SAFETY: plain syscalls without pointers to memory.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setgid(NOBODY))?;
        check(libc::setuid(NOBODY))
    }
}

/// A private mount namespace for the child: later mounts stay in it.
pub fn private_mounts() -> std::io::Result<()> {
    // SAFETY: plain syscalls with static NUL-terminated strings.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))
    }
}
