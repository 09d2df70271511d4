//! Agent state in process: working, waiting, idle and stranded runs, the agents read's shapes and caps, and a send to a role nobody holds (it waits, and the launcher hears once).

mod common;
use mosaic_bus::error::Code;
use serde_json::{json, Value};
#[path = "support/mht_env.rs"]
mod mht_env;
use mht_env::{agent_row, biz, bus_notices, human, reader, role, tester, Env};

#[test]
fn agent_state_working_waiting_idle_and_stranded() {
    let mut e = Env::new();
    let (cto_a, pm) = (role("cto", "run-a"), role("pm", "run-p"));
    e.ok(&pm, "role.claim", Value::Null);
    e.ok(&cto_a, "role.claim", Value::Null);
    let m1 = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "one"}),
    );
    let m2 = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "two"}),
    );
    let got = e.ok(&cto_a, "message.receive", Value::Null);
    assert_eq!(got["messages"].as_array().unwrap().len(), 2);
    let agents = e.ok(&human(), "agents", Value::Null);
    let cto = agent_row(&agents, "cto");
    assert_eq!(cto["state"], json!("working"));
    assert_eq!(cto["working"]["messages"], json!(2));
    assert_eq!(cto["working"]["since"], got["messages"][0]["delivered_at"]);
    assert_eq!(cto["stranded"], json!([]));
    e.ok(&cto_a, "message.read", json!({"id": m1["id"]}));
    // The holder releases without reading m2: stranded once another run claims.
    e.ok(&cto_a, "role.release", Value::Null);
    let listed = e.ok(&human(), "agents", Value::Null);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["role"] != "cto"),
        "released roles aren't listed"
    );
    let cto_b = role("cto", "run-b");
    e.ok(&cto_b, "role.claim", Value::Null);
    // Never redelivered, and neither run can acknowledge it.
    assert_eq!(
        e.ok(&cto_b, "message.receive", Value::Null)["messages"],
        json!([])
    );
    assert_eq!(
        e.call(&cto_b, "message.read", json!({"id": m2["id"]})),
        Err(Code::NotHolder)
    );
    assert_eq!(
        e.call(&cto_a, "message.read", json!({"id": m2["id"]})),
        Err(Code::NotHolder)
    );
    let d = e.raise("acme", "cto", "human", "cross-role");
    let g = e.raise("acme", "cto", "human", "gated");
    let _not_cto = e.raise("acme", "pm", "human", "gated");
    let agents = e.ok(&reader(), "agents", Value::Null);
    let cto = agent_row(&agents, "cto");
    assert_eq!(cto["run"], json!("run-b"));
    assert_eq!(cto["op"], json!("claim"));
    assert_eq!(cto["state"], json!("waiting"));
    assert_eq!(cto["working"], Value::Null);
    let needed: Vec<&Value> = cto["inputNeeded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["id"])
        .collect();
    assert_eq!(
        needed,
        vec![&json!(g), &json!(d)],
        "gated first, then oldest"
    );
    assert_eq!(cto["inputNeeded"][0]["blocking"], json!(false));
    assert_eq!(cto["stranded"].as_array().unwrap().len(), 1);
    assert_eq!(cto["stranded"][0]["id"], m2["id"]);
    assert_eq!(cto["stranded"][0]["from"], json!("human"));
    assert_eq!(cto["stranded"][0]["run"], json!("run-a"));
    let pm_row = agent_row(&agents, "pm");
    assert_eq!(pm_row["state"], json!("waiting"));
    // A role session gets claim rows only.
    let own = e.ok(&pm, "agents", Value::Null);
    assert!(
        own[0].get("state").is_none() && own[0].get("stranded").is_none(),
        "{own}"
    );
    assert_eq!(own.as_array().unwrap().len(), 2);
    // Idle: nothing received unread, nothing routed to the human.
    e.ok(&role("dev", "run-d"), "role.claim", Value::Null);
    let listed = e.ok(&tester(), "agents", Value::Null);
    let dev = agent_row(&listed, "dev");
    assert_eq!(dev["state"], json!("idle"));
    assert_eq!(
        (
            dev["working"].clone(),
            dev["inputNeeded"].clone(),
            dev["stranded"].clone()
        ),
        (Value::Null, json!([]), json!([]))
    );
}

/// Agent state's exact shapes: `stranded` is oldest first and at most 50,
/// each `{id, from, run, at}`; `inputNeeded` items are exactly
/// `{id, question, class, blocking, task_ref, at}`; `working` is
/// `{messages, since}`.
#[test]
fn agent_state_shapes_and_the_stranded_cap() {
    let mut e = Env::new();
    let cto_a = role("cto", "run-a");
    e.ok(&cto_a, "role.claim", Value::Null);
    let sent: Vec<Value> = (0..52)
        .map(|i| {
            e.ok(
                &human(),
                "message.send",
                json!({"to": "cto", "body": format!("m{i}")}),
            )["id"]
                .clone()
        })
        .collect();
    let got = e.ok(&cto_a, "message.receive", Value::Null);
    assert_eq!(got["messages"].as_array().unwrap().len(), 52);
    e.ok(&cto_a, "role.release", Value::Null);
    let cto_b = role("cto", "run-b");
    e.ok(&cto_b, "role.claim", Value::Null);
    let late = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "late"}),
    );
    let got_b = e.ok(&cto_b, "message.receive", Value::Null);
    let d = e.raise("acme", "cto", "human", "gated");
    let agents = e.ok(&reader(), "agents", Value::Null);
    let cto = agent_row(&agents, "cto");
    let stranded = cto["stranded"].as_array().unwrap();
    assert_eq!(stranded.len(), 50, "at most 50");
    let ids: Vec<Value> = stranded.iter().map(|s| s["id"].clone()).collect();
    assert_eq!(ids, sent[..50].to_vec(), "oldest first");
    for (s, m) in stranded.iter().zip(got["messages"].as_array().unwrap()) {
        assert_eq!(
            s,
            &json!({"id": m["id"], "from": "human", "run": "run-a", "at": m["delivered_at"]})
        );
    }
    assert_eq!(
        cto["working"],
        json!({"messages": 1, "since": got_b["messages"][0]["delivered_at"]})
    );
    assert_eq!(got_b["messages"][0]["id"], late["id"]);
    assert_eq!(cto["state"], json!("working"), "working wins over waiting");
    let at: String = e
        .core
        .store
        .db()
        .sql()
        .query_row("SELECT at FROM decisions WHERE id = ?1", [&d], |r| r.get(0))
        .unwrap();
    assert_eq!(
        cto["inputNeeded"],
        json!([{"id": d, "question": "Ship?", "class": "gated", "blocking": false,
                "task_ref": null, "at": at}])
    );
}

#[test]
fn a_send_to_a_role_nobody_holds_waits_and_tells_the_launcher_once() {
    let mut acme = biz("acme");
    acme["launch"] = json!({"by": "pm", "instances": ["cto"]});
    acme["roles"]["dev"]["authority"]["withinRole"] = json!(["message.send"]);
    let mut e = Env::build(acme, None);
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);

    // The human to an unheld instance the launcher may launch.
    let sent = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "Plan?"}),
    );
    let id = sent["id"].as_str().unwrap().to_string();
    assert_eq!(
        sent["waiting"],
        json!({"role": "cto", "launcher": "pm", "told": true,
               "launcherRunning": true, "launchable": true})
    );
    let notices = bus_notices(&e);
    assert_eq!(notices.len(), 1);
    let (run, to, class, reply_to, body) = notices[0].clone();
    assert_eq!(
        (run.as_str(), to.as_str(), class.as_str()),
        ("bus", "pm", "RESULT")
    );
    assert_eq!(reply_to, id);
    assert_eq!(
        body,
        format!(
            "Message {id} from human to cto waits: cto has no running session. Launch cto \
             within the launch block's limits, or tell human why not with message.send \
             in_reply_to {id}."
        )
    );
    // It reaches the launcher like any message, as a reply to the waiting one.
    let got = e.ok(&pm, "message.receive", Value::Null);
    let m = &got["messages"][0];
    assert_eq!(m["from_role"], json!("_bus"));
    assert_eq!(m["in_reply_to"], json!(id));
    assert!(m["decision"].is_null());

    // A role to an instance outside launch.instances: told, not launchable.
    let cto = role("cto", "run-c");
    e.ok(&cto, "role.claim", Value::Null);
    let sent = e.ok(
        &cto,
        "message.send",
        json!({"to": "dev", "body": "Review?"}),
    );
    let id = sent["id"].as_str().unwrap().to_string();
    assert_eq!(
        sent["waiting"],
        json!({"role": "dev", "launcher": "pm", "told": true,
               "launcherRunning": true, "launchable": false})
    );
    let notices = bus_notices(&e);
    assert_eq!(notices.len(), 2);
    assert_eq!(
        notices[1].4,
        format!(
            "Message {id} from cto to dev waits: dev has no running session and isn't in \
             the launch block's instances, so a launch of dev is refused. Tell cto why not \
             with message.send in_reply_to {id}."
        )
    );

    // No notice: from the launcher itself, or from the tester.
    let sent = e.ok(&pm, "message.send", json!({"to": "dev", "body": "Hi"}));
    assert_eq!(
        sent["waiting"],
        json!({"role": "dev", "launcher": "pm", "told": false,
               "launcherRunning": true, "launchable": false})
    );
    let sent = e.ok(
        &tester(),
        "message.send",
        json!({"to": "dev", "body": "[mos test] hi"}),
    );
    assert_eq!(sent["waiting"]["told"], json!(false));
    assert_eq!(bus_notices(&e).len(), 2);

    // A held target, and the human's own address, carry no waiting at all.
    let sent = e.ok(&human(), "message.send", json!({"to": "cto", "body": "Go"}));
    assert!(sent.get("waiting").is_none(), "{sent}");
    let sent = e.ok(&cto, "message.send", json!({"to": "human", "body": "Done"}));
    assert!(sent.get("waiting").is_none(), "{sent}");

    // The launcher itself, stopped: nobody to tell about it.
    e.ok(&pm, "role.release", Value::Null);
    let sent = e.ok(
        &human(),
        "message.send",
        json!({"to": "pm", "body": "Back?"}),
    );
    assert_eq!(
        sent["waiting"],
        json!({"role": "pm", "launcher": "pm", "told": false,
               "launcherRunning": false, "launchable": false})
    );
    // A notice to a stopped launcher still goes out and waits for its claim.
    let sent = e.ok(&cto, "message.send", json!({"to": "dev", "body": "Again"}));
    assert_eq!(sent["waiting"]["told"], json!(true));
    assert_eq!(sent["waiting"]["launcherRunning"], json!(false));
    assert_eq!(bus_notices(&e).len(), 3);
}

#[test]
fn without_a_launch_block_a_waiting_send_tells_nobody() {
    let mut e = Env::new();
    let sent = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "Plan?"}),
    );
    assert_eq!(
        sent["waiting"],
        json!({"role": "cto", "launcher": null, "told": false,
               "launcherRunning": null, "launchable": null})
    );
    assert!(bus_notices(&e).is_empty());
}

#[test]
fn a_refused_send_leaves_no_notice() {
    let mut acme = biz("acme");
    acme["launch"] = json!({"by": "pm", "instances": ["cto"]});
    let mut e = Env::build(acme, None);
    // dev has no message.send authority: refused, and nothing is written.
    let dev = role("dev", "run-d");
    e.ok(&dev, "role.claim", Value::Null);
    let before = e.counts();
    assert_eq!(
        e.call(&dev, "message.send", json!({"to": "cto", "body": "x"})),
        Err(Code::DecisionRequired)
    );
    assert_eq!(e.counts(), before);
    assert_eq!(
        e.refusals(),
        [json!([
            "dev",
            "run-d",
            null,
            "message.send",
            "decision-required"
        ])]
    );
    assert!(bus_notices(&e).is_empty());
}
