//! `mosaic-bus --demo`: the README's first command, as a newcomer meets it.
//! A real demo process on a private data root: it binds a run per role
//! (real processes it owns), walks the loop (an agent's `message.send` to
//! the human, the human reading it through the real `mosaic-human-cli`, the
//! reader's `trail`), prints the commands to repeat it, and a person's own
//! shim call from a shell works; SIGINT ends it and its runs, and a second
//! demo on the same data root can claim the roles again.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The demo's stdout up to its "serving" line (at most 60 s).
fn start_demo(data: &Path) -> (KillOnDrop, Vec<String>) {
    let mut cmd = Command::new(bin("mosaic-bus"));
    cmd.arg("--demo")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().expect("spawn the demo"));
    let out = child.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let end = line.starts_with("serving");
            if tx.send(line).is_err() || end {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let end = line.starts_with("serving");
                lines.push(line);
                if end {
                    return (child, lines);
                }
            }
            Err(_) => panic!("the demo did not start serving:\n{}", lines.join("\n")),
        }
    }
}

/// The JSON after `->` (or the whole indented line) of the first line that
/// starts with `prefix`.
fn reply_after(lines: &[String], prefix: &str) -> Value {
    let i = lines
        .iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?}:\n{}", lines.join("\n")));
    let text = match lines[i].split_once(" -> ") {
        Some((_, r)) => r.to_string(),
        // A shim command: its output is the next line, indented.
        None => lines[i + 1].trim().to_string(),
    };
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

fn value_of<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?}:\n{}", lines.join("\n")))
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its table entry is left.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

#[test]
fn the_demo_walks_the_whole_loop_and_a_person_can_repeat_it() {
    let dir = data_root();
    let data = dir.path().join("mosaic-data");
    let (mut demo, lines) = start_demo(&data);
    let text = lines.join("\n");

    // A real process per role of the shipped business, alive.
    let pids: Vec<i32> = lines
        .iter()
        .filter_map(|l| {
            l.trim()
                .split_once(", pid ")
                .map(|(_, p)| p.parse().unwrap())
        })
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    assert!(pids.iter().all(|p| alive(*p)), "{text}");
    let cap = value_of(&lines, "agent capability (pm): ");
    assert_eq!(cap.len(), 43, "a 256-bit base64url capability: {text}");

    // The loop, each step with its real reply.
    assert_eq!(
        reply_after(&lines, "[1] pm role.claim")["ok"],
        json!(true),
        "{text}"
    );
    let sent = reply_after(&lines, "[1] pm message.send");
    assert_eq!(sent["ok"], json!(true), "{text}");
    let id = sent["result"]["id"].as_str().unwrap().to_string();
    let received = reply_after(
        &lines,
        "[2] $ echo '{\"business\":\"acme\",\"verb\":\"message.receive\"}'",
    );
    assert_eq!(received["result"]["messages"][0]["id"], json!(id), "{text}");
    assert_eq!(received["result"]["messages"][0]["from_role"], json!("pm"));
    let read = reply_after(&lines, "[2] $ echo '{\"args\"");
    assert_eq!(read["result"]["already"], json!(false), "{text}");
    let trail = reply_after(&lines, "[3] reader trail");
    let records: Vec<&str> = trail["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{text}"))
        .iter()
        .filter_map(|r| r["record"].as_str())
        .collect();
    for r in ["event", "message", "delivery", "read"] {
        assert!(records.contains(&r), "trail lacks a {r}: {text}");
    }

    // By hand, as the printed commands say: the agent sends again (any
    // Unix-socket client; here the Rust one), the human receives it with
    // the printed shim command from a shell.
    let socket = value_of(&lines, "socket: ");
    let again = mosaic_bus::Client::new(socket, cap)
        .call("message.send", json!({"to": "human", "body": "hi again"}))
        .unwrap();
    let exports = lines
        .iter()
        .find(|l| l.trim_start().starts_with("export SOCK="))
        .unwrap();
    let receive = lines
        .iter()
        .find(|l| {
            l.trim_start().starts_with(
                "echo '{\"business\":\"acme\",\"verb\":\"message.receive\"}' | \"$HUMAN\"",
            )
        })
        .unwrap_or_else(|| panic!("{text}"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{exports}\n{receive}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["result"]["messages"][0]["id"], again["id"]);
    assert_eq!(got["result"]["messages"][0]["body"], json!("hi again"));

    // SIGINT: an orderly close (lock and socket gone), the runs end with it.
    // SAFETY: kill with a live child's pid.
    unsafe { libc::kill(demo.0.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut demo.0, Duration::from_secs(15)).expect("the demo exits");
    assert_eq!(status.code(), Some(0));
    assert!(!data.join("bus/writer.lock").exists());
    assert!(!data.join("bus/bus.sock").exists());
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pids.iter().any(|p| alive(*p)), "a run outlived the demo");

    // A second demo on the same data root: the roles are free again.
    let (mut second, lines) = start_demo(&data);
    assert_eq!(
        reply_after(&lines, "[1] pm role.claim")["ok"],
        json!(true),
        "{}",
        lines.join("\n")
    );
    assert_eq!(
        reply_after(&lines, "[1] pm message.send")["ok"],
        json!(true)
    );
    // SAFETY: as above.
    unsafe { libc::kill(second.0.id() as i32, libc::SIGINT) };
    assert_eq!(
        wait_exit(&mut second.0, Duration::from_secs(15)).and_then(|s| s.code()),
        Some(0)
    );
}
