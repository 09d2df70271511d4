//! Sequences across verbs (issue 23's behaviour review; 3i rows 140 and 141, L74, L77, L79,
//! L80, L214, L216): the sequences the per-verb tests (`names.rs`,
//! `staff.rs`, `organization.rs`) leave out, through the real broker, the
//! real shim and the real store. Names per business, lists and launch
//! notices after a name resolves, refusal evidence, a staff request to a
//! chief of staff no run holds, and the organization writer across a
//! restart.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const TASK: &str = "vikunja:3/41";

fn role(def: &str, within: Value) -> Value {
    json!({"definition": def, "authority": {"withinRole": within, "crossRole": []}})
}

/// acme: the chief of staff launches pm and dev; pm's lists reach the
/// chief, dev and the human but not qa. solo: no launch block at all.
fn config(root: &Path) -> Value {
    let mut pm = role("pm", json!(["message.send"]));
    pm["messaging"] = json!({"sendTo": ["chief-of-staff", "dev", "human"],
                             "receiveFrom": ["chief-of-staff", "dev", "human"]});
    json!({
        "dataRoot": root.to_str().expect("utf-8"),
        "businesses": {
            "acme": {
                "id": "acme", "human": "Ada",
                "arbiters": {"technical": "pm", "delivery": "pm"},
                "roles": {
                    "chief": role("chief-of-staff", json!(["message.send", "instance.name"])),
                    "pm": pm,
                    "dev": role("dev", json!(["message.send"])),
                    "qa": role("qa", json!(["message.send"])),
                },
                "launch": {"by": "chief", "instances": ["pm", "dev"]},
            },
            "solo": {
                "id": "solo", "human": "Sol",
                "arbiters": {"technical": "lead", "delivery": "lead"},
                "roles": {"lead": role("pm", json!(["message.send"])),
                          "dev": role("dev", json!([]))},
            },
        },
        "readers": ["acme"],
    })
}

/// Messages from `_bus` (launch notices) in the store, as (to, body).
fn notices(root: &Path) -> Vec<(String, String)> {
    let c = db(root);
    let mut st = c
        .prepare("SELECT to_role, body FROM messages WHERE from_role = '_bus' ORDER BY rowid")
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
}

/// The first object anywhere in `v` whose `id` is `id`.
fn find_id<'a>(v: &'a Value, id: &str) -> Option<&'a Value> {
    match v {
        Value::Object(o) if o.get("id") == Some(&json!(id)) => Some(v),
        Value::Object(o) => o.values().find_map(|x| find_id(x, id)),
        Value::Array(a) => a.iter().find_map(|x| find_id(x, id)),
        _ => None,
    }
}

fn is_canonical_time(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    b.len() == 24 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[23] == b'Z'
}

#[test]
fn a_staff_request_waits_for_the_chief_and_names_hold_per_business() {
    let dir = data_root();
    let root = dir.path();
    let (mut b, reply) = Broker::spawn(root, config(root));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let procs: Vec<Sleeper> = (0..4).map(|_| sleeper()).collect();
    let human = ShimSession::human(&b);
    let pm = b.claimed_in("acme", "pm", "pm-1", procs[0].id());
    let lead = b.claimed_in("solo", "lead", "lead-1", procs[1].id());
    let good = json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1}]});

    // L80: the launcher must be a chief-of-staff instance; a business with
    // no launch block has none. The refusal is on the task's trail (L140).
    let r = b.call(&lead, "staff.request", good.clone());
    assert_eq!(err(&r), "no-chief-of-staff", "{r}");
    assert!(
        refusals(root).contains(&json!([
            "lead",
            "lead-1",
            TASK,
            "staff.request",
            "no-chief-of-staff"
        ])),
        "{:?}",
        refusals(root)
    );

    // L80 + launch notices: no run holds the chief. The request is stored
    // and waits; the launcher is not told about a message to itself.
    let r = res(&b.call(&pm, "staff.request", good.clone())).clone();
    assert_eq!(r["to"], json!("chief"), "{r}");
    // Exactly the row's {message, to}: no `waiting` beside it.
    let keys: Vec<&String> = r.as_object().expect("reply").keys().collect();
    assert_eq!(keys, ["message", "to"], "{r}");
    let id = r["message"].as_str().expect("message id").to_string();
    assert!(notices(root).is_empty(), "{:?}", notices(root));
    let chief = b.claimed_in("acme", "chief", "chief-1", procs[2].id());
    let got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    let got = got["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], json!(id));
    assert_eq!(got[0]["class"], json!("STAFF-REQUEST"));
    // The chief answers the request with a reply to it; the pm gets it.
    let r = b.call(
        &chief,
        "message.send",
        json!({"to": "pm", "body": "launched dev-2", "class": "RESULT", "in_reply_to": id}),
    );
    assert!(res(&r)["id"].is_string(), "{r}");
    let got = res(&b.call(&pm, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["in_reply_to"], json!(id), "{got}");

    // L77: naming an instance with the name it already has is no clash;
    // names belong to a business, so solo's dev may take acme's name.
    let named = json!({"instance": "dev", "name": "builder"});
    assert_eq!(res(&human.call("name.set", named.clone())), &named);
    assert_eq!(res(&human.call("name.set", named.clone())), &named);
    assert_eq!(
        res(&human.call_in("solo", "name.set", named.clone())),
        &named
    );
    let r = b.call(
        &chief,
        "name.set",
        json!({"instance": "qa", "name": "checker"}),
    );
    assert_eq!(res(&r), &json!({"instance": "qa", "name": "checker"}));
    // A clash inside the business is refused, and the refusal is evidence.
    let r = b.call(
        &chief,
        "name.set",
        json!({"instance": "qa", "name": "builder"}),
    );
    assert_eq!(err(&r), "name-taken");
    assert!(
        refusals(root).contains(&json!(["chief", "chief-1", null, "name.set", "name-taken"])),
        "{:?}",
        refusals(root)
    );

    // L74: the name resolves before any check. pm's lists don't reach qa,
    // so qa's name is not-authorized (an unresolved name would be
    // unknown-role); dev's name reaches dev, no run holds dev, and the
    // waiting field and the launcher's notice name the instance.
    let r = b.call(&pm, "message.send", json!({"to": "checker", "body": "?"}));
    assert_eq!(err(&r), "not-authorized", "{r}");
    let r = res(&b.call(&pm, "message.send", json!({"to": "builder", "body": "hi"}))).clone();
    assert_eq!(
        r["waiting"],
        json!({"role": "dev", "launcher": "chief", "told": true,
               "launcherRunning": true, "launchable": true}),
        "{r}"
    );
    let mid = r["id"].as_str().expect("id").to_string();
    let told = notices(root);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, "chief");
    assert!(
        told[0]
            .1
            .starts_with(&format!("Message {mid} from pm to dev waits: dev has")),
        "{}",
        told[0].1
    );
    // The message reaches dev's run at its claim.
    let dev = b.claimed_in("acme", "dev", "dev-1", procs[3].id());
    let got = res(&b.call(&dev, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["id"], json!(mid), "{got}");
    // L74, L210: the row every message view gives carries the name the
    // sender used in `to_name` (null for a send by instance).
    assert_eq!(got["messages"][0]["to_name"], json!("builder"), "{got}");
    let trail = res(&b.call(&b.reader_cap(), "trail", json!({"subject": mid}))).clone();
    let row = find_id(&trail, &mid).unwrap_or_else(|| panic!("no row in {trail}"));
    assert_eq!(row["to_role"], json!("dev"), "{row}");
    assert_eq!(row["to_name"], json!("builder"), "{row}");
    let got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    let notice = &got["messages"][0];
    assert_eq!(notice["from_role"], json!("_bus"), "{got}");
    assert!(
        notice.get("to_name") == Some(&Value::Null),
        "a send by instance: {notice}"
    );

    // L79: each named instance's {instance, name, at}, by instance, in the
    // caller's business only; the same after a restart.
    res(&human.call("name.set", json!({"instance": "pm", "name": "reviewer"})));
    let names = res(&b.call(&pm, "names", Value::Null)).clone();
    let list = names.as_array().cloned().unwrap_or_default();
    let pairs: Vec<(Value, Value)> = list
        .iter()
        .map(|n| (n["instance"].clone(), n["name"].clone()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            (json!("dev"), json!("builder")),
            (json!("pm"), json!("reviewer")),
            (json!("qa"), json!("checker"))
        ]
    );
    assert!(
        list.iter()
            .all(|n| is_canonical_time(&n["at"]) && n.as_object().map(|o| o.len()) == Some(3)),
        "{names}"
    );
    let solo = res(&b.call(&lead, "names", Value::Null)).clone();
    assert_eq!(solo.as_array().map(Vec::len), Some(1), "{solo}");
    assert_eq!(solo[0]["instance"], json!("dev"));
    b.close();
    // The restart brings an instance of a new definition, `reviewer`, which
    // pm holds as its name: the definition wins (L74), so a send to it is
    // unknown-role, and the name can't be given again (L77).
    let mut later = config(root);
    later["businesses"]["acme"]["roles"]["rev"] = role("reviewer", json!([]));
    let (mut b, reply) = Broker::spawn(root, later);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let pm = b.bind("pm", "pm-1", procs[0].id());
    assert_eq!(res(&b.call(&pm, "names", Value::Null)), &names);
    let r = b.call(&pm, "message.send", json!({"to": "reviewer", "body": "?"}));
    assert_eq!(err(&r), "unknown-role", "{r}");
    let human = ShimSession::human(&b);
    let r = human.call("name.set", json!({"instance": "qa", "name": "reviewer"}));
    assert_eq!(err(&r), "name-is-role", "{r}");
    b.close();
}

/// The organization verbs' sequences: a definition change waits for a
/// restart and a vars change doesn't (L214), a stale `routes.set` writes
/// nothing (L216), a chief of staff whose run doesn't hold its role writes
/// nothing, and the revision and the record survive a broker restart.
#[test]
fn organization_writes_keep_their_sequence_across_a_restart() {
    let dir = data_root();
    let root = dir.path();
    let path = root.join("organization.json");
    let org = json!({
        "revision": 1,
        "limits": {"runs": 4, "perDefinition": {}},
        "models": {"local": {"harness": "pi"}, "cloud": {"harness": "claude-code"}},
        "instances": {"acme": {"dev": {"definition": "dev", "vars": {}, "launch": true}}},
        "assistants": {},
        "routes": {"default": {"model": "local", "thinking": "low"}},
        "plugins": {"harness": {"pi": {"on": true, "levels": ["low", "high"]},
                                "claude-code": {"on": false, "levels": ["low"]}}},
    });
    std::fs::write(&path, serde_json::to_vec(&org).expect("json")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut cfg = config(root);
    cfg["organization"] = json!(path);
    let (b, reply) = Broker::spawn(root, cfg.clone());
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let changes = |root: &Path| -> Vec<(i64, String)> {
        let c = db(root);
        let mut st = c
            .prepare(
                "SELECT json_extract(body, '$.revision'), json_extract(body, '$.operation')
                 FROM events WHERE kind = 'organization.changed' ORDER BY seq",
            )
            .expect("prepare");
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    };

    // L214: restart:true after a definition change, false for vars only.
    let r = human.call(
        "instances.set",
        json!({"revision": 1, "instance": "dev", "op": "change", "vars": {"tone": "plain"}}),
    );
    assert_eq!(res(&r)["restart"], json!(false), "{r}");
    let r = human.call(
        "instances.set",
        json!({"revision": 2, "instance": "dev", "op": "change", "definition": "qa"}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 3, "restart": true, "actor": "human", "instance": "dev"})
    );

    // L216: the harness codes pass through from instances.set too: an
    // instance's vars `model` and `thinking` are its route and get the
    // route checks, as an assistant's vars do. Nothing is written.
    let before = std::fs::read(&path).expect("read");
    for (vars, code) in [
        (json!({"model": "cloud"}), "harness-off"),
        (
            json!({"model": "local", "thinking": "max"}),
            "thinking-unsupported",
        ),
        (json!({"model": "nope"}), "organization-invalid"),
        (json!({"model": 5}), "organization-invalid"),
        (
            json!({"model": "local", "thinking": true}),
            "organization-invalid",
        ),
    ] {
        let r = human.call(
            "instances.set",
            json!({"revision": 3, "instance": "dev3", "op": "add", "definition": "dev",
                   "vars": vars}),
        );
        assert_eq!(err(&r), code, "{vars}: {r}");
    }
    assert_eq!(std::fs::read(&path).expect("read"), before);

    // L216: a stale routes.set refuses and the file stays byte for byte.
    let r = human.call(
        "routes.set",
        json!({"revision": 2, "routes": {"dev": {"model": "local"}}}),
    );
    assert_eq!(err(&r), "organization-stale", "{r}");
    assert_eq!(std::fs::read(&path).expect("read"), before);

    // A chief of staff bound but not holding its role: not-holder, nothing
    // written, no change on record.
    let p = sleeper();
    let mut cfg_chief = cfg.clone();
    cfg_chief["businesses"]["acme"]["roles"]["chief"]["authority"]["withinRole"] =
        json!(["message.send", "instance.name", "organization.change"]);
    b.close();
    let (mut b, reply) = Broker::spawn(root, cfg_chief.clone());
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let chief = b.bind("chief", "chief-1", p.id());
    let set = json!({"revision": 3, "limits": {"runs": 2, "perDefinition": {}}});
    assert_eq!(
        err(&b.call(&chief, "organization.set", set.clone())),
        "not-holder"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before);
    // After the restart the file's revision stands and the record holds
    // every earlier change.
    res(&b.call(&chief, "role.claim", Value::Null));
    let r = b.call(&chief, "organization.set", set);
    assert_eq!(
        res(&r),
        &json!({"revision": 4, "restart": false, "actor": "chief-of-staff.chief"})
    );
    assert_eq!(
        changes(root),
        vec![
            (2, "instances.set".to_string()),
            (3, "instances.set".to_string()),
            (4, "organization.set".to_string()),
        ]
    );
    let human = ShimSession::human(&b);
    let r = res(&human.call("limits", Value::Null)).clone();
    assert_eq!(r["revision"], json!(4));
    assert_eq!(r["limits"], json!({"runs": 2, "perDefinition": {}}));
    // L216: the levels are the ones read at start. A hand edit that gives
    // pi a new level counts for the checks only after a restart.
    let mut edited: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    edited["plugins"]["harness"]["pi"]["levels"] = json!(["low", "high", "max"]);
    std::fs::write(&path, serde_json::to_vec(&edited).expect("json")).expect("hand edit");
    let max = json!({"revision": 4, "routes": {"dev": {"model": "local", "thinking": "max"}}});
    assert_eq!(
        err(&human.call("routes.set", max.clone())),
        "thinking-unsupported"
    );
    b.close();
    let (b, reply) = Broker::spawn(root, cfg_chief);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    assert_eq!(
        res(&human.call("routes.set", max)),
        &json!({"revision": 5, "restart": true, "actor": "human"})
    );
    // Four writers with the same revision at once: one wins, the others
    // are stale, and the revision moves by one.
    let sessions: Vec<ShimSession> = (0..4).map(|_| ShimSession::human(&b)).collect();
    let writers: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            std::thread::spawn(move || {
                s.call(
                    "limits.set",
                    json!({"revision": 5, "limits": {"runs": i, "perDefinition": {}}}),
                )
            })
        })
        .collect();
    let replies: Vec<Value> = writers
        .into_iter()
        .map(|h| h.join().expect("writer thread"))
        .collect();
    let won: Vec<&Value> = replies.iter().filter(|r| r["ok"] == json!(true)).collect();
    assert_eq!(won.len(), 1, "{replies:?}");
    assert_eq!(won[0]["result"]["revision"], json!(6));
    for r in replies.iter().filter(|r| r["ok"] != json!(true)) {
        assert_eq!(err(r), "organization-stale", "{r}");
    }
    // This broker serves acme and solo: acme's first write gave each its
    // own part of the file (issue 29), and acme's part moved by one.
    let file: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    assert_eq!(file["businesses"]["acme"]["revision"], json!(6));
    assert_eq!(file["businesses"]["solo"]["revision"], json!(1));
    assert_eq!(changes(root).len(), 5);
    b.close();
}

/// L80: `staff.request` is action `message.send`, so a pm instance that
/// holds it only cross-role needs an approved decision for the chief of
/// staff, spends it once, and the evidence names it.
#[test]
fn a_staff_request_may_ride_on_a_cross_role_decision_once() {
    let dir = data_root();
    let root = dir.path();
    let mut cfg = config(root);
    cfg["businesses"]["acme"]["roles"]["pmx"] = json!({"definition": "pm",
        "authority": {"withinRole": [], "crossRole": ["message.send"]}});
    let (mut b, reply) = Broker::spawn(root, cfg);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let procs: Vec<Sleeper> = (0..3).map(|_| sleeper()).collect();
    let _chief = b.claimed_in("acme", "chief", "chief-1", procs[0].id());
    let pm = b.claimed_in("acme", "pm", "pm-1", procs[1].id());
    let pmx = b.claimed_in("acme", "pmx", "pmx-1", procs[2].id());
    let good = json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1}]});

    let r = b.call(&pmx, "staff.request", good.clone());
    assert_eq!(err(&r), "decision-required", "{r}");
    let r = b.call(
        &pmx,
        "decision.raise",
        json!({"action": "message.send", "target": "chief", "question": "Ask for staff?",
               "options": [{"key": "yes", "text": "Ask"}, {"key": "no", "text": "Don't"}],
               "recommendation": "yes", "blocking": false}),
    );
    let d = res(&r)["id"].as_str().expect("decision id").to_string();
    let r = b.call(&pm, "decision.resolve", json!({"id": d, "choice": "yes"}));
    res(&r);
    let mut with = good.clone();
    with["decision"] = json!(d);
    let r = res(&b.call(&pmx, "staff.request", with.clone())).clone();
    let id = r["message"].as_str().expect("message id").to_string();
    let allowed: String = db(root)
        .query_row(
            "SELECT body FROM events WHERE kind = 'action.allowed' AND role = 'pmx'
               AND json_extract(body, '$.operation') = 'staff.request'",
            [],
            |r| r.get(0),
        )
        .expect("the action.allowed");
    let allowed: Value = serde_json::from_str(&allowed).expect("json");
    assert_eq!(allowed["decision"], json!(d), "{allowed}");
    assert_eq!(allowed["message"], json!(id), "{allowed}");
    assert_eq!(allowed["staff_for"], json!(TASK), "{allowed}");
    // Spent: the same decision does not carry a second request.
    let r = b.call(&pmx, "staff.request", with);
    assert_eq!(err(&r), "decision-consumed", "{r}");
    b.close();
}
