//! Landing on a project's main (3i row 137, #1631) through real brokers:
//! the git socket's `checkLand`, `recordLand`, `landRefused` and `landHeld`
//! host ops, after a push, a review and a cross-role decision the human
//! resolved through the real human shim (or the arbiter through the bus).

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/landing_env.rs"]
mod landing_env;
use landing_env::{business, env, land, pair, Env, C1, C2, MAIN0, MAIN1, OTHER, PATCH, TASK};

/// The whole path: push, review request, approving verdict, a cross-role
/// raise the human resolves through the shim, `checkLand`, `recordLand`;
/// then the spent decision opens nothing again, on any path, also after a
/// restart.
/// 3i L48 and L71: a cross-role merge decision routed to the arbiter may be
/// resolved by the human through the CLI; the ticket and the landing record
/// then say `via: cli`, and the close says the human resolved it.
#[test]
fn a_decision_routed_to_the_arbiter_and_resolved_by_the_human_lands_via_cli() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    let routed: String = db(e.root.path())
        .query_row(
            "SELECT routed_to FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| r.get(0),
        )
        .expect("decision row");
    assert_eq!(routed, "pm");
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": d, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r}");
    assert_eq!(r["result"]["closed"]["by"], json!("Ada"));
    let ticket = e.ticket("dev", TASK, &d);
    assert_eq!(ticket["resolution"]["via"], json!("cli"));
    let out = res(&e.record(&ticket["id"], land(MAIN1, C1))).clone();
    let rec = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("landing record on the task's trail");
    assert_eq!(rec["body"]["via"], json!("cli"));
    let closes: Vec<Value> = e
        .receive("dev")
        .into_iter()
        .filter(|m| m["class"] == json!("DECISION"))
        .collect();
    assert_eq!(closes.len(), 1, "{closes:?}");
    assert_eq!(closes[0]["from_role"], json!("human"));
    assert!(
        closes[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("was resolved by Ada: yes (Land)")),
        "{closes:?}"
    );
}

#[test]
fn a_reviewed_task_lands_once_with_the_humans_approval() {
    let mut e = env();
    e.push("pm", TASK, C1);
    let verdict = e.reviewed("pm", TASK, C1, "approve");
    assert_eq!(e.held("pm", None), json!(false), "no decision yet");

    // pm is the delivery arbiter: its cross-role raise is the human's to resolve.
    let d = e.raise("pm", "git.merge.protected", TASK, json!({}));
    let row = db(e.root.path())
        .query_row(
            "SELECT class, routed_to FROM decisions WHERE id = ?1",
            [d.as_str().expect("id")],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .expect("decision row");
    assert_eq!(row, ("cross-role".to_string(), "human".to_string()));
    assert_eq!(e.held("pm", None), json!(false), "open");
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": d, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r} {}", e.b.stderr());
    assert_eq!(e.held("pm", None), json!(true));
    assert_eq!(e.held("dev", None), json!(false), "another role's approval");
    assert_eq!(
        e.held("pm", Some("t-1")),
        json!(false),
        "raised in no thread"
    );

    // checkLand hands out a ticket and writes nothing.
    let before = row_counts(e.root.path());
    let ticket = e.ticket("pm", TASK, &d);
    assert_eq!(row_counts(e.root.path()), before);
    let id = ticket["id"].clone();
    assert!(id.as_str().is_some_and(|s| s.len() == 36), "{ticket}");
    assert_eq!(
        ticket,
        json!({"id": id, "project": "site", "ref": "refs/heads/work/41", "commit": C1,
               "verdict": verdict,
               "resolution": {"decision": d, "option": "yes", "via": "cli"}})
    );

    // recordLand spends the decision and tells pm.
    let r = e.record(&id, land(MAIN1, C1));
    let out = res(&r).clone();
    assert_eq!(e.consumed(&d), 1);
    let trail = e.trail(TASK);
    let rec = trail
        .iter()
        .find(|x| x["id"] == out["event"])
        .expect("landing record on the task's trail");
    assert_eq!(rec["kind"], json!("action.allowed"));
    assert_eq!((&rec["role"], &rec["run"]), (&json!("pm"), &json!("pm-1")));
    assert_eq!(
        rec["body"],
        json!({"action": "git.merge.protected", "class": "cross-role", "target": TASK,
               "decision": d, "via": "cli", "project": "site", "ref": "refs/heads/work/41",
               "verdict": verdict, "commit": MAIN1, "previous": MAIN0, "reviewed": C1,
               "base": MAIN0, "patch_id": PATCH})
    );
    let got = e.receive("pm");
    let result: Vec<&Value> = got
        .iter()
        .filter(|m| m["from_role"] == json!("_bus"))
        .collect();
    assert_eq!(result.len(), 1, "{got:?}");
    assert_eq!(result[0]["id"], out["message"]);
    assert_eq!(result[0]["class"], json!("RESULT"));
    assert_eq!(result[0]["decision"], d);
    let text = result[0]["body"].as_str().expect("body");
    for part in [TASK, "site", MAIN1, MAIN0, d.as_str().expect("id")] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert_eq!(e.held("pm", None), json!(false), "spent");
    assert!(e.refusals(TASK).is_empty());

    // Spent: every path refuses it now.
    let spent = |e: &mut Env| {
        assert_eq!(
            err(&e.record(&id, land(MAIN1, C1))),
            "land-unknown",
            "the ticket ended"
        );
        assert_eq!(
            err(&e.check("pm", json!({"task_ref": TASK, "decision": d}))),
            "decision-consumed"
        );
        let r = e.op(
            "pm",
            json!({"op": "authorize", "action": "git.merge.protected", "target": TASK,
                   "decision": d}),
        );
        assert_eq!(err(&r), "decision-consumed");
        // message.send is cross-role for pm, and a merge approval is no
        // message approval: the shared helper matches the action first.
        assert_eq!(
            err(&e.call(
                "pm",
                "message.send",
                json!({"to": "cto", "body": "merged", "decision": d})
            )),
            "decision-mismatch"
        );
        assert_eq!(e.held("pm", None), json!(false));
        assert_eq!(e.consumed(&d), 1);
    };
    spent(&mut e);
    let mut e = e.restart(business());
    spent(&mut e);
    assert_eq!(
        e.refusals(TASK),
        vec![
            pair("checkLand", "decision-consumed"),
            pair("checkLand", "decision-consumed")
        ]
    );
    e.b.close();
}

/// Every `checkLand` refusal has its code, writes nothing but its
/// `action.refused` on the task's trail (none without a caller), and opens
/// no ticket.
#[test]
fn check_land_refuses_with_the_specs_codes() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    // dev's cross-role raise goes to pm, the delivery arbiter.
    let approve = |e: &Env, action: &str, target: &str| {
        let d = e.raise("dev", action, target, json!({}));
        e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
        d
    };
    let d = approve(&e, "git.merge.protected", TASK);

    // No caller: nothing is written.
    let before = row_counts(e.root.path());
    let r = e
        .b
        .op(json!({"op": "checkLand", "cap": "nope", "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "unknown-capability");
    let reader = e.b.reader_cap();
    let r = e
        .b
        .op(json!({"op": "checkLand", "cap": reader, "args": {"task_ref": TASK, "decision": d}}));
    assert_eq!(err(&r), "read-only");
    // Malformed ops never reach a caller either.
    for op in [
        json!({"op": "checkLand", "cap": e.caps["dev"]}),
        json!({"op": "checkLand", "cap": e.caps["dev"], "args": [TASK]}),
        json!({"op": "checkLand", "cap": e.caps["dev"], "args": {}, "task_ref": TASK}),
    ] {
        assert_eq!(err(&e.b.op(op.clone())), "invalid-request", "{op}");
    }
    assert_eq!(row_counts(e.root.path()), before);

    // No subject: an agent's landing always names its task.
    for args in [
        json!({"decision": d}),
        json!({"task_ref": null, "decision": d}),
    ] {
        assert_eq!(err(&e.check("dev", args)), "no-subject");
    }
    for args in [
        json!({"task_ref": "site", "decision": d}),
        json!({"task_ref": TASK}),
        json!({"task_ref": TASK, "decision": 7}),
        json!({"task_ref": TASK, "decision": d, "verdict": "v"}),
    ] {
        assert_eq!(
            err(&e.check("dev", args.clone())),
            "invalid-request",
            "{args}"
        );
    }
    let nothing = "01890000-0000-7000-8000-000000000000";
    for id in [json!(nothing), json!("not-a-uuid")] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": id}))),
            "decision-not-found"
        );
    }

    // not-authorized: another task, another role, another action, and a
    // gated decision even though the human approved it.
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": d}))),
        "not-authorized",
        "the decision targets another task"
    );
    assert_eq!(
        err(&e.check("pm", json!({"task_ref": TASK, "decision": d}))),
        "not-authorized",
        "raised by dev"
    );
    let close = approve(&e, "task.close", TASK);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": close}))),
        "not-authorized",
        "a task.close approval"
    );
    let gated = e.raise("qa", "git.merge.protected", TASK, json!({}));
    let r = e.human(
        "acme",
        "decision.resolve",
        json!({"id": gated, "choice": "yes"}),
    );
    assert_eq!(r["ok"], json!(true), "human resolve: {r}");
    assert_eq!(
        err(&e.check("qa", json!({"task_ref": TASK, "decision": gated}))),
        "not-authorized",
        "gated"
    );

    // decision-consumed: open, another option, withdrawn.
    let open = e.raise("dev", "git.merge.protected", TASK, json!({}));
    let no = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": no, "choice": "no"}));
    let gone = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("dev", "decision.withdraw", json!({"id": gone}));
    for (name, id) in [("open", &open), ("no", &no), ("withdrawn", &gone)] {
        assert_eq!(
            err(&e.check("dev", json!({"task_ref": TASK, "decision": id}))),
            "decision-consumed",
            "{name}"
        );
    }

    // The commit rule: a verdict must approve the task's latest push.
    e.push("dev", OTHER, C1);
    let other = approve(&e, "git.merge.protected", OTHER);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "verdict-not-found"
    );
    e.reviewed("dev", OTHER, C1, "changes");
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "verdict-not-approve"
    );
    e.reviewed("dev", OTHER, C1, "approve");
    e.ticket("dev", OTHER, &other);
    e.push("dev", OTHER, C2);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": OTHER, "decision": other}))),
        "ref-moved",
        "pushed again after the approval"
    );

    // not-holder: the run released its role.
    e.ok("dev", "role.release", Value::Null);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "not-holder"
    );
    e.ok("dev", "role.claim", Value::Null);
    let ticket = e.ticket("dev", TASK, &d);
    assert_eq!(
        ticket["resolution"]["via"],
        json!("broker"),
        "pm resolved it"
    );

    // After a restart with dev's merge authority gone, its approval no
    // longer matches current policy; and a push to a project the business
    // no longer declares lands nowhere.
    let mut changed = business();
    changed["roles"]["dev"]["authority"]["crossRole"] = json!(["task.close"]);
    changed["projects"] = json!({"docs": {"repo": "/srv/records/docs"}});
    let mut e = e.restart(changed);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "decision-mismatch"
    );
    let pm = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pm, "choice": "yes"}),
    );
    e.reviewed("dev", OTHER, C2, "approve");
    assert_eq!(
        err(&e.check("pm", json!({"task_ref": OTHER, "decision": pm}))),
        "unknown-project"
    );

    let want: Vec<(String, String)> = [
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "decision-not-found",
        "decision-not-found",
        "not-authorized",
        "not-authorized",
        "not-authorized",
        "decision-consumed",
        "decision-consumed",
        "decision-consumed",
        "not-holder",
        "decision-mismatch",
    ]
    .iter()
    .map(|c| pair("checkLand", c))
    .collect();
    assert_eq!(e.refusals(TASK), want);
    // A refusal without a task ref lands on no trail.
    let unfiled = e.count(
        "SELECT count(*) FROM events WHERE kind = 'action.refused' AND subject IS NULL
           AND json_extract(body, '$.op') = ?1",
        "checkLand",
    );
    assert_eq!(unfiled, 3, "no-subject twice, and a task ref that is none");
    assert_eq!(
        e.refusals(OTHER),
        [
            "not-authorized",
            "verdict-not-found",
            "verdict-not-approve",
            "ref-moved",
            "unknown-project"
        ]
        .iter()
        .map(|c| pair("checkLand", c))
        .collect::<Vec<_>>()
    );
    e.b.close();
}

/// `recordLand` checks again inside its transaction and keeps the ticket
/// when it refuses; `landRefused` ends a landing without spending the
/// decision; an unknown ticket is `land-unknown`, a ticket from before a
/// restart included; a ticket outlives its run.
#[test]
fn record_land_and_land_refused_end_a_landing_once() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));

    // Unknown tickets: no caller, nothing written.
    let before = row_counts(e.root.path());
    for t in ["01890000-0000-7000-8000-000000000000", "x"] {
        assert_eq!(err(&e.record(&json!(t), land(MAIN1, C1))), "land-unknown");
        let r = e.b.op(json!({"op": "landRefused", "ticket": t,
                              "args": {"code": "merge-conflict", "notify": true}}));
        assert_eq!(err(&r), "land-unknown");
    }
    for op in [
        json!({"op": "recordLand", "ticket": 7, "land": land(MAIN1, C1)}),
        json!({"op": "recordLand", "ticket": "x"}),
        json!({"op": "landRefused", "ticket": "x", "args": "merge-conflict"}),
        json!({"op": "landRefused", "ticket": "x", "args": {}, "notify": true}),
    ] {
        assert_eq!(err(&e.b.op(op.clone())), "invalid-request", "{op}");
    }
    assert_eq!(row_counts(e.root.path()), before);

    // A malformed land is refused on the trail; the ticket stays open.
    let t1 = e.ticket("dev", TASK, &d)["id"].clone();
    let mut missing = land(MAIN1, C1);
    missing.as_object_mut().expect("object").remove("patch_id");
    let mut extra = land(MAIN1, C1);
    extra["branch"] = json!("main");
    for bad in [
        land("HEAD", C1),
        land(&MAIN1.to_uppercase(), C1),
        land(MAIN1, &C1[..39]),
        missing,
        extra,
    ] {
        assert_eq!(err(&e.record(&t1, bad.clone())), "invalid-request", "{bad}");
    }
    // reviewed must be the ticket's commit.
    assert_eq!(err(&e.record(&t1, land(MAIN1, C2))), "ref-moved");
    // The host ends it with its own code and detail, and tells dev.
    let r = e.b.op(json!({"op": "landRefused", "ticket": t1, "args": {
        "code": "merge-conflict", "detail": "src/main.rs", "notify": true}}));
    let out = res(&r).clone();
    assert!(out["message"].is_string(), "{out}");
    let ev = e
        .trail(TASK)
        .into_iter()
        .find(|x| x["id"] == out["event"])
        .expect("the refusal on the task's trail");
    assert_eq!(ev["kind"], json!("action.refused"));
    assert_eq!(
        ev["body"],
        json!({"action": "git.merge.protected", "op": "landRefused", "code": "merge-conflict",
               "detail": "src/main.rs"})
    );
    let got = e.receive("dev");
    let m = got
        .iter()
        .find(|m| m["id"] == out["message"])
        .expect("RESULT to dev");
    assert_eq!(
        (&m["class"], &m["from_role"], &m["decision"]),
        (&json!("RESULT"), &json!("_bus"), &d)
    );
    let text = m["body"].as_str().expect("body");
    assert!(
        text.contains("merge-conflict") && text.contains("src/main.rs"),
        "{text}"
    );
    // Ended: the ticket is gone, the decision unspent.
    assert_eq!(err(&e.record(&t1, land(MAIN1, C1))), "land-unknown");
    assert_eq!(e.consumed(&d), 0);
    assert_eq!(e.held("dev", None), json!(true));

    // landRefused's own arguments.
    let t2 = e.ticket("dev", TASK, &d)["id"].clone();
    for args in [
        json!({"code": "Merge Conflict", "notify": true}),
        json!({"code": "merge-conflict"}),
        json!({"code": "merge-conflict", "notify": "yes"}),
        json!({"code": "merge-conflict", "notify": true, "detail": ""}),
        json!({"code": "merge-conflict", "notify": true, "detail": "x".repeat(2001)}),
        json!({"code": "merge-conflict", "notify": true, "extra": 1}),
    ] {
        let r =
            e.b.op(json!({"op": "landRefused", "ticket": t2, "args": args}));
        assert_eq!(err(&r), "invalid-request", "{args}");
    }
    // Without notify, no message.
    let r = e.b.op(json!({"op": "landRefused", "ticket": t2,
                          "args": {"code": "hook-failed", "notify": false}}));
    assert_eq!(res(&r)["message"], Value::Null);
    assert!(e.receive("dev").is_empty());

    // The push moved between checkLand and recordLand: refused inside the
    // transaction, the decision unspent, the ticket still open.
    let t3 = e.ticket("dev", TASK, &d)["id"].clone();
    e.push("dev", TASK, C2);
    assert_eq!(err(&e.record(&t3, land(MAIN1, C1))), "ref-moved");
    assert_eq!(e.consumed(&d), 0);
    e.reviewed("dev", TASK, C2, "approve");
    assert_eq!(
        err(&e.record(&t3, land(MAIN1, C1))),
        "ref-moved",
        "the ticket's commit"
    );
    let r = e.b.op(json!({"op": "landRefused", "ticket": t3,
                          "args": {"code": "ref-moved", "notify": false}}));
    res(&r);

    // Two tickets for one decision: the first recorded spends it, the
    // second's recordLand is then decision-consumed.
    let t4 = e.ticket("dev", TASK, &d)["id"].clone();
    let t5 = e.ticket("dev", TASK, &d)["id"].clone();
    assert_ne!(t4, t5);
    // A ticket outlives its run: the host may record after the run ended.
    let r = e.b.op(json!({"op": "endLaunch",
                          "record": {"business": "acme", "run": "dev-1", "reason": "done"}}));
    res(&r);
    res(&e.record(&t4, land(MAIN1, C2)));
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(err(&e.record(&t5, land(MAIN1, C2))), "decision-consumed");
    let r = e.b.op(json!({"op": "landRefused", "ticket": t5,
                          "args": {"code": "decision-consumed", "notify": false}}));
    res(&r);

    // A ticket open at a restart is gone after it.
    e.push("pm", OTHER, C1);
    e.reviewed("pm", OTHER, C1, "approve");
    let pd = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pd, "choice": "yes"}),
    );
    let t6 = e.ticket("pm", OTHER, &pd)["id"].clone();
    let mut e = e.restart(business());
    let before = row_counts(e.root.path());
    assert_eq!(err(&e.record(&t6, land(MAIN1, C1))), "land-unknown");
    let r = e.b.op(json!({"op": "landRefused", "ticket": t6,
                          "args": {"code": "x", "notify": true}}));
    assert_eq!(err(&r), "land-unknown");
    assert_eq!(row_counts(e.root.path()), before);
    assert_eq!(e.held("pm", None), json!(true), "still unspent");
    let t7 = e.ticket("pm", OTHER, &pd);
    assert_eq!(t7["resolution"]["via"], json!("broker"));
    res(&e.record(&t7["id"], land(MAIN1, C1)));
    assert_eq!(e.held("pm", None), json!(false));

    let mut want: Vec<(String, String)> = [
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "invalid-request",
        "ref-moved",
    ]
    .iter()
    .map(|c| pair("recordLand", c))
    .collect();
    want.push(pair("landRefused", "merge-conflict"));
    want.extend(std::iter::repeat_n(
        pair("landRefused", "invalid-request"),
        6,
    ));
    want.push(pair("landRefused", "hook-failed"));
    want.push(pair("recordLand", "ref-moved"));
    want.push(pair("recordLand", "ref-moved"));
    want.push(pair("landRefused", "ref-moved"));
    want.push(pair("recordLand", "decision-consumed"));
    want.push(pair("landRefused", "decision-consumed"));
    assert_eq!(e.refusals(TASK), want);
    // Refusals after the run ended are still the run's.
    let runs = e.count(
        "SELECT count(DISTINCT run) FROM events WHERE kind = 'action.refused' AND subject = ?1",
        TASK,
    );
    assert_eq!(runs, 1);
    e.b.close();
}

/// `landHeld`'s own arguments.
#[test]
fn land_held_refuses_unknown_businesses_roles_and_bad_shapes() {
    let mut e = env();
    let cases = [
        (
            json!({"op": "landHeld", "business": "globex", "role": "pm"}),
            "unknown-business",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "nobody"}),
            "unknown-role",
        ),
        (
            json!({"op": "landHeld", "business": "acme"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "pm", "thread": 3}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "business": "acme", "role": "pm", "run": "pm-1"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "nobody"}}),
            "unknown-role",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "pm"}, "business": "acme"}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": ["acme", "pm"]}),
            "invalid-request",
        ),
        (
            json!({"op": "landHeld", "record": {"business": "acme", "role": "pm", "run": "r"}}),
            "invalid-request",
        ),
    ];
    for (op, code) in cases {
        assert_eq!(err(&e.b.op(op.clone())), code, "{op}");
    }
    let r =
        e.b.op(json!({"op": "landHeld", "business": "acme", "role": "pm", "thread": null}));
    assert_eq!(res(&r), &json!({"held": false}));
    // The spec's shape (3i L53) answers the same; DESIGN.md's flat one
    // stays. (An earlier build refused the spec's `record`.)
    let r =
        e.b.op(json!({"op": "landHeld", "record": {"business": "acme", "role": "pm"}}));
    assert_eq!(res(&r), &json!({"held": false}));
    // A role whose policy doesn't grant the merge cross-role never holds one.
    assert_eq!(e.held("qa", None), json!(false));
    e.b.close();
}

/// Only the landing ops (and `authorize` with the decision) write the
/// landing record: `recordEvent` can't forge one.
#[test]
fn record_event_cannot_forge_a_landing_record() {
    let mut e = env();
    let r = e.op(
        "pm",
        json!({"op": "recordEvent", "kind": "action.allowed", "subject": TASK,
               "body": {"action": "git.merge.protected", "target": TASK, "commit": MAIN1}}),
    );
    assert_eq!(err(&r), "reserved-event");
    e.b.close();
}

/// The spec's `recordLand {ticket, land}` / `landRefused {ticket, args}`
/// may carry the ticket object `checkLand` returned instead of its id
/// (DESIGN.md): it must be that ticket exactly; an altered copy is
/// `land-unknown`, an object without a string id `invalid-request`.
#[test]
fn the_ticket_may_come_back_whole_as_check_land_gave_it() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let t = e.ticket("dev", TASK, &d);
    let before = row_counts(e.root.path());
    let mut altered = t.clone();
    altered["commit"] = json!(C2);
    assert_eq!(err(&e.record(&altered, land(MAIN1, C1))), "land-unknown");
    let r = e.b.op(json!({"op": "landRefused", "ticket": altered,
                          "args": {"code": "merge-conflict", "notify": false}}));
    assert_eq!(err(&r), "land-unknown");
    let mut no_id = t.clone();
    no_id.as_object_mut().expect("ticket").remove("id");
    assert_eq!(err(&e.record(&no_id, land(MAIN1, C1))), "invalid-request");
    assert_eq!(row_counts(e.root.path()), before);
    // The whole ticket, as given: the landing is recorded and spent.
    res(&e.record(&t, land(MAIN1, C1)));
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(err(&e.record(&t, land(MAIN1, C1))), "land-unknown");

    // landRefused takes it whole too.
    e.push("dev", TASK, C2);
    e.reviewed("dev", TASK, C2, "approve");
    let d2 = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d2, "choice": "yes"}));
    let t2 = e.ticket("dev", TASK, &d2);
    let r = e.b.op(json!({"op": "landRefused", "ticket": t2,
                          "args": {"code": "merge-conflict", "notify": false}}));
    assert!(res(&r)["event"].is_string(), "{r}");
    assert_eq!(err(&e.record(&t2["id"], land(MAIN1, C2))), "land-unknown");
    assert_eq!(e.consumed(&d2), 0);
    e.b.close();
}

/// A crash (SIGKILL) instead of a close: the landing that answered is
/// spent for good, and a ticket open at the crash is `land-unknown`, its
/// decision still usable.
#[test]
fn a_crash_keeps_what_recorded_and_forgets_open_tickets() {
    let mut e = env();
    e.push("dev", TASK, C1);
    e.reviewed("dev", TASK, C1, "approve");
    let d = e.raise("dev", "git.merge.protected", TASK, json!({}));
    e.ok("pm", "decision.resolve", json!({"id": d, "choice": "yes"}));
    let t = e.ticket("dev", TASK, &d);
    res(&e.record(&t["id"], land(MAIN1, C1)));

    e.push("pm", OTHER, C2);
    e.reviewed("pm", OTHER, C2, "approve");
    let pd = e.raise(
        "pm",
        "git.merge.protected",
        OTHER,
        json!({"domain": "technical"}),
    );
    e.ok(
        "cto",
        "decision.resolve",
        json!({"id": pd, "choice": "yes"}),
    );
    let open = e.ticket("pm", OTHER, &pd);

    let mut e = e.restart_after(business(), false);
    assert_eq!(e.consumed(&d), 1);
    assert_eq!(
        err(&e.check("dev", json!({"task_ref": TASK, "decision": d}))),
        "decision-consumed"
    );
    assert_eq!(err(&e.record(&open["id"], land(MAIN1, C2))), "land-unknown");
    assert_eq!(e.held("pm", None), json!(true));
    let again = e.ticket("pm", OTHER, &pd);
    res(&e.record(&again["id"], land(MAIN1, C2)));
    assert_eq!(e.consumed(&pd), 1);
    e.b.close();
}
