//! `mosaic-proofd` on real processes, over a real socketpair.
//!
//! Every process tree here is built so the outcome does not depend on the
//! environment of whoever runs the tests (which may be a coding agent with
//! `CLAUDECODE` set): refusal trees put their marker in a process the test
//! starts, and the positive trees detach with `setsid -f env -i`, so their
//! ancestry is the detached shell and then PID 1 (or the nearest
//! subreaper) — the spec's accepted trust limit.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mosaic_proofd::procfs;
use mosaic_proofd::proof::client::{ProofdClient, ProofdError};
use mosaic_proofd::proof::{Kind, ProofCode, HUMAN_NONCE_VAR, TESTER_NONCE_VAR};

const PROOFD: &str = env!("CARGO_BIN_EXE_mosaic-proofd");

/// A private directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).unwrap();
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("mosaic-proof-{tag}-{name}"));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    /// A copy of `/bin/sleep` at `<dir>/<sub>/mosaic-human-cli`: a real
    /// executable at a path of our choosing, standing in for the shim.
    fn shim_copy(&self, sub: &str) -> PathBuf {
        let d = self.0.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("mosaic-human-cli");
        std::fs::copy(sleep_bin(), &p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sleep_bin() -> &'static str {
    ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("sleep(1) is installed")
}

fn nonce() -> String {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Processes a test started; killed (by pid) on drop.
struct Tree {
    /// The stand-in shim.
    target: i32,
    /// Its parent shell.
    parent: i32,
}

impl Drop for Tree {
    fn drop(&mut self) {
        for pid in [self.target, self.parent] {
            // SAFETY: kill(2) on pids this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Starts `parent_env` shell → `target_env` target, detached with
/// `setsid -f env -i` when `detach`, else as the test's own grandchild.
fn start_tree(
    dir: &TempDir,
    target: &Path,
    parent_env: &[(&str, &str)],
    target_env: &[(&str, &str)],
    detach: bool,
) -> Tree {
    start_tree_caps(dir, target, parent_env, target_env, detach, false)
}

/// `start_tree`, optionally keeping the runner's capability bounding set.
fn start_tree_caps(
    dir: &TempDir,
    target: &Path,
    parent_env: &[(&str, &str)],
    target_env: &[(&str, &str)],
    detach: bool,
    keep_caps: bool,
) -> Tree {
    let tag = nonce();
    let pid_file = dir.0.join(format!("{tag}.pids"));
    let assign = |env: &[(&str, &str)]| {
        env.iter()
            .map(|(k, v)| sh_quote(&format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let script = format!(
        "/usr/bin/env -i {} {} 30 & echo $$ $! > {}.tmp && mv {}.tmp {}; wait",
        assign(target_env),
        sh_quote(target.to_str().unwrap()),
        sh_quote(pid_file.to_str().unwrap()),
        sh_quote(pid_file.to_str().unwrap()),
        sh_quote(pid_file.to_str().unwrap()),
    );
    let mut cmd = if detach {
        let mut c = Command::new("setsid");
        c.arg("-f").arg("/usr/bin/env").arg("-i");
        c
    } else {
        let mut c = Command::new("/usr/bin/env");
        c.arg("-i");
        c
    };
    for (k, v) in parent_env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg("/bin/sh").arg("-c").arg(script);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if !keep_caps {
        // SAFETY: only prctl between fork and exec.
        unsafe {
            cmd.pre_exec(drop_bounding_set);
        }
    }
    let mut child = cmd.spawn().expect("spawn the process tree");
    if detach {
        // setsid -f returns once it has forked.
        assert!(child.wait().unwrap().success());
    } else {
        // Reaped by the OS when the test exits; the tree is killed on drop.
        std::mem::forget(child);
    }
    let pids = wait_for("the pid file", || std::fs::read_to_string(&pid_file).ok());
    let mut it = pids.split_whitespace().map(|p| p.parse::<i32>().unwrap());
    let tree = Tree {
        parent: it.next().unwrap(),
        target: it.next().unwrap(),
    };
    let keys: Vec<&str> = target_env.iter().map(|(k, _)| *k).collect();
    wait_for_exec(&tree, target, &keys);
    tree
}

/// Waits until the target has exec'd the stand-in shim and its new
/// environment is in place. The kernel points `/proc/<pid>/exe` at the new
/// program before it sets up the new stack, so for a moment the target's
/// `environ` reads empty (a proof taken then fails on its nonce). A real
/// shim only sends its request once running, long after that.
fn wait_for_exec(tree: &Tree, target: &Path, env_keys: &[&str]) {
    wait_for("the target to exec", || {
        if procfs::read_exe(tree.target).ok()? != target {
            return None;
        }
        let env = procfs::read_environ(tree.target).ok()?;
        env_keys
            .iter()
            .all(|k| env.iter().any(|(name, _)| name == k.as_bytes()))
            .then_some(())
    });
}

/// Empties the capability bounding set, so that a tree started by a root
/// test runner holds no capabilities after exec. proofd drops all of its
/// own, and Linux lets a process read another's `environ` only when its
/// capabilities cover the target's permitted set; a shim run by an ordinary
/// user holds none, and neither do these stand-ins.
fn drop_bounding_set() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last cap.
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

fn start_of(pid: i32) -> u64 {
    procfs::read_stat(pid).unwrap().start_time
}

fn uid_of(pid: i32) -> u32 {
    procfs::read_uid(pid).unwrap()
}

fn client() -> ProofdClient {
    ProofdClient::spawn(Path::new(PROOFD)).expect("spawn mosaic-proofd")
}

fn verify(
    c: &mut ProofdClient,
    kind: Kind,
    tree: &Tree,
    nonce: &str,
    exe: &Path,
) -> Result<(), ProofdError> {
    c.verify(
        kind,
        tree.target,
        start_of(tree.target),
        nonce,
        exe,
        uid_of(tree.target),
    )
}

fn refused(code: ProofCode) -> Result<(), ProofdError> {
    Err(ProofdError::Refused(code))
}

/// PID 1's environment, when readable, must not carry a marker for the
/// detached positive cases to be meaningful; say so plainly if it does.
fn assert_detached_root_is_clean() {
    if let Ok(env) = procfs::read_environ(1) {
        for (k, _) in env {
            let k = String::from_utf8_lossy(&k).into_owned();
            assert!(
                !mosaic_proofd::proof::MANAGED_RUN_MARKERS.contains(&k.as_str())
                    && !mosaic_proofd::proof::AGENT_RUN_MARKERS.contains(&k.as_str()),
                "PID 1 carries run marker {k}: no detached tree can pass on this machine"
            );
        }
    }
}

#[test]
fn detached_clean_tree_passes_and_each_identity_field_is_checked() {
    assert_detached_root_is_clean();
    let dir = TempDir::new("clean");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let tree = start_tree(&dir, &exe, &[], &[(HUMAN_NONCE_VAR, &n)], true);
    let mut c = client();
    assert_eq!(verify(&mut c, Kind::Human, &tree, &n, &exe), Ok(()));

    let (pid, st, uid) = (tree.target, start_of(tree.target), uid_of(tree.target));
    // Another copy of the same binary elsewhere is not the configured shim.
    let other = dir.shim_copy("b");
    assert_eq!(
        c.verify(Kind::Human, pid, st, &n, &other, uid),
        refused(ProofCode::Exe)
    );
    assert_eq!(
        c.verify(Kind::Human, pid, st, &n, &exe, uid.wrapping_add(1)),
        refused(ProofCode::Uid)
    );
    assert_eq!(
        c.verify(Kind::Human, pid, st + 1, &n, &exe, uid),
        refused(ProofCode::StartTime)
    );
    assert_eq!(
        c.verify(Kind::Human, pid, st, &nonce(), &exe, uid),
        refused(ProofCode::Nonce)
    );
    // The human nonce does not prove a tester.
    assert_eq!(
        c.verify(Kind::Tester, pid, st, &n, &exe, uid),
        refused(ProofCode::Nonce)
    );
    // A malformed request.
    assert_eq!(
        c.verify(Kind::Human, pid, st, "short", &exe, uid),
        refused(ProofCode::InvalidRequest)
    );
    // Still the same helper: refusals don't break the channel.
    assert!(c.is_alive());
    assert_eq!(verify(&mut c, Kind::Human, &tree, &n, &exe), Ok(()));
}

#[test]
fn registered_launch_ancestor_or_self_refuses() {
    assert_detached_root_is_clean();
    let dir = TempDir::new("launch");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let tree = start_tree(&dir, &exe, &[], &[(TESTER_NONCE_VAR, &n)], true);
    let mut c = client();
    assert_eq!(verify(&mut c, Kind::Tester, &tree, &n, &exe), Ok(()));
    c.set_launches(&[(tree.parent, start_of(tree.parent))])
        .unwrap();
    assert_eq!(
        verify(&mut c, Kind::Tester, &tree, &n, &exe),
        refused(ProofCode::TesterRequired)
    );
    // The registry is replaced, not merged: the target itself now.
    c.set_launches(&[(tree.target, start_of(tree.target))])
        .unwrap();
    assert_eq!(
        verify(&mut c, Kind::Tester, &tree, &n, &exe),
        refused(ProofCode::TesterRequired)
    );
    // Same pid, another start time: another process.
    c.set_launches(&[(tree.parent, start_of(tree.parent) + 1)])
        .unwrap();
    assert_eq!(verify(&mut c, Kind::Tester, &tree, &n, &exe), Ok(()));

    let dir2 = TempDir::new("launch-h");
    let exe2 = dir2.shim_copy("a");
    let n2 = nonce();
    let human = start_tree(&dir2, &exe2, &[], &[(HUMAN_NONCE_VAR, &n2)], true);
    c.set_launches(&[(human.parent, start_of(human.parent))])
        .unwrap();
    assert_eq!(
        verify(&mut c, Kind::Human, &human, &n2, &exe2),
        refused(ProofCode::LaunchAncestor)
    );
}

#[test]
fn markers_in_a_real_ancestor_or_in_the_process_refuse() {
    let dir = TempDir::new("markers");
    let exe = dir.shim_copy("a");
    let mut c = client();
    // A managed run's marker in the parent (a direct, undetached tree).
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[("MOSAIC_RUN_ID", "run-1")],
        &[(HUMAN_NONCE_VAR, &n)],
        false,
    );
    assert_eq!(
        verify(&mut c, Kind::Human, &t, &n, &exe),
        refused(ProofCode::RunMarker)
    );
    drop(t);
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[("MOSAIC_BUS_CAP", "c")],
        &[(TESTER_NONCE_VAR, &n)],
        true,
    );
    assert_eq!(
        verify(&mut c, Kind::Tester, &t, &n, &exe),
        refused(ProofCode::TesterRequired)
    );
    drop(t);
    // An agent's marker in the parent: refuses a human, not a tester.
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[("CODEX_SANDBOX", "seatbelt")],
        &[(HUMAN_NONCE_VAR, &n)],
        true,
    );
    assert_eq!(
        verify(&mut c, Kind::Human, &t, &n, &exe),
        refused(ProofCode::RunMarker)
    );
    drop(t);
    assert_detached_root_is_clean();
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[("CLAUDECODE", "1")],
        &[(TESTER_NONCE_VAR, &n)],
        true,
    );
    assert_eq!(verify(&mut c, Kind::Tester, &t, &n, &exe), Ok(()));
    drop(t);
    // A marker in the process's own environment.
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[],
        &[(HUMAN_NONCE_VAR, &n), ("CLAUDE_CODE_ENTRYPOINT", "cli")],
        true,
    );
    assert_eq!(
        verify(&mut c, Kind::Human, &t, &n, &exe),
        refused(ProofCode::RunMarker)
    );
    drop(t);
    let n = nonce();
    let t = start_tree(
        &dir,
        &exe,
        &[],
        &[(TESTER_NONCE_VAR, &n), ("MOSAIC_AGENT_RUN", "1")],
        true,
    );
    assert_eq!(
        verify(&mut c, Kind::Tester, &t, &n, &exe),
        refused(ProofCode::TesterRequired)
    );
}

#[test]
fn a_pid_from_another_pid_namespace_does_not_prove_anything() {
    // The stand-in shim runs as PID 1 of its own PID namespace and claims
    // that pid, as a shim inside a sandbox would. proofd reads its own
    // namespace's PID 1, which is not the shim.
    common::require_pid_namespace();
    let dir = TempDir::new("pidns");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let mut outer = Command::new("unshare")
        // --kill-child: the namespace ends with `unshare` (killed below),
        // so the stand-in outlives the test by nothing.
        .args([
            "-p",
            "-f",
            "--kill-child",
            "--mount-proc",
            "/usr/bin/env",
            "-i",
        ])
        .arg(format!("{HUMAN_NONCE_VAR}={n}"))
        .arg(&exe)
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // The namespace's PID 1, seen from here: unshare's child.
    let inner: i32 = wait_for("the namespaced child", || {
        let kids =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", outer.id())).ok()?;
        let pid: i32 = kids.split_whitespace().next()?.parse().ok()?;
        (procfs::read_exe(pid).ok()? == exe).then_some(pid)
    });
    // Its own view: pid 1 (NSpid's last field).
    let status = std::fs::read_to_string(format!("/proc/{inner}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    let claimed: i32 = nspid.split_whitespace().last().unwrap().parse().unwrap();
    assert_eq!(claimed, 1);
    let mut c = client();
    let got = c.verify(
        Kind::Human,
        claimed,
        start_of(inner),
        &n,
        &exe,
        uid_of(inner),
    );
    // The claimed pid 1 is some other process here: its exe is not
    // the shim (or is unreadable to proofd, which has dropped every capability).
    let expected = match std::fs::read_link("/proc/1/exe") {
        Ok(p) if p == exe => panic!("PID 1 is the stand-in shim?"),
        Ok(_) => ProofCode::Exe,
        Err(_) => ProofCode::Unreadable,
    };
    assert_eq!(got, refused(expected));
    let _ = outer.kill();
    let _ = outer.wait();
}

#[test]
fn proofd_drops_privileges_and_exits_0_on_eof() {
    let c = client();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", c.pid().expect("spawned"))).unwrap();
    for key in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        assert_eq!(
            line.split_whitespace().nth(1),
            Some("0000000000000000"),
            "{line}"
        );
    }
    let nnp = status
        .lines()
        .find(|l| l.starts_with("NoNewPrivs:"))
        .unwrap();
    assert_eq!(nnp.split_whitespace().nth(1), Some("1"));
    let stat =
        std::fs::read_to_string(format!("/proc/{}/stat", c.pid().expect("spawned"))).unwrap();
    assert!(!stat.is_empty());
    drop(c);

    // By hand: close our end and the helper exits 0.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = spawn_raw(&theirs);
    drop(theirs);
    let mut w = &ours;
    w.write_all(b"{\"op\":\"hello\",\"version\":1}\n").unwrap();
    let mut r = BufReader::new(&ours);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "{\"ok\":true,\"version\":1}\n");
    drop(r);
    drop(ours);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

fn spawn_raw(theirs: &UnixStream) -> std::process::Child {
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(PROOFD);
    cmd.args(["--fd", "3"]).stdin(Stdio::null());
    // SAFETY: only dup2 between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

#[test]
fn raw_protocol_bad_lines_get_invalid_request() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = spawn_raw(&theirs);
    drop(theirs);
    let mut w = &ours;
    let mut r = BufReader::new(&ours);
    let mut ask = |line: &[u8]| {
        w.write_all(line).unwrap();
        let mut out = String::new();
        r.read_line(&mut out).unwrap();
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let bad = serde_json::json!({"ok":false,"error":"invalid-request"});
    assert_eq!(ask(b"nonsense\n"), bad);
    assert_eq!(
        ask(b"{\"op\":\"launch\",\"id\":4}\n"),
        serde_json::json!({"id":4,"ok":false,"error":"invalid-request"})
    );
    assert_eq!(
        ask(b"{\"op\":\"verify\",\"id\":5,\"kind\":\"human\"}\n"),
        serde_json::json!({"id":5,"ok":false,"error":"invalid-request"})
    );
    let mut huge = vec![b' '; 70 * 1024];
    huge.push(b'\n');
    assert_eq!(ask(&huge), bad);
    assert_eq!(
        ask(b"{\"op\":\"hello\",\"version\":1}\n"),
        serde_json::json!({"ok":true,"version":1})
    );
    drop(ours);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn proofd_refuses_a_bad_fd_argument() {
    for (args, code) in [
        (&["--fd", "abc"][..], "usage"),
        (&["--fd", "1"][..], "usage"),
        (&[][..], "usage"),
        (&["--fd", "3", "--fd", "4"][..], "usage"),
        (&["--fd", "97"][..], "bad-fd"),
    ] {
        let out = Command::new(PROOFD)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("{{\"error\":\"{code}\"}}\n"),
            "{args:?}"
        );
    }
    // An argument that is not UTF-8 is a usage error too, not a panic.
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(PROOFD)
        .arg("--fd")
        .arg(std::ffi::OsStr::from_bytes(b"3\xff"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "{\"error\":\"usage\"}\n"
    );
}

#[test]
fn a_dead_helper_is_unavailable() {
    let dir = TempDir::new("dead");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let tree = start_tree(&dir, &exe, &[], &[(HUMAN_NONCE_VAR, &n)], true);
    let mut c = client();
    // SAFETY: kill(2) on the helper this test spawned.
    unsafe {
        libc::kill(c.pid().expect("spawned") as i32, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        verify(&mut c, Kind::Human, &tree, &n, &exe),
        Err(ProofdError::Unavailable)
    );
    assert!(!c.is_alive());
    assert_eq!(c.set_launches(&[]), Err(ProofdError::Unavailable));
    assert_eq!(ProofdError::Unavailable.as_str(), "proof-unavailable");
    // A fresh helper works again.
    let mut c = client();
    assert_detached_root_is_clean();
    assert_eq!(verify(&mut c, Kind::Human, &tree, &n, &exe), Ok(()));
}

#[test]
fn a_shim_holding_capabilities_is_unreadable_to_the_capless_helper() {
    assert_detached_root_is_clean();
    let dir = TempDir::new("caps");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let tree = start_tree_caps(&dir, &exe, &[], &[(HUMAN_NONCE_VAR, &n)], true, true);
    let status = std::fs::read_to_string(format!("/proc/{}/status", tree.target)).unwrap();
    let prm = status.lines().find(|l| l.starts_with("CapPrm:")).unwrap();
    let has_caps = prm.split_whitespace().nth(1) != Some("0000000000000000");
    let mut c = client();
    let expected = if has_caps {
        // E.g. the tests run as root: the stand-in keeps root's capabilities.
        refused(ProofCode::Unreadable)
    } else {
        // An ordinary user's process: nothing to hide from a same-UID reader.
        Ok(())
    };
    assert_eq!(verify(&mut c, Kind::Human, &tree, &n, &exe), expected);
}

#[test]
fn an_adopted_helper_outlives_its_clients_and_is_never_killed_by_them() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = spawn_raw(&theirs);
    drop(theirs);
    assert_detached_root_is_clean();
    let dir = TempDir::new("adopt");
    let exe = dir.shim_copy("a");
    let n = nonce();
    let tree = start_tree(&dir, &exe, &[], &[(HUMAN_NONCE_VAR, &n)], true);
    for _ in 0..2 {
        let mut c = ProofdClient::adopt(ours.try_clone().unwrap()).unwrap();
        assert_eq!(c.pid(), None, "an adopted helper is not the client's child");
        assert!(c.is_alive());
        c.set_launches(&[]).unwrap();
        assert_eq!(verify(&mut c, Kind::Human, &tree, &n, &exe), Ok(()));
        drop(c);
        // Dropping the client neither shut the channel nor stopped the helper.
        assert!(matches!(child.try_wait(), Ok(None)));
    }
    drop(ours);
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "EOF once the last end closes"
    );
}

/// Starts, detached and capability-less, `/usr/bin/python3` as the parent of
/// the stand-in shim. The parent makes itself undumpable first, so its
/// `environ` and `exe` are closed to the capability-less helper (EACCES);
/// `CLAUDECODE=1` sits in that closed environment. `comm` renames the parent
/// (`PR_SET_NAME`), `argv0` runs it under another `argv[0]`.
fn start_undumpable_parent(
    dir: &TempDir,
    target: &Path,
    (var, nonce): (&str, &str),
    comm: &str,
    argv0: &str,
) -> Tree {
    let pid_file = dir.0.join(format!("{}.pids", self::nonce()));
    let script = r#"
import ctypes, os, subprocess, sys
target, var, nonce, pid_file, comm = sys.argv[1:6]
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
    sys.exit(3)
if comm and libc.prctl(15, comm.encode(), 0, 0, 0) != 0:  # PR_SET_NAME
    sys.exit(4)
child = subprocess.Popen([target, "30"], env={var: nonce})
with open(pid_file + ".tmp", "w") as f:
    f.write("%d %d" % (os.getpid(), child.pid))
os.rename(pid_file + ".tmp", pid_file)
child.wait()
"#;
    let mut cmd = Command::new("setsid");
    cmd.args([
        "-f",
        "/usr/bin/env",
        "-i",
        "CLAUDECODE=1",
        "/bin/bash",
        "-c",
    ])
    .arg(r#"a="$1"; shift; exec -a "$a" /usr/bin/python3 -c "$@""#)
    .arg("sh")
    .arg(argv0)
    .arg(script)
    .arg(target)
    .arg(var)
    .arg(nonce)
    .arg(&pid_file)
    .arg(comm)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // SAFETY: only prctl between fork and exec.
    unsafe {
        cmd.pre_exec(drop_bounding_set);
    }
    assert!(cmd.status().expect("setsid").success());
    let pids = wait_for("the pid file", || std::fs::read_to_string(&pid_file).ok());
    let mut it = pids.split_whitespace().map(|p| p.parse::<i32>().unwrap());
    let tree = Tree {
        parent: it.next().unwrap(),
        target: it.next().unwrap(),
    };
    wait_for_exec(&tree, target, &[var]);
    tree
}

#[test]
fn an_ancestor_with_a_closed_environment_is_still_checked_by_its_command_name() {
    assert_detached_root_is_clean();
    let dir = TempDir::new("undumpable");
    let exe = dir.shim_copy("a");
    let mut c = client();
    // The parent's environment (with its marker) is unreadable: the marker
    // check is skipped for it and the human passes, which also shows the
    // environment really was closed to the helper.
    let n = nonce();
    let t = start_undumpable_parent(&dir, &exe, (HUMAN_NONCE_VAR, &n), "", "python3");
    assert_eq!(verify(&mut c, Kind::Human, &t, &n, &exe), Ok(()));
    drop(t);
    // The same parent going by an agent's name, as its process title ...
    let n = nonce();
    let t = start_undumpable_parent(&dir, &exe, (HUMAN_NONCE_VAR, &n), "claude", "python3");
    assert_eq!(
        verify(&mut c, Kind::Human, &t, &n, &exe),
        refused(ProofCode::RunMarker)
    );
    drop(t);
    // ... or as its argv[0]: the command check still applies.
    let n = nonce();
    let t = start_undumpable_parent(&dir, &exe, (HUMAN_NONCE_VAR, &n), "", "/opt/agent/codex");
    assert_eq!(
        verify(&mut c, Kind::Human, &t, &n, &exe),
        refused(ProofCode::RunMarker)
    );
    drop(t);
    // A tester may run inside a coding agent: its name does not refuse one.
    let n = nonce();
    let t = start_undumpable_parent(&dir, &exe, (TESTER_NONCE_VAR, &n), "claude", "python3");
    assert_eq!(verify(&mut c, Kind::Tester, &t, &n, &exe), Ok(()));
}

#[test]
fn every_run_marker_refuses_from_a_real_ancestor() {
    use mosaic_proofd::proof::{AGENT_RUN_MARKERS, MANAGED_RUN_MARKERS};
    // The list DESIGN.md requires at the least, all in the one list.
    for m in [
        "MOSAIC_RUN_ID",
        "MOSAIC_BUS_CAP",
        "MOSAIC_AGENT_RUN",
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CODEX_SANDBOX",
        "CODEX_SANDBOX_NETWORK_DISABLED",
    ] {
        assert!(
            MANAGED_RUN_MARKERS.contains(&m) || AGENT_RUN_MARKERS.contains(&m),
            "{m} is not a run marker"
        );
    }
    assert_detached_root_is_clean();
    let dir = TempDir::new("every-marker");
    let exe = dir.shim_copy("a");
    let mut c = client();
    for m in MANAGED_RUN_MARKERS.iter().chain(AGENT_RUN_MARKERS) {
        let managed = MANAGED_RUN_MARKERS.contains(m);
        // An empty value counts as much as any other.
        let n = nonce();
        let t = start_tree(&dir, &exe, &[(m, "")], &[(HUMAN_NONCE_VAR, &n)], true);
        assert_eq!(
            verify(&mut c, Kind::Human, &t, &n, &exe),
            refused(ProofCode::RunMarker),
            "human under {m}"
        );
        drop(t);
        let n = nonce();
        let t = start_tree(&dir, &exe, &[(m, "1")], &[(TESTER_NONCE_VAR, &n)], true);
        let want = if managed {
            refused(ProofCode::TesterRequired)
        } else {
            Ok(())
        };
        assert_eq!(
            verify(&mut c, Kind::Tester, &t, &n, &exe),
            want,
            "tester under {m}"
        );
    }
}
