//! How threads end: the assistant's end revokes its held threads, a chief that lost its role ends none, thread runs release, restart and stop (3i L108-L113, L237).

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;
#[path = "support/threads_env.rs"]
mod threads_env;
use threads_env::{
    bind_thread, boot_for_ends, businesses, claimed_thread, count, ids, plans_and_budget, raise,
    state_of,
};

#[test]
fn ending_the_assistant_revokes_its_held_threads() {
    let root = data_root();
    let mut b = boot_for_ends(root.path());
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..8).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let h2 = claimed_thread(&mut b, "h-2", procs[1].id(), &t2);
    let chief = b.claimed("chief", "chief-1", procs[2].id());
    let pm = b.claimed("pm", "pm-1", procs[3].id());
    let dev = b.claimed("dev", "dev-1", procs[4].id());

    // A reason: only the chief of staff's ends the assistant (Q169).
    let reason = json!({"role": "helper", "reason": "the day is over"});
    assert_eq!(
        err(&b.call(&dev, "role.revoke", reason.clone())),
        "decision-required"
    );
    assert_eq!(
        err(&b.call(&pm, "role.revoke", reason.clone())),
        "role-end-refused"
    );
    let r = res(&b.call(&chief, "role.revoke", reason.clone())).clone();
    assert_eq!(r, json!({"revoked": true, "threads": 2}));
    // Each revoked run is told at its next call, and can't claim again.
    assert_eq!(
        err(&b.call(&h1, "message.receive", Value::Null)),
        "not-holder"
    );
    assert_eq!(
        err(&b.call(&h2, "message.send", json!({"to": "human", "body": "x"}))),
        "not-holder"
    );
    assert_eq!(err(&b.call(&h1, "role.claim", Value::Null)), "run-revoked");
    assert_eq!(
        count(
            root.path(),
            "SELECT count(*) FROM thread_claims WHERE op = 'revoke' AND reason = 'the day is over' AND by = 'chief-1'"
        ),
        2
    );
    assert_eq!(
        err(&b.call(&chief, "role.revoke", reason.clone())),
        "not-held"
    );

    // assistant.stop: the human, for the threads they made.
    let h3 = claimed_thread(&mut b, "h-3", procs[5].id(), &t1);
    assert_eq!(
        err(&h.call("assistant.stop", json!({"instance": "pm"}))),
        "not-assistant"
    );
    assert_eq!(
        err(&h.call("assistant.stop", json!({"instance": "nobody"}))),
        "unknown-role"
    );
    assert_eq!(
        err(&b.call(&chief, "assistant.stop", json!({"instance": "helper"}))),
        "human-required"
    );
    let stopped = h.ok("assistant.stop", json!({"instance": "helper"}));
    assert_eq!(stopped, json!({"stopped": [{"thread": t1, "run": "h-3"}]}));
    assert_eq!(
        err(&b.call(&h3, "message.receive", Value::Null)),
        "not-holder"
    );
    assert_eq!(
        err(&h.call("assistant.stop", json!({"instance": "helper"}))),
        "not-held"
    );
    assert_eq!(
        count(
            root.path(),
            "SELECT count(*) FROM thread_claims WHERE op = 'revoke' AND reason = 'stopped by the human' AND by = 'Ada'"
        ),
        1
    );

    // A decision: gated at every class, so it routes to the human even
    // for the chief, who holds role.revoke cross-role; it records no holder.
    let d = res(&b.call(
        &chief,
        "decision.raise",
        raise("role.revoke", Some("helper")),
    ))
    .clone();
    let id = d["decision"]["id"]
        .as_str()
        .or(d["id"].as_str())
        .expect("id")
        .to_string();
    let (class, routed, holder): (String, String, Option<String>) = db(root.path())
        .query_row(
            "SELECT class, routed_to, target_holder FROM decisions WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("decision");
    assert_eq!(
        (class.as_str(), routed.as_str(), holder),
        ("gated", "human", None)
    );
    let _h4 = claimed_thread(&mut b, "h-4", procs[6].id(), &t2);
    // Not resolved yet.
    assert_eq!(
        err(&b.call(
            &chief,
            "role.revoke",
            json!({"role": "helper", "decision": id})
        )),
        "decision-not-approved"
    );
    h.ok("decision.resolve", json!({"id": id, "choice": "yes"}));
    let r = res(&b.call(
        &chief,
        "role.revoke",
        json!({"role": "helper", "decision": id}),
    ))
    .clone();
    assert_eq!(r, json!({"revoked": true, "threads": 1}));
    assert_eq!(
        count(
            root.path(),
            &format!("SELECT count(*) FROM thread_claims WHERE op = 'revoke' AND decision = '{id}' AND run = 'h-4'")
        ),
        1
    );
    let _h5 = claimed_thread(&mut b, "h-5", procs[7].id(), &t2);
    assert_eq!(
        err(&b.call(
            &chief,
            "role.revoke",
            json!({"role": "helper", "decision": id})
        )),
        "decision-consumed"
    );
    let _ = b.op(json!({"op": "close"}));
}

/// 3i L68 and L237: a chief of staff whose role was released or revoked
/// (its run still bound) ends none of the assistant's threads with its
/// reason (`not-holder`); and a spent approval to end the assistant is
/// `decision-consumed` through `role.revoke` even with no thread held
/// (L157; before, `not-held`).
#[test]
fn a_chief_that_no_longer_holds_its_role_ends_no_thread() {
    let root = data_root();
    let mut b = boot_for_ends(root.path());
    let h = ShimSession::human(&b);
    let (t1, _) = plans_and_budget(&h);
    let procs: Vec<_> = (0..4).map(|_| sleeper()).collect();
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let chief = b.claimed("chief", "chief-1", procs[1].id());
    let pm = b.claimed("pm", "pm-1", procs[2].id());
    let reason = json!({"role": "helper", "reason": "the day is over"});
    let revokes = |root: &Path| {
        count(
            root,
            "SELECT count(*) FROM thread_claims WHERE op = 'revoke'",
        )
    };

    // Released: its reason ends nothing.
    res(&b.call(&chief, "role.release", Value::Null));
    assert_eq!(
        err(&b.call(&chief, "role.revoke", reason.clone())),
        "not-holder"
    );
    assert_eq!(revokes(root.path()), 0);
    res(&b.call(&h1, "message.receive", Value::Null));
    // Revoked (pm ends it with its own role.end): still nothing.
    res(&b.call(&chief, "role.claim", Value::Null));
    res(&b.call(
        &pm,
        "role.revoke",
        json!({"role": "chief", "reason": "away"}),
    ));
    assert_eq!(
        err(&b.call(&chief, "role.revoke", reason.clone())),
        "not-holder"
    );
    assert_eq!(revokes(root.path()), 0);
    res(&b.call(&h1, "message.receive", Value::Null));

    // A decision the human resolved through the CLI, spent once by a
    // chief that holds its role; then used again with no thread held.
    let chief2 = b.claimed("chief", "chief-2", procs[3].id());
    let d = res(&b.call(
        &chief2,
        "decision.raise",
        raise("role.revoke", Some("helper")),
    ))
    .clone();
    h.ok("decision.resolve", json!({"id": d["id"], "choice": "yes"}));
    let with = json!({"role": "helper", "decision": d["id"]});
    assert_eq!(
        res(&b.call(&chief2, "role.revoke", with.clone())).clone(),
        json!({"revoked": true, "threads": 1})
    );
    assert_eq!(
        err(&b.call(&chief2, "role.revoke", with)),
        "decision-consumed"
    );
    let _ = b.op(json!({"op": "close"}));
}

/// Claims of issue 20 no other test asserted: a name for the thread
/// instance, `lastOpen`, a thread run's own release, the human's withdraw
/// filed in the thread, a revoked thread run after a restart, a held claim
/// kept over a restart, and `assistant.stop` by a user who made no thread.
#[test]
fn thread_runs_release_restart_and_stop_as_the_spec_says() {
    let root = data_root();
    let mut b = boot_for_ends(root.path());
    let h = ShimSession::human(&b);
    let (t1, t2) = plans_and_budget(&h);
    let procs: Vec<_> = (0..4).map(|_| sleeper()).collect();
    // A name resolves to its instance before any check.
    h.ok("name.set", json!({"instance": "helper", "name": "sunny"}));
    assert_eq!(
        err(&h.call("message.send", json!({"to": "sunny", "body": "hi"}))),
        "thread-required-use-thread-send"
    );
    let opened = h.ok("thread.open", json!({"thread": t1}));
    assert_eq!(state_of(&mut b, &t1)["lastOpen"], opened["opened"]);
    assert_eq!(
        err(&h.call("thread.messages", json!({"thread": "nope"}))),
        "thread-not-found"
    );

    // role.release by a thread run releases its thread claim.
    let h1 = claimed_thread(&mut b, "h-1", procs[0].id(), &t1);
    let rel = res(&b.call(&h1, "role.release", Value::Null)).clone();
    assert_eq!(
        (&rel["op"], &rel["thread"]),
        (&json!("release"), &json!(t1))
    );
    assert_eq!(
        err(&b.call(&h1, "message.receive", Value::Null)),
        "not-holder"
    );
    assert_eq!(state_of(&mut b, &t1)["holder"], Value::Null);

    // The human's withdraw of a thread run's decision is filed in its thread
    // with the withdraw's human.input as request; the run's own sends none.
    let h2 = claimed_thread(&mut b, "h-2", procs[1].id(), &t2);
    let id_of = |v: &Value| {
        v["decision"]["id"]
            .as_str()
            .or(v["id"].as_str())
            .expect("id")
            .to_string()
    };
    let d = id_of(res(&b.call(
        &h2,
        "decision.raise",
        raise("prd.approve", None),
    )));
    let w = h.ok("decision.withdraw", json!({"id": d}));
    let in_t2 = h.ok("thread.messages", json!({"thread": t2}));
    assert_eq!(
        ids(&in_t2["messages"]),
        [w["message"].as_str().expect("message")]
    );
    assert_eq!(in_t2["messages"][0]["class"], json!("DECISION"));
    assert_eq!(in_t2["messages"][0]["request"], w["input"]);
    let got = res(&b.call(&h2, "message.receive", Value::Null)).clone();
    assert_eq!(ids(&got["messages"]), ids(&in_t2["messages"]));
    let own = id_of(res(&b.call(
        &h2,
        "decision.raise",
        raise("prd.approve", None),
    )));
    assert_eq!(
        res(&b.call(&h2, "decision.withdraw", json!({"id": own})))["message"],
        Value::Null
    );

    // h-2 revoked, h-3 holding t1: over a restart the revoked run can't claim
    // again and the holder still holds.
    let chief = b.claimed("chief", "chief-1", procs[2].id());
    let r = res(&b.call(
        &chief,
        "role.revoke",
        json!({"role": "helper", "reason": "bye"}),
    ))
    .clone();
    assert_eq!(r, json!({"revoked": true, "threads": 1}));
    // The reason is logged in the action.allowed body (L68).
    assert_eq!(
        count(
            root.path(),
            "SELECT count(*) FROM events WHERE kind = 'action.allowed' AND run = 'chief-1'
               AND json_extract(body, '$.action') = 'role.revoke'
               AND json_extract(body, '$.target') = 'helper'
               AND json_extract(body, '$.reason') = 'bye'"
        ),
        1
    );
    claimed_thread(&mut b, "h-3", procs[3].id(), &t1);
    b.close();
    let mut b = boot_for_ends(root.path());
    assert_eq!(state_of(&mut b, &t1)["holder"], json!("h-3"));
    let h2 = bind_thread(&mut b, "h-2", procs[1].id(), &t2);
    assert_eq!(err(&b.call(&h2, "role.claim", Value::Null)), "run-revoked");
    let h3 = bind_thread(&mut b, "h-3", procs[3].id(), &t1);
    assert_eq!(
        res(&b.call(&h3, "message.receive", Value::Null))["messages"],
        json!([])
    );
    b.close();

    // Another user stops only the threads they made: none here.
    let mut biz = businesses("Ben", false);
    biz["acme"]["roles"]["chief"]["authority"]["crossRole"] = json!(["role.revoke"]);
    let (mut b, reply) = Broker::spawn(
        root.path(),
        json!({"dataRoot": root.path().to_str().expect("utf-8"), "businesses": biz}),
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let ben = ShimSession::human(&b);
    assert_eq!(
        err(&ben.call("assistant.stop", json!({"instance": "helper"}))),
        "not-held"
    );
    assert_eq!(state_of(&mut b, &t1)["holder"], json!("h-3"));
    let _ = b.op(json!({"op": "close"}));
}
