//! Start, stop, exit codes and the data root's safety rules, on real brokers.

use mosaic_tests::*;
use serde_json::json;
use std::time::Duration;
#[path = "support/lifecycle_env.rs"]
mod lifecycle_env;
use lifecycle_env::{refused_with, try_call};

#[test]
fn sigterm_and_sigint_exit_zero_and_clean_up() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let root = data_root();
        let mut b = Broker::start(root.path());
        // SAFETY: kill(2) with plain integers, on our own child.
        unsafe { libc::kill(b.child.id() as i32, sig) };
        let s = b.wait(Duration::from_secs(10)).expect("exits");
        assert_eq!(s.code(), Some(0), "signal {sig}");
        assert!(!root.path().join("bus/writer.lock").exists());
        assert!(!root.path().join("bus/bus.sock").exists());
    }
}

#[test]
fn lost_channel_exits_two_with_a_static_code() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    b.drop_channel();
    let s = b.wait(Duration::from_secs(10)).expect("exits");
    assert_eq!(s.code(), Some(2));
    assert!(
        b.stderr().contains(r#"{"error":"channel-lost"}"#),
        "{}",
        b.stderr()
    );
    assert!(!root.path().join("bus/writer.lock").exists());
}

#[test]
fn refused_boots_exit_two_with_their_code() {
    let root = data_root();
    let cases = [
        (json!({"op": "hello"}), "boot-required"),
        (
            json!({"op": "boot", "config": {"dataRoot": "relative/path", "businesses": {}}}),
            "data-root",
        ),
        (
            json!({"op": "boot", "config": {"dataRoot": "/nonexistent/x", "businesses": {}}}),
            "data-root",
        ),
        (
            json!({"op": "boot", "config": {"dataRoot": root.path(), "businesses": {}, "extra": 1}}),
            "invalid-config",
        ),
    ];
    for (first, code) in cases {
        let (mut b, reply) = Broker::spawn_with(root.path(), first.clone(), &[]);
        assert_eq!(reply, json!({"ok": false, "error": code}), "{first}");
        let s = b.wait(Duration::from_secs(10)).expect("exits");
        assert_eq!(s.code(), Some(2));
        assert_eq!(b.stderr(), format!("{{\"error\":\"{code}\"}}\n"));
    }
}

#[test]
fn business_validation_refuses_the_boot() {
    let root = data_root();
    let mut missing_authority = business();
    missing_authority["roles"]["dev"]
        .as_object_mut()
        .unwrap()
        .remove("authority");
    let mut hard_wait = business();
    hard_wait["roles"]["dev"]["authority"]["withinRole"] = json!(["deploy"]);
    let mut unknown_key = business();
    unknown_key["roles"]["dev"]["surprise"] = json!(true);
    let mut bad_arbiter = business();
    bad_arbiter["arbiters"]["technical"] = json!("nobody");
    for b in [missing_authority, hard_wait, unknown_key, bad_arbiter] {
        let cfg = json!({"dataRoot": root.path(), "businesses": {"acme": b}});
        let (_b, reply) = Broker::spawn(root.path(), cfg);
        assert_eq!(reply, json!({"ok": false, "error": "invalid-business"}));
    }
    // Empty lists are fine: they grant nothing.
    let b = Broker::start(root.path());
    b.close();
}

#[test]
fn boot_id_is_echoed() {
    let root = data_root();
    let first = json!({"op": "boot", "id": 41, "config": config(root.path())});
    let (mut b, reply) = Broker::spawn_with(root.path(), first, &[]);
    assert_eq!(reply["ok"], json!(true));
    assert_eq!(reply["id"], json!(41));
    let r = b.op(json!({"op": "identity", "id": 42, "cap": "nope"}));
    assert_eq!(
        r,
        json!({"ok": false, "error": "unknown-capability", "id": 42})
    );
    let r = b.op(json!({"op": "identity", "id": 1.5, "cap": "nope"}));
    assert_eq!(r, json!({"ok": false, "error": "unknown-capability"}));
    // Unsafe integers are not echoed, the most negative i64 included.
    for id in [i64::MIN, -9007199254740992, 9007199254740992] {
        let r = b.op(json!({"op": "identity", "id": id, "cap": "nope"}));
        assert_eq!(
            r,
            json!({"ok": false, "error": "unknown-capability"}),
            "{id}"
        );
    }
    let r = b.op(json!({"op": "nonsense", "id": 7}));
    assert_eq!(r, json!({"ok": false, "error": "unknown-op", "id": 7}));
    // The landing ops are served: without their arguments each is
    // invalid-request (with the id echoed), and the broker keeps serving.
    for (n, op) in ["checkLand", "recordLand", "landRefused", "landHeld"]
        .iter()
        .enumerate()
    {
        let r = b.op(json!({"op": op, "id": n}));
        assert_eq!(
            r,
            json!({"ok": false, "error": "invalid-request", "id": n}),
            "{op}"
        );
    }
    let r = b.op(json!({"op": "boot", "config": {}}));
    assert_eq!(r["error"], json!("already-booted"));
    b.close();
}

#[test]
fn help_and_version() {
    let out = std::process::Command::new(bin("mosaic-bus"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("mosaic-bus "));
    let out = std::process::Command::new(bin("mosaic-bus"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--host-fd"));
    // An argument that is not UTF-8 is a usage error too, not a panic. An
    // unknown option (one that is not UTF-8 included) is one line naming
    // it (tests/tests/command_lines.rs); a bad value is `usage`.
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = std::ffi::OsStr::from_bytes(b"--host-fd\xff");
    for args in [vec![std::ffi::OsStr::new("--bogus")], vec![not_utf8]] {
        let out = std::process::Command::new(bin("mosaic-bus"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("mosaic-bus: unknown option "), "{err}");
        assert!(err.trim_end().ends_with("; see mosaic-bus --help"), "{err}");
    }
    for args in [
        vec![std::ffi::OsStr::new("--host-fd"), not_utf8],
        vec![std::ffi::OsStr::new("--log-level"), not_utf8],
    ] {
        let out = std::process::Command::new(bin("mosaic-bus"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().last(), Some(r#"{"error":"usage"}"#), "{args:?}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A reply means durable: eight clients send at once (so requests share
/// group commits), the broker is killed mid-stream, and every send that
/// was answered `ok` is in the store afterwards, which passes its checks
/// and opens again.
#[test]
fn every_answered_send_survives_a_kill_in_the_middle_of_group_commits() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let pm_run = sleeper();
    let cto_run = sleeper();
    let pm = b.bind("pm", "run-pm", pm_run.id());
    let cto = b.bind("cto", "run-cto", cto_run.id());
    for cap in [&pm, &cto] {
        assert_eq!(b.call(cap, "role.claim", json!(null))["ok"], json!(true));
    }
    let answered = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|s| {
        for t in 0..8 {
            let (socket, answered) = (&b.socket, &answered);
            let cap = if t % 2 == 0 { &pm } else { &cto };
            let to = if t % 2 == 0 { "cto" } else { "pm" };
            s.spawn(move || {
                for i in 0..10_000 {
                    let req = json!({"cap": cap, "verb": "message.send",
                                     "args": {"to": to, "body": format!("m{t}-{i}")}});
                    let Some(r) = try_call(socket, format!("{req}\n").as_bytes()) else {
                        return;
                    };
                    if r["ok"] != json!(true) {
                        return;
                    }
                    let id = r["result"]["id"].as_str().unwrap().to_string();
                    answered.lock().unwrap().push(id);
                }
            });
        }
        // Kill while the clients are still sending.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while answered.lock().unwrap().len() < 300 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        b.child.kill().unwrap();
        b.child.wait().unwrap();
    });
    let answered = answered.into_inner().unwrap();
    assert!(answered.len() >= 300);

    let conn = db(root.path());
    let stored: std::collections::HashSet<String> = {
        let mut st = conn.prepare("SELECT id FROM messages").unwrap();
        let ids = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        ids
    };
    let lost: Vec<&String> = answered.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} answered sends lost: {lost:?}",
        lost.len()
    );
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    drop(conn);

    // The operator's procedure, then the open checks pass on what was left.
    std::fs::remove_file(root.path().join("bus/writer.lock")).unwrap();
    let _ = std::fs::remove_file(root.path().join("bus/bus.sock"));
    let b2 = Broker::start(root.path());
    b2.close();
}

#[test]
fn end_launch_records_what_it_released_and_a_changed_role_never_rebinds() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let p = sleeper();
    let cap = b.bind("pm", "run-e", p.id());
    // The same run under another (known) role is another launch.
    let r = b.op(json!({"op": "bindLaunch", "record": launch("cto", "run-e", p.id())}));
    assert_eq!(r, json!({"ok": false, "error": "launch-mismatch"}));
    // Ending a run that never claimed: no claim to release, exitCode null.
    let r = b.op(json!({"op": "endLaunch", "id": 3,
                        "record": {"business": "acme", "run": "run-e", "reason": "spawn-failed"}}));
    assert_eq!(
        r,
        json!({"ok": true, "id": 3, "result": {"business": "acme", "run": "run-e", "released": false}})
    );
    let trail = b.call(&b.reader_cap(), "trail", json!({"subject": "run-e"}));
    let rows = trail["result"].as_array().unwrap();
    let ended = rows.last().unwrap();
    assert_eq!(ended["kind"], json!("session.ended"));
    assert_eq!(ended["role"], json!("pm"));
    assert_eq!(
        ended["body"],
        json!({"reason": "spawn-failed", "exitCode": null, "released": false})
    );
    assert!(
        !rows.iter().any(|x| x["record"] == json!("claim")),
        "no release row for a run that held nothing: {trail}"
    );
    assert_eq!(
        b.call(&cap, "role.claim", json!(null)),
        json!({"ok": false, "error": "unknown-capability"})
    );
    // A bad reason or an unknown key refuses and ends nothing.
    let q = sleeper();
    b.bind("cto", "run-f", q.id());
    for rec in [
        json!({"business": "acme", "run": "run-f", "reason": "Not An Id"}),
        json!({"business": "acme", "run": "run-f", "reason": "done", "extra": 1}),
        json!({"business": "acme", "run": "run-f"}),
    ] {
        let r = b.op(json!({"op": "endLaunch", "record": rec}));
        assert_eq!(r, json!({"ok": false, "error": "invalid-request"}), "{rec}");
    }
    let r = b.op(json!({"op": "endLaunch", "record": {"business": "acme", "run": "run-f", "reason": "done", "exitCode": 137}}));
    assert_eq!(r["ok"], json!(true), "{r}");
    b.close();
}

/// The boot config and business rules a host can get wrong, one config per
/// case, each refused with its own code, exit 2 and `{"error":CODE}` as the
/// whole of stderr; nothing of `bus/` is left behind but what the refused
/// start found.
#[test]
fn config_and_business_rules_refuse_the_boot_with_their_code() {
    let root = data_root();
    let bad_requirements = root.path().join("requirements.json");
    std::fs::write(
        &bad_requirements,
        br#"{"prd":"P","version":"1","requirements":[{"id":"REQ-1","title":"t"}]}"#,
    )
    .unwrap();
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        // 3i row 152: launch.by can't be one of launch.instances.
        (
            "launch.instances lists launch.by",
            Box::new(|c| {
                c["businesses"]["acme"]["launch"]["instances"] = json!(["pm", "cto"]);
            }),
            "invalid-business",
        ),
        (
            "launch.by not an instance",
            Box::new(|c| {
                c["businesses"]["acme"]["launch"]["by"] = json!("chief");
            }),
            "invalid-business",
        ),
        (
            "hard wait cross-role",
            Box::new(|c| {
                c["businesses"]["acme"]["roles"]["dev"]["authority"]["crossRole"] =
                    json!(["spend"]);
            }),
            "invalid-business",
        ),
        (
            "delivery arbiter not an instance",
            Box::new(|c| {
                c["businesses"]["acme"]["arbiters"]["delivery"] = json!("nobody");
            }),
            "invalid-business",
        ),
        (
            "messaging entry not a name",
            Box::new(|c| {
                c["businesses"]["acme"]["roles"]["dev"]["messaging"] =
                    json!({"sendTo": ["Not A Name"], "receiveFrom": []});
            }),
            "invalid-business",
        ),
        (
            "relative project repo",
            Box::new(|c| {
                c["businesses"]["acme"]["projects"] = json!({"site": {"repo": "records"}});
            }),
            "invalid-business",
        ),
        (
            "reader of an unknown business",
            Box::new(|c| {
                c["readers"] = json!(["nobody"]);
            }),
            "unknown-business",
        ),
        (
            "relative repoRoots entry",
            Box::new(|c| {
                c["repoRoots"] = json!(["repo"]);
            }),
            "invalid-config",
        ),
        (
            "relative shim",
            Box::new(|c| {
                c["shims"] = json!({"human": "mosaic-human-cli", "tester": "/abs/t"});
            }),
            "invalid-config",
        ),
        (
            "missing requirements file",
            {
                let p = root.path().join("nope.json");
                Box::new(move |c| c["requirements"] = json!(p))
            },
            "invalid-requirements",
        ),
        (
            "malformed requirements file",
            {
                let p = bad_requirements.clone();
                Box::new(move |c| c["requirements"] = json!(p))
            },
            "invalid-requirements",
        ),
    ];
    for (what, edit, code) in cases {
        let mut cfg = config(root.path());
        edit(&mut cfg);
        eprintln!("case: {what}");
        refused_with(root.path(), cfg, code);
        assert!(!root.path().join("bus/writer.lock").exists(), "{what}");
    }
    // The boot message itself: no config, or a key beside it.
    for first in [
        json!({"op": "boot"}),
        json!({"op": "boot", "config": config(root.path()), "extra": 1}),
    ] {
        let (mut b, reply) = Broker::spawn_with(root.path(), first.clone(), &[]);
        assert_eq!(
            reply,
            json!({"ok": false, "error": "invalid-config"}),
            "{first}"
        );
        assert_eq!(
            b.wait(Duration::from_secs(10)).expect("exits").code(),
            Some(2)
        );
        assert_eq!(b.stderr(), "{\"error\":\"invalid-config\"}\n");
    }
}

/// "Empty maps grant no actions; missing maps refuse": an empty authority
/// map (or one list left out) boots and grants nothing.
#[test]
fn an_empty_authority_map_boots_and_grants_nothing() {
    let root = data_root();
    let mut cfg = config(root.path());
    cfg["businesses"]["acme"]["roles"]["dev"]["authority"] = json!({});
    cfg["businesses"]["acme"]["roles"]["cto"]["authority"] =
        json!({"withinRole": ["message.send"]});
    let (mut b, reply) = Broker::spawn(root.path(), cfg);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let dev = b.bind("dev", "run-dev", std::process::id());
    assert_eq!(b.call(&dev, "role.claim", json!(null))["ok"], json!(true));
    let r = b.call(&dev, "message.send", json!({"to": "pm", "body": "hi"}));
    assert_eq!(err(&r), "decision-required", "{r}");
    // The list that is there still grants.
    let cto = b.bind("cto", "run-cto", std::process::id());
    assert_eq!(b.call(&cto, "role.claim", json!(null))["ok"], json!(true));
    let r = b.call(&cto, "message.send", json!({"to": "dev", "body": "hi"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    b.close();
}

/// A host that sends SIGTERM and then drops its channel (what a host
/// shutting down does) gets the signal's orderly close: exit 0, socket and
/// lock removed, the database kept. A client stuck mid-frame keeps that close
/// busy for its five seconds, long after the channel's EOF has arrived.
#[test]
fn sigterm_then_a_dropped_channel_still_closes_in_order_and_exits_zero() {
    use std::io::Write;
    let root = data_root();
    let mut b = Broker::start(root.path());
    let mut stuck = std::os::unix::net::UnixStream::connect(&b.socket).unwrap();
    stuck.write_all(br#"{"cap":"#).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(b.child.id() as i32, libc::SIGTERM) };
    b.drop_channel();
    let s = b.wait(Duration::from_secs(20)).expect("exits");
    assert_eq!(s.code(), Some(0), "stderr: {}", b.stderr());
    let bus = root.path().join("bus");
    assert!(
        !bus.join("writer.lock").exists(),
        "the close ran to its end"
    );
    assert!(!bus.join("bus.sock").exists());
    assert!(bus.join("bus.sqlite").exists());
    assert!(!b.stderr().contains("channel-lost"), "{}", b.stderr());
    drop(stuck);
}

/// Exactly one mode: two modes, or one twice, is a usage error (exit 2,
/// `{"error":"usage"}` last on stderr) and listens nowhere, whichever order.
#[test]
fn two_modes_on_one_command_line_are_a_usage_error() {
    let dir = data_root();
    let ctl = dir.path().join("control.sock");
    let ctl_s = ctl.to_str().unwrap();
    let other = dir.path().join("other.sock");
    let other_s = other.to_str().unwrap();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let fd = {
        use std::os::fd::AsRawFd;
        theirs.as_raw_fd()
    };
    for args in [
        vec!["--host-fd", "3", "--control", ctl_s],
        vec!["--control", ctl_s, "--host-fd", "3"],
        vec!["--control", ctl_s, "--control", other_s],
        vec!["--host-fd", "3", "--host-fd", "3"],
        vec!["--control", ctl_s, "--demo"],
        vec!["--demo", "--control", ctl_s],
    ] {
        let mut cmd = std::process::Command::new(bin("mosaic-bus"));
        cmd.args(&args)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // fd 3 is a real socket, so only the second mode is wrong.
        // SAFETY: dup2 is async-signal-safe; it clears CLOEXEC on fd 3.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let status = wait_exit(&mut child, Duration::from_secs(10));
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let status = status.unwrap_or_else(|| panic!("{args:?}: still running"));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}");
        assert_eq!(err.lines().last(), Some(r#"{"error":"usage"}"#), "{args:?}");
        assert!(!ctl.exists() && !other.exists(), "{args:?} listened");
        assert!(
            !dir.path().join("mosaic-data").exists(),
            "{args:?} ran the demo"
        );
    }
    drop((ours, theirs));
}

/// `mosaic_bus::start_broker` gives a runtime with one method per host op,
/// answering as the op does, and `close` removes the socket and the lock.
#[test]
fn the_embedded_runtime_offers_every_host_op_as_a_method() {
    use mosaic_bus::config::LaunchRecord;
    use mosaic_bus::Code;
    let root = data_root();
    let cfg = mosaic_bus::BootConfig::from_json(config(root.path())).expect("config");
    let rt = mosaic_bus::start_broker(cfg).expect("start_broker");
    let bus = root.path().join("bus");
    assert!(bus.join("writer.lock").exists());
    assert_eq!(rt.socket_path(), bus.join("bus.sock"));
    let reader = rt.boot_reply()["readers"][0]["cap"]
        .as_str()
        .expect("reader cap")
        .to_string();
    let run = sleeper();
    let record = LaunchRecord::from_json(launch("pm", "run-1", run.id())).expect("record");
    let bound = rt.bind_launch(record).expect("bindLaunch");
    let cap = bound["cap"].as_str().expect("cap").to_string();
    assert_eq!(
        rt.identity(&cap),
        Ok(json!({"business": "acme", "role": "pm", "run": "run-1"}))
    );
    let claim = raw_request(
        &rt.socket_path(),
        format!("{}\n", json!({"cap": cap, "verb": "role.claim"})).as_bytes(),
    );
    assert_eq!(claim["ok"], json!(true), "{claim}");

    let allowed = rt
        .authorize(&cap, "message.send", Some("cto"), None, None)
        .expect("authorize");
    assert_eq!(allowed["allowed"], json!(true), "{allowed}");
    assert!(rt.authorize_launch(&cap, "cto").is_ok());
    assert!(rt.refuse(&cap, "capacity", None).is_ok());
    assert_eq!(rt.credential_status("acme", "pm"), Ok(json!([])));
    assert_eq!(
        rt.credential_status("acme", "nobody"),
        Err(Code::UnknownRole)
    );
    let fields = json!({"title": "Site", "done": false});
    let task = rt
        .record_task(
            "acme",
            "vikunja:1/7",
            "2026-01-01T00:00:00.000Z",
            fields.as_object().cloned(),
        )
        .expect("recordTask");
    assert_eq!(task["task_ref"], json!("vikunja:1/7"));
    let body = json!({"note": "seen"}).as_object().cloned().unwrap();
    assert!(rt
        .record_event(&cap, "tracker.note", body.clone(), None)
        .is_ok());
    assert_eq!(
        rt.record_event(&reader, "tracker.note", body, None),
        Err(Code::ReadOnly)
    );
    // The pm holds no git.push.working or review.verdict, and the business
    // has no projects: refused, as the host ops refuse it.
    assert_eq!(
        rt.check_push(&cap, "vikunja:1/7"),
        Err(Code::DecisionRequired)
    );
    let push = json!({"task_ref": "vikunja:1/7", "project": "site", "branch": "work/7",
                      "ref": "refs/heads/work/7", "commit": "a".repeat(40), "previous": null});
    assert_eq!(
        rt.record_push(&cap, push.as_object().cloned().unwrap()),
        Err(Code::UnknownProject)
    );
    let args =
        json!({"task_ref": "vikunja:1/7", "request": "0190c1f5-0000-7000-8000-000000000000"});
    assert_eq!(
        rt.review_fetch(&cap, args.as_object().cloned().unwrap()),
        Err(Code::RequestNotFound)
    );
    assert!(rt.end_launch("acme", "run-1", "done", Some(0)).is_ok());
    assert_eq!(
        rt.end_launch("acme", "run-1", "done", Some(0)),
        Err(Code::RunEnded)
    );
    rt.close();
    assert!(!bus.join("writer.lock").exists());
    assert!(!bus.join("bus.sock").exists());
    assert!(bus.join("bus.sqlite").exists());
}

/// The embedded runtime's `record_event` takes a body as a value, with no
/// JSON parser in front to bound its depth: one nested past what serde_json
/// reads back (127 levels) is `invalid-request`, not a store error
/// (`storage-unavailable` past SQLite's JSON depth limit) or an event the
/// trail could not read back. Found by fuzzing the host ops in process.
#[test]
fn a_record_event_body_nested_too_deep_is_invalid_request() {
    use mosaic_bus::config::LaunchRecord;
    use mosaic_bus::Code;
    let root = data_root();
    let cfg = mosaic_bus::BootConfig::from_json(config(root.path())).expect("config");
    let rt = mosaic_bus::start_broker(cfg).expect("start_broker");
    let run = sleeper();
    let record = LaunchRecord::from_json(launch("pm", "run-1", run.id())).expect("record");
    let cap = rt.bind_launch(record).expect("bindLaunch")["cap"]
        .as_str()
        .expect("cap")
        .to_string();
    let body = |levels: usize| {
        let mut v = json!("x");
        for _ in 1..levels {
            v = json!({ "a": v });
        }
        let mut m = serde_json::Map::new();
        m.insert("a".into(), v);
        m
    };
    for levels in [128, 1001] {
        assert_eq!(
            rt.record_event(&cap, "tracker.note", body(levels), None),
            Err(Code::InvalidRequest),
            "{levels} levels"
        );
    }
    assert!(rt
        .record_event(&cap, "tracker.note", body(127), None)
        .is_ok());
    rt.close();
}

/// `--host-fd` takes an open socket above 2: anything else is a usage error
/// (exit 2, `{"error":"usage"}` last on stderr), a number that names no
/// inherited descriptor too (the broker must not mistake one it opened
/// itself for the host's).
#[test]
fn a_bad_host_fd_is_a_usage_error() {
    use std::os::fd::AsRawFd;
    let dir = data_root();
    let file = std::fs::File::create(dir.path().join("not-a-socket")).unwrap();
    // Well above 3, so that dup2 onto 3 really happens (and clears CLOEXEC).
    // SAFETY: F_DUPFD_CLOEXEC on an open fd; the copy is closed below.
    let high = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
    assert!(high >= 100);
    let cases: [(Option<&str>, bool); 8] = [
        (None, false),
        (Some("abc"), false),
        (Some("-1"), false),
        (Some("0"), false),
        (Some("2"), false),
        (Some("99"), false),
        (Some("3"), false), // nothing inherited at 3
        (Some("3"), true),  // a regular file at 3
    ];
    for (arg, file_at_3) in cases {
        let mut cmd = std::process::Command::new(bin("mosaic-bus"));
        cmd.arg("--host-fd");
        if let Some(a) = arg {
            cmd.arg(a);
        }
        if file_at_3 {
            // SAFETY: dup2 is async-signal-safe; it clears CLOEXEC on fd 3.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(move || {
                    if libc::dup2(high, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("run mosaic-bus");
        let status = wait_exit(&mut child, Duration::from_secs(15));
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let status = status.unwrap_or_else(|| panic!("{arg:?} {file_at_3}: still running"));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{arg:?} {file_at_3}");
        assert_eq!(
            err.lines().last(),
            Some(r#"{"error":"usage"}"#),
            "{arg:?} {file_at_3}"
        );
    }
    // SAFETY: closing the copy made above.
    unsafe { libc::close(high) };
}

/// The host's channel stays the broker's: the proof helper it spawns holds
/// no copy of it (a copy would keep the channel open after the broker died,
/// and let the helper talk to the host). Fd 7, since the helper's own
/// channel is put at 3 and would hide a copy there.
#[test]
fn the_proof_helper_does_not_inherit_the_host_channel() {
    use std::io::{BufRead, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let root = data_root();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new(bin("mosaic-bus"));
    cmd.args(["--host-fd", "7"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: dup2 is async-signal-safe; it clears CLOEXEC on fd 7.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(theirs);
    ours.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut host = std::io::BufReader::new(ours);
    let boot = json!({"op": "boot", "config": config(root.path())});
    host.get_mut()
        .write_all(format!("{boot}\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    host.read_line(&mut line).unwrap();
    assert!(line.contains(r#""ok":true"#), "{line}");

    let pid = child.id();
    let channel = std::fs::read_link(format!("/proc/{pid}/fd/7")).expect("fd 7");
    assert!(
        channel.to_string_lossy().starts_with("socket:"),
        "{channel:?}"
    );
    // Children of every thread of the broker (/proc/<pid>/task/<tid>/children).
    let mut helpers = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        helpers.extend(kids.split_whitespace().map(str::to_string));
    }
    assert!(!helpers.is_empty(), "the broker runs its proof helper");
    let mut leaked = Vec::new();
    for helper in &helpers {
        for fd in std::fs::read_dir(format!("/proc/{helper}/fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if std::fs::read_link(fd.path()).ok().as_ref() == Some(&channel) {
                leaked.push(format!("{helper}: {:?}", fd.path()));
            }
        }
    }
    host.get_mut().write_all(b"{\"op\":\"close\"}\n").unwrap();
    let _ = child.wait();
    assert!(
        leaked.is_empty(),
        "the helper holds the host channel: {leaked:?}"
    );
}
