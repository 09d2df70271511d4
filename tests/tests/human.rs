//! Human and tester sessions end to end: the real static shims, the real
//! broker and its real `mosaic-proofd`, real process trees.
//!
//! The suite may itself run under a coding agent whose environment carries
//! the very markers the proof refuses, so positive cases start their tree
//! detached with a clean environment (`setsid -f env -i`, the spec's
//! accepted trust limit); refusals run as the test's own descendants.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

struct Shim<'a> {
    exe: PathBuf,
    socket: &'a Path,
    dir: &'a Path,
}

impl Shim<'_> {
    /// Runs `script_prefix; SHIM SOCKET < req > out` under `/bin/sh`, detached
    /// and clean, or as our descendant with `parent_env` / `shim_env`.
    fn run(
        &self,
        req: &Value,
        detach: bool,
        parent_env: &[&str],
        shim_env: &[&str],
        pre: &str,
    ) -> (Value, i32) {
        let tag = format!("{:016x}", rand_u64());
        let input = self.dir.join(format!("{tag}.in"));
        let out = self.dir.join(format!("{tag}.out"));
        std::fs::write(&input, req.to_string()).unwrap();
        // A detached tree waits until `setsid` is reaped (see `Gate`).
        let gate = detach.then(|| Gate::new(self.dir, &format!("{tag}.go")));
        let hold = gate.as_ref().map(Gate::wait_line).unwrap_or_default();
        let script = format!(
            "{hold} {pre} /usr/bin/env -i {} {} {} < {} > {}.tmp; echo $? > {}.rc; mv {}.tmp {}",
            shim_env
                .iter()
                .map(|e| sh_quote(e))
                .collect::<Vec<_>>()
                .join(" "),
            sh_quote(self.exe.to_str().unwrap()),
            sh_quote(self.socket.to_str().unwrap()),
            sh_quote(input.to_str().unwrap()),
            sh_quote(out.to_str().unwrap()),
            sh_quote(out.to_str().unwrap()),
            sh_quote(out.to_str().unwrap()),
            sh_quote(out.to_str().unwrap()),
        );
        let mut cmd = if detach {
            let mut c = Command::new("setsid");
            c.args(["-f", "/usr/bin/env", "-i"]);
            c
        } else {
            let mut c = Command::new("/usr/bin/env");
            c.arg("-i");
            c
        };
        cmd.args(parent_env).arg("/bin/sh").arg("-c").arg(script);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only prctl between fork and exec.
        unsafe { cmd.pre_exec(drop_bounding_set) };
        let mut child = cmd.spawn().unwrap();
        if let Some(gate) = gate {
            assert!(child.wait().unwrap().success());
            gate.open();
        }
        let reply = wait_file(&out);
        let _ = child.wait();
        let rc: i32 = wait_file(&PathBuf::from(format!("{}.rc", out.display())))
            .trim()
            .parse()
            .unwrap();
        let v: Value = serde_json::from_str(reply.trim()).unwrap_or(Value::Null);
        (v, rc)
    }
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .unwrap();
    u64::from_le_bytes(b)
}

#[test]
fn human_from_a_clean_tree_succeeds_and_refusals_have_their_codes() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let io = shim_dir();
    let socket = b.socket.clone();
    let human = Shim {
        exe: bin("mosaic-human-cli"),
        socket: &socket,
        dir: io.path(),
    };
    let trail = json!({"business": "acme", "verb": "trail", "args": {"subject": "nothing"}});

    // A clean, detached tree: the human is bound.
    let (r, rc) = human.run(&trail, true, &[], &[], "");
    assert_eq!(r, json!({"ok": true, "result": []}), "{}", b.stderr());
    assert_eq!(rc, 0);
    // A human-only session can't claim a role.
    let (r, rc) = human.run(
        &json!({"business": "acme", "verb": "role.claim"}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r, json!({"ok": false, "error": "agent-required"}));
    assert_eq!(rc, 1);
    // An unknown business.
    let (r, _) = human.run(
        &json!({"business": "globex", "verb": "trail", "args": {"subject": "x"}}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r["error"], json!("unknown-business"));

    // A run marker in the shim's own environment.
    let (r, rc) = human.run(&trail, true, &[], &["CLAUDECODE=1"], "");
    assert_eq!(r["error"], json!("proof-run-marker"));
    assert_eq!(rc, 1);
    // A run marker in an ancestor's environment.
    let (r, _) = human.run(&trail, true, &["MOSAIC_RUN_ID=run-9"], &[], "");
    assert_eq!(r["error"], json!("proof-run-marker"));

    // A copy of the shim at another path.
    let copy = io.path().join("mosaic-human-cli");
    std::fs::copy(bin("mosaic-human-cli"), &copy).unwrap();
    let impostor = Shim {
        exe: copy,
        socket: &socket,
        dir: io.path(),
    };
    let (r, _) = impostor.run(&trail, true, &[], &[], "");
    assert_eq!(r["error"], json!("proof-exe"));

    // A shim under a bound launch: the launch's process is the shim's parent.
    let pidfile = io.path().join("launch.pid");
    let go = io.path().join("go");
    let pre = format!(
        "echo $$ > {p}.tmp; mv {p}.tmp {p}; while [ ! -e {g} ]; do sleep 0.02; done;",
        p = sh_quote(pidfile.to_str().unwrap()),
        g = sh_quote(go.to_str().unwrap())
    );
    let handle = {
        let socket = b.socket.clone();
        let dir = io.path().to_path_buf();
        let req = trail.clone();
        std::thread::spawn(move || {
            let s = Shim {
                exe: bin("mosaic-human-cli"),
                socket: &socket,
                dir: &dir,
            };
            s.run(&req, true, &[], &[], &pre)
        })
    };
    let pid: u32 = wait_file(&pidfile).trim().parse().unwrap();
    b.bind("dev", "run-under", pid);
    std::fs::write(&go, b"").unwrap();
    let (r, _) = handle.join().unwrap();
    assert_eq!(r["error"], json!("proof-launch-ancestor"));

    // A shim in its own PID namespace reports a pid the kernel doesn't confirm.
    let ns_out = io.path().join("ns.out");
    let gate = Gate::new(io.path(), "ns.go");
    let status = Command::new("setsid")
        .args([
            "-f",
            "/usr/bin/env",
            "-i",
            "/usr/bin/unshare",
            "-p",
            "-f",
            "/bin/sh",
            "-c",
        ])
        .arg(format!(
            "{} echo '{}' | {} {} > {}.tmp; mv {}.tmp {}",
            gate.wait_line(),
            trail,
            sh_quote(bin("mosaic-human-cli").to_str().unwrap()),
            sh_quote(b.socket.to_str().unwrap()),
            sh_quote(ns_out.to_str().unwrap()),
            sh_quote(ns_out.to_str().unwrap()),
            sh_quote(ns_out.to_str().unwrap()),
        ))
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    gate.open();
    let ns: Value = serde_json::from_str(wait_file(&ns_out).trim()).unwrap();
    assert_eq!(ns["error"], json!("proof-pid"), "inside a PID namespace");

    b.close();
}

#[test]
fn a_forged_raw_request_naming_another_pid_is_refused() {
    let root = data_root();
    let b = Broker::start(root.path());
    let me = std::process::id();
    let parent = std::os::unix::process::parent_id();
    let req = json!({"human": {"pid": parent, "startTime": start_time(parent), "nonce": "0123456789abcdef0123456789abcdef"},
                     "business": "acme", "verb": "trail", "args": {"subject": "x"}});
    assert_eq!(
        raw_request(&b.socket, format!("{req}\n").as_bytes()),
        json!({"ok": false, "error": "proof-pid"})
    );
    // A process without the shim's executable that names itself truthfully
    // (a capability-less child, as any agent's process would be).
    let v = truthful_non_shim(&b.socket, "human", "acme");
    assert_eq!(v, json!({"ok": false, "error": "proof-exe"}));
    let _ = me;
    b.close();
}

#[test]
fn tester_sessions() {
    let root = data_root();
    let b = Broker::start(root.path());
    let io = shim_dir();
    let tester = Shim {
        exe: bin("mosaic-tester-cli"),
        socket: &b.socket,
        dir: io.path(),
    };
    let trail = json!({"business": "acme", "verb": "trail", "args": {"subject": "x"}});
    let (r, rc) = tester.run(&trail, true, &[], &[], "");
    assert_eq!(r, json!({"ok": true, "result": []}));
    assert_eq!(rc, 0);
    // Claude and Codex markers pass for a tester; managed-run evidence doesn't.
    let (r, _) = tester.run(&trail, true, &["CLAUDECODE=1"], &[], "");
    assert_eq!(r, json!({"ok": true, "result": []}));
    let (r, _) = tester.run(&trail, true, &["MOSAIC_RUN_ID=r1"], &[], "");
    assert_eq!(r["error"], json!("tester-required"));
    let (r, _) = tester.run(&trail, true, &[], &["MOSAIC_BUS_CAP=x"], "");
    assert_eq!(r["error"], json!("tester-required"));
    // Verbs outside the tester's list.
    let (r, _) = tester.run(
        &json!({"business": "acme", "verb": "role.claim"}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r["error"], json!("tester-refused"));
    // A human-only verb whose row names no tester code: L218's
    // tester-refused. One whose row names it (instances, L214):
    // human-required (docs/decisions.md).
    let (r, _) = tester.run(
        &json!({"business": "acme", "verb": "launch.revoke"}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r["error"], json!("tester-refused"));
    let (r, _) = tester.run(
        &json!({"business": "acme", "verb": "instances"}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r["error"], json!("human-required"));
    // The human shim's nonce does not prove a tester and vice versa: the
    // tester shim's request sent with the human key fails the nonce check.
    b.close();

    // bus.tester off: the proof passes but the session does not bind.
    let root = data_root();
    let mut cfg = config(root.path());
    cfg["businesses"]["acme"]["vars"] = json!({"bus.tester": "true"});
    let (b, reply) = Broker::spawn(root.path(), cfg);
    assert_eq!(reply["ok"], json!(true));
    let tester = Shim {
        exe: bin("mosaic-tester-cli"),
        socket: &b.socket,
        dir: io.path(),
    };
    let (r, _) = tester.run(&trail, true, &[], &[], "");
    assert_eq!(r["error"], json!("tester-off"));
    b.close();
}

#[test]
fn a_dead_proof_helper_refuses_then_is_replaced() {
    let root = data_root();
    let b = Broker::start(root.path());
    let io = shim_dir();
    let human = Shim {
        exe: bin("mosaic-human-cli"),
        socket: &b.socket,
        dir: io.path(),
    };
    let trail = json!({"business": "acme", "verb": "trail", "args": {"subject": "x"}});
    assert_eq!(human.run(&trail, true, &[], &[], "").0["ok"], json!(true));
    // Find the broker's proofd child and kill it.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", b.child.id()))
        .unwrap_or_default();
    let mut killed = 0;
    for pid in children.split_whitespace() {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.ends_with("mosaic-proofd") {
            // SAFETY: kill(2) with plain integers, on the broker's helper child.
            unsafe { libc::kill(pid.parse().unwrap(), libc::SIGKILL) };
            killed += 1;
        }
    }
    assert_eq!(killed, 1, "the broker runs one proof helper");
    std::thread::sleep(Duration::from_millis(100));
    let (first, _) = human.run(&trail, true, &[], &[], "");
    let (second, _) = human.run(&trail, true, &[], &[], "");
    // The request that finds it dead may refuse; the helper is restarted and
    // the next request succeeds. Other sessions are unaffected meanwhile.
    assert!(
        first == json!({"ok": true, "result": []}) || first["error"] == json!("proof-unavailable"),
        "{first}"
    );
    assert_eq!(second, json!({"ok": true, "result": []}));
    assert_eq!(
        b.call(&b.reader_cap(), "trail", json!({"subject": "x"}))["ok"],
        json!(true)
    );
    b.close();
}

/// One datagram from a notify socket, with the descriptors it carried
/// (received close-on-exec), as systemd's manager would read it.
fn recv_notify(sock: &std::os::unix::net::UnixDatagram) -> (String, Vec<std::os::fd::OwnedFd>) {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut buf = vec![0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = vec![0u64; 64];
    // SAFETY: zeroed msghdr, pointers to live buffers for the call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    hdr.msg_controllen = control.len() * 8;
    // SAFETY: recvmsg into the buffers above.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut hdr, libc::MSG_CMSG_CLOEXEC) };
    assert!(n >= 0, "recvmsg: {}", std::io::Error::last_os_error());
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel filled in.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const i32;
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push(std::os::fd::OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&hdr, cmsg);
        }
    }
    (String::from_utf8(buf[..n as usize].to_vec()).unwrap(), fds)
}

/// `mosaic-bus --control` inside a new user namespace (as a sandboxed
/// systemd user unit runs it), with `stored` passed as systemd passes its fd
/// store: fd 3, `LISTEN_FDS=1`, `LISTEN_FDNAMES=mosaic-proofd`.
fn namespaced_control(
    dir: &Path,
    stored: Option<&std::os::fd::OwnedFd>,
) -> (
    KillOnDrop,
    std::io::BufReader<std::os::unix::net::UnixStream>,
) {
    use std::os::fd::AsRawFd;
    let ctl = dir.join("control.sock");
    let notify_path = dir.join("notify");
    let _ = std::fs::remove_file(&notify_path);
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let script = if stored.is_some() {
        "export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=mosaic-proofd; \
         exec \"$0\" --control \"$1\" --proofd-from-systemd"
    } else {
        "exec \"$0\" --control \"$1\""
    };
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-current-user", "/bin/sh", "-c", script])
        .arg(bin("mosaic-bus"))
        .arg(&ctl)
        .env("NOTIFY_SOCKET", &notify_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some(fd) = stored {
        let raw = fd.as_raw_fd();
        // SAFETY: only dup2/fcntl between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if raw == 3 {
                    let flags = libc::fcntl(3, libc::F_GETFD);
                    libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                } else if libc::dup2(raw, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    }
    let child = KillOnDrop(cmd.spawn().unwrap());
    let mut buf = [0u8; 512];
    let n = notify.recv(&mut buf).expect("READY from the broker");
    assert!(buf[..n].starts_with(b"READY=1"));
    let s = std::os::unix::net::UnixStream::connect(&ctl).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    (child, std::io::BufReader::new(s))
}

fn host_op(host: &mut std::io::BufReader<std::os::unix::net::UnixStream>, v: Value) -> Value {
    use std::io::{BufRead, Write};
    host.get_mut()
        .write_all(format!("{v}\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    host.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

/// A booted `mosaic-bus --control` inside a new user namespace (as a
/// sandboxed systemd user unit runs it), on a fresh data root.
struct NsBroker {
    child: KillOnDrop,
    host: std::io::BufReader<std::os::unix::net::UnixStream>,
    boot: Value,
    socket: PathBuf,
    _root: tempfile::TempDir,
}

impl NsBroker {
    fn start(run_dir: &Path, stored: Option<&std::os::fd::OwnedFd>) -> NsBroker {
        let root = data_root();
        let (child, mut host) = namespaced_control(run_dir, stored);
        let boot = host_op(
            &mut host,
            json!({"op": "boot", "config": config(root.path())}),
        );
        assert_eq!(boot["ok"], json!(true), "{boot}");
        NsBroker {
            child,
            host,
            boot,
            socket: root.path().join("bus/bus.sock"),
            _root: root,
        }
    }

    /// A human request through the real shim from a clean, detached tree.
    fn human_trail(&self, io: &Path, shim_env: &[&str]) -> Value {
        let human = Shim {
            exe: bin("mosaic-human-cli"),
            socket: &self.socket,
            dir: io,
        };
        let trail = json!({"business": "acme", "verb": "trail", "args": {"subject": "x"}});
        human.run(&trail, true, &[], shim_env, "").0
    }

    fn close(mut self) {
        let r = host_op(&mut self.host, json!({"op": "close"}));
        assert_eq!(r["ok"], json!(true), "{r}");
        assert!(self.child.0.wait().unwrap().success());
    }
}

/// The pids of processes whose environment holds exactly `entry`.
fn pids_with_env(entry: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.split(|b| *b == 0).any(|kv| kv == entry.as_bytes()))
        })
        .collect()
}

/// A start refused with exit 2 and `{"error":code}` on stderr.
fn assert_refused_start(out: &std::process::Output, code: &str) {
    assert_eq!(out.status.code(), Some(2));
    let expected = json!({ "error": code }).to_string();
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), expected);
}

#[test]
fn a_broker_in_a_user_namespace_proves_humans_through_the_helper_systemd_stored() {
    let io = shim_dir();
    let run = data_root();

    // Why the helper lives outside: a broker in a user namespace that spawns
    // its own helper cannot read a shim's /proc entries.
    let b = NsBroker::start(run.path(), None);
    assert_eq!(
        b.human_trail(io.path(), &[]),
        json!({"ok": false, "error": "proof-unreadable"})
    );
    b.close();

    // systemd's side of `ExecStartPre=+mosaic-proofd --systemd-fdstore`.
    let notify_path = run.path().join("manager-notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let tag = format!("{:016x}", rand_u64());
    let mut pre = Command::new(bin("mosaic-proofd"));
    pre.arg("--systemd-fdstore")
        .env("NOTIFY_SOCKET", &notify_path)
        .env("MOSAIC_TEST_HELPER", &tag)
        .stdin(Stdio::null());
    // SAFETY: only prctl between fork and exec.
    unsafe { pre.pre_exec(drop_bounding_set) };
    let mut pre = pre.spawn().unwrap();
    let (msg, mut fds) = recv_notify(&manager);
    assert_eq!(msg, "FDSTORE=1\nFDNAME=mosaic-proofd");
    assert_eq!(fds.len(), 1);
    let stored = fds.remove(0);
    let (msg, barrier) = recv_notify(&manager);
    assert_eq!(msg, "BARRIER=1");
    assert_eq!(barrier.len(), 1);
    drop(barrier);
    assert!(pre.wait().unwrap().success(), "the launcher exits 0");

    // The broker (still in its user namespace) gets the stored helper.
    let b = NsBroker::start(run.path(), Some(&stored));
    assert_eq!(
        b.human_trail(io.path(), &[]),
        json!({"ok": true, "result": []})
    );
    // The same refusals as ever.
    assert_eq!(
        b.human_trail(io.path(), &["CLAUDECODE=1"])["error"],
        json!("proof-run-marker")
    );
    b.close();

    // A second boot of a broker on the same stored helper (as after a
    // refused boot in control mode) still proves.
    let b = NsBroker::start(run.path(), Some(&stored));
    assert_eq!(
        b.human_trail(io.path(), &[]),
        json!({"ok": true, "result": []})
    );

    // The broker can't replace a helper it didn't start: once it is gone,
    // proofs refuse `proof-unavailable` (until the unit restarts), and
    // everything else keeps working.
    let helpers = pids_with_env(&format!("MOSAIC_TEST_HELPER={tag}"));
    assert_eq!(helpers.len(), 1, "one forked helper runs: {helpers:?}");
    // SAFETY: kill on a pid we just found.
    unsafe { libc::kill(helpers[0], libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..2 {
        assert_eq!(
            b.human_trail(io.path(), &[]),
            json!({"ok": false, "error": "proof-unavailable"})
        );
    }
    let cap = b.boot["readers"][0]["cap"].as_str().unwrap();
    let req = json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}});
    let r = raw_request(&b.socket, format!("{req}\n").as_bytes());
    assert_eq!(r["ok"], json!(true), "{r}");
    b.close();
}

#[test]
fn proofd_from_systemd_without_the_descriptor_refuses_to_start() {
    let run = tempfile::tempdir().unwrap();
    let ctl = run.path().join("control.sock");
    // No LISTEN_* at all, and LISTEN_PID naming another process.
    for env in [vec![], vec![("LISTEN_PID", "1"), ("LISTEN_FDS", "1")]] {
        let mut cmd = Command::new(bin("mosaic-bus"));
        cmd.arg("--control")
            .arg(&ctl)
            .arg("--proofd-from-systemd")
            .envs(env);
        let (code, err) = run_to_exit(cmd);
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.trim(), json!({"error": "proofd-spawn"}).to_string());
    }
    // The launcher needs a manager to hand its descriptor to.
    let out = Command::new(bin("mosaic-proofd"))
        .arg("--systemd-fdstore")
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    assert_refused_start(&out, "no-notify-socket");
    // A manager that isn't there to take the descriptor: the launcher kills
    // the helper it forked and says so.
    let tag = format!("{:016x}", rand_u64());
    let out = Command::new(bin("mosaic-proofd"))
        .arg("--systemd-fdstore")
        .env("NOTIFY_SOCKET", run.path().join("no-manager"))
        .env("MOSAIC_TEST_HELPER", &tag)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_refused_start(&out, "notify");
    assert!(pids_with_env(&format!("MOSAIC_TEST_HELPER={tag}")).is_empty());
}

#[test]
fn an_unproven_request_learns_nothing_about_the_configured_businesses() {
    let root = data_root();
    let b = Broker::start(root.path());
    // A proof naming another process, for a business that isn't configured:
    // the proof is judged first.
    let parent = std::os::unix::process::parent_id();
    for business in ["acme", "globex"] {
        let req = json!({"human": {"pid": parent, "startTime": start_time(parent),
                                   "nonce": "0123456789abcdef0123456789abcdef"},
                         "business": business, "verb": "trail", "args": {"subject": "x"}});
        assert_eq!(
            raw_request(&b.socket, format!("{req}\n").as_bytes()),
            json!({"ok": false, "error": "proof-pid"}),
            "{business}"
        );
    }
    // A truthful process that is not the shim, naming an unknown business.
    let v = truthful_non_shim(&b.socket, "tester", "globex");
    assert_eq!(v, json!({"ok": false, "error": "proof-exe"}));
    // A proven human naming an unknown business is told so.
    let io = shim_dir();
    let human = Shim {
        exe: bin("mosaic-human-cli"),
        socket: &b.socket,
        dir: io.path(),
    };
    let (r, rc) = human.run(
        &json!({"business": "globex", "verb": "trail", "args": {"subject": "x"}}),
        true,
        &[],
        &[],
        "",
    );
    assert_eq!(r, json!({"ok": false, "error": "unknown-business"}));
    assert_eq!(rc, 1);
    b.close();
}

/// Sends a `trail` request from a Python process that is not the shim but
/// names itself truthfully (its own pid and start time, a capability-less
/// child as any agent's process would be), under the proof key `key`
/// (`human` or `tester`) for `business`; returns the reply.
fn truthful_non_shim(socket: &Path, key: &str, business: &str) -> Value {
    let script = r#"
import json, os, socket, sys
st = open('/proc/self/stat').read()
start = int(st[st.rindex(')') + 2:].split(' ')[19])
req = {sys.argv[2]: {"pid": os.getpid(), "startTime": start, "nonce": "0123456789abcdef0123456789abcdef"},
       "business": sys.argv[3], "verb": "trail", "args": {"subject": "x"}}
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((json.dumps(req) + "\n").encode()); s.shutdown(socket.SHUT_WR)
print(s.makefile().readline().strip())
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(socket)
        .arg(key)
        .arg(business)
        .env_clear();
    // SAFETY: only prctl between fork and exec.
    unsafe { cmd.pre_exec(drop_bounding_set) };
    let out = cmd.output().unwrap();
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap()
}
