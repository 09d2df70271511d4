//! `role.revoke` on real brokers: the approval for this target and holder,
//! the reason path for a role whose authority lists it, its evidence, a
//! holder that lost its role, and a spent approval (3i L68, L157, L237).

use mosaic_tests::*;
use serde_json::{json, Value};

#[path = "support/decisions_env.rs"]
mod decisions_env;
use decisions_env::{business, Env};

#[test]
fn role_revoke_needs_the_approval_for_this_target_and_holder() {
    let mut e = Env::new();
    // dev may revoke across roles: routed to pm; the decision records qa's holder.
    let d = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}));
    assert_eq!(d["target_holder"], json!("qa-1"));
    assert_eq!(d["routed_to"], json!("pm"));
    let id = d["id"].clone();
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "qa", "decision": id}))),
        "decision-not-approved"
    );
    let r = e.resolve("pm", &id, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.call(
            "dev",
            "role.revoke",
            json!({"role": "nobody", "decision": id})
        )),
        "unknown-role"
    );
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "cto", "decision": id}))),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.call("pm", "role.revoke", json!({"role": "qa", "decision": id}))),
        "decision-mismatch"
    );
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "qa"}))),
        "invalid-request"
    );
    let r = e.call("dev", "role.revoke", json!({"role": "qa", "decision": id}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["result"]["run"], json!("qa-1"));
    // The revoked run never claims that role again, also after a restart.
    assert_eq!(err(&e.call("qa", "role.claim", Value::Null)), "run-revoked");
    e.restart(business());
    assert_eq!(err(&e.call("qa", "role.claim", Value::Null)), "run-revoked");
    // The approval was spent: no other path uses it.
    assert_eq!(
        err(&e.authorize("dev", "role.revoke", Some("qa"), Some(&id))),
        "decision-consumed"
    );
}

#[test]
fn role_revoke_refuses_another_holder_incarnation_and_a_spent_approval() {
    let mut e = Env::new();
    let d = e.raised("dev", json!({"action": "role.revoke", "target": "cto"}))["id"].clone();
    let r = e.resolve("pm", &d, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    // cto-1 releases; a new run cto-2 claims: another incarnation.
    let r = e.call("cto", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true));
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "cto", "decision": d}))),
        "not-held"
    );
    let mut p2 = sleeper();
    let cap2 = e.broker().bind("cto", "cto-2", p2.id());
    let r = e.broker().call(&cap2, "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "cto", "decision": d}))),
        "decision-mismatch"
    );
    let _ = p2.kill();
    let _ = p2.wait();

    // Spent through authorize first: role.revoke then refuses decision-consumed.
    let q = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}))["id"].clone();
    let r = e.resolve("pm", &q, "yes");
    assert_eq!(r["ok"], json!(true));
    let r = e.authorize("dev", "role.revoke", Some("qa"), Some(&q));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.call("dev", "role.revoke", json!({"role": "qa", "decision": q}))),
        "decision-consumed"
    );
    // qa still holds its role: the refused revoke wrote nothing.
    let r = e.call("qa", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
}

#[test]
fn role_revoke_writes_its_evidence_and_frees_the_role() {
    let mut e = Env::new();
    let id = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}))["id"].clone();
    let r = e.resolve("pm", &id, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = e.call("dev", "role.revoke", json!({"role": "qa", "decision": id}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let ids = id.as_str().unwrap();
    // One transaction wrote the three rows: the consumption by the revoking
    // run, the action.allowed with the target as subject, and the revoke
    // claim row naming the revoked run, the decision and who revoked.
    let (by, run): (String, String) = e
        .db()
        .query_row(
            "SELECT by, run FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            [ids],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((by.as_str(), run.as_str()), ("dev-1", "dev-1"));
    let event = r["result"]["event"].as_str().unwrap().to_string();
    let (kind, erun, subject, body) = e.event_row(&event);
    assert_eq!((kind.as_str(), erun.as_str()), ("action.allowed", "dev-1"));
    assert_eq!(subject.as_deref(), Some("qa"));
    assert_eq!(
        body,
        json!({"action": "role.revoke", "class": "cross-role", "target": "qa", "decision": ids})
    );
    let claim: (String, String, Option<String>, Option<String>) = e
        .db()
        .query_row(
            "SELECT run, op, decision, by FROM role_claims WHERE role = 'qa' ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        claim,
        (
            "qa-1".into(),
            "revoke".into(),
            Some(ids.to_string()),
            Some("dev-1".into())
        )
    );
    // The revoked run no longer holds: it cannot release or act as the role.
    assert_eq!(
        err(&e.call("qa", "role.release", Value::Null)),
        "not-holder"
    );
    // Its end then releases nothing.
    let r = e.broker().op(json!({"op": "endLaunch",
        "record": {"business": "acme", "run": "qa-1", "reason": "revoked"}}));
    assert_eq!(r["result"]["released"], json!(false), "{r}");
    // The role is free: a new run of it claims.
    let p2 = sleeper();
    let cap2 = e.broker().bind("qa", "qa-2", p2.id());
    let r = e.broker().call(&cap2, "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
}

#[test]
fn role_revoke_with_a_reason_is_only_for_a_role_that_lists_role_end() {
    let mut b = business();
    b["roles"]["pm"]["authority"]["withinRole"] =
        json!(["message.send", "record.write", "role.end"]);
    // An instance of the thread definition (nobody binds it here).
    b["roles"]["aide"] = json!({"definition": "assistant",
                                "authority": {"withinRole": [], "crossRole": []}});
    let e = Env::with(b);
    let d = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}))["id"].clone();
    // Any other role sending a reason needs a decision.
    assert_eq!(
        err(&e.call(
            "dev",
            "role.revoke",
            json!({"role": "qa", "reason": "stuck in a loop"})
        )),
        "decision-required"
    );
    // Both, or a malformed reason: invalid-request.
    assert_eq!(
        err(&e.call(
            "dev",
            "role.revoke",
            json!({"role": "qa", "decision": d, "reason": "stuck"})
        )),
        "invalid-request"
    );
    for bad in [json!(""), json!(5), json!("x".repeat(501))] {
        for caller in ["dev", "pm"] {
            assert_eq!(
                err(&e.call(caller, "role.revoke", json!({"role": "qa", "reason": bad}))),
                "invalid-request",
                "{caller} {bad}"
            );
        }
    }
    // The role.end holder may not end its own run, nor the assistant unless
    // it is the chief of staff (Q169: pm is not); an unknown role is unknown.
    assert_eq!(
        err(&e.call("pm", "role.revoke", json!({"role": "pm", "reason": "done"}))),
        "role-end-refused"
    );
    assert_eq!(
        err(&e.call(
            "pm",
            "role.revoke",
            json!({"role": "aide", "reason": "done"})
        )),
        "role-end-refused"
    );
    assert_eq!(
        err(&e.call(
            "pm",
            "role.revoke",
            json!({"role": "nobody", "reason": "done"})
        )),
        "unknown-role"
    );
    // Nothing was written by any of those: qa still holds its role.
    let before: i64 = e
        .db()
        .query_row("SELECT count(*) FROM role_claims", [], |r| r.get(0))
        .unwrap();
    // The role.end path (3d): the reason ends qa's run without a decision.
    let reason = "stuck in a loop — ending it";
    let r = e.call("pm", "role.revoke", json!({"role": "qa", "reason": reason}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let res = &r["result"];
    assert_eq!(
        (&res["role"], &res["run"], &res["op"], &res["reason"]),
        (
            &json!("qa"),
            &json!("qa-1"),
            &json!("revoke"),
            &json!(reason)
        )
    );
    let event = res["event"].as_str().unwrap().to_string();
    let (kind, erun, subject, body) = e.event_row(&event);
    assert_eq!((kind.as_str(), erun.as_str()), ("action.allowed", "pm-1"));
    assert_eq!(subject.as_deref(), Some("qa"));
    assert_eq!(
        body,
        json!({"action": "role.revoke", "class": "within-role", "target": "qa", "reason": reason})
    );
    let claim: (
        i64,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
    ) = e
        .db()
        .query_row(
            "SELECT (SELECT count(*) FROM role_claims), run, op, decision, by, reason
             FROM role_claims WHERE role = 'qa' ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        claim,
        (
            before + 1,
            "qa-1".into(),
            "revoke".into(),
            None,
            Some("pm-1".into()),
            Some(reason.into())
        )
    );
    assert_eq!(
        err(&e.call("qa", "role.release", Value::Null)),
        "not-holder"
    );
    // A role nobody holds now: not-held.
    assert_eq!(
        err(&e.call(
            "pm",
            "role.revoke",
            json!({"role": "qa", "reason": "again"})
        )),
        "not-held"
    );
}

/// 3i L68 and L237: a caller that doesn't hold its role has no powers. A
/// run whose role was released, or revoked, while its capability is still
/// bound ends nobody with `role.revoke {role, reason}` (`not-holder`, and
/// nothing written), nor with a decision.
#[test]
fn a_run_that_no_longer_holds_its_role_ends_nobody() {
    let mut b = business();
    for r in ["pm", "cto"] {
        let within = b["roles"][r]["authority"]["withinRole"].clone();
        let mut within: Vec<Value> = within.as_array().cloned().unwrap_or_default();
        within.push(json!("role.end"));
        b["roles"][r]["authority"]["withinRole"] = Value::Array(within);
    }
    let e = Env::with(b);
    let approval = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}))["id"].clone();
    let r = e.resolve("pm", &approval, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    let claims = || -> i64 {
        e.db()
            .query_row("SELECT count(*) FROM role_claims", [], |r| r.get(0))
            .unwrap()
    };
    let allowed = || -> i64 {
        e.db()
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'action.allowed'
                 AND json_extract(body, '$.action') = 'role.revoke'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };

    // Released: pm-1 is still bound, but holds nothing.
    let r = e.call("pm", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    let (before, events) = (claims(), allowed());
    assert_eq!(
        err(&e.call("pm", "role.revoke", json!({"role": "qa", "reason": "stop"}))),
        "not-holder"
    );
    // Revoked: cto ends dev with its reason; dev-1 then can't use its
    // approval either.
    let r = e.call(
        "cto",
        "role.revoke",
        json!({"role": "dev", "reason": "done"}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    let (before, events) = (before + 1, events + 1);
    assert_eq!(
        err(&e.call(
            "dev",
            "role.revoke",
            json!({"role": "qa", "decision": approval})
        )),
        "not-holder"
    );
    // Revoked, by a run holding its role: pm claims again and ends cto.
    let r = e.call("pm", "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = e.call(
        "pm",
        "role.revoke",
        json!({"role": "cto", "reason": "done"}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    let (before, events) = (before + 2, events + 1);
    assert_eq!(
        err(&e.call(
            "cto",
            "role.revoke",
            json!({"role": "qa", "reason": "stop"})
        )),
        "not-holder"
    );
    assert_eq!(
        (claims(), allowed()),
        (before, events),
        "the refused ends wrote nothing"
    );
    // qa still holds its role.
    let holder: String = e
        .db()
        .query_row(
            "SELECT run FROM role_claims WHERE role = 'qa' ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(holder, "qa-1");
    let r = e.call("qa", "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "qa held its role: {r}");
}

/// 3i L157: a spent `role.revoke` approval answers `decision-consumed` on a
/// later use through `role.revoke` too, as through `authorize` and
/// `message.send`: while its target is held by nobody (before: `not-held`)
/// and once another run holds it (before: `decision-mismatch`).
#[test]
fn a_spent_revoke_approval_is_decision_consumed_through_role_revoke() {
    let mut e = Env::new();
    let d = e.raised("dev", json!({"action": "role.revoke", "target": "qa"}))["id"].clone();
    let r = e.resolve("pm", &d, "yes");
    assert_eq!(r["ok"], json!(true), "{r}");
    let revoke = json!({"role": "qa", "decision": d});
    let r = e.call("dev", "role.revoke", revoke.clone());
    assert_eq!(r["ok"], json!(true), "{r}");
    // Nobody holds qa now.
    assert_eq!(
        err(&e.call("dev", "role.revoke", revoke.clone())),
        "decision-consumed"
    );
    // A new run holds it.
    let p2 = sleeper();
    let cap2 = e.broker().bind("qa", "qa-2", p2.id());
    let r = e.broker().call(&cap2, "role.claim", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        err(&e.call("dev", "role.revoke", revoke.clone())),
        "decision-consumed"
    );
    // After a restart too.
    e.restart(business());
    assert_eq!(
        err(&e.call("dev", "role.revoke", revoke)),
        "decision-consumed"
    );
    // qa-2 still holds qa: the refusals revoked nothing.
    let cap2 = e.broker().bind("qa", "qa-2", p2.id());
    let r = e.broker().call(&cap2, "role.release", Value::Null);
    assert_eq!(r["ok"], json!(true), "{r}");
}
