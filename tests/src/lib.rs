//! Shared helpers for the workspace's cross-process tests: a private data
//! root, a real `mosaic-bus` child on a real socketpair, and raw socket I/O.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod fixture;
pub mod flood;
pub mod sealcheck;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `target/debug` (or whichever profile built this test).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe path");
    // target/<profile>/deps/<test> -> target/<profile>
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

/// Path of a workspace binary; fails loudly when it was not built
/// (the README's test command builds every binary first).
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        p.display()
    );
    p
}

/// Fails the test unless it runs as root, saying what root is needed for.
/// Every test that calls it is `#[ignore = "needs root"]`, so a plain run
/// lists it as skipped; the README's command (`--run-ignored all`) runs it,
/// and run so as another user it fails here instead of passing unchecked.
pub fn require_root(what: &str) {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root to {what}: run it as root (README, \"Test\")"
    );
}

/// A private data root, removed on drop.
pub fn data_root() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("mosaic-test-")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    d
}

/// The example business used across tests.
pub fn business() -> Value {
    json!({
        "id": "acme",
        "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["message.send"], "crossRole": ["git.merge.protected"]},
                   "tracker": {"bot": "acme-pm-bot"}},
            "cto": {"definition": "cto",
                    "authority": {"withinRole": ["message.send", "review.verdict"], "crossRole": []},
                    "tracker": {"bot": "acme-cto-bot"}},
            "dev": {"definition": "dev",
                    "authority": {"withinRole": [], "crossRole": []}}
        },
        "launch": {"by": "pm", "instances": ["cto", "dev"]},
        "vars": {"bus.tester": true}
    })
}

/// A boot config for `root` with the example business and a reader.
pub fn config(root: &Path) -> Value {
    json!({
        "dataRoot": root.to_str().expect("utf-8 path"),
        "businesses": {"acme": business()},
        "readers": ["acme"],
    })
}

/// This process's start time (field 22 of /proc/<pid>/stat), for launch records.
pub fn start_time(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(19)
        .expect("field 22")
        .parse()
        .expect("number")
}

/// A launch record for a real process.
pub fn launch(role: &str, run: &str, pid: u32) -> Value {
    json!({"business": "acme", "role": role, "run": run, "harness": "pi",
           "pid": pid, "startTime": start_time(pid)})
}

/// Polls `child` until it exits, or `limit` passes (`None`: it is left
/// running, for the caller to kill or keep).
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Runs a command that should exit on its own and returns its status code
/// and stderr; kills it after 15 s as a hang guard (code `None`), so a
/// broker that wrongly keeps serving fails the test instead of hanging it.
pub fn run_to_exit(mut cmd: Command) -> (Option<i32>, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().expect("spawn"));
    let code = wait_exit(&mut child.0, Duration::from_secs(15)).and_then(|s| s.code());
    let _ = child.0.kill();
    let _ = child.0.wait();
    let mut err = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    (code, err)
}

/// A child process killed and reaped when dropped, so a test that fails
/// half way leaves nothing running (a `--control` broker keeps serving
/// after its host goes).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real `mosaic-bus --host-fd 3` child and our end of its channel.
pub struct Broker {
    pub child: Child,
    host: BufReader<UnixStream>,
    pub socket: PathBuf,
    pub stderr_path: PathBuf,
    pub boot: Value,
}

impl Broker {
    /// Spawns the broker and sends `boot` as the first message; returns the
    /// broker and the boot reply (which may be a refusal).
    pub fn spawn(root: &Path, config: Value) -> (Broker, Value) {
        Broker::spawn_with(root, json!({"op": "boot", "config": config}), &[])
    }

    /// Spawns with a raw first message and extra environment.
    pub fn spawn_with(root: &Path, first: Value, env: &[(&str, &str)]) -> (Broker, Value) {
        Broker::spawn_line(root, &first.to_string(), env)
    }

    /// Spawns and sends `first` as the first line, byte for byte (so a test
    /// can send JSON no `Value` can hold, such as a repeated key).
    pub fn spawn_line(root: &Path, first: &str, env: &[(&str, &str)]) -> (Broker, Value) {
        Broker::spawn_on(root, first, env, None, None)
    }

    /// As [`Broker::spawn_line`], with `RLIMIT_NOFILE` (soft and hard) set
    /// to `nofile` in the child when given.
    pub fn spawn_limited(
        root: &Path,
        first: &str,
        env: &[(&str, &str)],
        nofile: Option<u64>,
    ) -> (Broker, Value) {
        Broker::spawn_on(root, first, env, nofile, None)
    }

    /// Boots a broker that sees `kernel` instead of the one it runs on (the
    /// filter is installed before exec and its `mosaic-proofd` inherits it).
    pub fn start_on(root: &Path, kernel: OldKernel) -> Broker {
        let first = json!({"op": "boot", "config": config(root)}).to_string();
        let (b, reply) = Broker::spawn_on(root, &first, &[], None, Some(kernel));
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        b
    }

    /// Boots the example config with extra environment, on `kernel` when
    /// given (see [`Broker::start_on`]).
    pub fn start_with(root: &Path, kernel: Option<OldKernel>, env: &[(&str, &str)]) -> Broker {
        let first = json!({"op": "boot", "config": config(root)}).to_string();
        let (b, reply) = Broker::spawn_on(root, &first, env, None, kernel);
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        b
    }

    fn spawn_on(
        root: &Path,
        first: &str,
        env: &[(&str, &str)],
        nofile: Option<u64>,
        kernel: Option<OldKernel>,
    ) -> (Broker, Value) {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let fd = theirs.as_raw_fd();
        let stderr_path = root.with_extension("stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(bin("mosaic-bus"));
        cmd.args(["--host-fd", "3"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: dup2 and setrlimit are async-signal-safe; dup2 clears CLOEXEC on fd 3.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(n) = nofile {
                    let rl = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        if let Some(kernel) = kernel {
            kernel.apply(&mut cmd);
        }
        let child = cmd.spawn().expect("spawn mosaic-bus");
        drop(theirs);
        ours.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut b = Broker {
            child,
            host: BufReader::new(ours),
            socket: root.join("bus").join("bus.sock"),
            stderr_path,
            boot: Value::Null,
        };
        b.host_raw(format!("{first}\n").as_bytes());
        let reply = b.read_host();
        b.boot = reply.clone();
        (b, reply)
    }

    /// Boots and asserts success.
    pub fn start(root: &Path) -> Broker {
        let (b, reply) = Broker::spawn(root, config(root));
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        b
    }

    /// Sends one host op and reads its reply.
    pub fn op(&mut self, v: Value) -> Value {
        let mut line = v.to_string();
        line.push('\n');
        self.host
            .get_mut()
            .write_all(line.as_bytes())
            .expect("write host op");
        self.read_host()
    }

    /// Reads one line from the host channel (Null on EOF).
    pub fn read_host(&mut self) -> Value {
        let mut s = String::new();
        match self.host.read_line(&mut s) {
            Ok(0) | Err(_) => Value::Null,
            Ok(_) => serde_json::from_str(&s).expect("host reply is JSON"),
        }
    }

    /// Sends raw bytes on the host channel.
    pub fn host_raw(&mut self, bytes: &[u8]) {
        self.host.get_mut().write_all(bytes).expect("write");
    }

    /// Drops our end of the channel.
    pub fn drop_channel(&mut self) {
        let _ = self.host.get_mut().shutdown(std::net::Shutdown::Both);
    }

    /// The reader capability from the boot reply.
    pub fn reader_cap(&self) -> String {
        self.boot["readers"][0]["cap"]
            .as_str()
            .expect("reader cap")
            .to_string()
    }

    /// Binds a launch for `pid` and returns its capability.
    pub fn bind(&mut self, role: &str, run: &str, pid: u32) -> String {
        let r = self.op(json!({"op": "bindLaunch", "record": launch(role, run, pid)}));
        assert_eq!(r["ok"], json!(true), "bind: {r}");
        r["launch"]["cap"].as_str().expect("cap").to_string()
    }

    /// Binds a launch for `pid` and claims its role; the capability.
    pub fn claimed(&mut self, role: &str, run: &str, pid: u32) -> String {
        let cap = self.bind(role, run, pid);
        res(&self.call(&cap, "role.claim", Value::Null));
        cap
    }

    /// As [`Broker::claimed`], for a role of `business`.
    pub fn claimed_in(&mut self, business: &str, role: &str, run: &str, pid: u32) -> String {
        let mut rec = launch(role, run, pid);
        rec["business"] = json!(business);
        let r = self.op(json!({"op": "bindLaunch", "record": rec}));
        assert_eq!(r["ok"], json!(true), "bind: {r}");
        let cap = r["launch"]["cap"].as_str().expect("cap").to_string();
        res(&self.call(&cap, "role.claim", Value::Null));
        cap
    }

    /// Binds run `{role}-1` of each of `roles` to a fresh [`Sleeper`];
    /// their capabilities by role, and the sleepers (kept alive by the
    /// caller for as long as the runs should live).
    pub fn bind_each(
        &mut self,
        roles: &[&'static str],
    ) -> (
        std::collections::HashMap<&'static str, String>,
        Vec<Sleeper>,
    ) {
        let mut caps = std::collections::HashMap::new();
        let mut procs = Vec::new();
        for &r in roles {
            let p = sleeper();
            caps.insert(r, self.bind(r, &format!("{r}-1"), p.id()));
            procs.push(p);
        }
        (caps, procs)
    }

    /// A client-socket call with a capability; returns the whole reply.
    pub fn call(&self, cap: &str, verb: &str, args: Value) -> Value {
        let mut req = json!({"cap": cap, "verb": verb});
        if !args.is_null() {
            req["args"] = args;
        }
        raw_request(&self.socket, format!("{req}\n").as_bytes())
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, limit)
    }

    /// Sends `{"op":"close"}` and waits for exit 0.
    pub fn close(mut self) {
        let r = self.op(json!({"op": "close"}));
        assert_eq!(r["ok"], json!(true));
        let s = self.wait(Duration::from_secs(10)).expect("broker exits");
        assert_eq!(s.code(), Some(0));
    }

    /// What the broker wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

/// Sends raw bytes, half-closes, and reads the reply line (Null if none).
pub fn raw_request(socket: &Path, bytes: &[u8]) -> Value {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    if out.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(out.trim_ascii_end()).expect("reply is JSON")
}

/// A long-lived real process standing in for a managed run. It holds none
/// of the test's pipes (so the test binary can exit) and is killed on drop.
pub struct Sleeper(Child);

impl std::ops::Deref for Sleeper {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Sleeper {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a [`Sleeper`].
pub fn sleeper() -> Sleeper {
    Sleeper(
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep"),
    )
}

/// A read-only connection to a data root's store (for asserting evidence
/// while a broker runs; WAL lets it read beside the writer).
pub fn db(root: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        root.join("bus").join("bus.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open store read-only")
}

/// Row counts of every evidence table, in a fixed order, refusal evidence
/// left out.
pub fn row_counts(root: &Path) -> Vec<i64> {
    let conn = db(root);
    [
        // Refusal evidence is counted apart ([`refusals`]): a test that
        // refuses checks exactly which rows its refusals left.
        "events WHERE kind != 'action.refused'",
        "decisions",
        "decision_events",
        "role_claims",
        "messages",
        "deliveries",
        "read_receipts",
        "task_snapshots",
    ]
    .iter()
    .map(|t| {
        conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
            .expect("count")
    })
    .collect()
}

/// Every `action.refused` row of the store, oldest first, as
/// `[role, run, subject, action, code]`.
pub fn refusals(root: &Path) -> Vec<Value> {
    let conn = db(root);
    let mut st = conn
        .prepare(
            "SELECT role, run, subject, json_extract(body, '$.action'),
             json_extract(body, '$.code') FROM events
             WHERE kind = 'action.refused' ORDER BY seq",
        )
        .expect("prepare");
    let rows = st
        .query_map([], |r| {
            let s = |i: usize| r.get::<_, Option<String>>(i);
            Ok(json!([s(0)?, s(1)?, s(2)?, s(3)?, s(4)?]))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The `error` of a refusal reply (panics on success, to keep tests exact).
pub fn err(reply: &Value) -> &str {
    assert_eq!(reply["ok"], json!(false), "expected a refusal: {reply}");
    reply["error"].as_str().expect("error code")
}

/// The `result` of a successful reply (panics on a refusal).
pub fn res(reply: &Value) -> &Value {
    assert_eq!(reply["ok"], json!(true), "expected success: {reply}");
    &reply["result"]
}

/// A scratch folder for a shim's request and reply files, removed on drop.
/// Mode 0755: the shim runs detached, with no capability to pass a
/// private folder's permissions.
pub fn shim_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("mosaic-shim-")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    d
}

/// A proven session through a real static shim (`mosaic-human-cli` or
/// `mosaic-tester-cli`), started detached with a clean environment
/// (`setsid -f env -i`), as a person's terminal would run it, so the proof
/// helper finds no managed-run marker of the test runner's own.
pub struct ShimSession {
    exe: PathBuf,
    socket: PathBuf,
    dir: tempfile::TempDir,
    n: std::cell::Cell<u32>,
}

/// `s` as one single-quoted `/bin/sh` word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A shim holds no capability: drop the bounding set a root test runner
/// passes down (the capability-less proof helper may read only such a
/// process's environ). For `pre_exec` only.
pub fn drop_bounding_set() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    }
    Ok(())
}

impl ShimSession {
    /// The human of `b`'s businesses.
    pub fn human(b: &Broker) -> ShimSession {
        ShimSession::with("mosaic-human-cli", &b.socket)
    }

    /// A PM tester (the business needs `bus.tester`).
    pub fn tester(b: &Broker) -> ShimSession {
        ShimSession::with("mosaic-tester-cli", &b.socket)
    }

    fn with(exe: &str, socket: &Path) -> ShimSession {
        ShimSession {
            exe: bin(exe),
            socket: socket.to_path_buf(),
            dir: shim_dir(),
            n: std::cell::Cell::new(0),
        }
    }

    /// One request for business `acme`; the whole reply.
    pub fn call(&self, verb: &str, args: Value) -> Value {
        self.call_in("acme", verb, args)
    }

    /// The `result` of a request for `acme` that must succeed.
    pub fn ok(&self, verb: &str, args: Value) -> Value {
        res(&self.call(verb, args)).clone()
    }

    /// One request for `business` (`args` left out when null); the whole reply.
    pub fn call_in(&self, business: &str, verb: &str, args: Value) -> Value {
        let i = self.n.get() + 1;
        self.n.set(i);
        let input = self.dir.path().join(format!("{i}.in"));
        let out = self.dir.path().join(format!("{i}.out"));
        let mut req = json!({"business": business, "verb": verb});
        if !args.is_null() {
            req["args"] = args;
        }
        std::fs::write(&input, req.to_string()).expect("write request");
        let q = |p: &Path| sh_quote(p.to_str().expect("utf-8"));
        let gate = Gate::new(self.dir.path(), &format!("{i}.go"));
        let script = format!(
            "{} /usr/bin/env -i {} {} < {} > {o}.tmp; mv {o}.tmp {o}",
            gate.wait_line(),
            q(&self.exe),
            q(&self.socket),
            q(&input),
            o = q(&out),
        );
        let mut cmd = Command::new("setsid");
        cmd.args(["-f", "/usr/bin/env", "-i", "/bin/sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only prctl between fork and exec.
        unsafe { cmd.pre_exec(drop_bounding_set) };
        let mut child = cmd.spawn().expect("spawn the shim");
        // `setsid -f` exits once it has forked; only when it is reaped is
        // the shell reparented, and only then may the shim start (a proof
        // taken while `setsid` is still exiting sees its ancestry vanish).
        assert!(child.wait().expect("wait for setsid").success());
        gate.open();
        let reply = wait_file(&out);
        serde_json::from_str(reply.trim()).expect("reply is JSON")
    }
}

/// A FIFO a detached shell blocks on (`read _ < FIFO`) before it starts the
/// shim, so a test can hold the shim until the `setsid` that detached it has
/// been reaped and the shell reparented, as a person's terminal is long
/// settled before they type the command.
pub struct Gate {
    path: PathBuf,
}

impl Gate {
    /// A new FIFO `name` in `dir` (mode 0600); panics when mkfifo fails.
    pub fn new(dir: &Path, name: &str) -> Gate {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: mkfifo on a NUL-terminated path.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(
            rc,
            0,
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        Gate { path }
    }

    /// The shell line that waits for [`Gate::open`] (ends with `;`).
    pub fn wait_line(&self) -> String {
        format!("read _ < {};", sh_quote(self.path.to_str().expect("utf-8")))
    }

    /// Lets the waiting shell go on: opens the FIFO for writing once the
    /// shell has it open for reading (retrying while it has not got there
    /// yet, for up to 20 s) and writes one line.
    pub fn open(self) {
        use std::os::unix::fs::OpenOptionsExt;
        let end = Instant::now() + Duration::from_secs(20);
        let mut f = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.path)
            {
                Ok(f) => break f,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("the shell never opened {}: {e}", self.path.display()),
            }
        };
        f.write_all(b"\n").expect("write the gate");
        drop(f);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The text of `p` once it exists (a detached shim writes its reply to a
/// temporary name and renames it); panics after 20 s.
pub fn wait_file(p: &Path) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(s) = std::fs::read_to_string(p) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", p.display());
}

/// An older kernel than the one the tests run on, made by a seccomp filter
/// a test installs in a child just before exec. The child's own children
/// inherit it, and nothing can lift it: it is how a test drives the
/// production binaries down their old-kernel paths without any switch in
/// them. x86_64 and aarch64 only (the syscall numbers and the audit arch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OldKernel {
    /// Before Linux 6.5: `getsockopt(SOL_SOCKET, SO_PEERPIDFD)` fails with
    /// ENOPROTOOPT, as a kernel that does not know the option answers.
    NoPeerPidfd,
    /// Before Linux 5.1: no SO_PEERPIDFD either, and `pidfd_open`,
    /// `pidfd_send_signal` and `pidfd_getfd` fail with ENOSYS.
    NoPidfd,
    /// Linux 6.5 and later as it answers for a peer already reaped:
    /// `SO_PEERPIDFD` fails with this errno (ESRCH from 6.9, EINVAL 6.5 to
    /// 6.8), for every connection; the pidfd calls work.
    PeerGone(i32),
}

/// `SO_PEERPIDFD` (Linux 6.5).
const SO_PEERPIDFD: u32 = 77;

impl OldKernel {
    /// Installs the filter in `cmd`'s child before it execs.
    pub fn apply(self, cmd: &mut Command) {
        let prog = self.program();
        // SAFETY: the closure only calls prctl (async-signal-safe) on a
        // program built before the fork.
        unsafe {
            cmd.pre_exec(move || install_filter(&prog));
        }
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn program(self) -> Vec<libc::sock_filter> {
        #[cfg(target_arch = "x86_64")]
        const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
        #[cfg(target_arch = "aarch64")]
        const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        // seccomp_data: nr (0), arch (4), ip (8), args[6] (16 + 8 * i);
        // both arches are little-endian, so an argument's low word is first.
        const ARG1: u32 = 16 + 8;
        const ARG2: u32 = 16 + 2 * 8;
        // No syscall has this number: the NoPeerPidfd filter's pidfd rows.
        const NONE: u32 = u32::MAX;
        let (open, signal, getfd) = match self {
            OldKernel::NoPeerPidfd | OldKernel::PeerGone(_) => (NONE, NONE, NONE),
            OldKernel::NoPidfd => (
                libc::SYS_pidfd_open as u32,
                libc::SYS_pidfd_send_signal as u32,
                libc::SYS_pidfd_getfd as u32,
            ),
        };
        let peer_pidfd_errno = match self {
            OldKernel::PeerGone(errno) => errno as u32,
            _ => libc::ENOPROTOOPT as u32,
        };
        let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        vec![
            /* 0 */ f(LD_W_ABS, 0, 0, 4),
            /* 1 */ f(JEQ_K, 0, 9, ARCH), // another arch: allow (11)
            /* 2 */ f(LD_W_ABS, 0, 0, 0),
            /* 3 */ f(JEQ_K, 0, 4, libc::SYS_getsockopt as u32), // else 8
            /* 4 */ f(LD_W_ABS, 0, 0, ARG1),
            /* 5 */ f(JEQ_K, 0, 5, libc::SOL_SOCKET as u32), // else 11
            /* 6 */ f(LD_W_ABS, 0, 0, ARG2),
            /* 7 */ f(JEQ_K, 5, 3, SO_PEERPIDFD), // 13, else 11
            /* 8 */ f(JEQ_K, 3, 0, open), // 12
            /* 9 */ f(JEQ_K, 2, 0, signal), // 12
            /* 10 */ f(JEQ_K, 1, 0, getfd), // 12
            /* 11 */ f(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
            /* 12 */ f(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            /* 13 */
            f(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | peer_pidfd_errno),
        ]
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn program(self) -> Vec<libc::sock_filter> {
        panic!("OldKernel filters are written for x86_64 and aarch64")
    }
}

fn install_filter(prog: &[libc::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a valid filter program that outlives the call.
    let rc = unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -1
        } else {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &fprog as *const libc::sock_fprog,
            )
        }
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A pipe, both ends close-on-exec: (read, write).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 with a valid out-array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just made for us.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Reads one byte; false at end of file.
pub fn read_byte(fd: &OwnedFd) -> bool {
    let mut b = 0u8;
    // SAFETY: reads one byte into a live local.
    unsafe { libc::read(fd.as_raw_fd(), (&mut b as *mut u8).cast(), 1) == 1 }
}

/// Writes one byte.
pub fn write_byte(fd: &OwnedFd) {
    // SAFETY: writes one byte from a static.
    unsafe { libc::write(fd.as_raw_fd(), b"x".as_ptr().cast(), 1) };
}

/// The `sockaddr_un` of `path` and its length.
pub fn sockaddr(path: &Path) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    (
        addr,
        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
    )
}

/// A connection made by a forked child (so SO_PEERCRED names the child),
/// kept by this process; the child waits until told to exit.
pub struct Connector {
    /// The forked child that made the connection.
    pub pid: i32,
    conn: UnixStream,
    exit: OwnedFd,
}

impl Connector {
    /// Forks a child that connects to `socket` and waits; returns once the
    /// child has called `connect` (the server accepts on its own time).
    pub fn connect(socket: &Path) -> Connector {
        let (addr, len) = sockaddr(socket);
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: the descriptor was just made for us.
        let conn = unsafe { UnixStream::from_raw_fd(fd) };
        let (ready_r, ready_w) = pipe();
        let (exit_r, exit_w) = pipe();
        // SAFETY: the child makes only async-signal-safe calls (connect,
        // write, read, _exit) on memory and descriptors made before fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                let rc = libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len);
                if rc != 0 {
                    libc::_exit(1);
                }
                libc::write(ready_w.as_raw_fd(), b"c".as_ptr().cast(), 1);
                let mut b = 0u8;
                libc::read(exit_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        drop(ready_w);
        drop(exit_r);
        assert!(read_byte(&ready_r), "the connector did not connect");
        Connector {
            pid,
            conn,
            exit: exit_w,
        }
    }

    /// Lets the connector exit and reaps it: its pid is free again.
    pub fn exit(&self) {
        write_byte(&self.exit);
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(self.pid, &mut status, 0) }, self.pid);
    }

    /// Sends `line` on the kept connection and reads the reply.
    pub fn request(&mut self, line: &[u8]) -> String {
        self.conn
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("connector socket");
        self.conn.write_all(line).expect("connector socket");
        self.conn
            .shutdown(std::net::Shutdown::Write)
            .expect("connector socket");
        let mut out = String::new();
        let _ = self.conn.read_to_string(&mut out);
        out
    }
}
