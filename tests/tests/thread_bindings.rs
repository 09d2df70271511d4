//! What a thread run does binds to its thread (3i row 121, issues 20 and 30): reviews to and from it, its decisions, its turns' accounting, and an approval bound to a thread, which outlives a restart. Through the real broker, the human through the real static shim.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;
#[path = "support/threads_env.rs"]
mod threads_env;
use threads_env::{
    boot, boot_for_ends, businesses, claimed_thread, ids, plans_and_budget, raise, state_of,
    thread_launch,
};

/// Reviews to or from a thread run are filed in its thread (3i L108-L113):
/// the assistant's thread run asks the pm for a review; the REVIEW-REQUEST
/// is in its thread, the pm's REVIEW-RESULT in reply joins the same
/// thread, `threadsState` counts it, the thread run receives it, and the
/// pm's plain reply to the request by `message.send` reaches the thread too.
/// A review request to the thread instance, which has no thread to join, is
/// refused as any message to it without one is.
#[test]
fn reviews_to_and_from_a_thread_run_are_filed_in_its_thread() {
    const TASK: &str = "vikunja:3/41";
    const C1: &str = "1111111111111111111111111111111111111111";
    let root = data_root();
    let mut biz = businesses("Ada", false);
    biz["acme"]["roles"]["helper"]["authority"]["withinRole"] = json!([
        "message.send",
        "review.request",
        "git.push.working",
        "review.verdict"
    ]);
    biz["acme"]["roles"]["pm"]["authority"]["withinRole"] = json!([
        "message.send",
        "review.verdict",
        "review.request",
        "git.push.working"
    ]);
    let (mut b, reply) = Broker::spawn(
        root.path(),
        json!({"dataRoot": root.path().to_str().expect("utf-8"), "businesses": biz}),
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let h = ShimSession::human(&b);
    let (thread, _) = plans_and_budget(&h);
    let procs: Vec<_> = (0..2).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &thread);
    let pm = b.claimed("pm", "pm-1", procs[1].id());
    let push = |b: &mut Broker, cap: &str| {
        b.op(json!({"op": "recordPush", "cap": cap, "push": {
            "task_ref": TASK, "project": "site", "branch": "work/41",
            "ref": "refs/heads/work/41", "commit": C1, "previous": null}}))
    };
    res(&push(&mut b, &h1));
    let threaded = |root: &Path, id: &Value| -> Option<String> {
        db(root)
            .query_row(
                "SELECT thread FROM message_threads WHERE message = ?1",
                [id.as_str().expect("id")],
                |r| r.get(0),
            )
            .ok()
    };

    let req = res(&b.call(
        &h1,
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "pm"}),
    ))
    .clone();
    assert_eq!(threaded(root.path(), &req["message"]), Some(thread.clone()));
    let got = res(&b.call(&pm, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), [req["message"].as_str().unwrap()]);
    let before = state_of(&mut b, &thread);
    let v = res(&b.call(
        &pm,
        "review.verdict",
        json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
               "body": "fine"}),
    ))
    .clone();
    assert_eq!(threaded(root.path(), &v["message"]), Some(thread.clone()));
    let after = state_of(&mut b, &thread);
    assert_eq!(
        after["pending"].as_i64(),
        before["pending"].as_i64().map(|n| n + 1),
        "{before} {after}"
    );
    // The pm answers the request by message.send too: in the thread.
    let answer = res(&b.call(
        &pm,
        "message.send",
        json!({"to": "helper", "body": "One more thing", "in_reply_to": req["message"]}),
    ))
    .clone();
    assert_eq!(threaded(root.path(), &answer["id"]), Some(thread.clone()));
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    let got = got["messages"].as_array().cloned().unwrap_or_default();
    let classes: Vec<(&Value, &Value)> = got.iter().map(|m| (&m["id"], &m["class"])).collect();
    assert_eq!(
        classes,
        [
            (&v["message"], &json!("REVIEW-RESULT")),
            (&answer["id"], &json!("INFO")),
        ]
    );

    // The pm asks the thread instance for a review: nothing to reply to,
    // so no thread to file it in.
    res(&push(&mut b, &pm));
    let before = row_counts(root.path());
    assert_eq!(
        err(&b.call(
            &pm,
            "review.request",
            json!({"task_ref": TASK, "commit": C1, "to": "helper"})
        )),
        "thread-required-reply-to-thread-message"
    );
    assert_eq!(row_counts(root.path()), before);
    let _ = b.op(json!({"op": "close"}));
}

#[test]
fn a_thread_runs_decisions_bind_to_its_thread() {
    let root = data_root();
    let mut b = boot_for_ends(root.path());
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..3).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let h2 = claimed_thread(&mut b, "h-2", procs[1].id(), &t2);
    let id_of = |v: &Value| {
        v["decision"]["id"]
            .as_str()
            .or(v["id"].as_str())
            .expect("id")
            .to_string()
    };

    // Raised in t1, resolved by the human: the close message is in t1.
    let d1 = id_of(res(&b.call(
        &h1,
        "decision.raise",
        raise("prd.approve", None),
    )));
    let closed = h.ok("decision.resolve", json!({"id": d1, "choice": "yes"}));
    let message = closed["message"]
        .as_str()
        .expect("close message")
        .to_string();
    let in_t1 = h.ok("thread.messages", json!({"thread": t1}));
    assert_eq!(ids(&in_t1["messages"]), std::slice::from_ref(&message));
    assert_eq!(in_t1["messages"][0]["class"], json!("DECISION"));
    let got = res(&b.call(&h1, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), [message]);
    assert_eq!(
        res(&b.call(&h2, "message.receive", Value::Null))["messages"],
        json!([])
    );

    // Only a run holding t1 uses it: the same instance in t2 is a mismatch.
    let auth = |cap: &str, d: &str| json!({"op": "authorize", "cap": cap, "action": "prd.approve", "decision": d});
    assert_eq!(err(&b.op(auth(&h2, &d1))), "decision-mismatch");
    assert_eq!(res(&b.op(auth(&h1, &d1)))["allowed"], json!(true));
    assert_eq!(err(&b.op(auth(&h1, &d1))), "decision-consumed");

    // A later run of t1 may use t1's approval; supersede stays in the thread.
    let d2 = id_of(res(&b.call(
        &h1,
        "decision.raise",
        raise("prd.approve", None),
    )));
    let mut over = raise("prd.approve", None);
    over["supersedes"] = json!(d2);
    assert_eq!(
        err(&b.call(&h2, "decision.raise", over.clone())),
        "supersede-refused"
    );
    h.ok("decision.resolve", json!({"id": d2, "choice": "yes"}));
    let d3 = id_of(res(&b.call(
        &h1,
        "decision.raise",
        raise("prd.approve", None),
    )));
    over["supersedes"] = json!(d3);
    res(&b.call(&h1, "decision.raise", over));
    let r = b.op(
        json!({"op": "endLaunch", "record": {"business": "acme", "run": "h-1", "reason": "done"}}),
    );
    assert_eq!(res(&r)["released"], json!(true));
    let h3 = claimed_thread(&mut b, "h-3", procs[2].id(), &t1);
    assert_eq!(res(&b.op(auth(&h3, &d2)))["allowed"], json!(true));
    let _ = b.op(json!({"op": "close"}));
}

/// A thread run (the assistant, holding its thread rather than the role)
/// is the bound holder of its thread's messages: `usage.begin`/`usage.end`
/// count its turn, the `usage` read answers it, and a message of another
/// thread is not its delivery.
#[test]
fn a_thread_run_accounts_its_turns() {
    let root = data_root();
    let files = tempfile::tempdir().expect("tempdir");
    let mut b = boot(root.path(), "Ada", false);
    let h = ShimSession::human(&b);
    let (thread, other) = plans_and_budget(&h);
    let asked = h.ok("thread.send", json!({"thread": thread, "body": "Draft"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let elsewhere = h.ok("thread.send", json!({"thread": other, "body": "Later"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let session = files.path().join("pi.jsonl");
    let p = sleeper();
    let mut rec = thread_launch("helper", "h-1", p.id(), &thread);
    rec["transcript"] = json!(session.to_str().unwrap());
    let r = b.op(json!({"op": "bindLaunch", "record": rec}));
    let cap = r["launch"]["cap"].as_str().expect("cap").to_string();
    res(&b.call(&cap, "role.claim", Value::Null));
    let got = res(&b.call(&cap, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), std::slice::from_ref(&asked));

    let begun = res(&b.call(&cap, "usage.begin", json!({"turn": asked}))).clone();
    assert_eq!(
        begun["sources"],
        json!([{"source": "pi", "baseline": true}])
    );
    let reply = json!({"type": "message", "id": "a1", "parentId": null,
        "timestamp": "2026-12-01T10:00:00.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                    "api": "openai-responses", "provider": "openai", "model": "gpt-5",
                    "usage": {"input": 11, "output": 7, "cacheRead": 5, "cacheWrite": 0,
                              "totalTokens": 23}, "stopReason": "stop", "timestamp": 1}});
    std::fs::write(&session, format!("{reply}\n")).unwrap();
    let ended = res(&b.call(&cap, "usage.end", json!({"turn": asked}))).clone();
    assert_eq!(
        ended["outcomes"],
        json!([{"source": "pi", "known": true, "provider": "openai", "model": "gpt-5",
                "account": null, "input": 11, "output": 7, "cacheWrite": 0, "cacheRead": 5}])
    );
    assert_eq!(
        err(&b.call(&cap, "usage.begin", json!({"turn": elsewhere}))),
        "not-delivered"
    );
    let read = res(&b.call(&cap, "usage", Value::Null)).clone();
    assert_eq!(
        read["byInstance"],
        json!([{"instance": "helper", "input": 11, "output": 7, "cacheWrite": 0,
                "cacheRead": 5, "unknownTurns": 0}])
    );
    b.close();
}

/// A thread-bound approval outlives a restart (L157): after it, a new run of
/// the same thread consumes it, the instance's run in another thread gets
/// `decision-mismatch`, and a second use `decision-consumed`.
#[test]
fn a_thread_bound_approval_outlives_a_restart() {
    let root = data_root();
    let mut b = boot_for_ends(root.path());
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..3).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let d = res(&b.call(&h1, "decision.raise", raise("prd.approve", None))).clone();
    let id = d["decision"]["id"]
        .as_str()
        .or(d["id"].as_str())
        .expect("id")
        .to_string();
    h.ok("decision.resolve", json!({"id": id, "choice": "yes"}));
    let r = b.op(
        json!({"op": "endLaunch", "record": {"business": "acme", "run": "h-1", "reason": "done"}}),
    );
    assert_eq!(res(&r)["released"], json!(true));
    b.close();

    let mut b = boot_for_ends(root.path());
    let auth =
        |cap: &str| json!({"op": "authorize", "cap": cap, "action": "prd.approve", "decision": id});
    let other = claimed_thread(&mut b, "h-3", procs[2].id(), &t2);
    assert_eq!(err(&b.op(auth(&other))), "decision-mismatch");
    let next = claimed_thread(&mut b, "h-2", procs[1].id(), &t1);
    assert_eq!(res(&b.op(auth(&next)))["allowed"], json!(true));
    assert_eq!(err(&b.op(auth(&next))), "decision-consumed");
    let _ = b.op(json!({"op": "close"}));
}
