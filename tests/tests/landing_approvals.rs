//! Which approval lands which task: a thread run's own thread decision, a later run of the raising instance or thread, a within-role decision, another branch, a second landing (3i L48, L157, L269).

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/landing_env.rs"]
mod landing_env;
use landing_env::{
    approved_merge, business, config, env, land, res_launch, Env, C1, C2, MAIN0, MAIN1, PATCH, TASK,
};

/// A thread run lands with a decision raised in its own thread only: the
/// same instance in another thread gets `decision-mismatch`, `landHeld`
/// answers per thread, and the RESULT is filed in the decision's thread.
#[test]
fn a_thread_run_lands_only_with_its_own_threads_decision() {
    let root = data_root();
    let business = json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["review.verdict", "message.send"],
                                 "crossRole": []}},
            "helper": {"definition": "assistant",
                       "authority": {"withinRole": ["git.push.working", "review.request",
                                                    "message.send"],
                                     "crossRole": ["git.merge.protected"]}}
        },
        "projects": {"site": {"repo": "/srv/records/site"}}
    });
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let project =
        res(&human.call("project.create", json!({"name": "Site", "repo": "site"})))["id"].clone();
    let thread = |name: &str| {
        res(&human.call("thread.create", json!({"project": project, "name": name})))["id"]
            .as_str()
            .expect("thread id")
            .to_string()
    };
    let (t1, t2) = (thread("One"), thread("Two"));
    let procs = [sleeper(), sleeper(), sleeper()];
    let pm = b.bind("pm", "pm-1", procs[0].id());
    let mut bind_thread = |run: &str, pid: u32, th: &str| {
        let mut rec = launch("helper", run, pid);
        rec["thread"] = json!(th);
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        res_launch(&r)
    };
    let h1 = bind_thread("h-1", procs[1].id(), &t1);
    let h2 = bind_thread("h-2", procs[2].id(), &t2);
    for cap in [&pm, &h1, &h2] {
        res(&b.call(cap, "role.claim", Value::Null));
    }

    let d = approved_merge(&mut b, &h1, &pm);

    let mut held = |th: Option<&str>| {
        let mut op = json!({"op": "landHeld", "business": "acme", "role": "helper"});
        if let Some(t) = th {
            op["thread"] = json!(t);
        }
        res(&b.op(op))["held"].clone()
    };
    assert_eq!(held(Some(&t1)), json!(true));
    assert_eq!(held(Some(&t2)), json!(false), "another thread");
    assert_eq!(held(None), json!(false), "no thread");

    let args = json!({"task_ref": TASK, "decision": d});
    let r = b.op(json!({"op": "checkLand", "cap": h2, "args": args}));
    assert_eq!(
        err(&r),
        "decision-mismatch",
        "the same instance in another thread"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h1, "args": args}));
    let ticket = res(&r)["ticket"].clone();
    let r = b.op(json!({"op": "recordLand", "ticket": ticket["id"], "land": land(MAIN1, C1)}));
    let out = res(&r).clone();
    let filed: String = db(root.path())
        .query_row(
            "SELECT thread FROM message_threads WHERE message = ?1",
            [out["message"].as_str().expect("message id")],
            |r| r.get(0),
        )
        .expect("the RESULT is filed in a thread");
    assert_eq!(filed, t1);
    let got = res(&b.call(&h1, "message.receive", Value::Null))["messages"].clone();
    assert!(
        got.as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "{got}"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h1, "args": args}));
    assert_eq!(err(&r), "decision-consumed");
    b.close();
}

/// Row 136: the approval binds to the role instance, not the run that
/// raised it. A later run of dev, holding its claim, lands with the
/// decision dev-1 raised; the record names the landing run; the RESULT
/// waits for dev's next run when the landing run ended before the host
/// recorded; and a ticket that ended refuses `landRefused` as well.
#[test]
fn a_later_run_of_the_raising_instance_lands_and_the_next_run_hears_of_it() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let end = |e: &mut Env, run: &str| {
        let r = e.b.op(json!({"op": "endLaunch",
                              "record": {"business": "acme", "run": run, "reason": "done"}}));
        res(&r);
    };
    end(&mut e, "dev-1");
    assert_eq!(e.held("dev", None), json!(true), "outlives its run");

    let p2 = sleeper();
    let dev2 = e.b.bind("dev", "dev-2", p2.id());
    res(&e.b.call(&dev2, "role.claim", Value::Null));
    let r =
        e.b.op(json!({"op": "checkLand", "cap": dev2, "args": {"task_ref": TASK, "decision": d}}));
    let ticket = res(&r)["ticket"].clone();
    assert_eq!(ticket["commit"], json!(C1));
    end(&mut e, "dev-2");
    let out = res(&e.record(&ticket["id"], land(MAIN1, C1))).clone();
    let rec = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("the landing record");
    assert_eq!(
        (&rec["role"], &rec["run"]),
        (&json!("dev"), &json!("dev-2"))
    );
    assert_eq!(e.consumed(&d), 1);
    let r = e.b.op(json!({"op": "landRefused", "ticket": ticket["id"],
                          "args": {"code": "merge-conflict", "notify": true}}));
    assert_eq!(err(&r), "land-unknown", "recordLand ended the landing");

    let p3 = sleeper();
    let dev3 = e.b.bind("dev", "dev-3", p3.id());
    res(&e.b.call(&dev3, "role.claim", Value::Null));
    let got = res(&e.b.call(&dev3, "message.receive", Value::Null))["messages"].clone();
    let m = got
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["id"] == out["message"])
        .cloned()
        .unwrap_or_else(|| panic!("the RESULT reaches dev's next run: {got}"));
    assert_eq!((&m["class"], &m["decision"]), (&json!("RESULT"), &d));
    let r =
        e.b.op(json!({"op": "checkLand", "cap": dev3, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "decision-consumed", "spent for every run");
    e.b.close();
}

/// REQ-LAND-1: a within-role merge decision (closed at its raise) never
/// lands, and `landHeld` never counts it.
#[test]
fn a_within_role_merge_decision_never_lands() {
    let root = data_root();
    let mut business = business();
    business["roles"]["ops"] = json!({"authority": {
        "withinRole": ["git.merge.protected", "git.push.working", "review.request"],
        "crossRole": []}});
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (pops, pcto) = (sleeper(), sleeper());
    let ops = b.bind("ops", "ops-1", pops.id());
    let cto = b.bind("cto", "cto-1", pcto.id());
    for cap in [&ops, &cto] {
        res(&b.call(cap, "role.claim", Value::Null));
    }
    let r = b.op(json!({"op": "recordPush", "cap": ops, "push": {
        "task_ref": TASK, "project": "site", "branch": "work/41",
        "ref": "refs/heads/work/41", "commit": C1, "previous": null}}));
    res(&r);
    let req = res(&b.call(
        &ops,
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
    ))
    .clone();
    res(&b.call(
        &cto,
        "review.verdict",
        json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
               "body": "fine"}),
    ));
    let d = res(&b.call(
        &ops,
        "decision.raise",
        json!({"action": "git.merge.protected", "question": "Land?", "target": TASK,
               "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "blocking": false, "choice": "yes"}),
    ))["id"]
        .clone();
    let class: String = db(root.path())
        .query_row(
            "SELECT class FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| r.get(0),
        )
        .expect("decision row");
    assert_eq!(class, "within-role");
    let r = b.op(json!({"op": "landHeld", "business": "acme", "role": "ops"}));
    assert_eq!(res(&r)["held"], json!(false));
    let r = b.op(json!({"op": "checkLand", "cap": ops, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "not-authorized");
    b.close();
}

/// Row 136 for a thread: a later run serving the same thread lands with
/// the decision an earlier one raised there, once it holds the thread's
/// claim (`not-holder` before); the RESULT is filed in that thread and the
/// thread's next run receives it after the landing run ended.
#[test]
fn a_later_run_of_the_same_thread_lands_its_decision() {
    let root = data_root();
    let business = json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm",
                   "authority": {"withinRole": ["review.verdict", "message.send"],
                                 "crossRole": []}},
            "helper": {"definition": "assistant",
                       "authority": {"withinRole": ["git.push.working", "review.request",
                                                    "message.send"],
                                     "crossRole": ["git.merge.protected"]}}
        },
        "projects": {"site": {"repo": "/srv/records/site"}}
    });
    let (mut b, reply) = Broker::spawn(root.path(), config(root.path(), &business));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let project =
        res(&human.call("project.create", json!({"name": "Site", "repo": "site"})))["id"].clone();
    let t1 = res(&human.call("thread.create", json!({"project": project, "name": "One"})))["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let t2 = res(&human.call("thread.create", json!({"project": project, "name": "Two"})))["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let procs = [sleeper(), sleeper(), sleeper(), sleeper(), sleeper()];
    let pm = b.bind("pm", "pm-1", procs[0].id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let bind_thread = |b: &mut Broker, run: &str, pid: u32| {
        let mut rec = launch("helper", run, pid);
        rec["thread"] = json!(t1);
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        res_launch(&r)
    };
    let end = |b: &mut Broker, run: &str| {
        let r = b.op(json!({"op": "endLaunch",
                            "record": {"business": "acme", "run": run, "reason": "done"}}));
        res(&r);
    };
    let h1 = bind_thread(&mut b, "h-1", procs[1].id());
    res(&b.call(&h1, "role.claim", Value::Null));
    let d = approved_merge(&mut b, &h1, &pm);

    // h-3 serves the thread h-1 still holds: not its claim yet.
    let args = json!({"task_ref": TASK, "decision": d});
    let h3 = bind_thread(&mut b, "h-3", procs[2].id());
    let r = b.op(json!({"op": "checkLand", "cap": h3, "args": args}));
    assert_eq!(err(&r), "not-holder");
    end(&mut b, "h-1");
    res(&b.call(&h3, "role.claim", Value::Null));
    let r = b.op(json!({"op": "checkLand", "cap": h3, "args": args}));
    let ticket = res(&r)["ticket"].clone();
    end(&mut b, "h-3");
    // The instance's run in another thread, holding it.
    let mut rec = launch("helper", "h-2", procs[4].id());
    rec["thread"] = json!(t2);
    let h2 = res_launch(&b.op(json!({"op": "bindLaunch", "record": rec})));
    res(&b.call(&h2, "role.claim", Value::Null));
    let r = b.op(json!({"op": "recordLand", "ticket": ticket["id"], "land": land(MAIN1, C1)}));
    let out = res(&r).clone();
    let filed: String = db(root.path())
        .query_row(
            "SELECT thread FROM message_threads WHERE message = ?1",
            [out["message"].as_str().expect("message id")],
            |r| r.get(0),
        )
        .expect("the RESULT is filed in a thread");
    assert_eq!(filed, t1);
    let other = res(&b.call(&h2, "message.receive", Value::Null))["messages"].clone();
    assert!(
        !other
            .as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "not delivered in another thread: {other}"
    );

    let h4 = bind_thread(&mut b, "h-4", procs[3].id());
    res(&b.call(&h4, "role.claim", Value::Null));
    let got = res(&b.call(&h4, "message.receive", Value::Null))["messages"].clone();
    assert!(
        got.as_array()
            .expect("messages")
            .iter()
            .any(|m| m["id"] == out["message"]),
        "the thread's next run receives the RESULT: {got}"
    );
    let r = b.op(json!({"op": "checkLand", "cap": h4, "args": args}));
    assert_eq!(err(&r), "decision-consumed");
    b.close();
}

/// Row 137: the decision's target must be the branch the caller names, the
/// task ref for an agent's landing (`refactor` is land-work's), so a merge
/// approval for `refactor`, or for no target, lands no task: `checkLand`
/// refuses it `not-authorized`, and `landHeld` does not count it as one a
/// landing could use (the launcher would bind a land op that can only
/// refuse).
#[test]
fn a_merge_approval_for_another_branch_or_none_lands_no_task() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let refactor = e.raise("dev", "git.merge.protected", "refactor", json!({}));
    e.ok(
        "pm",
        "decision.resolve",
        json!({"id": refactor, "choice": "yes"}),
    );
    let mut untargeted = json!({"action": "git.merge.protected", "question": "Land?",
           "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "Not yet"}],
           "recommendation": "yes", "blocking": false});
    let none = e.ok("dev", "decision.raise", untargeted.take())["id"].clone();
    e.ok(
        "pm",
        "decision.resolve",
        json!({"id": none, "choice": "yes"}),
    );

    let before = row_counts(e.root.path());
    assert_eq!(
        e.held("dev", None),
        json!(false),
        "no approval lands a task"
    );
    assert_eq!(row_counts(e.root.path()), before, "landHeld writes nothing");
    assert!(e.refusals(TASK).is_empty());
    for d in [&refactor, &none] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
            "not-authorized",
            "{d}"
        );
    }
    // A task's own approval is held.
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    assert_eq!(e.held("dev", None), json!(true));
    e.b.close();
}

/// Each landing spends its own decision: after a task landed, new work on
/// it (a new push, a new approving verdict) lands again only with a new
/// approval, whose ticket names the new commit.
#[test]
fn a_task_lands_again_only_with_a_new_approval() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d1 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d1, "choice": "yes"}));
    let t1 = e.ticket("dev", TASK, &d1);
    res(&e.record(&t1["id"], land(MAIN1, C1)));

    e.push("dev", TASK, C2);
    let v2 = e.reviewed("dev", TASK, C2, "approve");
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d1}))),
        "decision-consumed"
    );
    assert_eq!(e.held("dev", None), json!(false));
    let d2 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d2, "choice": "yes"}));
    let t2 = e.ticket("dev", TASK, &d2);
    assert_eq!((&t2["commit"], &t2["verdict"]), (&json!(C2), &v2));
    let mut second = land(PATCH, C2);
    second["previous"] = json!(MAIN1);
    res(&e.record(&t2["id"], second));
    assert_eq!((e.consumed(&d1), e.consumed(&d2)), (1, 1));
    let landings: Vec<Value> = e
        .trail(TASK)
        .into_iter()
        .filter(|x| {
            x["kind"] == json!("action.allowed")
                && x["body"]["action"] == json!("git.merge.protected")
        })
        .map(|x| {
            json!([
                x["body"]["decision"],
                x["body"]["reviewed"],
                x["body"]["previous"]
            ])
        })
        .collect();
    assert_eq!(
        landings,
        vec![json!([d1, C1, MAIN0]), json!([d2, C2, MAIN1])]
    );
    e.b.close();
}
