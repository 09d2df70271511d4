//! The embedded runtime's `seals` method (DESIGN.md: every host op is also a
//! method): the same seals the host op lists, from the seals file, and the
//! last seal made at close covers every commit.

mod common;

use mosaic_bus::config::{BootConfig, LaunchRecord};
use mosaic_bus::runtime::start_with;
use serde_json::{json, Value};

fn start_time() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(19)
        .and_then(|f| f.parse().ok())
        .expect("field 22")
}

#[test]
fn the_runtime_lists_its_seals_and_seals_at_close() {
    let dir = common::private_root();
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_str().expect("utf-8"),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {"pm": {"authority": {"withinRole": ["message.send"], "crossRole": []}}}}},
        "sealSeconds": 3600,
    }))
    .expect("config");
    let rt = start_with(cfg.clone(), None).expect("start");
    assert_eq!(
        rt.seals(None).expect("seals"),
        json!([]),
        "nothing to seal yet"
    );
    let rec = LaunchRecord::from_json(json!({
        "business": "acme", "role": "pm", "run": "pm-1", "harness": "pi",
        "pid": std::process::id(), "startTime": start_time()}))
    .expect("record");
    rt.bind_launch(rec.clone()).expect("bind");
    rt.close();

    // The next start lists the seal the close made, in the host op's shape.
    let rt = start_with(cfg, None).expect("start again");
    let list = rt.seals(None).expect("seals");
    let list = list.as_array().expect("list");
    assert_eq!(list.len(), 1, "{list:?}");
    let s = &list[0];
    assert_eq!(s["seq"], json!(1));
    assert_eq!(s["prev"], json!("0".repeat(64)));
    assert!(s["upto"]["events"].as_i64() >= Some(1), "{s}");
    let keys: Vec<&str> = s
        .as_object()
        .expect("seal")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["at", "prev", "root", "seq", "upto"]);
    assert_eq!(rt.seals(Some(1)).expect("after 1"), Value::Array(vec![]));
    rt.close();
}
