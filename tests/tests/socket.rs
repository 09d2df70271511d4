//! The client socket: framing, envelope, capabilities and the first verbs,
//! against a real broker over a real Unix socket.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn refusal(code: &str) -> Value {
    json!({"ok": false, "error": code})
}

#[test]
fn framing_rules() {
    let root = data_root();
    let b = Broker::start(root.path());
    let cap = b.reader_cap();
    let good = format!(
        "{}\n",
        json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}})
    );

    // A good request.
    assert_eq!(
        raw_request(&b.socket, good.as_bytes()),
        json!({"ok": true, "result": []})
    );
    // Not JSON, not UTF-8, not an object.
    assert_eq!(
        raw_request(&b.socket, b"{nope\n"),
        refusal("invalid-request")
    );
    assert_eq!(
        raw_request(&b.socket, b"\xff\xfe\n"),
        refusal("invalid-request")
    );
    assert_eq!(
        raw_request(&b.socket, b"[1,2]\n"),
        refusal("invalid-request")
    );
    // Unterminated: EOF before the newline.
    assert_eq!(
        raw_request(&b.socket, good.trim_end().as_bytes()),
        refusal("invalid-request")
    );
    // Two frames in one write.
    let two = format!("{good}{good}");
    assert_eq!(
        raw_request(&b.socket, two.as_bytes()),
        refusal("invalid-request")
    );
    // Oversized: 64 KiB with the newline is the limit.
    let pad = "x".repeat(65536);
    let big = format!(
        "{}\n",
        json!({"cap": cap, "verb": "trail", "args": {"subject": pad}})
    );
    assert_eq!(
        raw_request(&b.socket, big.as_bytes()),
        refusal("request-too-large")
    );
    let huge = vec![b'a'; 200_000];
    assert_eq!(raw_request(&b.socket, &huge), refusal("request-too-large"));
    // Exactly at the limit is accepted by the framer (the verb then judges it).
    let base = json!({"cap": cap, "verb": "trail", "args": {"subject": ""}}).to_string();
    let fill = 65535 - base.len();
    let exact = format!(
        "{}\n",
        json!({"cap": cap, "verb": "trail", "args": {"subject": "y".repeat(fill)}})
    );
    assert_eq!(exact.len(), 65536);
    assert_eq!(
        raw_request(&b.socket, exact.as_bytes()),
        refusal("invalid-request")
    );
    // Unknown envelope keys, missing verb, two identities.
    for bad in [
        json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}, "extra": true}),
        json!({"cap": cap}),
        json!({"cap": cap, "verb": "trail", "business": "acme"}),
        json!({"verb": "trail"}),
    ] {
        assert_eq!(
            raw_request(&b.socket, format!("{bad}\n").as_bytes()),
            refusal("invalid-request"),
            "{bad}"
        );
    }
    // The id is echoed on success and refusal; an unsafe id is not.
    let with_id = json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}, "id": 12});
    assert_eq!(
        raw_request(&b.socket, format!("{with_id}\n").as_bytes()),
        json!({"ok": true, "result": [], "id": 12})
    );
    let bad_verb = json!({"cap": cap, "verb": "no.such", "id": 13});
    assert_eq!(
        raw_request(&b.socket, format!("{bad_verb}\n").as_bytes()),
        json!({"ok": false, "error": "unknown-verb", "id": 13})
    );
    let unsafe_id =
        json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}, "id": 9007199254740992u64});
    assert_eq!(
        raw_request(&b.socket, format!("{unsafe_id}\n").as_bytes()),
        refusal("invalid-request")
    );
    // The most negative i64 is no safe integer either (and must not
    // overflow the check): refused, nothing echoed, the broker still serves.
    for id in [i64::MIN, -9007199254740992] {
        let line = format!(
            "{{\"cap\":\"{cap}\",\"verb\":\"trail\",\"args\":{{\"subject\":\"x\"}},\"id\":{id}}}\n"
        );
        assert_eq!(
            raw_request(&b.socket, line.as_bytes()),
            refusal("invalid-request"),
            "{id}"
        );
    }
    assert_eq!(
        raw_request(&b.socket, format!("{with_id}\n").as_bytes()),
        json!({"ok": true, "result": [], "id": 12})
    );
    b.close();
}

#[test]
fn a_slow_client_times_out_and_a_delayed_second_frame_is_not_read() {
    let root = data_root();
    let b = Broker::start(root.path());
    // Half a frame, then silence: refused at the 5 s deadline, with the
    // deadline's own code.
    let mut s = UnixStream::connect(&b.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(b"{\"cap\":").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap(),
        refusal("request-timeout")
    );

    // The broker answers at the newline without waiting for EOF; bytes sent
    // later are never read as a request.
    let cap = b.reader_cap();
    let mut s = UnixStream::connect(&b.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}});
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let reply: Value = serde_json::from_slice(buf.trim_ascii_end()).unwrap();
    assert_eq!(reply, json!({"ok": true, "result": []}));
    assert!(
        s.write_all(format!("{req}\n").as_bytes()).is_err() || {
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            rest.is_empty()
        }
    );
    b.close();
}

/// Thousands of hostile frames, then a good request: the broker still answers.
#[test]
fn fuzzed_frames_never_crash_or_hang_the_broker() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let cap = b.reader_cap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let templates = [
        json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}}).to_string(),
        json!({"cap": cap, "verb": "role.claim"}).to_string(),
        json!({"human": {"pid": 1, "startTime": 2, "nonce": "n"}, "business": "acme", "verb": "inbox"}).to_string(),
        json!({"cap": cap, "verb": "event.emit", "args": {"kind": "action.allowed", "body": {"action": "routine"}}}).to_string(),
    ];
    let sent = 3000;
    let mut answered = 0;
    for i in 0..sent {
        let t = templates[(rnd() % templates.len() as u64) as usize]
            .as_bytes()
            .to_vec();
        let frame: Vec<u8> = match i % 6 {
            // random bytes with a newline
            0 => {
                let n = (rnd() % 300) as usize;
                let mut v: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
                v.push(b'\n');
                v
            }
            // truncated JSON
            1 => {
                let cut = (rnd() as usize) % t.len();
                let mut v = t[..cut].to_vec();
                v.push(b'\n');
                v
            }
            // a byte flipped
            2 => {
                let mut v = t.clone();
                let at = (rnd() as usize) % v.len();
                v[at] = rnd() as u8;
                v.push(b'\n');
                v
            }
            // deep nesting
            3 => {
                let d = 1 + (rnd() % 5000) as usize;
                let mut v = "[".repeat(d).into_bytes();
                v.extend("]".repeat(d).into_bytes());
                v.push(b'\n');
                v
            }
            // no newline at all
            4 => t.clone(),
            // a huge line
            _ => {
                let mut v = vec![b'{'; 70_000 + (rnd() % 10_000) as usize];
                v.push(b'\n');
                v
            }
        };
        let r = raw_request(&b.socket, &frame);
        if r.is_object() {
            answered += 1;
            if r["ok"] == json!(true) {
                continue;
            }
            assert_eq!(r["ok"], json!(false), "{r}");
            let code = r["error"]
                .as_str()
                .unwrap_or_else(|| panic!("a refusal without a code: {r}"));
            assert!(
                mosaic_bus::Code::parse(code).is_some(),
                "{code} is not a code of the bus (frame {i}): {r}"
            );
            // The classes whose refusal the frame alone decides. A flipped
            // byte (2) may still be a request, refused for what it asks.
            let expected = match i % 6 {
                // Not one JSON object: random bytes (or several lines),
                // truncated JSON, nesting past any request, a frame ended by
                // EOF instead of a newline.
                0 | 1 | 3 | 4 => Some("invalid-request"),
                // Past the 64 KiB frame cap, and no save verb.
                5 => Some("request-too-large"),
                _ => None,
            };
            if let Some(want) = expected {
                assert_eq!(code, want, "frame {i} (class {}): {r}", i % 6);
            }
        }
    }
    assert_eq!(answered, sent, "every frame got a reply");
    // Slow clients: a handful of connections that never finish their frame.
    let slow: Vec<UnixStream> = (0..20)
        .map(|_| {
            let mut s = UnixStream::connect(&b.socket).unwrap();
            s.write_all(b"{\"cap\":\"").unwrap();
            s
        })
        .collect();
    let good = json!({"cap": cap, "verb": "trail", "args": {"subject": "x"}});
    assert_eq!(
        raw_request(&b.socket, format!("{good}\n").as_bytes()),
        json!({"ok": true, "result": []})
    );
    drop(slow);
    assert!(b.child.try_wait().unwrap().is_none(), "still running");
    let r = b.op(json!({"op": "identity", "cap": cap}));
    assert_eq!(r["ok"], json!(true));
    b.close();
}

#[test]
fn claim_release_emit_and_trail() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let p1 = sleeper();
    let p2 = sleeper();
    let pm1 = b.bind("pm", "run-pm-1", p1.id());
    let pm2 = b.bind("pm", "run-pm-2", p2.id());
    let reader = b.reader_cap();

    // Unknown capability.
    assert_eq!(
        b.call("not-a-cap", "role.claim", Value::Null),
        refusal("unknown-capability")
    );
    // Emit before claiming: not the holder.
    let emit = json!({"kind": "action.allowed", "body": {"action": "routine", "target": "x"}, "subject": "vikunja:1/2"});
    assert_eq!(
        b.call(&pm1, "event.emit", emit.clone()),
        refusal("not-holder")
    );
    // Release before claiming.
    assert_eq!(
        b.call(&pm1, "role.release", Value::Null),
        refusal("not-holder")
    );
    // Claim; a second claim (either run) is refused.
    let c = b.call(&pm1, "role.claim", Value::Null);
    assert_eq!(c["ok"], json!(true), "{c}");
    assert_eq!(c["result"]["role"], json!("pm"));
    assert_eq!(c["result"]["run"], json!("run-pm-1"));
    assert_eq!(
        b.call(&pm2, "role.claim", Value::Null),
        refusal("role-held")
    );
    assert_eq!(
        b.call(&pm1, "role.claim", Value::Null),
        refusal("role-held")
    );
    assert_eq!(
        b.call(&pm2, "role.release", Value::Null),
        refusal("not-holder")
    );
    // Args where none are taken.
    assert_eq!(
        b.call(&pm1, "role.claim", json!({"role": "cto"})),
        refusal("invalid-request")
    );
    // Routine events only.
    let e = b.call(&pm1, "event.emit", emit.clone());
    assert_eq!(e["ok"], json!(true), "{e}");
    let event_id = e["result"]["event"].as_str().unwrap().to_string();
    for bad in [
        json!({"kind": "human.input", "body": {"action": "routine"}}),
        json!({"kind": "action.allowed", "body": {"action": "deploy"}}),
        json!({"kind": "action.allowed", "body": {"action": "routine", "extra": 1}}),
        json!({"kind": "action.allowed"}),
        json!({"kind": "action.allowed", "body": {"action": "routine"}, "surprise": 1}),
    ] {
        assert_eq!(
            b.call(&pm1, "event.emit", bad.clone()),
            refusal("invalid-request"),
            "{bad}"
        );
    }
    // Readers never mutate.
    assert_eq!(
        b.call(&reader, "role.claim", Value::Null),
        refusal("read-only")
    );
    assert_eq!(
        b.call(&reader, "event.emit", emit.clone()),
        refusal("read-only")
    );
    // `decisions` is for human and reader sessions: a role's is refused.
    assert_eq!(
        b.call(&pm1, "decisions", json!({"list": "roles"})),
        refusal("human-required")
    );

    // Release, then the other run may claim.
    assert_eq!(b.call(&pm1, "role.release", Value::Null)["ok"], json!(true));
    assert_eq!(b.call(&pm2, "role.claim", Value::Null)["ok"], json!(true));

    // Trail of the run: session, claim and release in write order.
    let t = b.call(&reader, "trail", json!({"subject": "run-pm-1"}));
    let rec = t["result"].as_array().unwrap();
    let kinds: Vec<String> = rec
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r["record"].as_str().unwrap(),
                r["kind"].as_str().or(r["op"].as_str()).unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        ["event:session.launched", "claim:claim", "claim:release"]
    );
    let ats: Vec<&str> = rec.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] < w[1]), "{ats:?}");
    // Trail of the task subject and of the event id.
    let t = b.call(&reader, "trail", json!({"subject": "vikunja:1/2"}));
    assert_eq!(t["result"][0]["id"], json!(event_id));
    assert_eq!(
        t["result"][0]["body"],
        json!({"action": "routine", "target": "x"})
    );
    assert_eq!(t["result"][0]["role"], json!("pm"));
    // Unknown subject: an empty list. Bad args: invalid-request.
    assert_eq!(
        b.call(&reader, "trail", json!({"subject": "nothing"})),
        json!({"ok": true, "result": []})
    );
    assert_eq!(
        b.call(&reader, "trail", json!({})),
        refusal("invalid-request")
    );
    assert_eq!(
        b.call(&reader, "trail", json!({"subject": 5})),
        refusal("invalid-request")
    );

    b.close();
}

#[test]
fn launches_bind_rebind_and_end() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let p = sleeper();
    let pid = p.id();
    let rec = launch("cto", "run-c", pid);

    // Refusals that leave the run unbound.
    let mut wrong_start = rec.clone();
    wrong_start["startTime"] = json!(rec["startTime"].as_u64().unwrap() + 1);
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": wrong_start}))["error"],
        json!("process-mismatch")
    );
    let mut bad_harness = rec.clone();
    bad_harness["harness"] = json!("Not A Module!");
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": bad_harness}))["error"],
        json!("invalid-harness")
    );
    let mut no_role = rec.clone();
    no_role["role"] = json!("cfo");
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": no_role}))["error"],
        json!("unknown-role")
    );
    let mut no_biz = rec.clone();
    no_biz["business"] = json!("globex");
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": no_biz}))["error"],
        json!("unknown-business")
    );
    let mut extra = rec.clone();
    extra["surprise"] = json!(1);
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": extra}))["error"],
        json!("invalid-launch")
    );
    assert_eq!(
        b.op(json!({"op": "endLaunch", "record": {"business": "acme", "run": "run-c", "reason": "done"}}))["error"],
        json!("unknown-run")
    );

    // Bind; the identical record binds again to the same capability.
    let r1 = b.op(json!({"op": "bindLaunch", "record": rec, "id": 5}));
    assert_eq!(r1["ok"], json!(true));
    assert_eq!(r1["id"], json!(5));
    assert_eq!(r1["launch"]["business"], json!("acme"));
    assert_eq!(r1["launch"]["run"], json!("run-c"));
    let cap = r1["launch"]["cap"].as_str().unwrap().to_string();
    assert_eq!(cap.len(), 43);
    let r2 = b.op(json!({"op": "bindLaunch", "record": rec}));
    assert_eq!(r2["launch"]["cap"], json!(cap));
    // A changed identity refuses.
    let mut moved = rec.clone();
    moved["address"] = json!("elsewhere");
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": moved}))["error"],
        json!("launch-mismatch")
    );
    // identity
    assert_eq!(
        b.op(json!({"op": "identity", "cap": cap})),
        json!({"ok": true, "result": {"business": "acme", "role": "cto", "run": "run-c"}})
    );
    // Claim, then end: the claim is released and the capability dropped.
    assert_eq!(b.call(&cap, "role.claim", Value::Null)["ok"], json!(true));
    let end = b.op(json!({"op": "endLaunch", "record": {"business": "acme", "run": "run-c", "reason": "done", "exitCode": 0}}));
    assert_eq!(end["ok"], json!(true), "{end}");
    assert_eq!(end["result"]["released"], json!(true));
    assert_eq!(
        b.call(&cap, "role.claim", Value::Null),
        refusal("unknown-capability")
    );
    assert_eq!(
        b.op(json!({"op": "identity", "cap": cap}))["error"],
        json!("unknown-capability")
    );
    assert_eq!(
        b.op(json!({"op": "endLaunch", "record": {"business": "acme", "run": "run-c", "reason": "done"}}))["error"],
        json!("run-ended")
    );
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": rec}))["error"],
        json!("run-ended")
    );
    let trail = b.call(&b.reader_cap(), "trail", json!({"subject": "run-c"}));
    let ended = trail["result"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(ended["kind"], json!("session.ended"));
    assert_eq!(
        ended["body"],
        json!({"reason": "done", "exitCode": 0, "released": true})
    );
    b.close();

    // After a restart: still ended; a new run's identical record rebinds.
    let mut b = Broker::start(root.path());
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": rec}))["error"],
        json!("run-ended")
    );
    let rec2 = launch("cto", "run-d", pid);
    let cap1 = b.bind("cto", "run-d", pid);
    b.close();
    let mut b = Broker::start(root.path());
    let mut changed = rec2.clone();
    changed["harness"] = json!("claude-code");
    assert_eq!(
        b.op(json!({"op": "bindLaunch", "record": changed}))["error"],
        json!("launch-mismatch")
    );
    let cap2 = b.bind("cto", "run-d", pid);
    assert_ne!(cap1, cap2, "a restart mints a new capability");
    let trail = b.call(&b.reader_cap(), "trail", json!({"subject": "run-d"}));
    let launched = trail["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "session.launched")
        .count();
    assert_eq!(
        launched, 1,
        "a rebind does not append a second session.launched"
    );
    b.close();
}

#[test]
fn boot_launches_get_capabilities_and_logs_never_show_them() {
    let root = data_root();
    let p = sleeper();
    let mut cfg = config(root.path());
    cfg["launches"] = json!([launch("pm", "run-boot", p.id())]);
    let (mut b, reply) = Broker::spawn(root.path(), cfg);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let cap = reply["launches"][0]["cap"].as_str().unwrap().to_string();
    assert_eq!(reply["launches"][0]["run"], json!("run-boot"));
    assert_eq!(b.call(&cap, "role.claim", Value::Null)["ok"], json!(true));
    // A few refusals that mention the capability's request.
    let _ = b.call(&cap, "role.claim", Value::Null);
    let _ = raw_request(
        &b.socket,
        format!("{{\"cap\":\"{cap}\",\"verb\":\"x\",\"bad\":1}}\n").as_bytes(),
    );
    let _ = b.op(json!({"op": "identity", "cap": cap}));
    let reader = b.reader_cap();
    let stderr_before_close = b.stderr();
    let path = b.stderr_path.clone();
    b.close();
    let logs = std::fs::read_to_string(path).unwrap_or(stderr_before_close);
    assert!(!logs.contains(&cap), "capability in logs");
    assert!(!logs.contains(&reader), "reader capability in logs");
    // The database holds no capability either.
    let db = std::fs::read(root.path().join("bus/bus.sqlite")).unwrap();
    let wal = std::fs::read(root.path().join("bus/bus.sqlite-wal")).unwrap_or_default();
    for hay in [&db, &wal] {
        assert!(
            !hay.windows(cap.len()).any(|w| w == cap.as_bytes()),
            "capability in the store"
        );
    }
}

#[test]
fn rust_client_and_views() {
    use mosaic_bus::client::Client;
    use mosaic_bus::views::views;
    let root = data_root();
    let mut b = Broker::start(root.path());
    let p = sleeper();
    let cap = b.bind("pm", "run-x", p.id());
    let c = Client::new(&b.socket, cap.clone());
    assert!(!format!("{c:?}").contains(&cap));
    let claimed = c.call("role.claim", Value::Null).unwrap();
    assert_eq!(claimed["run"], json!("run-x"));
    assert_eq!(
        c.call("role.claim", Value::Null).unwrap_err().code,
        "role-held"
    );
    let r = Client::new(&b.socket, b.reader_cap());
    assert!(views(&r).trail("run-x").unwrap().as_array().unwrap().len() >= 2);
    let state = views(&r).state().unwrap();
    assert_eq!(state["launch"]["state"], json!("allowed"));
    assert_eq!(
        views(&r).task("vikunja:1/1").unwrap_err().code,
        "task-not-found"
    );
    assert_eq!(views(&r).requirements().unwrap_err().code, "read-only");
    assert_eq!(
        views(&r).tasks_page(json!({"limit": 5})).unwrap()["total"],
        json!(0)
    );
    assert_eq!(views(&r).credentials().unwrap(), json!([]));
    // Too large a request never leaves the client.
    let big = json!({"subject": "z".repeat(70_000)});
    assert_eq!(c.call("trail", big).unwrap_err().code, "request-too-large");
    b.close();
    // No broker: the outcome is unknown.
    assert_eq!(
        c.call("role.release", Value::Null).unwrap_err().code,
        "outcome-unknown"
    );
}

/// Issue 25: a key given twice in one JSON object, at any depth, refuses
/// `invalid-request` on the client socket and on the host channel, and
/// changes nothing; the same requests without the repeat are served.
#[test]
fn duplicate_keys_refuse_on_the_socket_and_the_host_channel() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let p1 = sleeper();
    let p2 = sleeper();
    let pm = b.bind("pm", "run-pm-1", p1.id());
    let before = row_counts(root.path());

    // The client socket: the envelope, args, a nested object in args, a
    // shim proof; the escaped spelling of a key is the same key.
    let lines = [
        format!(r#"{{"cap":"{pm}","verb":"role.claim","verb":"role.claim"}}"#),
        format!(r#"{{"cap":"{pm}","cap":"{pm}","verb":"role.claim"}}"#),
        format!(r#"{{"cap":"{pm}","verb":"role.claim","id":1,"id":2}}"#),
        format!(r#"{{"cap":"{pm}","verb":"role.claim","args":{{}},"args":{{}}}}"#),
        format!(
            r#"{{"cap":"{pm}","verb":"event.emit","args":{{"kind":"action.allowed","body":{{"action":"routine","target":"x","target":"y"}},"subject":"vikunja:1/2"}}}}"#
        ),
        format!(
            r#"{{"cap":"{pm}","verb":"event.emit","args":{{"kind":"action.allowed","kind":"action.allowed","body":{{"action":"routine","target":"x"}},"subject":"vikunja:1/2"}}}}"#
        ),
        format!(r#"{{"cap":"{pm}","verb":"role.claim","\u0076erb":"role.claim"}}"#),
        r#"{"human":{"pid":1,"startTime":1,"nonce":"aaaaaaaaaaaaaaaa","pid":2},"business":"acme","verb":"decision.list"}"#.to_string(),
    ];
    for line in &lines {
        assert_eq!(
            raw_request(&b.socket, format!("{line}\n").as_bytes()),
            refusal("invalid-request"),
            "{line}"
        );
    }
    assert_eq!(row_counts(root.path()), before, "a refused request wrote");

    // The host channel: an op, a nested record; the broker keeps serving.
    let record = launch("cto", "run-cto-1", p2.id()).to_string();
    let twice = record.replacen(
        r#""run":"run-cto-1""#,
        r#""run":"run-cto-1","run":"run-x""#,
        1,
    );
    assert_ne!(twice, record, "the record names its run");
    for line in [
        r#"{"op":"close","op":"close"}"#.to_string(),
        r#"{"op":"identity","cap":"x","cap":"y","id":3}"#.to_string(),
        format!(r#"{{"op":"bindLaunch","record":{twice}}}"#),
    ] {
        b.host_raw(format!("{line}\n").as_bytes());
        assert_eq!(b.read_host(), refusal("invalid-request"), "{line}");
    }
    assert_eq!(row_counts(root.path()), before, "a refused host op wrote");
    assert_eq!(b.child.try_wait().ok().flatten(), None, "the broker exited");

    // Without the repeats the same requests are served.
    let r = b
        .op(json!({"op": "bindLaunch", "record": serde_json::from_str::<Value>(&record).unwrap()}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let c = b.call(&pm, "role.claim", Value::Null);
    assert_eq!(c["ok"], json!(true), "{c}");
    b.close();
}

/// A boot line with a repeated key is refused `invalid-request` before
/// anything is opened, and the broker exits 2.
#[test]
fn a_boot_with_a_duplicate_key_is_refused() {
    let root = data_root();
    let config = config(root.path()).to_string();
    let line = format!(r#"{{"op":"boot","config":{config},"config":{config}}}"#);
    let (mut b, reply) = Broker::spawn_line(root.path(), &line, &[]);
    assert_eq!(reply, refusal("invalid-request"));
    assert_eq!(
        b.wait(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(2)
    );
    assert_eq!(b.stderr(), "{\"error\":\"invalid-request\"}\n");
    assert!(!root.path().join("bus").join("bus.sock").exists());
}
