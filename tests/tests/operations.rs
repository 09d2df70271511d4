//! Operations: `--control` mode as systemd runs it (sd_notify readiness and
//! status), the crash procedure, capabilities and no-new-privs, signals, and
//! what the logs may and may not contain.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `mosaic-bus --control` child with this test playing systemd: a private
/// 0700 runtime directory holding the control socket and our notify socket.
struct Control {
    child: Child,
    dir: tempfile::TempDir,
    notify: UnixDatagram,
    stderr_path: PathBuf,
}

impl Control {
    fn spawn(extra: &[&str], env: &[(&str, &str)]) -> Control {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-run-")
            .tempdir()
            .expect("tempdir");
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o700)).expect("chmod");
        let notify_path = dir.path().join("notify");
        let notify = UnixDatagram::bind(&notify_path).expect("bind notify socket");
        notify
            .set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        let stderr_path = dir.path().with_extension("stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(bin("mosaic-bus"));
        cmd.arg("--control")
            .arg(dir.path().join("control.sock"))
            .args(extra)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn mosaic-bus --control");
        Control {
            child,
            dir,
            notify,
            stderr_path,
        }
    }

    fn control_path(&self) -> PathBuf {
        self.dir.path().join("control.sock")
    }

    /// The next sd_notify datagram.
    fn next_notify(&self) -> String {
        let mut buf = vec![0u8; 4096];
        let n = self.notify.recv(&mut buf).expect("a notify datagram");
        String::from_utf8(buf[..n].to_vec()).expect("utf-8")
    }

    /// Connects as the host.
    fn host(&self) -> Host {
        let s = UnixStream::connect(self.control_path()).expect("connect control socket");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Host(BufReader::new(s))
    }

    /// Closes the broker through `host` and sees it exit 0.
    fn close_by(&mut self, host: &mut Host) {
        assert_eq!(host.op(json!({"op": "close"}))["ok"], json!(true));
        assert_eq!(self.wait(Duration::from_secs(15)), Some(0));
    }

    fn wait(&mut self, limit: Duration) -> Option<i32> {
        wait_exit(&mut self.child, limit).map(|s| s.code().unwrap_or(-1))
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

struct Host(BufReader<UnixStream>);

impl Host {
    fn op(&mut self, v: Value) -> Value {
        let mut line = v.to_string();
        line.push('\n');
        self.0.get_mut().write_all(line.as_bytes()).expect("write");
        let mut s = String::new();
        match self.0.read_line(&mut s) {
            Ok(0) | Err(_) => Value::Null,
            Ok(_) => serde_json::from_str(&s).expect("JSON reply"),
        }
    }

    fn boot(&mut self, root: &Path) -> Value {
        self.op(json!({"op": "boot", "config": config(root)}))
    }
}

fn call(socket: &Path, req: Value) -> Value {
    raw_request(socket, format!("{req}\n").as_bytes())
}

/// `Name:\tvalue` from /proc/<pid>/status (or a task's).
fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} missing"))
        .trim()
        .to_string()
}

#[test]
fn notify_ready_booted_stopping_in_order_and_exit_zero() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let ctl = c.control_path();
    let md = std::fs::metadata(&ctl).expect("control socket exists at READY");
    assert_eq!(md.permissions().mode() & 0o777, 0o600);

    let mut host = c.host();
    let reply = host.boot(root.path());
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let sock = root.path().join("bus/bus.sock");
    assert_eq!(reply["path"], json!(sock.to_str().unwrap()));
    assert_eq!(
        c.next_notify(),
        format!("STATUS=booted; serving {}", sock.display())
    );
    // The broker serves: the reader capability works.
    let cap = reply["readers"][0]["cap"].as_str().unwrap();
    let r = call(
        &sock,
        json!({"cap": cap, "verb": "trail", "args": {"subject": "vikunja:1/2"}}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");

    let r = host.op(json!({"op": "close", "id": 9}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(c.next_notify(), "STOPPING=1\nSTATUS=closing");
    assert_eq!(c.wait(Duration::from_secs(15)), Some(0));
    assert!(!ctl.exists(), "control socket removed on close");
    assert!(!root.path().join("bus/writer.lock").exists());
    assert!(!sock.exists());
}

#[test]
fn sigterm_in_control_mode_stops_with_status_and_removes_the_control_socket() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    assert!(c.next_notify().starts_with("STATUS=booted; serving "));
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(c.child.id() as i32, libc::SIGTERM) };
    assert_eq!(c.next_notify(), "STOPPING=1\nSTATUS=closing");
    assert_eq!(c.wait(Duration::from_secs(15)), Some(0));
    assert!(!c.control_path().exists());
    assert!(!root.path().join("bus/writer.lock").exists());
}

#[test]
fn control_mode_crash_needs_the_operator_procedure_then_serves_the_old_data() {
    let root = data_root();
    let lock = root.path().join("bus/writer.lock");
    let sock = root.path().join("bus/bus.sock");
    let run = sleeper();

    let mut c = Control::spawn(&[], &[]);
    c.next_notify();
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    let r = host.op(json!({"op": "bindLaunch", "record": launch("pm", "run-1", run.id())}));
    let cap = r["launch"]["cap"].as_str().expect("cap").to_string();
    let r = call(&sock, json!({"cap": cap, "verb": "role.claim"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    drop(host);
    assert!(lock.exists(), "a crash leaves writer.lock");

    // Restarted (as `systemctl --user start` would): it waits for the host,
    // and every boot refuses until an operator acts.
    let mut c2 = Control::spawn(&[], &[]);
    assert_eq!(c2.next_notify(), "READY=1\nSTATUS=waiting for the host");
    for _ in 0..2 {
        let mut host = c2.host();
        assert_eq!(
            host.boot(root.path()),
            json!({"ok": false, "error": "writer-locked"})
        );
        assert_eq!(
            c2.next_notify(),
            "STATUS=waiting for the host (boot refused: writer-locked)"
        );
        assert!(lock.exists(), "nothing reclaims the lock");
        assert!(root.path().join("bus/bus.sqlite").exists());
    }
    assert_eq!(
        c2.child.try_wait().unwrap(),
        None,
        "still waiting for a host"
    );

    // docs/operations.md: the old broker is gone; keep bus.sqlite (+ -wal,
    // -shm); remove only writer.lock and bus.sock.
    std::fs::remove_file(&lock).unwrap();
    let _ = std::fs::remove_file(&sock);
    let mut host = c2.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    assert!(c2.next_notify().starts_with("STATUS=booted; serving "));
    let r = host.op(json!({"op": "bindLaunch", "record": launch("pm", "run-1", run.id())}));
    assert_eq!(r["ok"], json!(true), "identical rebind: {r}");
    let cap = r["launch"]["cap"].as_str().unwrap().to_string();
    let trail = call(
        &sock,
        json!({"cap": cap, "verb": "trail", "args": {"subject": "run-1"}}),
    );
    let records = trail["result"].as_array().expect("trail");
    assert!(
        records
            .iter()
            .any(|r| r["record"] == "claim" && r["op"] == "claim"),
        "the claim written before the kill: {trail}"
    );
    let again = call(&sock, json!({"cap": cap, "verb": "role.claim"}));
    assert_eq!(again, json!({"ok": false, "error": "role-held"}));
    assert_eq!(host.op(json!({"op": "close"}))["ok"], json!(true));
    assert_eq!(c2.wait(Duration::from_secs(15)), Some(0));
    assert!(!lock.exists());
}

#[test]
fn the_broker_holds_no_capability_and_no_new_privs_in_every_thread() {
    let root = data_root();
    let b = Broker::start(root.path());
    let pid = b.child.id();
    let me = std::fs::read_to_string("/proc/self/status").unwrap();
    // With CAP_SETPCAP (a root test runner) the broker can empty its
    // bounding set, and must; without it the bounding set is the runner's.
    let setpcap = u64::from_str_radix(&status_field(&me, "CapEff"), 16).unwrap() & (1 << 8) != 0;
    let want_bnd = if setpcap {
        "0000000000000000".to_string()
    } else {
        status_field(&me, "CapBnd")
    };
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(tasks.len() > 1, "the broker runs threads");
    for task in tasks {
        let st = std::fs::read_to_string(task.join("status")).unwrap();
        for f in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            assert_eq!(status_field(&st, f), "0000000000000000", "{f} of {task:?}");
        }
        assert_eq!(status_field(&st, "CapBnd"), want_bnd, "{task:?}");
        assert_eq!(status_field(&st, "NoNewPrivs"), "1", "{task:?}");
    }
    assert!(
        !b.stderr().contains("hardening step failed"),
        "{}",
        b.stderr()
    );
    b.close();
}

#[test]
fn a_second_signal_while_closing_forces_exit_two() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    // A client stuck mid-frame: close waits for it (up to five seconds).
    let pid = b.child.id() as i32;
    let before = socket_fds(pid);
    let mut stuck = UnixStream::connect(&b.socket).unwrap();
    stuck.write_all(br#"{"cap":"#).unwrap();
    // The broker has accepted it: one more socket among its descriptors.
    wait_until("the broker accepts the stuck client", || {
        socket_fds(pid) > before
    });
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    // The close has begun (the listener is gone) and waits for the client
    // in flight: the broker is still there.
    wait_until("the listener closes", || {
        UnixStream::connect(&b.socket).is_err()
    });
    assert!(
        b.child.try_wait().unwrap().is_none(),
        "close waits for the in-flight request"
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let s = b.wait(Duration::from_secs(30)).expect("the broker exits");
    // Exit 2, not the orderly close's 0 that the client's end or the 5 s
    // bound would bring: the second signal ended it.
    assert_eq!(s.code(), Some(2));
    assert!(b.stderr().contains("second signal while closing"));
    assert!(!b.stderr().contains("broker closed"));
    // Not an orderly close: the lock stays, as after a crash.
    assert!(root.path().join("bus/writer.lock").exists());
    drop(stuck);
}

/// How many sockets `pid` holds open.
fn socket_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits for `what` to become true; fails the test, naming it, when it has
/// not after 30 s (a guard against a hang, not a measure of anything).
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < end, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn log_level_flag() {
    for level in ["error", "warn", "info", "debug", "trace"] {
        let root = data_root();
        let mut c = Control::spawn(&["--log-level", level], &[]);
        assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
        let mut host = c.host();
        assert_eq!(host.boot(root.path())["ok"], json!(true));
        assert_eq!(host.op(json!({"op": "close"}))["ok"], json!(true));
        assert_eq!(c.wait(Duration::from_secs(15)), Some(0), "{level}");
        let logs = c.stderr();
        assert_eq!(
            logs.contains("broker serving"),
            matches!(level, "info" | "debug" | "trace"),
            "{level}: {logs}"
        );
    }
    let dir = data_root();
    let ctl = dir.path().join("control.sock");
    for bad in [
        vec!["--log-level", "nonsense"],
        vec!["--log-level"],
        vec!["--log-level", "INFO,mosaic_bus=trace"],
    ] {
        let out = Command::new(bin("mosaic-bus"))
            .arg("--control")
            .arg(&ctl)
            .args(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().last(), Some(r#"{"error":"usage"}"#), "{bad:?}");
        assert!(!ctl.exists(), "a usage error listens nowhere");
    }
}

#[test]
fn logs_are_single_plain_lines_and_never_carry_secrets() {
    let root = data_root();
    // JOURNAL_STREAM as journald sets it: no timestamps (journald adds them).
    let mut c = Control::spawn(&["--log-level", "trace"], &[("JOURNAL_STREAM", "8:12345")]);
    c.next_notify();
    let mut host = c.host();
    let boot = host.boot(root.path());
    assert_eq!(boot["ok"], json!(true));
    c.next_notify();
    let sock = root.path().join("bus/bus.sock");
    let reader = boot["readers"][0]["cap"].as_str().unwrap().to_string();
    let mut run = sleeper();
    let r = host.op(json!({"op": "bindLaunch", "record": launch("pm", "run-logs", run.id())}));
    let cap = r["launch"]["cap"].as_str().unwrap().to_string();
    let body_marker = "body-marker-5f1c0de";
    let nonce = "nonce-marker-77aa19e";
    assert_eq!(
        call(&sock, json!({"cap": cap, "verb": "role.claim"}))["ok"],
        json!(true)
    );
    let e = call(
        &sock,
        json!({"cap": cap, "verb": "event.emit",
               "args": {"kind": "action.allowed", "body": {"action": "routine", "target": body_marker}}}),
    );
    assert_eq!(e["ok"], json!(true), "{e}");
    assert_eq!(
        call(
            &sock,
            json!({"cap": reader, "verb": "trail", "args": {"subject": "vikunja:1/2"}})
        )["ok"],
        json!(true)
    );
    assert_eq!(
        host.op(json!({"op": "identity", "cap": cap}))["ok"],
        json!(true)
    );
    // A human proof from a process that is not the shim: refused, and its
    // nonce must not be logged either.
    let me = std::process::id();
    let h = call(
        &sock,
        json!({"human": {"pid": me, "startTime": start_time(me), "nonce": nonce},
               "business": "acme", "verb": "trail", "args": {"subject": "vikunja:1/2"}}),
    );
    assert_eq!(h["ok"], json!(false), "{h}");
    // Bad requests get logged at most by code.
    let _ = call(
        &sock,
        json!({"cap": format!("{cap}x"), "verb": "trail", "args": {"subject": "vikunja:1/2"}}),
    );
    let r = host.op(json!({"op": "endLaunch", "record": {"business": "acme", "run": "run-logs", "reason": "done"}}));
    assert_eq!(r["ok"], json!(true), "{r}");
    c.close_by(&mut host);
    let _ = run.kill();
    let _ = run.wait();

    let logs = c.stderr();
    assert!(logs.contains("broker serving"), "{logs}");
    for secret in [&cap, &reader, &nonce.to_string(), &body_marker.to_string()] {
        assert!(!logs.contains(secret.as_str()), "{secret} in logs:\n{logs}");
    }
    for line in logs.lines() {
        assert!(!line.contains('\x1b'), "ANSI escape: {line:?}");
        let level = line.split_whitespace().next().unwrap_or("");
        assert!(
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
            "one event per line, level first under journald: {line:?}"
        );
    }
}

#[test]
fn the_runbook_covers_every_code() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"),
    )
    .expect("docs/operations.md");
    for code in mosaic_bus::Code::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", code.as_str())),
            "docs/operations.md has no row for `{}`",
            code.as_str()
        );
    }
}

/// What `sqlite3 bus.sqlite ".backup DEST"` does: SQLite's online backup API.
fn online_backup(src: &Path, dst: &Path) {
    use rusqlite::ffi;
    let src = rusqlite::Connection::open(src).expect("open live store");
    let dst = rusqlite::Connection::open(dst).expect("open backup");
    // SAFETY: both handles are open connections that outlive the backup
    // object, which is finished before they drop.
    unsafe {
        let bk = ffi::sqlite3_backup_init(
            dst.handle(),
            c"main".as_ptr(),
            src.handle(),
            c"main".as_ptr(),
        );
        assert!(!bk.is_null(), "backup_init");
        assert_eq!(ffi::sqlite3_backup_step(bk, -1), ffi::SQLITE_DONE);
        assert_eq!(ffi::sqlite3_backup_finish(bk), ffi::SQLITE_OK);
    }
}

#[test]
fn a_live_backup_boots_in_a_new_root_with_the_evidence() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let run = sleeper();
    let cap = b.bind("pm", "run-bk", run.id());
    assert_eq!(b.call(&cap, "role.claim", Value::Null)["ok"], json!(true));
    let emit =
        json!({"kind": "action.allowed", "body": {"action": "routine"}, "subject": "vikunja:1/2"});
    assert_eq!(b.call(&cap, "event.emit", emit.clone())["ok"], json!(true));

    // Back up while the broker serves; it keeps serving.
    let restored = data_root();
    let bus = restored.path().join("bus");
    std::fs::create_dir(&bus).unwrap();
    std::fs::set_permissions(&bus, PermissionsExt::from_mode(0o700)).unwrap();
    let copy = bus.join("bus.sqlite");
    online_backup(&root.path().join("bus/bus.sqlite"), &copy);
    std::fs::set_permissions(&copy, PermissionsExt::from_mode(0o600)).unwrap();
    assert_eq!(b.call(&cap, "event.emit", emit)["ok"], json!(true));

    // A broker on the restored copy passes every open check and has the
    // claim and the event written before the backup.
    let mut b2 = Broker::start(restored.path());
    let cap2 = b2.bind("pm", "run-bk", run.id());
    assert_eq!(
        b2.call(&cap2, "role.claim", Value::Null),
        json!({"ok": false, "error": "role-held"})
    );
    let trail = b2.call(&cap2, "trail", json!({"subject": "vikunja:1/2"}));
    let records = trail["result"].as_array().expect("trail");
    assert_eq!(
        records
            .iter()
            .filter(|r| r["kind"] == "action.allowed")
            .count(),
        1,
        "exactly the event before the backup: {trail}"
    );
    b2.close();
    b.close();
}

#[test]
fn every_unit_verifies_and_rates_two_or_lower() {
    // systemd-analyze is part of this machine image (Debian's systemd
    // package); without it there is nothing to check the units with.
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| d.join("systemd-analyze").is_file())
    });
    assert!(
        found,
        "systemd-analyze is not installed (Debian's systemd package): the units can't be checked"
    );
    // The README's test command has built the binaries the units name.
    bin("mosaic-bus");
    bin("mosaic-proofd");
    bin("mosaic-leased");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/check.sh");
    // The binaries this test run built, wherever cargo put its target
    // directory (CARGO_TARGET_DIR, a config's build.target-dir).
    let out = Command::new("sh")
        .arg(&script)
        .arg(bin_dir())
        .output()
        .expect("run systemd/check.sh (needs systemd-analyze)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let units = [
        "mosaic-bus.service",
        "mosaic-bus@.service",
        "mosaic-leased.service",
    ];
    for unit in units {
        assert!(
            text.contains(&format!("verify {unit}: ok")),
            "{unit} does not verify:\n{text}"
        );
    }
    let scores: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("Overall exposure level for ").nth(1))
        .filter_map(|rest| rest.split(": ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(scores.len(), units.len(), "{text}");
    for s in scores {
        assert!(s <= 2.0, "an exposure above 2.0:\n{text}");
    }
}

/// One host at a time: a connection that arrives while a host is connected
/// is answered `host-busy` at once and closed (it does not wait unanswered
/// in the backlog), the connected host is unaffected, and once it leaves the
/// next host is served.
#[test]
fn a_second_host_connection_while_one_is_connected_gets_host_busy() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    assert!(c.next_notify().starts_with("STATUS=booted; serving "));

    let mut second = c.host();
    let mut line = String::new();
    let n = second.0.read_line(&mut line).unwrap_or(0);
    assert!(n > 0, "the second connection got no answer");
    assert_eq!(
        serde_json::from_str::<Value>(&line).expect("JSON"),
        json!({"ok": false, "error": "host-busy"})
    );
    line.clear();
    assert_eq!(second.0.read_line(&mut line).unwrap_or(0), 0, "then closed");
    assert!(c.stderr().contains("host-busy"), "{}", c.stderr());

    let r = host.op(json!({"op": "identity", "cap": "nope", "id": 2}));
    assert_eq!(
        r,
        json!({"ok": false, "error": "unknown-capability", "id": 2})
    );
    drop(host);
    assert_eq!(
        c.next_notify(),
        "STATUS=booted; host disconnected, waiting for the host"
    );
    let mut next = c.host();
    let r = next.op(json!({"op": "identity", "cap": "nope"}));
    assert_eq!(r, json!({"ok": false, "error": "unknown-capability"}));
    assert_eq!(next.op(json!({"op": "close"}))["ok"], json!(true));
    assert_eq!(c.next_notify(), "STOPPING=1\nSTATUS=closing");
    assert_eq!(c.wait(Duration::from_secs(15)), Some(0));
    assert!(!root.path().join("bus/writer.lock").exists());
}

/// A control-socket peer of another user (SO_PEERCRED) is answered
/// `peer-uid` and closed; it does not take the host's place. Needs root, to
/// connect as uid 65534.
#[test]
#[ignore = "needs root"]
fn a_control_peer_of_another_user_gets_peer_uid() {
    use std::os::unix::process::CommandExt;
    require_root("connect as uid 65534");
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    // The broker checked its directory at start; open both so that uid 65534
    // can reach the socket at all (only SO_PEERCRED stands in its way).
    std::fs::set_permissions(c.dir.path(), PermissionsExt::from_mode(0o711)).unwrap();
    std::fs::set_permissions(c.control_path(), PermissionsExt::from_mode(0o666)).unwrap();

    // SAFETY: a zeroed sockaddr_un is valid; the path fits (checked).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = c.control_path();
    let bytes = path.as_os_str().as_encoded_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let mut cmd = Command::new("cat");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if fd < 0
                || libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0
                || libc::dup2(fd, 0) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("cat as uid 65534");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "one reply line: {text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        json!({"ok": false, "error": "peer-uid"})
    );
    assert!(c.stderr().contains("peer-uid"), "{}", c.stderr());

    // The broker's own user is still the host.
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    c.close_by(&mut host);
}

/// The host's place is taken by the first line, not by the connect: a
/// connection that has said nothing (a liveness probe, a host still making
/// its config) does not turn away a host that boots meanwhile; it is
/// answered `host-busy` once it speaks, and its closing changes nothing.
#[test]
fn a_silent_connection_does_not_hold_the_host_place() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let mut silent = c.host();
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    assert_eq!(
        silent.op(json!({"op": "identity", "cap": "nope"})),
        json!({"ok": false, "error": "host-busy"})
    );
    drop(silent);
    // A probe that connects and closes at once.
    drop(UnixStream::connect(c.control_path()).expect("connect"));
    let r = host.op(json!({"op": "identity", "cap": "nope", "id": 3}));
    assert_eq!(
        r,
        json!({"ok": false, "error": "unknown-capability", "id": 3})
    );
    c.close_by(&mut host);
}

/// A second `--control` broker on the path a live broker listens on
/// refuses `control-in-use` (exit 2) and leaves that broker and its socket
/// alone; the first one still takes its host there.
#[test]
fn a_second_broker_on_a_live_control_socket_refuses_control_in_use() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let mut cmd = Command::new(bin("mosaic-bus"));
    cmd.arg("--control")
        .arg(c.control_path())
        .env_remove("NOTIFY_SOCKET");
    let (code, err) = run_to_exit(cmd);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().last(), Some(r#"{"error":"control-in-use"}"#));
    // The second broker learned the socket is live by connecting to it; a
    // connection that closes without a word never holds the host's place,
    // so a host that connects right after it is served.
    let mut host = c.host();
    let r = host.boot(root.path());
    assert_eq!(r["ok"], json!(true), "{r}");
    c.close_by(&mut host);

    // A socket nobody listens on (a crashed broker's) is replaced.
    let dir = tempfile::Builder::new()
        .prefix("mosaic-run-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o700)).unwrap();
    let stale = dir.path().join("control.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let mut b = Command::new(bin("mosaic-bus"))
        .arg("--control")
        .arg(&stale)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("NOTIFY_SOCKET")
        .spawn()
        .unwrap();
    let mut host = None;
    let end = Instant::now() + Duration::from_secs(15);
    while host.is_none() && Instant::now() < end {
        host = UnixStream::connect(&stale).ok();
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut host = Host(BufReader::new(host.expect("the new broker listens")));
    host.0
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(
        host.op(json!({"op": "close"}))["error"],
        json!("boot-required")
    );
    let _ = b.kill();
    let _ = b.wait();
}

/// A boot line over the 4 MiB limit is still answered, `invalid-config`,
/// and (in control mode) the broker waits for the next host.
#[test]
fn an_oversized_boot_is_answered_invalid_config() {
    let root = data_root();
    let mut c = Control::spawn(&[], &[]);
    assert_eq!(c.next_notify(), "READY=1\nSTATUS=waiting for the host");
    let mut host = c.host();
    // One byte over the limit and no newline: the broker has read it all
    // when it refuses.
    let big = vec![b'x'; mosaic_bus::host::channel::MAX_BOOT + 1];
    host.0.get_mut().write_all(&big).expect("write");
    let mut line = String::new();
    let _ = host.0.read_line(&mut line);
    assert_eq!(
        serde_json::from_str::<Value>(&line).ok(),
        Some(json!({"ok": false, "error": "invalid-config"})),
        "{line:?}"
    );
    assert_eq!(
        c.next_notify(),
        "STATUS=waiting for the host (boot refused: invalid-config)"
    );
    let mut host = c.host();
    assert_eq!(host.boot(root.path())["ok"], json!(true));
    c.close_by(&mut host);
}

/// The control socket's directory must be ours and 0700, the path absolute,
/// and anything at the path other than a socket is left alone: each refuses
/// before anything listens.
#[test]
fn control_paths_that_are_not_private_refuse_before_listening() {
    let dir = data_root();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, PermissionsExt::from_mode(0o755)).unwrap();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, PermissionsExt::from_mode(0o700)).unwrap();
    let file = private.join("control.sock");
    std::fs::write(&file, b"not a socket").unwrap();
    for (path, code) in [
        (PathBuf::from("relative/control.sock"), "usage"),
        (open.join("control.sock"), "unsafe-path"),
        (dir.path().join("missing/control.sock"), "unsafe-path"),
        (file.clone(), "unsafe-path"),
    ] {
        let mut cmd = Command::new(bin("mosaic-bus"));
        cmd.arg("--control")
            .arg(&path)
            .current_dir(dir.path())
            .env_remove("NOTIFY_SOCKET");
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status, Some(2), "{path:?}: {err}");
        let want = format!("{{\"error\":\"{code}\"}}");
        assert_eq!(err.lines().last(), Some(want.as_str()), "{path:?}");
    }
    assert!(!open.join("control.sock").exists());
    assert_eq!(std::fs::read(&file).unwrap(), b"not a socket");
}

/// Only `--control` reports to systemd: a forked broker with NOTIFY_SOCKET
/// in its environment sends nothing there, boot to close.
#[test]
fn a_forked_broker_never_notifies() {
    let root = data_root();
    let run = tempfile::Builder::new()
        .prefix("mosaic-run-")
        .tempdir()
        .unwrap();
    let notify_path = run.path().join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let first = json!({"op": "boot", "config": config(root.path())});
    let (b, reply) = Broker::spawn_with(
        root.path(),
        first,
        &[("NOTIFY_SOCKET", notify_path.to_str().unwrap())],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    b.close();
    // The broker has exited: whatever it sent is already queued here.
    notify.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    let got = notify.recv(&mut buf);
    assert!(
        matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a forked broker notified: {:?}",
        got.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );
}
