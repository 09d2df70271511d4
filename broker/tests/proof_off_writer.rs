//! The writer never waits on the proof side (issue 18, item 1): with a shim
//! proof check held open inside the verifier, a `bindLaunch`, a
//! `message.send` over the real socket and an `endLaunch` all commit, and
//! the launch-set changes they made reach the verifier after that check, in
//! order. A real runtime on a real socket and store; only the verifier is
//! a stand-in, one that does not answer until the test lets it.

use mosaic_bus::config::{BootConfig, LaunchRecord};
use mosaic_bus::error::Code;
use mosaic_bus::proof::Verifier;
use mosaic_bus::server::envelope::{Proof, ShimKind};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Far longer than any step here takes: only a hang reaches it.
const HANG: Duration = Duration::from_secs(30);

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: impl Into<String>) {
    log.lock().expect("log").push(what.into());
}

/// A verifier whose check waits until the test releases it.
struct Held {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
    log: Log,
}

impl Verifier for Held {
    fn verify(&mut self, _: ShimKind, _: &Proof, _: &Path, _: u32) -> Result<(), Code> {
        note(&self.log, "verify begins");
        let _ = self.entered.send(());
        let released = self.release.recv_timeout(HANG).is_ok();
        note(&self.log, "verify ends");
        if released {
            Ok(())
        } else {
            Err(Code::ProofUnavailable)
        }
    }

    fn set_launches(&mut self, launches: &[(i32, u64)]) {
        note(&self.log, format!("launches {}", launches.len()));
    }
}

fn own_start_time() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    after
        .split(' ')
        .nth(19)
        .and_then(|s| s.parse().ok())
        .expect("start time")
}

/// This test process as a launch of `role`.
fn launch(role: &str, run: &str) -> LaunchRecord {
    LaunchRecord::from_json(json!({
        "business": "acme", "role": role, "run": run, "harness": "pi",
        "pid": std::process::id(), "startTime": own_start_time()
    }))
    .expect("record")
}

/// One request on the client socket, one reply (a hang fails the test).
fn call(socket: &Path, req: &Value) -> Value {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(HANG)).expect("timeout");
    writeln!(s, "{req}").expect("write");
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .expect("a reply before the hang guard");
    serde_json::from_str(&line).expect("reply json")
}

#[test]
fn a_proof_check_held_open_does_not_hold_the_writer() {
    let root = tempfile::tempdir().expect("tempdir");
    let config = BootConfig::from_json(json!({
        "dataRoot": root.path(),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "cto", "delivery": "pm"},
            "roles": {
                "pm": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                "cto": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
            }
        }},
        "shims": {"human": "/nonexistent/human", "tester": "/nonexistent/tester"}
    }))
    .expect("config");
    let log: Log = Arc::default();
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let held = Held {
        entered: entered_tx,
        release: release_rx,
        log: log.clone(),
    };
    let rt = mosaic_bus::runtime::start_with(config, Some(Box::new(held))).expect("start");
    let socket = rt.socket_path();
    let pm = rt.bind_launch(launch("pm", "pm-1")).expect("bind pm")["cap"]
        .as_str()
        .expect("cap")
        .to_string();
    let claimed = call(&socket, &json!({"cap": pm, "verb": "role.claim"}));
    assert_eq!(claimed["ok"], json!(true), "{claimed}");

    // A human shim's request: the peer pid is the proof's (this process),
    // so the gate hands the check to the verifier, which holds it.
    let human = {
        let socket = socket.clone();
        std::thread::spawn(move || {
            call(
                &socket,
                &json!({"human": {"pid": std::process::id(), "startTime": own_start_time(),
                                  "nonce": "n"},
                        "business": "acme", "verb": "inbox"}),
            )
        })
    };
    entered
        .recv_timeout(HANG)
        .expect("the check reached the verifier");

    // With the check open: a bind and an end (each changes the launch set
    // the proof side keeps) and a send all commit.
    let cto = rt.bind_launch(launch("cto", "cto-1")).expect("bind cto");
    assert!(cto["cap"].is_string(), "{cto}");
    let sent = call(
        &socket,
        &json!({"cap": pm, "verb": "message.send", "args": {"to": "cto", "body": "hello"}}),
    );
    assert_eq!(sent["ok"], json!(true), "{sent}");
    let ended = rt
        .end_launch("acme", "cto-1", "done", Some(0))
        .expect("end cto");
    assert_eq!(ended["released"], json!(false), "{ended}");
    note(&log, "writer done");

    release.send(()).expect("release");
    let inbox = human.join().expect("human thread");
    assert_eq!(inbox["ok"], json!(true), "{inbox}");
    let trail = call(
        &socket,
        &json!({"cap": pm, "verb": "trail", "args": {"subject": sent["result"]["id"]}}),
    );
    assert!(
        trail["result"].as_array().is_some_and(|t| !t.is_empty()),
        "the send is in the store: {trail}"
    );
    rt.close();

    let log = log.lock().expect("log").clone();
    let at = |what: &str| log.iter().position(|l| l == what);
    let (begins, done, ends) = (at("verify begins"), at("writer done"), at("verify ends"));
    assert!(
        begins < done && done < ends,
        "the writer finished while the check was open: {log:?}"
    );
    // The launch set the writer changed during the check reached the
    // verifier after it, ending with pm-1 alone (cto-1 bound, then ended).
    let after: Vec<&String> = log[ends.expect("ends") + 1..].iter().collect();
    assert_eq!(
        after.last().map(|s| s.as_str()),
        Some("launches 1"),
        "{log:?}"
    );
    assert!(
        log[..begins.expect("begins")]
            .iter()
            .any(|l| l == "launches 1"),
        "pm-1's bind reached the verifier before the check: {log:?}"
    );
}
