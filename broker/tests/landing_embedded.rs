//! The landing ops as the embedded runtime's methods (`check_land`,
//! `record_land`, `land_refused`, `land_held`): a real broker started in
//! process, its real socket for the verbs, the arbiter resolving the
//! cross-role decision through the bus.

mod common;

use mosaic_bus::client::Client;
use mosaic_bus::config::{BootConfig, LaunchRecord};
use mosaic_bus::error::Code;
use mosaic_bus::runtime::start_with;
use serde_json::{json, Map, Value};

const TASK: &str = "vikunja:3/41";
const C1: &str = "1111111111111111111111111111111111111111";
const MAIN0: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const MAIN1: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object: {v}"),
    }
}

fn start_time() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(19)
        .and_then(|f| f.parse().ok())
        .expect("field 22")
}

#[test]
fn the_runtime_lands_and_refuses_through_its_methods() {
    let dir = common::private_root();
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_str().expect("utf-8"),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {
                "pm": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}},
                "dev": {"authority": {"withinRole": ["git.push.working", "review.request"],
                                      "crossRole": ["git.merge.protected"]}}
            },
            "projects": {"site": {"repo": "/srv/records/site"}}
        }},
    }))
    .expect("config");
    let rt = start_with(cfg, None).expect("start");
    let mut caps = Vec::new();
    for role in ["pm", "dev"] {
        let rec = LaunchRecord::from_json(json!({
            "business": "acme", "role": role, "run": format!("{role}-1"), "harness": "pi",
            "pid": std::process::id(), "startTime": start_time()}))
        .expect("record");
        let launch = rt.bind_launch(rec).expect("bind");
        caps.push(launch["cap"].as_str().expect("cap").to_string());
    }
    let (pm_cap, dev_cap) = (caps[0].clone(), caps[1].clone());
    let pm = Client::new(rt.socket_path(), pm_cap);
    let dev = Client::new(rt.socket_path(), dev_cap.clone());
    pm.call("role.claim", Value::Null).expect("claim");
    dev.call("role.claim", Value::Null).expect("claim");

    rt.record_push(
        &dev_cap,
        obj(
            json!({"task_ref": TASK, "project": "site", "branch": "work/41",
                   "ref": "refs/heads/work/41", "commit": C1, "previous": null}),
        ),
    )
    .expect("push");
    let req = dev
        .call(
            "review.request",
            json!({"task_ref": TASK, "commit": C1, "to": "pm"}),
        )
        .expect("review request");
    pm.call(
        "review.verdict",
        json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
               "body": "fine"}),
    )
    .expect("verdict");
    let d = dev
        .call(
            "decision.raise",
            json!({"action": "git.merge.protected", "question": "Land?", "target": TASK,
                   "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
                   "recommendation": "yes", "blocking": false}),
        )
        .expect("raise")["id"]
        .clone();
    assert_eq!(
        rt.land_held("acme", "dev", None),
        Ok(json!({"held": false}))
    );
    pm.call("decision.resolve", json!({"id": d, "choice": "yes"}))
        .expect("resolve");
    assert_eq!(rt.land_held("acme", "dev", None), Ok(json!({"held": true})));
    assert_eq!(rt.land_held("acme", "nobody", None), Err(Code::UnknownRole));

    // A landing the host gives up on.
    let args = || obj(json!({"task_ref": TASK, "decision": d}));
    let t = rt.check_land(&dev_cap, args()).expect("ticket")["ticket"].clone();
    assert_eq!(t["resolution"]["via"], json!("broker"));
    let id = t["id"].as_str().expect("id").to_string();
    let r = rt
        .land_refused(&id, obj(json!({"code": "push-rejected", "notify": false})))
        .expect("refused");
    assert_eq!(r["message"], Value::Null);
    assert_eq!(
        rt.land_refused(&id, obj(json!({"code": "push-rejected", "notify": false}))),
        Err(Code::LandUnknown)
    );

    // And one it lands.
    let t = rt.check_land(&dev_cap, args()).expect("ticket")["ticket"].clone();
    let id = t["id"].as_str().expect("id");
    let land = || {
        obj(
            json!({"commit": MAIN1, "previous": MAIN0, "reviewed": C1, "base": MAIN0,
                   "patch_id": MAIN1}),
        )
    };
    let r = rt.record_land(id, land()).expect("landed");
    assert!(r["event"].is_string() && r["message"].is_string(), "{r}");
    assert_eq!(rt.record_land(id, land()), Err(Code::LandUnknown));
    assert_eq!(rt.check_land(&dev_cap, args()), Err(Code::DecisionConsumed));
    assert_eq!(
        rt.land_held("acme", "dev", None),
        Ok(json!({"held": false}))
    );
    let got = dev.call("message.receive", Value::Null).expect("receive");
    let results: Vec<&Value> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["class"] == json!("RESULT") && m["from_role"] == json!("_bus"))
        .collect();
    assert_eq!(results.len(), 1, "{got}");
    assert_eq!(results[0]["id"], r["message"]);
    rt.close();
}
