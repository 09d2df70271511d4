//! Issue 25: the peer is pinned at accept on every kernel, in the bus and in
//! `mosaic-leased`, and a pid that changes hands after the pin never passes.
//!
//! Older kernels are made with a seccomp filter installed in the daemon
//! before exec ([`OldKernel`]): `NoPeerPidfd` answers `SO_PEERPIDFD` with
//! ENOPROTOOPT (Linux before 6.5), `NoPidfd` also fails every pidfd call
//! with ENOSYS (before 5.1). The production binaries run unchanged; nothing
//! in them can be switched to an old-kernel path.
//!
//! The pid-cycling attack: a process connects and sends nothing; once the
//! daemon holds its pin (seen in the daemon's `/proc/<pid>/fdinfo`) it
//! exits, the test (which kept the connection) steers the next pid onto
//! the dead connector's (`/proc/sys/kernel/ns_last_pid`, root only; the
//! attack proper cycles pids for seconds instead), and a process the
//! attacker wants to be taken for starts under that pid. Then the kept
//! connection sends a request naming it. Without the pin that request
//! would be read as coming from the new process.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Pid steering is global: one attack at a time in this binary.
static STEER: Mutex<()> = Mutex::new(());

const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";

/// Fails the test unless this process may steer pid allocation (root in
/// the initial user namespace, or CAP_CHECKPOINT_RESTORE). The tests that
/// steer are `#[ignore = "needs root"]`.
fn require_pid_steering() {
    require_root("steer the next pid");
    let now = std::fs::read_to_string(NS_LAST_PID).expect("read ns_last_pid");
    if let Err(e) = std::fs::write(NS_LAST_PID, now.trim()) {
        panic!("steering the next pid needs {NS_LAST_PID} writable (root in the initial user namespace): {e}");
    }
}

/// Makes the next pid the kernel hands out `pid` (unless something else
/// forks first: callers check and retry).
fn next_pid_is(pid: i32) {
    std::fs::write(NS_LAST_PID, (pid - 1).to_string()).expect("write ns_last_pid");
}

/// Waits until `holder` holds a pidfd for `pid` (the daemon's pin).
fn wait_pinned(holder: u32, pid: i32) {
    let want = format!("Pid:\t{pid}");
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let fds = std::fs::read_dir(format!("/proc/{holder}/fd")).expect("daemon fds");
        for e in fds.flatten() {
            let is_pidfd = std::fs::read_link(e.path())
                .map(|l| l.as_os_str() == "anon_inode:[pidfd]")
                .unwrap_or(false);
            let info = format!("/proc/{holder}/fdinfo/{}", e.file_name().to_string_lossy());
            if is_pidfd
                && std::fs::read_to_string(info)
                    .map(|s| s.lines().any(|l| l == want))
                    .unwrap_or(false)
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the daemon never pinned pid {pid}");
}

fn stat_of(pid: i32) -> Option<(i32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

fn reply(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or(Value::Null)
}

/// The real human shim, detached with a clean environment (the tree a human
/// at a terminal has; `setsid -f env -i`), reading `req` from a file and
/// talking to `socket`. Returns its reply once it exits. The detached shell
/// holds the shim on a [`Gate`] until `setsid` is reaped, so the proof never
/// walks an ancestry whose `setsid` is still exiting.
fn human_shim(dir: &Path, socket: &Path, req: &Value) -> Value {
    let input = dir.join("req.json");
    let out = dir.join("reply.json");
    std::fs::write(&input, req.to_string()).unwrap();
    let _ = std::fs::remove_file(&out);
    let gate = Gate::new(dir, "shim.go");
    let q = |p: &Path| sh_quote(p.to_str().unwrap());
    let script = format!(
        "{} exec {} {} < {} > {}",
        gate.wait_line(),
        q(&bin("mosaic-human-cli")),
        q(socket),
        q(&input),
        q(&out)
    );
    let mut cmd = Command::new("setsid");
    cmd.args(["-f", "/usr/bin/env", "-i", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only prctl between fork and exec.
    unsafe { cmd.pre_exec(drop_bounding_set) };
    assert!(cmd.spawn().expect("setsid").wait().unwrap().success());
    gate.open();
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.ends_with('\n') || Instant::now() > end {
            return reply(&text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn trail() -> Value {
    json!({"business": "acme", "verb": "trail", "args": {"subject": "nothing"}})
}

/// A kernel without SO_PEERPIDFD pins by `pidfd_open` and serves the human
/// as before; a kernel with no pidfd at all refuses human (and tester)
/// requests `peer-pin-unsupported` and still serves capabilities.
#[test]
fn old_kernels_pin_the_peer_or_refuse_shim_requests() {
    let io = tempfile::tempdir().unwrap();

    let root = data_root();
    let b = Broker::start_on(root.path(), OldKernel::NoPeerPidfd);
    let r = human_shim(io.path(), &b.socket, &trail());
    assert_eq!(r, json!({"ok": true, "result": []}), "{}", b.stderr());
    let reader = b.reader_cap();
    assert_eq!(
        res(&b.call(&reader, "trail", json!({"subject": "x"}))),
        &json!([])
    );
    b.close();

    let root = data_root();
    let b = Broker::start_on(root.path(), OldKernel::NoPidfd);
    let r = human_shim(io.path(), &b.socket, &trail());
    assert_eq!(r, json!({"ok": false, "error": "peer-pin-unsupported"}));
    // The tester shim meets the same gate: a raw tester envelope from this
    // process is refused before anything reads its (bogus) proof.
    let me = std::process::id();
    let tester = json!({"tester": {"pid": me, "startTime": start_time(me), "nonce": "a".repeat(32)},
                        "business": "acme", "verb": "trail", "args": {"subject": "x"}});
    assert_eq!(
        raw_request(&b.socket, format!("{tester}\n").as_bytes()),
        json!({"ok": false, "error": "peer-pin-unsupported"})
    );
    let reader = b.reader_cap();
    assert_eq!(
        res(&b.call(&reader, "trail", json!({"subject": "x"}))),
        &json!([])
    );
    b.close();
}

/// One try at the bus attack: `Some(reply)` when the human's shim landed on
/// the dead connector's pid, `None` when something else took it first.
///
/// On a kernel without SO_PEERPIDFD the broker pins the connector at
/// accept, and the attack waits for that pin before the connector exits.
/// Where the kernel answers SO_PEERPIDFD the broker leaves the connector to
/// the kernel (which recorded it at `connect()`) and takes its pidfd only
/// for a shim request, so there is nothing to wait for.
fn bus_attack_once(b: &Broker, dir: &Path, pinned_at_accept: bool) -> Option<Value> {
    let fake = dir.join("fake.sock");
    let go = dir.join("go");
    let input = dir.join("victim.json");
    for f in [&fake, &go] {
        let _ = std::fs::remove_file(f);
    }
    let listener = UnixListener::bind(&fake).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::write(&input, trail().to_string()).unwrap();
    let c = std::ffi::CString::new(go.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    // The human's terminal: a detached shell with a clean environment that
    // runs the real shim (a fork of its own) when the test says go. The
    // shim's request goes to a socket the attacker listens on, standing in
    // for reading the shim's environ and stat (a same-UID process can), so
    // the shim stays alive while the attacker uses its proof.
    let script = format!(
        "read _ < '{}'; '{}' '{}' < '{}' > /dev/null 2>&1; exit 0",
        go.display(),
        bin("mosaic-human-cli").display(),
        fake.display(),
        input.display()
    );
    let mut cmd = Command::new("setsid");
    cmd.args(["-f", "/usr/bin/env", "-i", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only prctl between fork and exec.
    unsafe { cmd.pre_exec(drop_bounding_set) };
    let _ = cmd.spawn().expect("setsid").wait();

    let mut attacker = Connector::connect(&b.socket);
    let p = attacker.pid;
    if pinned_at_accept {
        wait_pinned(b.child.id(), p);
    }
    attacker.exit();

    // The shell's next fork, the shim, gets p.
    next_pid_is(p);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .and_then(|mut f| f.write_all(b"\n"))
        .expect("go");
    let end = Instant::now() + Duration::from_secs(10);
    let mut victim = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("the shim never connected: {e}"),
        }
    };
    victim.set_nonblocking(false).unwrap();
    victim
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    if peer_pid(&victim) != p {
        return None;
    }
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while victim.read(&mut byte).unwrap_or(0) == 1 {
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    let stolen: Value = serde_json::from_slice(&line).expect("the shim's request");
    // The stolen proof names pid p, which is now the human's live shim.
    assert_eq!(stolen["human"]["pid"], json!(p));
    let answer = reply(&attacker.request(&line));
    // The shim is still there, under p, with the start time the proof
    // claims, in a clean detached tree: the helper would have found a
    // genuine human shim.
    let (_, start) = stat_of(p).expect("the shim is alive");
    assert_eq!(json!(start), stolen["human"]["startTime"]);
    assert_eq!(
        std::fs::read_link(format!("/proc/{p}/exe")).unwrap(),
        bin("mosaic-human-cli")
    );
    drop(victim);
    Some(answer)
}

fn peer_pid(s: &UnixStream) -> i32 {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a live ucred of the given length.
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

/// The attack, on a kernel without SO_PEERPIDFD and on this one:
/// the stolen proof of a live human shim, sent on a connection whose
/// connector has exited and whose pid the shim now has, is refused
/// `proof-start-time`; the same shim's own request is served.
#[test]
#[ignore = "needs root"]
fn a_recycled_pid_is_refused_with_and_without_so_peerpidfd() {
    require_pid_steering();
    let _one = STEER.lock().unwrap_or_else(|e| e.into_inner());
    let io = tempfile::tempdir().unwrap();
    let mut perm = std::fs::metadata(io.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(io.path(), perm).unwrap();

    for kernel in [Some(OldKernel::NoPeerPidfd), None] {
        let root = data_root();
        let b = match kernel {
            Some(k) => Broker::start_on(root.path(), k),
            None => Broker::start(root.path()),
        };
        let mut landed = None;
        for _ in 0..30 {
            if let Some(r) = bus_attack_once(&b, io.path(), kernel.is_some()) {
                landed = Some(r);
                break;
            }
        }
        let answer = landed.expect("the shim never landed on the recycled pid");
        assert_eq!(
            answer,
            json!({"ok": false, "error": "proof-start-time"}),
            "{kernel:?}: {}",
            b.stderr()
        );
        // The same human, from its own connection, is served.
        let r = human_shim(io.path(), &b.socket, &trail());
        assert_eq!(r, json!({"ok": true, "result": []}), "{kernel:?}");
        b.close();
    }
}

// --- mosaic-leased -------------------------------------------------------

struct Leased {
    child: Child,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Leased {
    fn start(kernel: Option<OldKernel>) -> Leased {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("leased.sock");
        let mut cmd = Command::new(bin("mosaic-leased"));
        cmd.arg("--socket")
            .arg(&sock)
            .arg("--state")
            .arg(dir.path().join("state.json"))
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(k) = kernel {
            k.apply(&mut cmd);
        }
        let child = cmd.spawn().expect("mosaic-leased");
        let end = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < end, "mosaic-leased never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        Leased {
            child,
            sock,
            _dir: dir,
        }
    }

    fn request(&self, v: &Value) -> Value {
        let mut s = UnixStream::connect(&self.sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("{v}\n").as_bytes()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        reply(&out)
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An anchor process: a forked child that registers itself with the lease
/// broker, hands the reply back, and on request forks one child (its
/// descendant) that waits until the anchor is dropped.
struct Anchor {
    pid: i32,
    reply: Value,
    fork: OwnedFd,
    forked: OwnedFd,
    _stop: OwnedFd,
    descendants: std::cell::RefCell<Vec<i32>>,
}

impl Anchor {
    fn register(sock: &Path) -> Anchor {
        let (addr, len) = sockaddr(sock);
        let line = b"{\"action\":\"register_anchor\",\"runtime_generation\":0}\n";
        let (reply_r, reply_w) = pipe();
        let (fork_r, fork_w) = pipe();
        let (forked_r, forked_w) = pipe();
        let (stop_r, stop_w) = pipe();
        // SAFETY: the child makes only async-signal-safe calls on memory and
        // descriptors made before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                // Only the test holds the stop pipe's write end, so the
                // descendants see its end when the anchor is dropped.
                libc::close(stop_w.as_raw_fd());
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                if fd < 0 || libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0
                {
                    libc::_exit(1);
                }
                libc::write(fd, line.as_ptr().cast(), line.len());
                libc::shutdown(fd, libc::SHUT_WR);
                let mut buf = [0u8; 512];
                loop {
                    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    if n <= 0 {
                        break;
                    }
                    libc::write(reply_w.as_raw_fd(), buf.as_ptr().cast(), n as usize);
                }
                libc::close(reply_w.as_raw_fd());
                let mut b = 0u8;
                while libc::read(fork_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1) == 1 {
                    let kid = libc::fork();
                    if kid == 0 {
                        // The descendant: waits for the anchor's end.
                        libc::read(stop_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                        libc::_exit(0);
                    }
                    libc::write(forked_w.as_raw_fd(), (&kid as *const i32).cast(), 4);
                }
                libc::_exit(0);
            }
        }
        drop(reply_w);
        drop(fork_r);
        drop(forked_w);
        drop(stop_r);
        let mut text = Vec::new();
        let mut f = std::fs::File::from(reply_r);
        f.read_to_end(&mut text).unwrap();
        Anchor {
            pid,
            reply: serde_json::from_slice(text.trim_ascii_end()).unwrap_or(Value::Null),
            fork: fork_w,
            forked: forked_r,
            _stop: stop_w,
            descendants: Default::default(),
        }
    }

    /// Forks one descendant; returns its pid.
    fn spawn_descendant(&self) -> i32 {
        write_byte(&self.fork);
        let mut pid = [0u8; 4];
        // SAFETY: reads four bytes into a live local.
        let n = unsafe { libc::read(self.forked.as_raw_fd(), pid.as_mut_ptr().cast(), 4) };
        assert_eq!(n, 4);
        let pid = i32::from_ne_bytes(pid);
        self.descendants.borrow_mut().push(pid);
        pid
    }
}

impl Drop for Anchor {
    fn drop(&mut self) {
        // SAFETY: signals our own descendants (still alive: each waits for
        // the stop pipe this struct holds) and reaps our own child.
        unsafe {
            for &kid in self.descendants.borrow().iter() {
                libc::kill(kid, libc::SIGKILL);
            }
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The lease broker on a kernel with no pidfd at all can't pin a peer:
/// every request refuses `peer-pin-unsupported` (the pin itself, on the
/// other kernels, is the next test's).
#[test]
fn the_lease_broker_refuses_every_peer_where_no_pidfd_pins_it() {
    let d = Leased::start(Some(OldKernel::NoPidfd));
    assert_eq!(
        d.request(&json!({"action": "register_anchor", "runtime_generation": 0})),
        json!({"ok": false, "code": "peer-pin-unsupported"})
    );
    drop(d);
}

/// The lease broker's pin, without SO_PEERPIDFD and on this kernel: an
/// anchor registers; a stranger's connection whose pid passes to one of the
/// anchor's descendants after the pin is refused `ancestry-changed`.
#[test]
#[ignore = "needs root"]
fn the_lease_broker_refuses_a_recycled_peer_pid_on_every_kernel() {
    require_pid_steering();
    let _one = STEER.lock().unwrap_or_else(|e| e.into_inner());
    for kernel in [Some(OldKernel::NoPeerPidfd), None] {
        let d = Leased::start(kernel);
        let anchor = Anchor::register(&d.sock);
        assert_eq!(
            anchor.reply["ok"],
            json!(true),
            "{kernel:?}: {}",
            anchor.reply
        );
        let sid = anchor.reply["session_id"].as_str().unwrap().to_string();
        let auth = format!(
            "{}\n",
            json!({"action": "authenticate", "session_id": sid, "runtime_generation": 0})
        );
        let mut landed = None;
        for _ in 0..30 {
            // A stranger (this process's child, not the anchor's) connects.
            let mut stranger = Connector::connect(&d.sock);
            let p = stranger.pid;
            wait_pinned(d.child.id(), p);
            stranger.exit();
            next_pid_is(p);
            let kid = anchor.spawn_descendant();
            if kid != p {
                continue;
            }
            // p is now the anchor's child: a walk from p reaches the anchor.
            assert_eq!(stat_of(p).map(|s| s.0), Some(anchor.pid));
            landed = Some(reply(&stranger.request(auth.as_bytes())));
            break;
        }
        let answer = landed.expect("the descendant never landed on the recycled pid");
        assert_eq!(
            answer,
            json!({"ok": false, "code": "ancestry-changed"}),
            "{kernel:?}"
        );
    }
}
