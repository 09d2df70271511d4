//! `mosaic-bus --demo [DIR]`: the shipped example business, served on a
//! local data root, with the whole loop shown once.
//!
//! The demo is its own host (the embedded runtime). It
//!
//! 1. makes sure the proof helper and the human shim stand beside this
//!    binary: under `cargo run` (which sets `CARGO`) it builds the missing
//!    ones with the same cargo, profile and target directory;
//! 2. starts one real process per role of the business (a `sleep` that
//!    dies with the demo: `PR_SET_PDEATHSIG`) and boots the broker with a
//!    launch record for each, plus a reader;
//! 3. walks the loop and prints each step with its real reply: each run
//!    claims its role, `pm` sends the human a `message.send`, the human
//!    receives and reads it through a real `mosaic-human-cli` child, and
//!    the reader asks for the message's `trail`;
//! 4. prints the socket, the capabilities and shell commands to do the same
//!    by hand, then serves until SIGINT or SIGTERM.
//!
//! Capabilities are printed here on purpose: the demo's whole point is to
//! hand a person a session to try. A demo data root is for trying only.

use mosaic_bus::error::Code;
use mosaic_bus::host::channel::Shared;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The binaries the demo needs beside `mosaic-bus`.
const SIBLINGS: [&str; 2] = ["mosaic-proofd", "mosaic-human-cli"];

/// The business the demo boots.
const BUSINESS: &str = include_str!("../examples/business.json");

/// The role that sends the human a message (it may: its `sendTo` lists
/// `human`).
const SENDER: &str = "pm";

/// The demo's runs (business, run), ended by [`end_runs`] at the close.
static RUNS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Ends the demo's runs before its orderly close (SIGINT, SIGTERM), as a
/// host ends the runs it launched: their roles are free again for the next
/// demo on the same data root. Outside the demo there are none.
pub fn end_runs(rt: &mosaic_bus::runtime::Runtime) {
    for (business, run) in RUNS.get().into_iter().flatten() {
        let _ = rt.end_launch(business, run, "demo stopped", None);
    }
}

/// Runs the demo; returns only on a refused start.
pub fn run(dir: PathBuf, shared: &Shared) -> Code {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.exists()
        && std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .is_err()
    {
        return Code::DataRoot;
    }
    let Some(bin_dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    else {
        return Code::ProofdSpawn;
    };
    if let Err(missing) = ensure_siblings(&bin_dir) {
        eprintln!(
            "mosaic-bus --demo: {missing} is not beside {} (build every binary with \
             `cargo build --workspace --bins`, or start the demo with \
             `cargo run -p mosaic-bus -- --demo`)",
            bin_dir.display()
        );
        return Code::ProofdSpawn;
    }
    let business: Value = match serde_json::from_str(BUSINESS) {
        Ok(v) => v,
        Err(_) => return Code::InvalidBusiness,
    };
    let id = business["id"].as_str().unwrap_or("acme").to_string();
    let roles: Vec<String> = business["roles"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    // One real process per role; they end with the demo (Ctrl-C reaches the
    // whole foreground group, and PR_SET_PDEATHSIG covers any other end).
    let mut runs: Vec<(String, String, Child)> = Vec::new();
    let mut launches = Vec::new();
    for role in &roles {
        let Some(child) = spawn_run_process() else {
            return Code::InvalidLaunch;
        };
        let pid = child.id() as i32;
        let Ok(stat) = mosaic_proofd::procfs::read_stat(pid) else {
            return Code::ProcessMismatch;
        };
        let run = format!("demo-{role}-{pid}");
        launches.push(
            json!({"business": id, "role": role, "run": run, "harness": "pi",
                             "pid": pid, "startTime": stat.start_time}),
        );
        runs.push((role.clone(), run, child));
    }
    let config = json!({
        "dataRoot": dir.to_string_lossy(),
        "businesses": {id.clone(): business},
        "launches": launches,
        "readers": [id],
    });
    let config = match mosaic_bus::BootConfig::from_json(config) {
        Ok(c) => c,
        Err(c) => return c,
    };
    let rt = match mosaic_bus::runtime::start_with(config, mosaic_bus::proof::spawn_default()) {
        Ok(rt) => rt,
        Err(c) => return c,
    };
    let reply = rt.boot_reply().clone();
    let socket = PathBuf::from(reply["path"].as_str().unwrap_or_default());
    let reader = reply["readers"][0]["cap"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let cap_of = |run: &str| {
        reply["launches"]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["run"] == run))
            .and_then(|x| x["cap"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let human_cli = bin_dir.join("mosaic-human-cli");
    let _ = RUNS.set(
        runs.iter()
            .map(|(_, run, _)| (id.clone(), run.clone()))
            .collect(),
    );
    // The runtime goes where a signal's orderly close finds it.
    if let Ok(mut g) = shared.lock() {
        *g = Some(rt);
    }

    let mut out = String::new();
    let mut say = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    say(format!(
        "mosaic-bus demo: business {id} (broker/examples/business.json) on {}",
        dir.display()
    ));
    say(format!("socket: {}", socket.display()));
    say("runs (one real process per role, ended with the demo):".into());
    for (role, run, child) in &runs {
        say(format!("  {role}: run {run}, pid {}", child.id()));
    }
    let sender_cap = runs
        .iter()
        .find(|(r, _, _)| r == SENDER)
        .map(|(_, run, _)| cap_of(run))
        .unwrap_or_default();
    for (role, run, _) in &runs {
        say(format!("agent capability ({role}): {}", cap_of(run)));
    }
    say(format!("reader capability ({id}): {reader}"));
    say(String::new());

    // 1. Every run claims its role; the sender tells the human something.
    for (role, run, _) in &runs {
        let r = call(&socket, &cap_of(run), "role.claim", Value::Null);
        say(format!("[1] {role} role.claim -> {}", r.1));
    }
    let send_args = json!({"to": "human", "body": "Hello from the demo: the plan is ready."});
    let sent = call(&socket, &sender_cap, "message.send", send_args.clone());
    say(format!(
        "[1] {SENDER} message.send {send_args} -> {}",
        sent.1
    ));
    let message = sent.0["result"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    // 2. The human receives and reads it through the real shim.
    let receive = json!({"business": id, "verb": "message.receive"});
    say(format!(
        "[2] $ echo '{receive}' | {} {}",
        human_cli.display(),
        socket.display()
    ));
    say(format!("    {}", shim(&human_cli, &socket, &receive)));
    let read = json!({"business": id, "verb": "message.read", "args": {"id": message}});
    say(format!(
        "[2] $ echo '{read}' | {} {}",
        human_cli.display(),
        socket.display()
    ));
    say(format!("    {}", shim(&human_cli, &socket, &read)));

    // 3. The reader's trail of the message.
    let trail_args = json!({"subject": message});
    let trail = call(&socket, &reader, "trail", trail_args.clone());
    say(format!("[3] reader trail {trail_args} -> {}", trail.1));
    say(String::new());

    // 4. The same by hand.
    say("Try it yourself in another shell:".into());
    say(format!(
        "  export SOCK='{}' CAP='{sender_cap}' READER='{reader}' HUMAN='{}'",
        socket.display(),
        human_cli.display()
    ));
    say(format!("  bus() {{ {CLIENT_ONE_LINER} \"$SOCK\"; }}"));
    say(
        r#"  printf '{"cap":"%s","verb":"message.send","args":{"to":"human","body":"hi again"}}\n' "$CAP" | bus"#
            .to_string(),
    );
    say(format!(
        "  echo '{{\"business\":\"{id}\",\"verb\":\"message.receive\"}}' | \"$HUMAN\" \"$SOCK\""
    ));
    say(format!(
        "  printf '{{\"cap\":\"%s\",\"verb\":\"trail\",\"args\":{{\"subject\":\"{message}\"}}}}\\n' \"$READER\" | bus"
    ));
    say("serving; press Ctrl-C to stop".into());
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
    drop(stdout);
    // The run processes live as long as the demo; a signal's close exits
    // the process, and PR_SET_PDEATHSIG takes them along.
    let _keep = runs;
    loop {
        std::thread::park();
    }
}

/// A shell function body that sends stdin's line to a Unix socket, half
/// closes and prints the reply (any Unix-socket client does; `socat -
/// UNIX-CONNECT:$SOCK` too).
const CLIENT_ONE_LINER: &str = "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR); sys.stdout.write(s.makefile().read())'";

/// One capability call; returns the reply object and its text.
fn call(socket: &Path, cap: &str, verb: &str, args: Value) -> (Value, String) {
    let mut req = json!({"cap": cap, "verb": verb});
    if !args.is_null() {
        req["args"] = args;
    }
    let reply = mosaic_bus::client::exchange(socket, &req)
        .unwrap_or_else(|e| json!({"ok": false, "error": e.code}));
    let text = reply.to_string();
    (reply, text)
}

/// Runs the human shim once with `request` on stdin; returns its stdout line.
fn shim(exe: &Path, socket: &Path, request: &Value) -> String {
    let child = Command::new(exe)
        .arg(socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return r#"{"ok":false,"error":"outcome-unknown"}"#.into();
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    match child.wait_with_output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim_end().to_string(),
        Err(_) => r#"{"ok":false,"error":"outcome-unknown"}"#.into(),
    }
}

/// A run's stand-in process: it sleeps until the demo ends.
fn spawn_run_process() -> Option<Child> {
    let mut cmd = Command::new("sleep");
    cmd.arg("infinity")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec the closure makes one prctl call
    // (async-signal-safe) and touches no lock or allocation.
    unsafe {
        cmd.pre_exec(|| {
            let _ = mosaic_os::hardening::die_with_parent();
            Ok(())
        });
    }
    cmd.spawn().ok()
}

/// Makes sure every binary in [`SIBLINGS`] stands in `bin_dir`: under
/// `cargo run` the missing ones are built with that cargo, for the same
/// profile and target directory. Returns the first one still missing.
fn ensure_siblings(bin_dir: &Path) -> Result<(), &'static str> {
    let missing = || {
        SIBLINGS
            .iter()
            .copied()
            .find(|b| !bin_dir.join(b).is_file())
    };
    if missing().is_none() {
        return Ok(());
    }
    if let (Some(cargo), Some(manifest)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) {
        let mut cmd = Command::new(cargo);
        cmd.current_dir(manifest)
            .args([
                "build",
                "--bins",
                "-p",
                "mosaic-proofd",
                "-p",
                "mosaic-shims",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        match bin_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(profile) => {
                cmd.args(["--profile", profile]);
            }
        }
        // Cargo marks the root of its target directory; passing it keeps a
        // `--target-dir` given to `cargo run` (CARGO_TARGET_DIR is inherited).
        if let Some(target) = bin_dir
            .parent()
            .filter(|t| t.join("CACHEDIR.TAG").is_file())
        {
            cmd.arg("--target-dir").arg(target);
        }
        eprintln!("mosaic-bus --demo: building the proof helper and the shims beside it");
        let _ = cmd.status();
    }
    match missing() {
        None => Ok(()),
        Some(b) => Err(b),
    }
}
