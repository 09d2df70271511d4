//! Integration tests for `mosaic-leased`: the real binary, real Unix sockets,
//! real processes as anchors, descendants and strangers.

// The helper that plays anchor / descendant / stranger (Python 3, stdlib only).
const AGENT: &str = r##"
# Test helper for proofd/tests/leased_daemon.rs: a real process that talks to
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

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-leased");

/// A private directory (0700), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
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
    fn path(&self, leaf: &str) -> PathBuf {
        self.0.join(leaf)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Daemon {
    child: Option<Child>,
    sock: PathBuf,
}

fn daemon_command(sock: &Path, state: &Path, env: &[(&str, &str)]) -> Command {
    daemon_command_of(Path::new(BIN), sock, state, env)
}

/// [`daemon_command`] running the daemon at `bin`.
fn daemon_command_of(bin: &Path, sock: &Path, state: &Path, env: &[(&str, &str)]) -> Command {
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

fn spawn_daemon(sock: &Path, state: &Path, env: &[(&str, &str)]) -> Child {
    daemon_command(sock, state, env).spawn().unwrap()
}

impl Daemon {
    fn start(dir: &TempDir) -> Daemon {
        Daemon::start_with(dir, &dir.path("state.json"), &[])
    }

    fn start_with(dir: &TempDir, state: &Path, env: &[(&str, &str)]) -> Daemon {
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
    fn stop_with_stderr(mut self) -> (ExitStatus, String) {
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
    fn stop(mut self) -> ExitStatus {
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

/// Run the daemon expecting a startup refusal: (exit code, stderr).
fn refused_start(dir: &TempDir, state: &Path, sock: &Path) -> (Option<i32>, String) {
    let _ = dir;
    wait_refused(spawn_daemon(sock, state, &[]))
}

/// The exact outcome of a startup refusal: exit 2, one line `{"error":CODE}`.
fn refusal(code: &str) -> (Option<i32>, String) {
    (Some(2), format!("{{\"error\":\"{code}\"}}\n"))
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Fails the test unless it runs as root, saying what for. Every test that
/// calls it is `#[ignore = "needs root"]`: a plain run lists it as skipped,
/// the README's command (`--run-ignored all`) runs it.
fn require_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root to {why}: run it as root (README, \"Test\")"
    );
}

/// A private directory owned by the unprivileged user 65534 (needs root).
fn nobody_dir() -> TempDir {
    let dir = TempDir::new();
    std::os::unix::fs::chown(&dir.0, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

/// A copy of the daemon user 65534 may run, in a directory of its own (0755,
/// removed on drop): the build's own may sit under a directory only its
/// owner may enter (a checkout in a 0700 home), where that user's exec
/// fails.
struct NobodyBin(TempDir);

impl NobodyBin {
    fn new() -> NobodyBin {
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

    fn path(&self) -> PathBuf {
        self.0.path("mosaic-leased")
    }
}

/// Wait for a daemon that should refuse to start: (exit code, stderr).
fn wait_refused(mut child: Child) -> (Option<i32>, String) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (st.code(), err);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("daemon started although startup should be refused");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn connect(sock: &Path) -> UnixStream {
    let s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn read_reply(mut s: UnixStream) -> String {
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Write raw bytes, half-close, read the reply.
fn raw(sock: &Path, bytes: &[u8]) -> String {
    let mut s = connect(sock);
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_reply(s)
}

fn parse_reply(text: &str) -> Value {
    assert!(
        text.ends_with('\n'),
        "reply not newline-terminated: {text:?}"
    );
    assert_eq!(text.matches('\n').count(), 1, "more than one reply line");
    serde_json::from_str(text.trim_end()).unwrap()
}

/// One request from the test process itself.
fn req(sock: &Path, v: &Value) -> Value {
    let mut bytes = serde_json::to_vec(v).unwrap();
    bytes.push(b'\n');
    parse_reply(&raw(sock, &bytes))
}

/// The refusal code of a reply (asserts it is a refusal with only ok+code).
fn code(v: &Value) -> String {
    assert_eq!(v["ok"], json!(false), "expected refusal, got {v}");
    assert_eq!(
        v.as_object().unwrap().len(),
        2,
        "refusal carries extra keys: {v}"
    );
    v["code"].as_str().unwrap().to_owned()
}

fn ok(v: &Value) -> &Value {
    assert_eq!(v["ok"], json!(true), "expected success, got {v}");
    v
}

fn register(generation: u64) -> Value {
    json!({"action":"register_anchor","runtime_generation":generation})
}

fn auth(sid: &str, generation: u64) -> Value {
    json!({"action":"authenticate","session_id":sid,"runtime_generation":generation})
}

fn binding(n: u64) -> Value {
    json!({"compaction_epoch":n,"request_epoch":n + 1,"h_source":"sha256:aa","h_payload":"sha256:bb","schema_version":1})
}

fn mint(sid: &str, generation: u64, n: u64) -> Value {
    json!({"action":"mint_token","session_id":sid,"runtime_generation":generation,"binding":binding(n)})
}

fn consume(sid: &str, generation: u64, token: &str) -> Value {
    json!({"action":"consume_token","session_id":sid,"runtime_generation":generation,"token":token})
}

/// A Python process outside the test's own identity: it is the anchor, and
/// spawns descendants and strangers on command.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Agent {
    fn spawn(dir: &TempDir, sock: &Path) -> Agent {
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

    fn cmd(&mut self, cmd: Value) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        v["out"].as_str().unwrap().to_owned()
    }

    fn reply(&mut self, cmd: Value) -> Value {
        let out = self.cmd(cmd);
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("bad reply {out:?}"))
    }

    /// Request from the agent itself.
    fn req(&mut self, obj: Value) -> Value {
        self.reply(json!({"op":"req","obj":obj}))
    }

    /// Request from a process `depth` levels below the agent.
    fn nested(&mut self, depth: u32, obj: Value) -> Value {
        self.reply(json!({"op":"nested","depth":depth,"obj":obj}))
    }

    /// Request from a process re-parented away from the agent's tree.
    fn stranger(&mut self, obj: Value) -> Value {
        self.reply(json!({"op":"stranger","obj":obj}))
    }

    /// The token the agent itself mints for `binding(n)`.
    fn token(&mut self, sid: &str, generation: u64, n: u64) -> String {
        self.req(mint(sid, generation, n))["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn register(&mut self, generation: u64) -> String {
        let r = self.req(register(generation));
        ok(&r)["session_id"].as_str().unwrap().to_owned()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

fn is_id(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[test]
fn verbs_from_anchor_descendants_and_strangers() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let mut a = Agent::spawn(&dir, &d.sock);
    let sid = a.register(0);
    assert!(is_id(&sid));

    // The anchor itself and a grandchild authenticate.
    let r = a.req(auth(&sid, 0));
    assert_eq!(r, json!({"ok":true,"runtime_generation":0}));
    let r = a.nested(2, auth(&sid, 0));
    assert_eq!(r, json!({"ok":true,"runtime_generation":0}));

    // A stranger (re-parented away from the anchor) and the test process
    // (the anchor's parent, not its descendant) are refused.
    assert_eq!(code(&a.stranger(auth(&sid, 0))), "not-descendant");
    assert_eq!(code(&req(&d.sock, &auth(&sid, 0))), "not-descendant");
    assert_eq!(code(&req(&d.sock, &mint(&sid, 0, 1))), "not-descendant");

    // A grandchild mints, the anchor consumes: the binding comes back.
    let t = a.nested(2, mint(&sid, 0, 7));
    let token = ok(&t)["token"].as_str().unwrap().to_owned();
    assert!(is_id(&token));
    assert_eq!(t.as_object().unwrap().len(), 2);
    // A stranger cannot consume it.
    assert_eq!(
        code(&a.stranger(consume(&sid, 0, &token))),
        "not-descendant"
    );
    let c = a.req(consume(&sid, 0, &token));
    assert_eq!(
        c,
        json!({"ok":true,"binding":binding(7),"runtime_generation":0})
    );
    assert_eq!(
        code(&a.nested(1, consume(&sid, 0, &token))),
        "token-consumed"
    );

    // Tokens are distinct and single use.
    let t1 = a.token(&sid, 0, 1);
    let t2 = a.token(&sid, 0, 2);
    assert_ne!(t1, t2);
    ok(&a.req(consume(&sid, 0, &t2)));
    ok(&a.req(consume(&sid, 0, &t1)));

    // Unknown session / token, already-registered anchor.
    let fake = "A".repeat(43);
    assert_eq!(code(&a.req(auth(&fake, 0))), "unknown-session");
    assert_eq!(code(&a.req(consume(&sid, 0, &fake))), "unknown-token");
    assert_eq!(code(&a.req(register(0))), "already-registered");

    // A second anchor (the test process) gets its own session; it cannot use
    // the agent's tokens and the agent cannot use its session.
    let mine = ok(&req(&d.sock, &register(0)))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(mine, sid);
    let t3 = a.token(&sid, 0, 3);
    assert_eq!(
        code(&req(&d.sock, &consume(&mine, 0, &t3))),
        "unknown-token"
    );
    // The agent is the test's child, so the test's session accepts it.
    ok(&a.req(auth(&mine, 0)));
    assert_eq!(code(&a.stranger(auth(&mine, 0))), "not-descendant");
}

/// Every field rule, from the test process (a fresh anchor each time is not
/// needed: these are refused before identity is used).
#[test]
fn field_rules_refusals() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let s = &d.sock;
    let fake = "A".repeat(43);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"runtime_generation":0}), "missing-field"),
        (json!({"action":7,"runtime_generation":0}), "invalid-field"),
        (
            json!({"action":"renew","runtime_generation":0}),
            "unknown-action",
        ),
        (json!({"action":"register_anchor"}), "missing-field"),
        (
            json!({"action":"register_anchor","runtime_generation":-1}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":1.5}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":"1"}),
            "invalid-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"x":1}),
            "unknown-field",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":null}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":""}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"register_anchor","runtime_generation":0,"session_id":fake}),
            "session-id-forbidden",
        ),
        (
            json!({"action":"authenticate","runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"authenticate","session_id":fake}),
            "missing-field",
        ),
        (
            json!({"action":"authenticate","session_id":5,"runtime_generation":0}),
            "invalid-field",
        ),
        (
            json!({"action":"authenticate","session_id":fake,"runtime_generation":0,"token":"x"}),
            "unknown-field",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":{}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":[1]}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b"}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b","schema_version":1,"extra":0}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":-1,"request_epoch":1,"h_source":"a","h_payload":"b","schema_version":1}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,
                "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"","h_payload":"b","schema_version":1}}),
            "invalid-binding",
        ),
        (
            json!({"action":"mint_token","session_id":fake,"runtime_generation":0,"binding":binding(1),"token":"x"}),
            "unknown-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0}),
            "missing-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":1}),
            "invalid-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":"t","binding":binding(1)}),
            "unknown-field",
        ),
        (
            json!({"action":"consume_token","session_id":fake,"runtime_generation":0,"token":"t"}),
            "unknown-session",
        ),
    ];
    for (obj, want) in cases {
        assert_eq!(code(&req(s, &obj)), want, "for {obj}");
    }
    let raw_cases: Vec<(&[u8], &str)> = vec![
        (b"not json\n", "malformed-request"),
        (b"[1,2]\n", "malformed-request"),
        (b"\"register_anchor\"\n", "malformed-request"),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0\n",
            "malformed-request",
        ),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0} {}\n",
            "malformed-request",
        ),
        (
            b"{\"action\":\"register_anchor\",\"runtime_generation\":0,\"runtime_generation\":1}\n",
            "duplicate-field",
        ),
        (
            b"{\"action\":\"reg\xff\",\"runtime_generation\":0}\n",
            "malformed-request",
        ),
        (
            b"\xef\xbb\xbf{\"action\":\"register_anchor\",\"runtime_generation\":0}\n",
            "malformed-request",
        ),
    ];
    for (bytes, want) in raw_cases {
        assert_eq!(code(&parse_reply(&raw(s, bytes))), want, "for {bytes:?}");
    }
    // Still serving, and none of the above registered anything.
    let r = req(s, &register(0));
    assert!(is_id(ok(&r)["session_id"].as_str().unwrap()));
}

#[test]
fn framing_fails_closed_and_daemon_keeps_serving() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let s = &d.sock;
    let good = b"{\"action\":\"register_anchor\",\"runtime_generation\":0}";
    let serving = |g: u64| {
        // A refusal that proves a full parse + reply still happens.
        let r = req(
            s,
            &json!({"action":"authenticate","session_id":"x","runtime_generation":g}),
        );
        assert_eq!(code(&r), "unknown-session");
    };

    // Unterminated: EOF without newline; and an empty connection.
    assert_eq!(code(&parse_reply(&raw(s, good))), "unterminated-frame");
    serving(0);
    assert_eq!(code(&parse_reply(&raw(s, b""))), "unterminated-frame");
    serving(0);

    // Two frames in one write.
    let mut two = good.to_vec();
    two.push(b'\n');
    two.extend_from_slice(good);
    two.push(b'\n');
    assert_eq!(code(&parse_reply(&raw(s, &two))), "multiple-frames");
    serving(0);

    // A delayed second frame: no reply before EOF, then refusal.
    let mut c = connect(s);
    c.write_all(good).unwrap();
    c.write_all(b"\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut second = good.to_vec();
    second.push(b'\n');
    c.write_all(&second).unwrap();
    // The daemon may already have refused and closed its side.
    let _ = c.shutdown(std::net::Shutdown::Write);
    assert_eq!(code(&parse_reply(&read_reply(c))), "multiple-frames");
    serving(0);

    // Newline but no half-close: no success; closed at the 1 s deadline,
    // with the deadline's own code (never the request's answer).
    let mut c = connect(s);
    c.write_all(good).unwrap();
    c.write_all(b"\n").unwrap();
    assert_eq!(code(&parse_reply(&read_reply(c))), "deadline-exceeded");
    // Nothing at all, never closed: same deadline.
    let c = connect(s);
    assert_eq!(code(&parse_reply(&read_reply(c))), "deadline-exceeded");
    serving(0);

    // Oversized: more than 64 KiB without a newline, and a 64 KiB + 1 frame.
    let big = vec![b' '; 70 * 1024];
    assert_eq!(code(&parse_reply(&raw(s, &big))), "frame-too-large");
    serving(0);
    let pad = |total: usize| {
        let mut f = good.to_vec();
        f.resize(total - 1, b' ');
        f.push(b'\n');
        f
    };
    assert_eq!(
        code(&parse_reply(&raw(s, &pad(64 * 1024 + 1)))),
        "frame-too-large"
    );
    serving(0);
    // Exactly 64 KiB (newline included) is accepted.
    let r = parse_reply(&raw(s, &pad(64 * 1024)));
    assert!(is_id(ok(&r)["session_id"].as_str().unwrap()));

    // Non-UTF-8 bytes.
    assert_eq!(
        code(&parse_reply(&raw(s, b"\xff\xfe\n"))),
        "malformed-request"
    );
    serving(0);
}

#[path = "../../../tests/src/flood.rs"]
mod flood;
use flood::{first_answer, flood, open_files_limit, own_nofile_for_floods, Held};

/// How many good requests a flood test makes at most while it waits for
/// the flood (one every 50 ms): a daemon that never answers the flood fails
/// the test here instead of hanging it.
const GUARD: usize = 1200;

/// A good client's requests, one every 50 ms, until every flood connection
/// has been answered: each answered (`unknown-session`, the request's own
/// refusal), never `busy`. Returns the instant each reply arrived, to order
/// it against the flood's.
fn good_client_until_answered(sock: &Path, held: &Held) -> Vec<Instant> {
    let mut replies = Vec::new();
    for n in 0..GUARD {
        if n > 0 && held.all_answered() {
            return replies;
        }
        let reply = req(sock, &auth("no-such-session", 0));
        assert_eq!(code(&reply), "unknown-session", "request {n}");
        replies.push(Instant::now());
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "after {GUARD} good requests only {} flood connections were answered",
        held.answered()
    );
}

/// Issue 17: with 1,000 idle connections and 200 slow writers open, a good
/// client is answered every time, from while the whole flood is held, and
/// never `busy` (the daemon raised its descriptor limit and has room); every
/// flood connection is closed at the one-second deadline with
/// `deadline-exceeded`.
#[test]
fn a_flood_of_idle_and_slow_connections_never_starves_a_good_client() {
    own_nofile_for_floods();
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let pid = d.child.as_ref().unwrap().id();
    let (soft, hard) = open_files_limit(pid);
    assert_eq!(
        soft, hard,
        "the daemon raised its soft limit to the hard one"
    );
    let (seen, good) = flood(&d.sock, |held| good_client_until_answered(&d.sock, held));
    let first_flood = first_answer(&seen).expect("the flood was answered");
    assert!(
        good[0] < first_flood,
        "the good client was answered while every flood connection was held"
    );
    for (i, s) in seen.iter().enumerate() {
        assert!(s.at.is_some(), "connection {i} never closed");
        assert_eq!(
            code(&parse_reply(&s.reply)),
            "deadline-exceeded",
            "connection {i}"
        );
    }
    assert_eq!(d.stop().code(), Some(0));
}

/// With few descriptors (hard limit 256, so a cap of 64 connections), the
/// same flood is shed oldest first: all but the cap's worth of connections
/// are answered `busy`, the rest `deadline-exceeded`, and a good client is
/// answered every time, never `busy`.
#[test]
fn past_the_cap_the_oldest_idle_connection_is_shed_not_the_good_client() {
    own_nofile_for_floods();
    let dir = TempDir::new();
    let sock = dir.path("leased.sock");
    let mut cmd = daemon_command(&sock, &dir.path("state.json"), &[]);
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let d = Daemon {
        child: Some(child),
        sock: sock.clone(),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < until, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (seen, _) = flood(&sock, |held| good_client_until_answered(&sock, held));
    let busy = seen
        .iter()
        .filter(|s| s.reply.contains(r#""code":"busy""#))
        .count();
    // At most the cap (64) can wait for their deadline; the rest were shed.
    assert!(busy >= 1200 - 64 - 16, "only {busy} shed");
    for (i, s) in seen.iter().enumerate() {
        let c = code(&parse_reply(&s.reply));
        assert!(
            c == "busy" || c == "deadline-exceeded",
            "connection {i}: {c}"
        );
    }
    assert_eq!(d.stop().code(), Some(0));
}

#[test]
fn generations_replace_and_stale() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let mut a = Agent::spawn(&dir, &d.sock);
    let sid = a.register(1);
    let t1 = a.token(&sid, 1, 1);
    let t1b = a.token(&sid, 1, 2);
    ok(&a.req(consume(&sid, 1, &t1b)));

    // Lower generation: stale, for every authenticated request and register.
    assert_eq!(code(&a.req(auth(&sid, 0))), "stale-generation");
    assert_eq!(code(&a.nested(1, mint(&sid, 0, 1))), "stale-generation");
    assert_eq!(code(&a.req(consume(&sid, 0, &t1))), "stale-generation");
    assert_eq!(code(&a.req(register(0))), "stale-generation");

    // Higher generation from a descendant replaces the incarnation and
    // consumes every prior token of the session.
    assert_eq!(
        a.nested(1, auth(&sid, 2)),
        json!({"ok":true,"runtime_generation":2})
    );
    assert_eq!(code(&a.req(consume(&sid, 2, &t1))), "token-consumed");
    assert_eq!(code(&a.req(auth(&sid, 1))), "stale-generation");

    // A higher generation inside consume_token also consumes the token itself.
    let t2 = a.token(&sid, 2, 3);
    assert_eq!(code(&a.req(consume(&sid, 3, &t2))), "token-consumed");
    assert_eq!(
        a.req(auth(&sid, 3)),
        json!({"ok":true,"runtime_generation":3})
    );

    // register_anchor at a higher generation: new session_id, old one gone,
    // old tokens consumed.
    let t3 = a.token(&sid, 3, 4);
    assert_eq!(code(&a.req(register(3))), "already-registered");
    let sid2 = a.register(5);
    assert_ne!(sid, sid2);
    assert_eq!(code(&a.req(auth(&sid, 5))), "unknown-session");
    assert_eq!(code(&a.req(consume(&sid2, 5, &t3))), "token-consumed");
    let t4 = a.token(&sid2, 5, 5);
    assert_eq!(
        a.req(consume(&sid2, 5, &t4)),
        json!({"ok":true,"binding":binding(5),"runtime_generation":5})
    );
}

#[test]
fn restart_keeps_sessions_and_consumed_tokens() {
    let dir = TempDir::new();
    let state = dir.path("state.json");
    let d = Daemon::start(&dir);
    let sock = d.sock.clone();
    let mut a = Agent::spawn(&dir, &sock);
    let sid = a.register(4);
    let t1 = a.token(&sid, 4, 1);
    let t2 = a.token(&sid, 4, 2);
    ok(&a.req(consume(&sid, 4, &t1)));
    // The socket is created 0600 (the daemon's umask is 0077).
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    let (st, err) = d.stop_with_stderr();
    assert_eq!(st.code(), Some(0));
    // Nothing is logged in normal operation, least of all ids or tokens.
    assert_eq!(err, "", "the daemon wrote on stderr");
    assert!(!sock.exists(), "socket removed on SIGTERM");
    let meta = std::fs::symlink_metadata(&state).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    // No temp files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let d = Daemon::start(&dir);
    assert_eq!(
        a.req(auth(&sid, 4)),
        json!({"ok":true,"runtime_generation":4})
    );
    assert_eq!(code(&a.req(consume(&sid, 4, &t1))), "token-consumed");
    assert_eq!(code(&a.req(auth(&sid, 3))), "stale-generation");
    assert_eq!(code(&a.req(register(4))), "already-registered");
    assert_eq!(code(&a.stranger(auth(&sid, 4))), "not-descendant");
    assert_eq!(
        a.nested(1, consume(&sid, 4, &t2)),
        json!({"ok":true,"binding":binding(2),"runtime_generation":4})
    );
    // And the consumption of t2 survives another restart.
    assert_eq!(d.stop().code(), Some(0));
    let _d = Daemon::start(&dir);
    assert_eq!(code(&a.req(consume(&sid, 4, &t2))), "token-consumed");
}

fn write_state(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn startup_code(dir: &TempDir, state: &Path) -> String {
    let (exit, err) = refused_start(dir, state, &dir.path("leased.sock"));
    assert_eq!(exit, Some(2), "stderr {err:?}");
    assert_eq!(err.lines().count(), 1, "exactly one stderr line: {err:?}");
    let v: Value = serde_json::from_str(err.trim_end()).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 1);
    assert!(!err.contains(dir.0.to_str().unwrap()), "no path in error");
    v["error"].as_str().unwrap().to_owned()
}

fn valid_state(sessions: &[(i32, u64)]) -> Value {
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

#[test]
fn startup_refusals() {
    let dir = TempDir::new();
    let state = dir.path("state.json");

    // A well-formed state starts (sanity for the fixtures below).
    write_state(&state, &valid_state(&[(10, 5), (10, 6)]).to_string(), 0o600);
    let d = Daemon::start_with(&dir, &state, &[]);
    assert_eq!(d.stop().code(), Some(0));

    write_state(&state, &valid_state(&[(10, 5)]).to_string(), 0o644);
    assert_eq!(startup_code(&dir, &state), "state-mode");
    write_state(&state, &valid_state(&[(10, 5)]).to_string(), 0o400);
    assert_eq!(startup_code(&dir, &state), "state-mode");

    std::fs::remove_file(&state).unwrap();
    let target = dir.path("real.json");
    write_state(&target, &valid_state(&[(10, 5)]).to_string(), 0o600);
    std::os::unix::fs::symlink(&target, &state).unwrap();
    assert_eq!(startup_code(&dir, &state), "state-symlink");
    std::fs::remove_file(&state).unwrap();

    std::fs::create_dir(&state).unwrap();
    assert_eq!(startup_code(&dir, &state), "state-not-regular");
    std::fs::remove_dir(&state).unwrap();
    // A socket can't even be opened; it is still not a regular file.
    let listener = std::os::unix::net::UnixListener::bind(&state).unwrap();
    assert_eq!(startup_code(&dir, &state), "state-not-regular");
    drop(listener);
    std::fs::remove_file(&state).unwrap();

    write_state(&state, "{\"version\":1,\"sessions\":[", 0o600);
    assert_eq!(startup_code(&dir, &state), "state-corrupt");
    write_state(&state, "{\"version\":1,\"sessions\":[],\"extra\":1}", 0o600);
    assert_eq!(startup_code(&dir, &state), "state-corrupt");

    write_state(&state, &valid_state(&[(10, 5), (10, 5)]).to_string(), 0o600);
    assert_eq!(startup_code(&dir, &state), "state-duplicate-anchor");

    let mut bad = valid_state(&[(10, 5)]);
    bad["sessions"][0]["session_id"] = json!("short");
    write_state(&state, &bad.to_string(), 0o600);
    assert_eq!(startup_code(&dir, &state), "state-invalid");
    let mut bad = valid_state(&[(10, 5)]);
    bad["sessions"][0]["tokens"] = json!([{"token":"C".repeat(43),"runtime_generation":0,
        "binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b"},"consumed":false}]);
    write_state(&state, &bad.to_string(), 0o600);
    assert_eq!(startup_code(&dir, &state), "state-corrupt");
    bad["sessions"][0]["tokens"][0]["binding"]["schema_version"] = json!(1);
    bad["sessions"][0]["tokens"][0]["token"] = json!("C".repeat(44));
    write_state(&state, &bad.to_string(), 0o600);
    assert_eq!(startup_code(&dir, &state), "state-invalid");
    write_state(&state, "{\"version\":2,\"sessions\":[]}", 0o600);
    assert_eq!(startup_code(&dir, &state), "state-invalid");

    let big = format!(
        "{{\"version\":1,\"sessions\":[]{}}}",
        " ".repeat(4 * 1024 * 1024)
    );
    write_state(&state, &big, 0o600);
    assert_eq!(startup_code(&dir, &state), "state-too-large");
    std::fs::remove_file(&state).unwrap();

    // Socket path taken by a regular file; bad command lines.
    let sock = dir.path("leased.sock");
    std::fs::write(&sock, "x").unwrap();
    let (exit, err) = refused_start(&dir, &state, &sock);
    assert_eq!(
        (exit, err.as_str()),
        (Some(2), "{\"error\":\"socket-path-occupied\"}\n")
    );
    std::fs::remove_file(&sock).unwrap();
    for args in [&["--socket"][..], &["--state", "x"]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(out.stderr, b"{\"error\":\"usage\"}\n");
    }
    // An option it does not take is named on one line of its own.
    let out = Command::new(BIN)
        .args(["--socket", "a", "--state", "b", "--x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        out.stderr,
        b"mosaic-leased: unknown option \"--x\"; see mosaic-leased --help\n"
    );
    // A missing state file is an empty state.
    assert!(!state.exists());
    let d = Daemon::start_with(&dir, &state, &[]);
    ok(&req(&d.sock, &register(0)));
    assert!(state.exists());
}

#[test]
fn anchor_gone_peer_gone_and_ancestry_changed() {
    let dir = TempDir::new();
    // The walk pauses 600 ms before its re-read so a parent can die inside it.
    let d = Daemon::start_with(
        &dir,
        &dir.path("state.json"),
        &[("MOSAIC_LEASED_TEST_WALK_PAUSE_MS", "600")],
    );
    let mut a = Agent::spawn(&dir, &d.sock);
    let sid = a.register(0);

    // The connecting process exits (and is reaped) before the daemon reads
    // its request: its socket lives on in another process.
    assert_eq!(
        code(&a.reply(json!({"op":"peer_gone","obj":auth(&sid, 0)}))),
        "peer-gone"
    );
    assert_eq!(
        code(&a.reply(json!({"op":"peer_gone","obj":register(0)}))),
        "peer-gone"
    );

    // A grandchild whose parent is killed between the walk and the re-read.
    let r = a.reply(json!({"op":"nested","depth":2,"obj":auth(&sid, 0),"kill_parent_after":0.2}));
    assert_eq!(code(&r), "ancestry-changed");
    // Without the kill the same shape of tree passes.
    assert_eq!(
        a.nested(2, auth(&sid, 0)),
        json!({"ok":true,"runtime_generation":0})
    );

    // The anchor dies: its session is unusable by anyone.
    let mut b = Agent::spawn(&dir, &d.sock);
    let sid_b = b.register(0);
    b.kill();
    assert_eq!(code(&req(&d.sock, &auth(&sid_b, 0))), "anchor-gone");
    assert_eq!(code(&a.req(mint(&sid_b, 0, 1))), "anchor-gone");
}

/// A state file another user owns is refused `state-owner` at startup.
/// Needs root, to give the file away.
#[test]
#[ignore = "needs root"]
fn a_state_file_of_another_user_is_state_owner() {
    require_root("give the state file to uid 65534");
    let dir = TempDir::new();
    let state = dir.path("state.json");
    write_state(&state, &valid_state(&[]).to_string(), 0o600);
    std::os::unix::fs::chown(&state, Some(NOBODY), None).unwrap();
    assert_eq!(startup_code(&dir, &state), "state-owner");
    // The file stays as it was, and is still its owner's.
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        valid_state(&[]).to_string()
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&state).unwrap()),
        NOBODY
    );
}

/// A peer the daemon's PID namespace can't see has no PID there (SO_PEERCRED
/// reports 0): it can be neither anchor nor descendant, so every request
/// refuses `peer-unidentified`. The daemon runs as PID 1 of its own PID
/// namespace (under `unshare`, in a user namespace so no privilege is
/// needed); this test process connects from outside it.
#[test]
fn a_peer_outside_the_daemons_pid_namespace_is_unidentified() {
    let dir = TempDir::new();
    let sock = dir.path("leased.sock");
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "--pid", "--fork", "true"])
        .status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "unshare --user --map-root-user --pid is not permitted here: this case needs a PID namespace"
    );
    let mut child = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--pid",
            "--fork",
            "--kill-child",
        ])
        .arg(BIN)
        .arg("--socket")
        .arg(&sock)
        .arg("--state")
        .arg(dir.path("state.json"))
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&sock).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "daemon exited early");
        assert!(Instant::now() < until, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(code(&req(&sock, &register(0))), "peer-unidentified");
    assert_eq!(
        code(&req(&sock, &auth("0".repeat(32).as_str(), 0))),
        "peer-unidentified"
    );
    // Killing `unshare` takes the daemon with it (--kill-child).
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn token_and_session_limits() {
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let mut a = Agent::spawn(&dir, &d.sock);
    let sid = a.register(0);
    let mut tokens = Vec::new();
    for n in 0..32 {
        let t = a.req(mint(&sid, 0, n));
        tokens.push(ok(&t)["token"].as_str().unwrap().to_owned());
    }
    assert_eq!(code(&a.req(mint(&sid, 0, 99))), "too-many-tokens");
    ok(&a.req(consume(&sid, 0, &tokens[0])));
    ok(&a.req(mint(&sid, 0, 100)));
    assert_eq!(code(&a.req(mint(&sid, 0, 101))), "too-many-tokens");

    // 127 more live anchors fill the session table (128 with the agent).
    let out = a.cmd(json!({"op":"many","n":127,"obj":register(0)}));
    let codes: Vec<String> = serde_json::from_str(&out).unwrap();
    assert_eq!(codes.len(), 127);
    assert!(codes.iter().all(|c| c == "ok"), "{codes:?}");
    assert_eq!(code(&req(&d.sock, &register(0))), "too-many-sessions");
    // When those anchors exit, their sessions are dropped on the next register.
    assert_eq!(a.cmd(json!({"op":"release"})), "released");
    ok(&req(&d.sock, &register(0)));
    ok(&a.req(auth(&sid, 0)));
}

#[test]
fn failed_state_write_changes_nothing() {
    let dir = TempDir::new();
    let sub = dir.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let d = Daemon::start_with(&dir, &sub.join("state.json"), &[]);
    let mut a = Agent::spawn(&dir, &d.sock);
    let sid = a.register(0);
    let t = a.token(&sid, 0, 1);
    // Take the state directory away: saves fail, nothing is acknowledged.
    std::fs::rename(&sub, dir.path("moved")).unwrap();
    assert_eq!(code(&a.req(mint(&sid, 0, 2))), "state-write-failed");
    assert_eq!(code(&a.req(consume(&sid, 0, &t))), "state-write-failed");
    assert_eq!(code(&a.req(auth(&sid, 1))), "state-write-failed");
    // Reads that change nothing still work.
    assert_eq!(
        a.req(auth(&sid, 0)),
        json!({"ok":true,"runtime_generation":0})
    );
    std::fs::rename(dir.path("moved"), &sub).unwrap();
    // The refused consume did not happen; the refused bump did not either.
    assert_eq!(
        a.req(consume(&sid, 0, &t)),
        json!({"ok":true,"binding":binding(1),"runtime_generation":0})
    );
}

/// docs/leased.md lists every refusal and startup code, as a table row.
#[test]
fn docs_list_every_code() {
    use mosaic_leased::code::{Code, StartupError};
    let doc = include_str!("../../../docs/leased.md");
    for c in Code::ALL {
        assert!(doc.contains(&format!("| `{}` |", c.as_str())), "{c:?}");
    }
    for c in StartupError::ALL {
        assert!(doc.contains(&format!("| `{}` |", c.as_str())), "{c:?}");
    }
    let mut seen = std::collections::HashSet::new();
    for c in Code::ALL {
        assert!(seen.insert(c.as_str()), "duplicate {c:?}");
        assert!(c
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-'));
    }
}

#[test]
fn a_second_daemon_on_the_same_state_refuses_and_leaves_the_first_serving() {
    let dir = TempDir::new();
    let state = dir.path("state.json");
    let first = Daemon::start_with(&dir, &state, &[]);
    let mut agent = Agent::spawn(&dir, &first.sock);
    agent.register(1);
    // Another socket path, same state file: refused before it binds anything.
    let other = dir.path("other.sock");
    let (exit, err) = refused_start(&dir, &state, &other);
    assert_eq!(
        (exit, err.as_str()),
        (Some(2), "{\"error\":\"state-locked\"}\n")
    );
    assert!(!other.exists());
    // Same socket path: the first daemon's socket is not taken over.
    let (exit, err) = refused_start(&dir, &state, &first.sock);
    assert_eq!(
        (exit, err.as_str()),
        (Some(2), "{\"error\":\"state-locked\"}\n")
    );
    agent.register(2);
    assert!(first.stop().success());
    // The lock goes with its holder, also after SIGKILL.
    let mut second = Daemon::start_with(&dir, &state, &[]);
    let mut child = second.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let third = Daemon::start_with(&dir, &state, &[]);
    assert!(third.stop().success());
}

/// Spawns the daemon with `setup` run in the child between fork and exec
/// (async-signal-safe syscalls only) and waits for its socket. A setup the
/// environment refuses fails the test.
fn spawn_daemon_in(
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

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The unprivileged user root-only tests run the daemon as.
const NOBODY: u32 = 65534;

/// Drop the child to `NOBODY` (no supplementary groups).
fn become_nobody() -> std::io::Result<()> {
    // SAFETY: plain syscalls without pointers to memory.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setgid(NOBODY))?;
        check(libc::setuid(NOBODY))
    }
}

/// Runs the daemon with `setup` run in the child between fork and exec
/// (async-signal-safe syscalls only), expecting a startup refusal. A setup
/// the environment refuses fails the test.
fn refused_start_in(
    bin: &Path,
    sock: &Path,
    state: &Path,
    setup: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = daemon_command_of(bin, sock, state, &[]);
    // SAFETY: `setup` makes plain syscalls on memory prepared before fork.
    unsafe { cmd.pre_exec(setup) };
    match cmd.spawn() {
        Ok(child) => wait_refused(child),
        Err(e) => panic!("the test setup failed in the child: {e}"),
    }
}

/// A private mount namespace for the child: later mounts stay in it.
fn private_mounts() -> std::io::Result<()> {
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

/// `proc-unreadable`: the daemon runs as an unprivileged user (65534) with
/// its own real procfs mounted `hidepid=1`, the kernel's "no access to other
/// users' /proc/<pid>" mode. A peer of another user (this test, root) is
/// identified by SO_PEERCRED and pinned, but its `/proc/<pid>/stat` answers
/// EPERM: not a vanished process, so the refusal is `proc-unreadable`, both
/// when it registers and on the walk of an existing session. Needs root (to
/// mount procfs and change user).
#[test]
#[ignore = "needs root"]
fn a_peer_whose_proc_entry_the_daemon_may_not_read_is_proc_unreadable() {
    require_root("mount procfs hidepid=1 and run the daemon as 65534");
    use std::os::unix::process::CommandExt;
    let dir = nobody_dir();
    // A live anchor the daemon can read: a process of the daemon's user,
    // with a session for it in the state file.
    let mut anchor = Command::new("sleep")
        .arg("60")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let anchor_pid = anchor.id() as i32;
    let stat = std::fs::read_to_string(format!("/proc/{anchor_pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let start: u64 = after.split(' ').nth(19).unwrap().parse().unwrap();
    let mut state = valid_state(&[(anchor_pid, start)]);
    state["sessions"][0]["uid"] = json!(NOBODY);
    let sid = state["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let state_path = dir.path("state.json");
    write_state(&state_path, &state.to_string(), 0o600);
    std::os::unix::fs::chown(&state_path, Some(NOBODY), Some(NOBODY)).unwrap();

    let nobody_bin = NobodyBin::new();
    let d = spawn_daemon_in(&nobody_bin.path(), &dir, move || {
        private_mounts()?;
        // SAFETY: plain syscalls with static NUL-terminated strings.
        unsafe {
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                0,
                c"hidepid=1".as_ptr().cast(),
            ))?;
        }
        become_nobody()
    });
    // The host's /proc is untouched (the mount is private to the daemon).
    assert!(std::fs::read_to_string("/proc/1/stat").is_ok());

    assert_eq!(code(&req(&d.sock, &register(0))), "proc-unreadable");
    // The session exists and its anchor is readable, so the walk starts and
    // fails on this peer's own entry, not with not-descendant or anchor-gone.
    assert_eq!(code(&req(&d.sock, &auth(&sid, 0))), "proc-unreadable");
    assert_eq!(code(&req(&d.sock, &mint(&sid, 0, 1))), "proc-unreadable");
    // Refusals before /proc is consulted are unchanged.
    assert_eq!(
        code(&req(&d.sock, &auth(&"A".repeat(43), 0))),
        "unknown-session"
    );
    // Nothing was written: the state file is as it was.
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    assert_eq!(on_disk, state);
    assert_eq!(d.stop().code(), Some(0));
    let _ = anchor.kill();
    let _ = anchor.wait();
}

/// The seccomp filter for `internal`: `getrandom(2)` fails with ENOSYS,
/// every other syscall is allowed.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn deny_getrandom() -> std::io::Result<()> {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let prog = [
        f(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        f(JEQ_K, 0, 3, ARCH),
        f(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        f(JEQ_K, 0, 1, libc::SYS_getrandom as u32),
        f(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        f(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a valid filter program that outlives the call.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        check(libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
        ))
    }
}

/// `internal`: the OS RNG is unavailable to the daemon. A seccomp filter
/// makes `getrandom(2)` fail with ENOSYS and an empty tmpfs over `/dev` (in
/// the daemon's own mount namespace) removes the `/dev/urandom` fallback, so
/// no session id can be minted: `register_anchor` answers `internal`, writes
/// nothing, and the daemon keeps serving. Needs root for the mount; the
/// seccomp filter is written for x86_64 and aarch64 (elsewhere the test is
/// not built).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
#[ignore = "needs root"]
fn no_os_randomness_is_internal_and_changes_nothing() {
    {
        require_root("mount a tmpfs over /dev");
        let dir = TempDir::new();
        let d = spawn_daemon_in(Path::new(BIN), &dir, || {
            private_mounts()?;
            // SAFETY: plain syscalls with static NUL-terminated strings.
            unsafe {
                check(libc::mount(
                    c"none".as_ptr(),
                    c"/dev".as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                ))?;
            }
            deny_getrandom()
        });
        let mut a = Agent::spawn(&dir, &d.sock);
        assert_eq!(code(&a.req(register(0))), "internal");
        assert_eq!(code(&req(&d.sock, &register(3))), "internal");
        // Nothing was registered or written.
        assert!(!dir.path("state.json").exists());
        assert_eq!(code(&a.req(auth(&"A".repeat(43), 0))), "unknown-session");
        // The daemon still serves and still frames correctly.
        assert_eq!(
            code(&parse_reply(&raw(&d.sock, b"{\"action\":1"))),
            "unterminated-frame"
        );
        assert_eq!(d.stop().code(), Some(0));
    }
}

/// `state-unreadable` where opening fails for a reason other than a missing
/// file or a symlink. The daemon opens `FILE.lock` (read-write, created)
/// before the state itself, so a lock path that cannot be opened refuses
/// with the same code: here it is a directory (EISDIR), the state's directory
/// is missing (ENOENT: a missing *file* is an empty state, a missing
/// directory is not created), or a path component is a regular file
/// (ENOTDIR). Nothing is created or changed; no socket is bound.
#[test]
fn a_state_path_that_cannot_be_opened_is_state_unreadable() {
    let dir = TempDir::new();
    let state = dir.path("state.json");
    let sock = dir.path("leased.sock");
    let text = valid_state(&[(10, 5)]).to_string();
    write_state(&state, &text, 0o600);
    let lock = dir.path("state.json.lock");
    std::fs::create_dir(&lock).unwrap();
    assert_eq!(
        refused_start(&dir, &state, &sock),
        refusal("state-unreadable")
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), text);
    assert_eq!(listing(&dir.0), ["state.json", "state.json.lock"]);
    assert!(listing(&lock).is_empty());
    std::fs::remove_dir(&lock).unwrap();

    for bad in [
        dir.path("absent").join("state.json"),
        state.join("state.json"),
    ] {
        assert_eq!(
            refused_start(&dir, &bad, &sock),
            refusal("state-unreadable")
        );
        assert_eq!(listing(&dir.0), ["state.json"]);
        assert_eq!(std::fs::read_to_string(&state).unwrap(), text);
    }
}

/// `state-unreadable` from the read itself: a regular file, mode 0600, owned
/// by the daemon's user, that opens but cannot be read. The daemon, in its
/// own mount namespace, sees `/proc/self/mem` bind-mounted over the state
/// path; reading it at offset 0 (never mapped) fails with EIO. Only the
/// lock file is created beside the state (before the read, as documented);
/// the state file is unchanged and no socket is bound. Needs root for the
/// mount.
#[test]
#[ignore = "needs root"]
fn a_state_file_that_opens_but_cannot_be_read_is_state_unreadable() {
    require_root("bind-mount over the state file");
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new();
    let state = dir.path("state.json");
    let text = valid_state(&[(10, 5)]).to_string();
    write_state(&state, &text, 0o600);
    let target = std::ffi::CString::new(state.as_os_str().as_bytes()).unwrap();
    let got = refused_start_in(
        Path::new(BIN),
        &dir.path("leased.sock"),
        &state,
        move || {
            private_mounts()?;
            // SAFETY: plain syscalls with NUL-terminated strings made before fork.
            unsafe {
                check(libc::mount(
                    c"/proc/self/mem".as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ))
            }
        },
    );
    assert_eq!(got, refusal("state-unreadable"));
    assert_eq!(std::fs::read_to_string(&state).unwrap(), text);
    assert_eq!(listing(&dir.0), ["state.json", "state.json.lock"]);
    assert_eq!(
        std::fs::metadata(dir.path("state.json.lock"))
            .unwrap()
            .len(),
        0
    );
}

/// `socket-bind-failed`: the socket path is free (so not
/// `socket-path-occupied`) but bind(2) fails: its directory is missing
/// (ENOENT, not created), a path component is a regular file (ENOTDIR), or
/// the path does not fit `sun_path` (107 bytes and a NUL) although the filesystem
/// would take it. The state was loaded first, so `FILE.lock` exists beside
/// it; nothing else is created and the state file is unchanged.
#[test]
fn a_socket_path_that_cannot_be_bound_is_socket_bind_failed() {
    let dir = TempDir::new();
    let state = dir.path("state.json");
    let text = valid_state(&[(10, 5)]).to_string();
    write_state(&state, &text, 0o600);
    let long = dir.path(&"s".repeat(200));
    assert!(long.as_os_str().len() >= 108);
    for sock in [
        dir.path("absent").join("leased.sock"),
        state.join("leased.sock"),
        long,
    ] {
        assert_eq!(
            refused_start(&dir, &state, &sock),
            refusal("socket-bind-failed")
        );
        assert_eq!(listing(&dir.0), ["state.json", "state.json.lock"]);
        assert_eq!(std::fs::read_to_string(&state).unwrap(), text);
    }
    // The same state and a good socket path: the daemon starts.
    let d = Daemon::start_with(&dir, &state, &[]);
    assert_eq!(d.stop().code(), Some(0));
}

/// `socket-bind-failed` for a daemon that may not write the socket's
/// directory: it runs as 65534 (its state directory and state are its own)
/// and the socket directory is root's, 0755. A free path fails to bind
/// (EACCES); a stale socket there cannot be unlinked, so it is not replaced
/// and stays as it was. Needs root to change user.
#[test]
#[ignore = "needs root"]
fn a_socket_directory_the_daemon_may_not_write_is_socket_bind_failed() {
    require_root("run the daemon as 65534");
    let nobody_bin = NobodyBin::new();
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = nobody_dir();
    let state = dir.path("state.json");
    let text = valid_state(&[(10, 5)]).to_string();
    write_state(&state, &text, 0o600);
    std::os::unix::fs::chown(&state, Some(NOBODY), Some(NOBODY)).unwrap();
    let sock_dir = dir.path("root-only");
    std::fs::create_dir(&sock_dir).unwrap();
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = sock_dir.join("leased.sock");

    let got = refused_start_in(&nobody_bin.path(), &sock, &state, become_nobody);
    assert_eq!(got, refusal("socket-bind-failed"));
    assert!(listing(&sock_dir).is_empty());

    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let stale = std::fs::symlink_metadata(&sock).unwrap();
    assert!(stale.file_type().is_socket());
    let got = refused_start_in(&nobody_bin.path(), &sock, &state, become_nobody);
    assert_eq!(got, refusal("socket-bind-failed"));
    let after = std::fs::symlink_metadata(&sock).unwrap();
    assert!(after.file_type().is_socket());
    assert_eq!((after.ino(), after.mtime()), (stale.ino(), stale.mtime()));
    assert_eq!(listing(&sock_dir), ["leased.sock"]);

    assert_eq!(std::fs::read_to_string(&state).unwrap(), text);
    assert_eq!(
        listing(&dir.0),
        ["root-only", "state.json", "state.json.lock"]
    );
}
