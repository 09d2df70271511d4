//! Projects and threads (3i row 121, issue 20) through the real broker: a
//! `mosaic-bus` child on a socketpair, the human through the real static
//! shim and the real proof helper, thread runs bound to real processes.
//!
//! The human's shim runs detached with a clean environment (`setsid -f env
//! -i`, the spec's accepted trust limit), as in `human.rs`: the suite may
//! itself run under an agent whose markers the proof refuses.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::time::Duration;
#[path = "support/threads_env.rs"]
mod threads_env;
use threads_env::{
    bind_thread, boot, businesses, claimed_thread, count, ids, plans_and_budget, raise, state_of,
    thread_launch,
};

#[test]
fn the_human_makes_projects_and_threads_and_talks_in_them() {
    let root = data_root();
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);

    // Projects: by name once per business; repo names one of its projects.
    let p = h.ok("project.create", json!({"name": "Site", "repo": "site"}));
    let project = p["id"].as_str().expect("id").to_string();
    assert_eq!(
        err(&h.call("project.create", json!({"name": "Site"}))),
        "project-exists"
    );
    assert_eq!(
        err(&h.call("project.create", json!({"name": "Other", "repo": "nope"}))),
        "unknown-repo"
    );
    assert_eq!(
        err(&h.call("project.create", json!({"name": ""}))),
        "invalid-request"
    );
    assert_eq!(
        err(&h.call("project.create", json!({"name": "X", "extra": 1}))),
        "invalid-request"
    );
    h.ok("project.create", json!({"name": "Back office"}));
    let list = h.ok("project.list", json!({}));
    assert_eq!(list[0]["name"], json!("Site"));
    assert_eq!(list[0]["repo"], json!("site"));
    assert_eq!(list[1]["name"], json!("Back office"));
    assert_eq!(list[1]["repo"], Value::Null);

    // Threads: in a known project, by name once per project, for the one
    // thread instance.
    assert_eq!(
        err(&h.call(
            "thread.create",
            json!({"project": "no-such", "name": "Plans"})
        )),
        "project-not-found"
    );
    let t = h.ok(
        "thread.create",
        json!({"project": project, "name": "Plans"}),
    );
    assert_eq!(t["instance"], json!("helper"));
    let thread = t["id"].as_str().expect("id").to_string();
    assert_eq!(
        err(&h.call(
            "thread.create",
            json!({"project": project, "name": "Plans"})
        )),
        "thread-exists"
    );
    let solo = h.call_in("solo", "project.create", json!({"name": "S"}));
    let solo_project = res(&solo)["id"].clone();
    assert_eq!(
        err(&h.call_in(
            "solo",
            "thread.create",
            json!({"project": solo_project, "name": "T"})
        )),
        "thread-instance-missing"
    );
    let duo = h.call_in("duo", "project.create", json!({"name": "D"}));
    let duo_project = res(&duo)["id"].clone();
    assert_eq!(
        err(&h.call_in(
            "duo",
            "thread.create",
            json!({"project": duo_project, "name": "T"})
        )),
        "thread-instance-ambiguous"
    );
    // Another business's project is not found here.
    assert_eq!(
        err(&h.call(
            "thread.create",
            json!({"project": solo_project, "name": "T"})
        )),
        "project-not-found"
    );
    let second = h.ok(
        "thread.create",
        json!({"project": project, "name": "Budget"}),
    );
    let listed = h.ok("thread.list", json!({}));
    assert_eq!(
        ids(&listed),
        [thread.clone(), second["id"].as_str().unwrap().to_string()]
    );
    assert_eq!(listed[0]["name"], json!("Plans"));
    assert_eq!(listed[0]["project"], json!(project));
    assert_eq!(
        ids(&h.ok("thread.list", json!({"project": project}))).len(),
        2
    );
    assert_eq!(
        err(&h.call("thread.list", json!({"project": "nope"}))),
        "project-not-found"
    );

    // Opens and messages.
    let opened = h.ok("thread.open", json!({"thread": thread}));
    assert!(opened["opened"].is_string(), "{opened}");
    assert_eq!(
        err(&h.call("thread.open", json!({"thread": "nope"}))),
        "thread-not-found"
    );
    let sent = h.ok(
        "thread.send",
        json!({"thread": thread, "body": "Draft the plan", "class": "REQUEST"}),
    );
    assert!(sent["request"].is_string());
    assert_eq!(
        err(&h.call(
            "thread.send",
            json!({"thread": thread, "body": "x", "class": "NOPE"})
        )),
        "invalid-class"
    );
    assert_eq!(
        err(&h.call("thread.send", json!({"thread": "nope", "body": "x"}))),
        "thread-not-found"
    );
    // The human reaches the thread instance only through thread.send.
    assert_eq!(
        err(&h.call("message.send", json!({"to": "helper", "body": "hi"}))),
        "thread-required-use-thread-send"
    );
    for i in 0..3 {
        h.ok(
            "thread.send",
            json!({"thread": thread, "body": format!("more {i}")}),
        );
    }
    let page = h.ok("thread.messages", json!({"thread": thread, "limit": 2}));
    let first = ids(&page["messages"]);
    assert_eq!(first[0], sent["id"].as_str().unwrap());
    assert_eq!(page["messages"][0]["thread"], json!(thread));
    assert_eq!(page["messages"][0]["request"], sent["request"]);
    assert_eq!(page["next"], json!(first[1]));
    let rest = h.ok(
        "thread.messages",
        json!({"thread": thread, "after": page["next"]}),
    );
    assert_eq!(ids(&rest["messages"]).len(), 2);
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(
        err(&h.call(
            "thread.messages",
            json!({"thread": thread, "after": "nope"})
        )),
        "message-not-found"
    );
    for bad in [json!(0), json!(201), json!("5")] {
        assert_eq!(
            err(&h.call("thread.messages", json!({"thread": thread, "limit": bad}))),
            "invalid-request"
        );
    }
    // No other thread's message is a cursor here.
    let other = h.ok(
        "thread.send",
        json!({"thread": second["id"], "body": "elsewhere"}),
    );
    assert_eq!(
        err(&h.call(
            "thread.messages",
            json!({"thread": thread, "after": other["id"]})
        )),
        "message-not-found"
    );

    // Human-only verbs: a role and a reader are refused.
    let pm = sleeper();
    let cap = b.bind("pm", "pm-1", pm.id());
    for verb in [
        "project.create",
        "project.list",
        "thread.create",
        "thread.list",
        "thread.open",
        "thread.send",
        "thread.messages",
    ] {
        assert_eq!(
            err(&b.call(&cap, verb, json!({}))),
            "human-required",
            "{verb}"
        );
        assert_eq!(
            err(&b.call(&b.reader_cap(), verb, json!({}))),
            "human-required",
            "{verb}"
        );
    }
    assert_eq!(count(root.path(), "SELECT count(*) FROM thread_opens"), 1);
    assert_eq!(
        count(root.path(), "SELECT count(*) FROM message_threads"),
        5
    );
    b.close();

    // Another user's thread: the business's human changed.
    let mut b = boot(root.path(), "Ben", false);
    let ben = ShimSession::human(&b);
    for (verb, args) in [
        ("thread.open", json!({"thread": thread})),
        ("thread.send", json!({"thread": thread, "body": "mine?"})),
        ("thread.messages", json!({"thread": thread})),
    ] {
        assert_eq!(err(&ben.call(verb, args)), "thread-not-owned", "{verb}");
    }
    assert_eq!(ben.ok("thread.list", json!({})), json!([]));
    let _ = b.op(json!({"op": "close"}));
}

#[test]
fn thread_runs_claim_their_thread_receive_only_it_and_idle_out() {
    let root = data_root();
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (thread, other) = plans_and_budget(&h);
    let asked = h.ok(
        "thread.send",
        json!({"thread": thread, "body": "Draft the plan"}),
    );
    h.ok(
        "thread.send",
        json!({"thread": other, "body": "Not for run one"}),
    );

    // bindLaunch: the thread instance needs a thread of its own; no other role names one.
    let p1 = sleeper();
    let bind = |b: &mut Broker, rec: Value| b.op(json!({"op": "bindLaunch", "record": rec}));
    assert_eq!(
        err(&bind(&mut b, launch("helper", "h-0", p1.id()))),
        "thread-required"
    );
    assert_eq!(
        err(&bind(
            &mut b,
            thread_launch("helper", "h-0", p1.id(), "no-such")
        )),
        "thread-not-found"
    );
    assert_eq!(
        err(&bind(&mut b, thread_launch("pm", "pm-0", p1.id(), &thread))),
        "thread-not-allowed"
    );
    let s = state_of(&mut b, &thread);
    assert_eq!(
        (&s["pending"], &s["unread"], &s["holder"], &s["instance"]),
        (&json!(1), &json!(0), &Value::Null, &json!("helper"))
    );
    assert!(s["lastMessage"].is_string() && s["lastClaim"].is_null() && s["lastOpen"].is_null());

    let h1 = bind_thread(&mut b, "h-1", p1.id(), &thread);
    let claim = res(&b.call(&h1, "role.claim", Value::Null)).clone();
    assert_eq!(
        (&claim["thread"], &claim["op"]),
        (&json!(thread), &json!("claim"))
    );
    // One run per thread, and a run holds one thread.
    let p2 = sleeper();
    let h2 = bind_thread(&mut b, "h-2", p2.id(), &thread);
    assert_eq!(
        err(&b.call(&h2, "role.claim", Value::Null)),
        "thread-already-held"
    );
    assert_eq!(
        err(&b.call(&h1, "role.claim", Value::Null)),
        "thread-already-held"
    );
    assert_eq!(count(root.path(), "SELECT count(*) FROM role_claims"), 0);

    // It receives its own thread's messages only.
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), [asked["id"].as_str().unwrap()]);
    assert_eq!(got["messages"][0]["request"], asked["request"]);
    let s = state_of(&mut b, &thread);
    assert_eq!(
        (&s["pending"], &s["unread"], &s["holder"]),
        (&json!(0), &json!(1), &json!("h-1"))
    );
    assert_eq!(state_of(&mut b, &other)["pending"], json!(1));

    // Its messages are in its thread; another role answers it in reply.
    let to_chief = res(&b.call(
        &h1,
        "message.send",
        json!({"to": "chief", "body": "Need a pm"}),
    ))
    .clone();
    let to_human = res(&b.call(
        &h1,
        "message.send",
        json!({"to": "human", "body": "Working on it"}),
    ))
    .clone();
    assert!(to_human.get("waiting").is_none());
    let pc = sleeper();
    let chief = b.bind("chief", "chief-1", pc.id());
    res(&b.call(&chief, "role.claim", Value::Null));
    let chief_got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    assert_eq!(
        ids(&chief_got["messages"]),
        [to_chief["id"].as_str().unwrap()]
    );
    assert_eq!(
        err(&b.call(
            &chief,
            "message.send",
            json!({"to": "helper", "body": "no thread"})
        )),
        "thread-required-reply-to-thread-message"
    );
    let pp = sleeper();
    let pm = b.bind("pm", "pm-1", pp.id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let unthreaded =
        res(&b.call(&pm, "message.send", json!({"to": "chief", "body": "hello"}))).clone();
    assert_eq!(
        err(&b.call(
            &chief,
            "message.send",
            json!({"to": "helper", "body": "x", "in_reply_to": unthreaded["id"]})
        )),
        "thread-required-reply-to-thread-message"
    );
    // A reply to a reply still finds the thread at the chain's root.
    let chief_to_pm = res(&b.call(
        &chief,
        "message.send",
        json!({"to": "pm", "body": "Can you?", "in_reply_to": to_chief["id"]}),
    ))
    .clone();
    let pm_back = res(&b.call(
        &pm,
        "message.send",
        json!({"to": "chief", "body": "Yes", "in_reply_to": chief_to_pm["id"]}),
    ))
    .clone();
    let reply = res(&b.call(
        &chief,
        "message.send",
        json!({"to": "helper", "body": "A pm is on it", "in_reply_to": pm_back["id"]}),
    ))
    .clone();
    assert!(reply.get("waiting").is_none(), "{reply}");
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), [reply["id"].as_str().unwrap()]);
    let in_thread = h.ok("thread.messages", json!({"thread": thread}));
    assert_eq!(
        ids(&in_thread["messages"]),
        [
            asked["id"].as_str().unwrap(),
            to_chief["id"].as_str().unwrap(),
            to_human["id"].as_str().unwrap(),
            reply["id"].as_str().unwrap()
        ]
    );

    // Idle: not while something is unread; then released, and a new message waits.
    let r = b.op(json!({"op": "threadIdle", "business": "acme", "thread": thread, "run": "h-1"}));
    assert_eq!(
        res(&r),
        &json!({"released": false, "pending": 0, "unread": 2})
    );
    for m in [&asked["id"], &reply["id"]] {
        res(&b.call(&h1, "message.read", json!({"id": m})));
    }
    let r = b.op(json!({"op": "threadIdle", "business": "acme", "thread": thread, "run": "h-2"}));
    assert_eq!(err(&r), "not-holder");
    let r = b.op(json!({"op": "threadIdle", "business": "acme", "thread": thread, "run": "h-1"}));
    assert_eq!(res(&r), &json!({"released": true}));
    assert_eq!(
        err(&b.call(&h1, "message.receive", Value::Null)),
        "not-holder"
    );
    assert_eq!(err(&b.call(&h1, "role.release", Value::Null)), "not-holder");
    h.ok(
        "thread.send",
        json!({"thread": thread, "body": "One more thing"}),
    );
    let s = state_of(&mut b, &thread);
    assert_eq!((&s["pending"], &s["holder"]), (&json!(1), &Value::Null));

    // The next run takes the thread; its end releases the claim, and what
    // it received unread is stranded: neither pending nor unread.
    res(&b.call(&h2, "role.claim", Value::Null));
    let got = res(&b.call(&h2, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]).len(), 1);
    let r = b.op(
        json!({"op": "endLaunch", "record": {"business": "acme", "run": "h-2", "reason": "done"}}),
    );
    assert_eq!(res(&r)["released"], json!(true));
    let s = state_of(&mut b, &thread);
    assert_eq!(
        (&s["pending"], &s["unread"], &s["holder"]),
        (&json!(0), &json!(0), &Value::Null)
    );
    let r = b.op(json!({"op": "threadIdle", "business": "acme", "thread": thread, "run": "h-2"}));
    assert_eq!(err(&r), "run-ended");
    assert_eq!(
        count(
            root.path(),
            "SELECT count(*) FROM thread_claims WHERE op = 'release'"
        ),
        2
    );
    let _ = b.op(json!({"op": "close"}));
}

/// The boot's launches follow bindLaunch's thread rules (a refused one
/// refuses the boot), and the embedded runtime offers `threads_state` and
/// `thread_idle` as the host ops answer them.
#[test]
fn boot_launches_and_the_embedded_runtime_keep_the_thread_rules() {
    use mosaic_bus::config::LaunchRecord;
    use mosaic_bus::Code;
    let root = data_root();
    let b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (thread, second) = plans_and_budget(&h);
    h.ok("thread.send", json!({"thread": thread, "body": "Hello"}));
    b.close();

    let p = sleeper();
    let cfg = |launches: Value| {
        json!({"dataRoot": root.path().to_str().expect("utf-8"),
               "businesses": businesses("Ada", false), "launches": launches})
    };
    for (launches, code) in [
        (json!([launch("helper", "h-1", p.id())]), "thread-required"),
        (
            json!([thread_launch("helper", "h-1", p.id(), "nope")]),
            "thread-not-found",
        ),
        (
            json!([thread_launch("pm", "pm-1", p.id(), &thread)]),
            "thread-not-allowed",
        ),
    ] {
        let (mut refused, reply) = Broker::spawn(root.path(), cfg(launches));
        assert_eq!(reply, json!({"ok": false, "error": code}));
        assert_eq!(
            refused.wait(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(2)
        );
    }

    let config = mosaic_bus::BootConfig::from_json(cfg(json!([thread_launch(
        "helper",
        "h-1",
        p.id(),
        &thread
    )])))
    .expect("config");
    let rt = mosaic_bus::start_broker(config).expect("start_broker");
    let cap = rt.boot_reply()["launches"][0]["cap"]
        .as_str()
        .expect("boot launch cap")
        .to_string();
    let call = |verb: &str| {
        raw_request(
            &rt.socket_path(),
            format!("{}\n", json!({"cap": cap, "verb": verb})).as_bytes(),
        )
    };
    assert_eq!(res(&call("role.claim"))["thread"], json!(thread));
    let state = rt.threads_state("acme").expect("threads_state");
    assert_eq!(state[0]["holder"], json!("h-1"));
    assert_eq!(state[0]["pending"], json!(1));
    assert_eq!(rt.threads_state("globex"), Err(Code::UnknownBusiness));
    assert_eq!(
        rt.thread_idle("acme", &thread, "h-1"),
        Ok(json!({"released": false, "pending": 1, "unread": 0}))
    );
    let got = res(&call("message.receive")).clone();
    let id = got["messages"][0]["id"].clone();
    let read = raw_request(
        &rt.socket_path(),
        format!(
            "{}\n",
            json!({"cap": cap, "verb": "message.read", "args": {"id": id}})
        )
        .as_bytes(),
    );
    res(&read);
    assert_eq!(
        rt.thread_idle("acme", &thread, "h-1"),
        Ok(json!({"released": true}))
    );
    assert_eq!(rt.thread_idle("acme", &thread, "h-1"), Err(Code::NotHolder));
    assert_eq!(
        rt.thread_idle("acme", "nope", "h-1"),
        Err(Code::ThreadNotFound)
    );
    // A run serves one thread: binding it again with another is a mismatch.
    let moved =
        LaunchRecord::from_json(thread_launch("helper", "h-1", p.id(), &second)).expect("record");
    assert_eq!(rt.bind_launch(moved), Err(Code::LaunchMismatch));
    let unknown = LaunchRecord::from_json(thread_launch("helper", "h-1", p.id(), "elsewhere"))
        .expect("record");
    assert_eq!(rt.bind_launch(unknown), Err(Code::ThreadNotFound));
    rt.close();
}

/// `agents` for a thread instance (3i L63, row 121 "stranded"): each held
/// thread is listed as its claim row; a message a thread run received and
/// left unread when its claim ended is stranded under the next holder of
/// that thread, never working and never another thread's.
#[test]
fn agents_lists_held_threads_and_their_stranded_messages() {
    let root = data_root();
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..4).map(|_| sleeper()).collect();
    let asked = h.ok("thread.send", json!({"thread": t1, "body": "Draft"}))["id"].clone();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    res(&b.call(&h1, "message.receive", Value::Null));
    let helper = |list: &Value| -> Vec<Value> {
        list.as_array()
            .expect("list")
            .iter()
            .filter(|r| r["role"] == json!("helper"))
            .cloned()
            .collect()
    };
    let rows = helper(&h.ok("agents", Value::Null));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            &rows[0]["run"],
            &rows[0]["thread"],
            &rows[0]["op"],
            &rows[0]["state"]
        ),
        (
            &json!("h-1"),
            &json!(t1),
            &json!("claim"),
            &json!("working")
        )
    );
    assert_eq!(rows[0]["working"]["messages"], json!(1));
    assert_eq!(rows[0]["stranded"], json!([]));
    // A role session gets the claim row only.
    let pc = sleeper();
    let chief = b.claimed("chief", "chief-1", pc.id());
    let seen = helper(res(&b.call(&chief, "agents", Value::Null)));
    assert_eq!(seen.len(), 1);
    assert!(seen[0].get("stranded").is_none(), "{seen:?}");

    // h-1 ends without reading; unheld, the thread isn't listed.
    let r = b.op(
        json!({"op": "endLaunch", "record": {"business": "acme", "run": "h-1", "reason": "done"}}),
    );
    assert_eq!(res(&r)["released"], json!(true));
    assert_eq!(helper(&h.ok("agents", Value::Null)), Vec::<Value>::new());

    // The next holder of t1 sees it stranded; a holder of t2 doesn't.
    let _h2 = claimed_thread(&mut b, "h-2", procs[1].id(), &t1);
    let _h3 = claimed_thread(&mut b, "h-3", procs[2].id(), &t2);
    h.ok("thread.send", json!({"thread": t2, "body": "Budget"}));
    res(&b.call(&_h3, "message.receive", Value::Null));
    let rows = helper(&h.ok("agents", Value::Null));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let of = |t: &str| {
        rows.iter()
            .find(|r| r["thread"] == json!(t))
            .expect("row")
            .clone()
    };
    let r1 = of(&t1);
    assert_eq!(
        (&r1["run"], &r1["state"], &r1["working"]),
        (&json!("h-2"), &json!("idle"), &Value::Null)
    );
    assert_eq!(r1["stranded"].as_array().expect("stranded").len(), 1);
    let s = &r1["stranded"][0];
    assert_eq!(
        (&s["id"], &s["from"], &s["run"]),
        (&asked, &json!("human"), &json!("h-1"))
    );
    assert!(s["at"].is_string());
    let r2 = of(&t2);
    assert_eq!((&r2["run"], &r2["stranded"]), (&json!("h-3"), &json!([])));
    assert_eq!(r2["working"]["messages"], json!(1));
    // The reader sees the same.
    assert_eq!(
        helper(res(&b.call(&b.reader_cap(), "agents", Value::Null))),
        rows
    );
    // Never replayed to the new holder, who can't acknowledge it either.
    assert_eq!(
        res(&b.call(&_h2, "message.receive", Value::Null))["messages"],
        json!([])
    );
    assert_eq!(
        err(&b.call(&_h2, "message.read", json!({"id": asked}))),
        "not-holder"
    );
    assert_eq!(helper(&h.ok("agents", Value::Null)), rows);
    // Stranded keeps no later run from idling out (row 121).
    let r = b.op(json!({"op": "threadIdle", "business": "acme", "thread": t1, "run": "h-2"}));
    assert_eq!(res(&r), &json!({"released": true}));
    let _ = b.op(json!({"op": "close"}));
}

/// Launch notices stay out of threads (3i L188, L190): a reply into an
/// unheld thread carries no `waiting`, and neither it, `thread.send` nor a
/// decision close tells `launch.by`. A thread run's message is in its own
/// thread, so it can't go to another thread instance (whose runs receive
/// only their own threads): `thread-instance-mismatch`, nothing stored.
#[test]
fn threads_send_no_notices_and_stay_with_their_instance() {
    let root = data_root();
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (t1, _t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..3).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let to_chief = res(&b.call(
        &h1,
        "message.send",
        json!({"to": "chief", "body": "Need a pm"}),
    ))["id"]
        .clone();
    let d = res(&b.call(&h1, "decision.raise", raise("prd.approve", None))).clone();
    let id = d["decision"]["id"]
        .as_str()
        .or(d["id"].as_str())
        .expect("id")
        .to_string();
    let r = b.op(
        json!({"op": "endLaunch", "record": {"business": "acme", "run": "h-1", "reason": "done"}}),
    );
    assert_eq!(res(&r)["released"], json!(true));
    h.ok(
        "thread.send",
        json!({"thread": t1, "body": "While nobody holds it"}),
    );
    h.ok("decision.resolve", json!({"id": id, "choice": "yes"}));
    let chief = b.claimed("chief", "chief-1", procs[1].id());
    let reply = res(&b.call(
        &chief,
        "message.send",
        json!({"to": "helper", "body": "A pm is on it", "in_reply_to": to_chief}),
    ))
    .clone();
    assert!(reply.get("waiting").is_none(), "{reply}");
    let got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), [to_chief.as_str().expect("id")]);
    assert_eq!(
        count(
            root.path(),
            "SELECT count(*) FROM messages WHERE from_role = '_bus'"
        ),
        0
    );
    assert_eq!(state_of(&mut b, &t1)["pending"], json!(3));
    b.close();

    // A second thread instance (the business file changed).
    let (mut b, reply) = Broker::spawn(
        root.path(),
        json!({"dataRoot": root.path().to_str().expect("utf-8"),
               "businesses": businesses("Ada", true)}),
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let h2 = claimed_thread(&mut b, "h-2", procs[2].id(), &t1);
    let before = count(root.path(), "SELECT count(*) FROM messages");
    for args in [
        json!({"to": "helper2", "body": "hey"}),
        json!({"to": "helper2", "body": "hey", "in_reply_to": to_chief}),
    ] {
        assert_eq!(
            err(&b.call(&h2, "message.send", args)),
            "thread-instance-mismatch"
        );
    }
    assert_eq!(count(root.path(), "SELECT count(*) FROM messages"), before);
    // And a run of the other instance can't be bound to helper's thread.
    let p = sleeper();
    let r =
        b.op(json!({"op": "bindLaunch", "record": thread_launch("helper2", "x-1", p.id(), &t1)}));
    assert_eq!(err(&r), "thread-not-found");
    let _ = b.op(json!({"op": "close"}));
}

/// The sizes the spec gives: `thread.messages` answers at most 50 without
/// `limit` (L99) and at most 200 with it; a thread run's `message.receive`
/// hands at most 100 of its thread's messages, oldest first (L73).
#[test]
fn thread_pages_and_batches_keep_their_sizes() {
    let root = data_root();
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..2).map(|_| sleeper()).collect();
    let first = h.ok("thread.send", json!({"thread": t1, "body": "start"}))["id"].clone();
    h.ok("thread.send", json!({"thread": t2, "body": "other"}));
    // Even in reply to a thread message, the human uses thread.send.
    assert_eq!(
        err(&h.call(
            "message.send",
            json!({"to": "helper", "body": "x", "in_reply_to": first})
        )),
        "thread-required-use-thread-send"
    );
    let chief = b.claimed("chief", "chief-1", procs[0].id());
    let mut sent = vec![first.as_str().expect("id").to_string()];
    for i in 0..219 {
        let r = b.call(
            &chief,
            "message.send",
            json!({"to": "helper", "body": format!("note {i}"), "in_reply_to": first}),
        );
        sent.push(res(&r)["id"].as_str().expect("id").to_string());
    }
    let page = h.ok("thread.messages", json!({"thread": t1}));
    assert_eq!(ids(&page["messages"]), sent[..50]);
    assert_eq!(page["next"], json!(sent[49]));
    let page = h.ok(
        "thread.messages",
        json!({"thread": t1, "after": sent[49], "limit": 200}),
    );
    assert_eq!(ids(&page["messages"]), sent[50..220]);
    assert_eq!(page["next"], Value::Null);

    let h1 = claimed_thread(&mut b, "h-1", procs[1].id(), &t1);
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), sent[..100]);
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), sent[100..200]);
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), sent[200..220]);
    assert_eq!(
        res(&b.call(&h1, "message.receive", Value::Null))["messages"],
        json!([])
    );
    assert_eq!(state_of(&mut b, &t2)["pending"], json!(1));
    let _ = b.op(json!({"op": "close"}));
}
