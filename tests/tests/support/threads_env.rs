//! Shared setup of `threads.rs`, `thread_bindings.rs` and `thread_ends.rs`.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;

/// acme: one thread instance (`helper`), a chief of staff who launches and
/// may end roles with a reason, a pm. solo: no thread instance. duo: two.
pub fn businesses(human: &str, second_assistant: bool) -> Value {
    let role = |def: &str, within: Value| {
        json!({"definition": def,
        "authority": {"withinRole": within, "crossRole": []}})
    };
    let mut acme = json!({
        "id": "acme", "human": human,
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "chief": role("chief-of-staff", json!(["message.send", "role.end"])),
            "helper": role("assistant", json!(["message.send"])),
            "pm": role("pm", json!(["message.send"])),
        },
        "launch": {"by": "chief", "instances": ["pm", "helper"]},
        "projects": {"site": {"repo": "/srv/records/site"}},
    });
    if second_assistant {
        acme["roles"]["helper2"] = role("assistant", json!(["message.send"]));
    }
    json!({
        "acme": acme,
        "solo": {"id": "solo", "human": "Sol",
                 "arbiters": {"technical": "pm", "delivery": "pm"},
                 "roles": {"pm": role("pm", json!(["message.send"]))}},
        "duo": {"id": "duo", "human": "Dee",
                "arbiters": {"technical": "a1", "delivery": "a1"},
                "roles": {"a1": role("assistant", json!([])), "a2": role("assistant", json!([]))}},
    })
}

pub fn boot(root: &Path, human: &str, second_assistant: bool) -> Broker {
    let (b, reply) = Broker::spawn(
        root,
        json!({"dataRoot": root.to_str().expect("utf-8"),
               "businesses": businesses(human, second_assistant),
               "readers": ["acme"]}),
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    b
}

/// The human's project `Site` and its threads `Plans` and `Budget`, made
/// in that order; the threads' ids.
pub fn plans_and_budget(h: &ShimSession) -> (String, String) {
    let project = h.ok("project.create", json!({"name": "Site"}))["id"].clone();
    let mk = |name: &str| {
        h.ok("thread.create", json!({"project": project, "name": name}))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let plans = mk("Plans");
    (plans, mk("Budget"))
}

pub fn thread_launch(role: &str, run: &str, pid: u32, thread: &str) -> Value {
    let mut l = launch(role, run, pid);
    l["thread"] = json!(thread);
    l
}

pub fn bind_thread(b: &mut Broker, run: &str, pid: u32, thread: &str) -> String {
    let r = b.op(json!({"op": "bindLaunch", "record": thread_launch("helper", run, pid, thread)}));
    assert_eq!(r["ok"], json!(true), "bind: {r}");
    r["launch"]["cap"].as_str().expect("cap").to_string()
}

pub fn state_of(b: &mut Broker, thread: &str) -> Value {
    let r = b.op(json!({"op": "threadsState", "business": "acme"}));
    let all = res(&r).as_array().expect("list").clone();
    all.into_iter()
        .find(|s| s["thread"] == json!(thread))
        .expect("the thread is listed")
}

pub fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("list")
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_string())
        .collect()
}

pub fn count(root: &Path, sql: &str) -> i64 {
    db(root).query_row(sql, [], |r| r.get(0)).expect("count")
}

/// acme with a chief of staff who may revoke cross-role and end roles with
/// a reason, a pm who may also end roles with a reason (but is not the
/// chief of staff), and a dev who may neither.
pub fn boot_for_ends(root: &Path) -> Broker {
    let mut biz = businesses("Ada", false);
    biz["acme"]["roles"]["chief"]["authority"]["crossRole"] = json!(["role.revoke"]);
    biz["acme"]["roles"]["pm"]["authority"]["withinRole"] = json!(["message.send", "role.end"]);
    biz["acme"]["roles"]["dev"] =
        json!({"definition": "dev", "authority": {"withinRole": [], "crossRole": []}});
    let (b, reply) = Broker::spawn(
        root,
        json!({"dataRoot": root.to_str().expect("utf-8"), "businesses": biz}),
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    b
}

pub fn claimed_thread(b: &mut Broker, run: &str, pid: u32, thread: &str) -> String {
    let cap = bind_thread(b, run, pid, thread);
    res(&b.call(&cap, "role.claim", Value::Null));
    cap
}

pub fn raise(action: &str, target: Option<&str>) -> Value {
    let mut a = json!({"action": action, "question": "Go ahead?",
        "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
        "recommendation": "yes", "blocking": false});
    if let Some(t) = target {
        a["target"] = json!(t);
    }
    a
}
