//! Issue 17, part 5: the user unit `systemd/mosaic-bus.service` under a
//! real systemd, booted as PID 1 of its own PID, mount, cgroup, UTS, IPC and
//! network namespaces on a private overlay root (`systemd/boot.sh`), with
//! nothing else started. Start (`Type=notify`: ready once listening), the
//! host's boot over the control socket, a human proven through the helper
//! systemd keeps in its fd store (and a shim under an agent's marker still
//! refused), stop (exit 0, socket and lock gone), poweroff; the namespaces,
//! the overlay and the boot's cgroup are gone afterwards.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The booted system: the script's process and its namespaces' PID 1 (as
/// this process sees it). Dropping it kills that PID 1, which ends every
/// process in the namespaces, and reaps the script.
struct Booted {
    script: Child,
    pid1: i32,
    cgroup: PathBuf,
}

impl Drop for Booted {
    fn drop(&mut self) {
        // SAFETY: kill with a pid; PID 1 of a child namespace dies of SIGKILL
        // sent from its parent namespace.
        unsafe { libc::kill(self.pid1, libc::SIGKILL) };
        if wait_exit(&mut self.script, Duration::from_secs(20)).is_none() {
            let _ = self.script.kill();
            let _ = self.script.wait();
        }
    }
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn boot(scratch: &Path) -> Booted {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/boot.sh");
    let log = scratch.with_extension("log");
    let mut child = Command::new("sh")
        .arg(script)
        .arg(scratch)
        .arg(bin_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("run systemd/boot.sh");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let cgroup = PathBuf::from(first.trim().strip_prefix("cgroup: ").unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "boot.sh: {first:?} {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    }));
    // script (sh) -> unshare -> PID 1, which execs systemd.
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid1 = loop {
        let found = children(child.id())
            .into_iter()
            .flat_map(children)
            .find(|p| comm(*p) == "systemd");
        if let Some(p) = found {
            break p as i32;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no systemd came up:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Booted {
        script: child,
        pid1,
        cgroup,
    }
}

impl Booted {
    /// Runs `args` inside the booted system (its namespaces and root), with
    /// a clean environment; returns (success, stdout).
    fn run(&self, args: &[&str], stdin: &str) -> (bool, String) {
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(self.pid1.to_string())
            .args(["-m", "-p", "-u", "-i", "-n", "-C", "-r", "-w", "--"])
            .args(["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("nsenter");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
        if !out.status.success() {
            eprintln!(
                "{args:?}: {:?} {text} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        (out.status.success(), text)
    }

    fn user(&self, args: &[&str]) -> (bool, String) {
        let mut all = vec!["XDG_RUNTIME_DIR=/run/user/0", "systemctl", "--user"];
        all.extend_from_slice(args);
        self.run(&all, "")
    }

    /// A path inside the booted root, as this process can reach it.
    fn path(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{inside}", self.pid1))
    }
}

fn props(text: &str) -> Value {
    let mut m = serde_json::Map::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            m.insert(k.into(), json!(v));
        }
    }
    Value::Object(m)
}

#[test]
#[ignore = "needs root"]
fn the_user_unit_starts_proves_a_human_through_the_fd_store_and_stops_under_a_real_systemd() {
    require_root("boot systemd in its own namespaces");
    assert!(
        Path::new("/lib/systemd/systemd").exists(),
        "/lib/systemd/systemd is missing: this test boots a real systemd \
         (docs/operations.md, \"The units under a real systemd\")"
    );
    let dir = data_root();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let sys = boot(&scratch);

    // The system comes up with nothing but its default target.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, state) = sys.run(&["systemctl", "is-system-running"], "");
        if state == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "system state: {state}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, units) = sys.run(
        &[
            "systemctl",
            "list-units",
            "--type=service",
            "--state=active",
            "--plain",
            "--no-legend",
        ],
        "",
    );
    assert_eq!(units, "", "no service of the image runs");

    // Root's user manager (it needs the system bus and logind).
    let (ok, _) = sys.run(
        &[
            "systemctl",
            "start",
            "dbus.socket",
            "systemd-logind.service",
            "user@0.service",
        ],
        "",
    );
    assert!(ok, "user@0.service started");

    // Start: Type=notify, so `start` returns once the broker said READY=1.
    let (ok, _) = sys.user(&["start", "mosaic-bus.service"]);
    assert!(ok, "mosaic-bus.service started");
    let (_, shown) = sys.user(&[
        "show",
        "-p",
        "ActiveState",
        "-p",
        "StatusText",
        "-p",
        "NFileDescriptorStore",
        "-p",
        "MainPID",
        "mosaic-bus.service",
    ]);
    let p = props(&shown);
    assert_eq!(p["ActiveState"], json!("active"), "{shown}");
    assert_eq!(p["StatusText"], json!("waiting for the host"), "{shown}");
    assert_eq!(
        p["NFileDescriptorStore"],
        json!("1"),
        "the helper is in the fd store: {shown}"
    );
    let main_pid = p["MainPID"].as_str().unwrap().to_string();

    // The host boots it over the control socket (same user: root).
    let control = sys.path("/run/user/0/mosaic-bus/control.sock");
    let mut host = UnixStream::connect(&control).expect("connect the control socket");
    host.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let business: Value =
        serde_json::from_str(include_str!("../../broker/examples/business.json")).unwrap();
    let boot_op = json!({"op": "boot", "config": {
        "dataRoot": "/root/.local/share/mosaic",
        "businesses": {"acme": business},
        "readers": ["acme"],
    }});
    writeln!(host, "{boot_op}").unwrap();
    let mut line = String::new();
    BufReader::new(&host).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let socket = reply["path"].as_str().unwrap().to_string();
    assert_eq!(socket, "/root/.local/share/mosaic/bus/bus.sock");

    // A human proven by the helper systemd handed over: the broker spawned
    // none of its own.
    let (ok, out) = sys.run(
        &["/opt/mosaic-bin/mosaic-human-cli", &socket],
        r#"{"business":"acme","verb":"inbox"}"#,
    );
    assert!(ok, "{out}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got["ok"], json!(true), "{got}");
    assert_eq!(got["result"]["role"], json!("human"), "{got}");
    let (_, kids) = sys.run(
        &["cat", &format!("/proc/{main_pid}/task/{main_pid}/children")],
        "",
    );
    assert_eq!(kids.trim(), "", "the broker started no helper of its own");
    // The proof is really checked: an agent's marker is refused.
    let (ok, out) = sys.run(
        &["CLAUDECODE=1", "/opt/mosaic-bin/mosaic-human-cli", &socket],
        r#"{"business":"acme","verb":"inbox"}"#,
    );
    assert!(!ok);
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got, json!({"ok": false, "error": "proof-run-marker"}));
    drop(host);

    // Stop: SIGTERM, an orderly close, exit 0; socket and lock removed.
    let (ok, _) = sys.user(&["stop", "mosaic-bus.service"]);
    assert!(ok);
    let (_, shown) = sys.user(&[
        "show",
        "-p",
        "ActiveState",
        "-p",
        "Result",
        "-p",
        "ExecMainStatus",
        "mosaic-bus.service",
    ]);
    let p = props(&shown);
    assert_eq!(p["ActiveState"], json!("inactive"), "{shown}");
    assert_eq!(p["Result"], json!("success"), "{shown}");
    assert_eq!(p["ExecMainStatus"], json!("0"), "{shown}");
    assert!(!sys.path("/root/.local/share/mosaic/bus/bus.sock").exists());
    assert!(!sys
        .path("/root/.local/share/mosaic/bus/writer.lock")
        .exists());
    assert!(sys
        .path("/root/.local/share/mosaic/bus/bus.sqlite")
        .exists());

    // Poweroff: the booted systemd exits, and with it every namespace.
    let (ok, _) = sys.run(&["systemctl", "poweroff"], "");
    assert!(ok);
    let mut sys = sys;
    let status = wait_exit(&mut sys.script, Duration::from_secs(30));
    assert!(status.is_some(), "the booted systemd did not exit");
    assert!(
        !Path::new(&format!("/proc/{}", sys.pid1)).exists() || comm(sys.pid1 as u32) != "systemd"
    );
    // Nothing left behind: the boot's cgroup is removed, and the overlay's
    // upper layer lived on a tmpfs in the gone mount namespace.
    assert!(!sys.cgroup.exists(), "{} is left", sys.cgroup.display());
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}
