//! Instance names (3i row 141, schema 3g, issue 23) through the real
//! broker: `name.set` by the human's shim and by the chief of staff's run,
//! `names`, and `message.send` by name, read back from the real store.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;

fn role(def: &str, within: Value) -> Value {
    json!({"definition": def, "authority": {"withinRole": within, "crossRole": []}})
}

fn config(root: &Path, with_qa: bool) -> Value {
    let mut roles = json!({
        "chief": role("chief-of-staff", json!(["message.send", "instance.name"])),
        "pm": role("pm", json!(["message.send"])),
        "dev": role("dev", json!(["message.send"])),
    });
    if with_qa {
        roles["qa"] = role("qa", json!(["message.send"]));
    }
    json!({
        "dataRoot": root.to_str().expect("utf-8"),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": roles,
            "vars": {"bus.tester": true},
        }},
        "readers": ["acme"],
    })
}

fn stored(root: &Path, id: &str) -> (String, Option<String>) {
    db(root)
        .query_row(
            "SELECT to_role, to_name FROM messages WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the message")
}

#[test]
fn names_resolve_before_every_check_and_keys_win_over_names() {
    let dir = data_root();
    let root = dir.path();
    let (mut b, reply) = Broker::spawn(root, config(root, false));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let procs: Vec<Sleeper> = (0..3).map(|_| sleeper()).collect();
    let chief = b.claimed("chief", "chief-1", procs[0].id());
    let pm = b.claimed("pm", "pm-1", procs[1].id());
    let dev = b.claimed("dev", "dev-1", procs[2].id());
    let human = ShimSession::human(&b);
    let tester = ShimSession::tester(&b);

    // Who may name: the human's CLI and a role granted instance.name within its role.
    let r = human.call("name.set", json!({"instance": "dev", "name": "builder"}));
    assert_eq!(
        res(&r),
        &json!({"instance": "dev", "name": "builder"}),
        "{r}"
    );
    let r = b.call(
        &chief,
        "name.set",
        json!({"instance": "pm", "name": "lead"}),
    );
    assert_eq!(res(&r), &json!({"instance": "pm", "name": "lead"}), "{r}");
    let named = json!({"instance": "pm", "name": "boss"});
    assert_eq!(
        err(&b.call(&pm, "name.set", named.clone())),
        "not-authorized"
    );
    assert_eq!(
        err(&b.call(&b.reader_cap(), "name.set", named.clone())),
        "read-only"
    );
    assert_eq!(
        err(&tester.call("name.set", named.clone())),
        "tester-refused"
    );
    // What a name may not be.
    for (args, code) in [
        (json!({"instance": "dev", "name": "pm"}), "name-is-instance"),
        (
            json!({"instance": "dev", "name": "human"}),
            "name-is-instance",
        ),
        (
            json!({"instance": "dev", "name": "tester"}),
            "name-is-instance",
        ),
        (
            json!({"instance": "dev", "name": "chief-of-staff"}),
            "name-is-role",
        ),
        (json!({"instance": "pm", "name": "builder"}), "name-taken"),
        (
            json!({"instance": "nobody", "name": "ghost"}),
            "unknown-role",
        ),
        (
            json!({"instance": "dev", "name": "Big Name"}),
            "invalid-request",
        ),
        (
            json!({"instance": "dev", "name": "x", "extra": 1}),
            "invalid-request",
        ),
    ] {
        let r = human.call("name.set", args.clone());
        assert_eq!(err(&r), code, "{args}: {r}");
    }
    // Naming again replaces; the old name is free for another instance.
    res(&human.call("name.set", json!({"instance": "dev", "name": "maker"})));
    res(&b.call(
        &chief,
        "name.set",
        json!({"instance": "pm", "name": "builder"}),
    ));
    let names = res(&b.call(&dev, "names", Value::Null)).clone();
    let pairs: Vec<(String, String)> = names
        .as_array()
        .expect("list")
        .iter()
        .map(|n| {
            (
                n["instance"].as_str().expect("instance").to_string(),
                n["name"].as_str().expect("name").to_string(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("dev".into(), "maker".into()),
            ("pm".into(), "builder".into())
        ]
    );
    // The chief's naming is on record as action.allowed with the instance as target.
    let n: i64 = db(root)
        .query_row(
            "SELECT count(*) FROM events WHERE kind = 'action.allowed' AND role = 'chief'
               AND subject = 'pm' AND json_extract(body, '$.action') = 'instance.name'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(n, 2);

    // message.send by name: the instance in to_role, the name in to_name.
    let r = b.call(
        &dev,
        "message.send",
        json!({"to": "builder", "body": "by name"}),
    );
    let id = res(&r)["id"].as_str().expect("id").to_string();
    assert_eq!(stored(root, &id), ("pm".into(), Some("builder".into())));
    let r = b.call(&dev, "message.send", json!({"to": "pm", "body": "by key"}));
    let id = res(&r)["id"].as_str().expect("id").to_string();
    assert_eq!(stored(root, &id), ("pm".into(), None));
    let r = human.call("message.send", json!({"to": "maker", "body": "from Ada"}));
    let id = res(&r)["id"].as_str().expect("id").to_string();
    assert_eq!(stored(root, &id), ("dev".into(), Some("maker".into())));
    for to in ["lead", "nobody", "chief-of-staff"] {
        let r = b.call(&dev, "message.send", json!({"to": to, "body": "?"}));
        assert_eq!(err(&r), "unknown-role", "{to}: {r}");
    }
    let got = res(&b.call(&pm, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"].as_array().map(Vec::len), Some(2), "{got}");
    // Name dev "qa", then restart with an instance keyed qa: the key wins.
    res(&human.call("name.set", json!({"instance": "dev", "name": "qa"})));
    let r = b.call(&pm, "message.send", json!({"to": "qa", "body": "to dev"}));
    let id = res(&r)["id"].as_str().expect("id").to_string();
    assert_eq!(stored(root, &id), ("dev".into(), Some("qa".into())));
    b.close();
    let (mut b, reply) = Broker::spawn(root, config(root, true));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    // pm-1 still holds pm: its run binds again.
    let pm = b.bind("pm", "pm-1", procs[1].id());
    let r = b.call(
        &pm,
        "message.send",
        json!({"to": "qa", "body": "to the qa instance"}),
    );
    let id = res(&r)["id"].as_str().expect("id").to_string();
    assert_eq!(stored(root, &id), ("qa".into(), None));
    b.close();
}
