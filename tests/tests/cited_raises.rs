//! A decision raised citing the spec (3i row 138, issue 22) through the real broker: checked against the current confirmed spec, stored with its citation, routed to its arbiter, and waiting on Git off the writer, then checked again.

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/records_env.rs"]
mod records_env;
use records_env::{cite, Cited, Pause, Repo};

#[test]
fn a_cited_raise_checks_the_current_confirmed_spec_and_stores_its_citation() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\nv1\n", "Ada");
    let docs_only = Repo::new();
    docs_only.commit("docs/plan.md", "# Plan\n", "Ada");
    let plain = tempfile::tempdir().expect("tempdir");
    let w = Cited::start(
        business(),
        &[
            ("site", repo.path()),
            ("nospec", docs_only.path()),
            ("plain", plain.path()),
        ],
        &["pm", "cto", "dev"],
    );

    // A cited gated raise of a routed action goes to the arbiter of its
    // domain (delivery by default, technical when asked); the class stays
    // gated, and the citation is stored.
    let d = res(&w.raise("dev", "prd.approve", cite("site", &c1))).clone();
    assert_eq!(
        (&d["class"], &d["routed_to"]),
        (&json!("gated"), &json!("pm"))
    );
    assert_eq!(
        (&d["spec_path"], &d["spec_commit"]),
        (&json!("spec/north-star.md"), &json!(c1))
    );
    assert_eq!(
        w.stored(&d["id"]),
        [
            json!("gated"),
            json!("pm"),
            json!("site"),
            json!("spec/north-star.md"),
            json!(c1)
        ]
    );
    let mut tech = cite("site", &c1);
    tech["domain"] = json!("technical");
    let t = res(&w.raise("dev", "policy.change", tech)).clone();
    assert_eq!(
        (&t["class"], &t["routed_to"]),
        (&json!("gated"), &json!("cto"))
    );

    // Uncited, the same raise goes to the human and stores no citation
    // (a project alone is no citation).
    let u = res(&w.raise("dev", "prd.approve", json!({"project": "site"}))).clone();
    assert_eq!(
        w.stored(&u["id"]),
        [
            json!("gated"),
            json!("human"),
            json!("site"),
            Value::Null,
            Value::Null
        ]
    );
    // A hard wait goes to the human, cited or not; so does a raise by the
    // arbiter of its own domain (the class stays gated).
    let h = res(&w.raise("dev", "deploy", cite("site", &c1))).clone();
    assert_eq!(
        (&h["class"], &h["routed_to"]),
        (&json!("gated"), &json!("human"))
    );
    assert_eq!(h["spec_commit"], json!(c1));
    let own = res(&w.raise("pm", "prd.approve", cite("site", &c1))).clone();
    assert_eq!(
        (&own["class"], &own["routed_to"]),
        (&json!("gated"), &json!("human"))
    );
    // A cross-role raise routes as ever, cited or not.
    let x = res(&w.raise("pm", "git.merge.protected", cite("site", &c1))).clone();
    assert_eq!(
        (&x["class"], &x["routed_to"]),
        (&json!("cross-role"), &json!("human"))
    );

    // The arbiter's inbox shows the cited decision with its citation.
    let inbox = res(&w.call("pm", "inbox", Value::Null)).clone();
    let shown = inbox["decisions"]
        .as_array()
        .expect("inbox decisions")
        .iter()
        .find(|r| r["id"] == d["id"])
        .cloned()
        .expect("the cited decision in the arbiter's inbox");
    assert_eq!(
        (&shown["spec_path"], &shown["spec_commit"]),
        (&json!("spec/north-star.md"), &json!(c1))
    );

    // The arbiter resolves the cited one. The human may resolve it too (3i
    // L71): here it marks it seen and names a choice it doesn't have.
    let human = ShimSession::human(&w.b);
    human.ok("decision.seen", json!({"id": d["id"]}));
    assert_eq!(
        err(&human.call(
            "decision.resolve",
            json!({"id": d["id"], "choice": "maybe"})
        )),
        "invalid-choice"
    );
    let closed = res(&w.call(
        "pm",
        "decision.resolve",
        json!({"id": d["id"], "choice": "yes"}),
    ))
    .clone();
    assert_eq!(closed["kind"], json!("resolved"));

    // A later docs commit does not change the spec's file commit: c1 is
    // still current, and the head is no spec commit.
    let d1 = repo.commit("docs/plan.md", "# Plan\n", "pm.pm");
    res(&w.raise("dev", "prd.approve", cite("site", &c1)));
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &d1))),
        "stale-spec"
    );

    // An agent's later spec change: the human's older commit is stale, and
    // the current one is unconfirmed.
    let c2 = repo.commit("spec/north-star.md", "# North star\nv2\n", "cto.cto");
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &c1))),
        "stale-spec"
    );
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &c2))),
        "spec-unconfirmed"
    );
    // A commit that was never there is stale too.
    let nowhere = "0123456789abcdef0123456789abcdef01234567";
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", nowhere))),
        "stale-spec"
    );
    // The human confirms it again: c3 is citable.
    let c3 = repo.commit("spec/north-star.md", "# North star\nv3\n", "Ada");
    let d3 = res(&w.raise("dev", "prd.approve", cite("site", &c3))).clone();
    assert_eq!(d3["spec_commit"], json!(c3));

    // Later commits never rewrite a settled decision's citation or state.
    assert_eq!(w.stored(&d["id"])[4], json!(c1));

    // Incomplete or malformed citations.
    let sha = c3.as_str();
    for bad in [
        json!({"spec_path": "spec/north-star.md", "spec_commit": sha}),
        json!({"project": "site", "spec_path": "spec/north-star.md"}),
        json!({"project": "site", "spec_commit": sha}),
        json!({"spec_commit": sha}),
        json!({"project": "site", "spec_path": "docs/plan.md", "spec_commit": sha}),
        json!({"project": "site", "spec_path": "spec/north-star.md", "spec_commit": &sha[..12]}),
        json!({"project": "site", "spec_path": "spec/north-star.md", "spec_commit": sha.to_uppercase()}),
        json!({"project": "site", "spec_path": "spec/north-star.md", "spec_commit": "HEAD"}),
        json!({"project": "site", "spec_path": "spec/north-star.md", "spec_commit": 7}),
    ] {
        assert_eq!(
            err(&w.raise("dev", "prd.approve", bad.clone())),
            "invalid-spec-citation",
            "{bad}"
        );
    }
    // The reader's codes: an unknown project, a spec never committed, a
    // directory that is no repository.
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("other", sha))),
        "unknown-project"
    );
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("nospec", sha))),
        "project-file-missing"
    );
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("plain", sha))),
        "project-unavailable"
    );
    // The raise's own checks still come first: no Git is read for them.
    assert_eq!(
        err(&w.raise("dev", "prd.approve", json!({"project": "site", "spec_path": "spec/north-star.md", "spec_commit": sha, "choice": "yes"}))),
        "invalid-choice"
    );
    // A run that no longer holds its role.
    res(&w.call("cto", "role.release", Value::Null));
    assert_eq!(
        err(&w.raise("cto", "prd.approve", cite("site", sha))),
        "not-holder"
    );

    // Every refusal left action.refused for decision.raise against the raiser.
    let refused = refusals(w.root.path());
    let codes: Vec<(&str, &str, &str)> = refused
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or("?"),
                r[3].as_str().unwrap_or("?"),
                r[4].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let mut want = vec![("dev", "decision.raise", "stale-spec"); 2];
    want.push(("dev", "decision.raise", "spec-unconfirmed"));
    want.push(("dev", "decision.raise", "stale-spec"));
    want.extend([("dev", "decision.raise", "invalid-spec-citation"); 9]);
    want.extend([
        ("dev", "decision.raise", "unknown-project"),
        ("dev", "decision.raise", "project-file-missing"),
        ("dev", "decision.raise", "project-unavailable"),
        ("dev", "decision.raise", "invalid-choice"),
        ("cto", "decision.raise", "not-holder"),
    ]);
    // The human's invalid-choice came first.
    assert_eq!(refused[0][4], json!("invalid-choice"));
    assert_eq!(codes[1..], want[..]);
    w.b.close();
}

#[test]
fn a_cited_role_revoke_goes_to_the_arbiter_whose_approval_the_revoke_then_uses() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let mut biz = business();
    biz["roles"]["aide"] = json!({"definition": "assistant",
                                  "authority": {"withinRole": [], "crossRole": []}});
    let w = Cited::start(biz, &[("site", repo.path())], &["pm", "cto", "dev"]);
    let target = |t: &str| {
        let mut a = cite("site", &c1);
        a["target"] = json!(t);
        a
    };

    // Uncited: the human. Cited: the delivery arbiter (gated either way).
    let uncited = res(&w.raise("cto", "role.revoke", json!({"target": "dev"}))).clone();
    assert_eq!(
        (&uncited["class"], &uncited["routed_to"]),
        (&json!("gated"), &json!("human"))
    );
    let d = res(&w.raise("cto", "role.revoke", target("dev"))).clone();
    assert_eq!(
        (&d["class"], &d["routed_to"]),
        (&json!("gated"), &json!("pm"))
    );
    assert_eq!(
        (&d["target"], &d["target_holder"]),
        (&json!("dev"), &json!("run-dev"))
    );
    assert_eq!(
        w.stored(&d["id"]),
        [
            json!("gated"),
            json!("pm"),
            json!("site"),
            json!("spec/north-star.md"),
            json!(c1)
        ]
    );
    // The arbiter raising it itself: the human.
    let own = res(&w.raise("pm", "role.revoke", target("dev"))).clone();
    assert_eq!(own["routed_to"], json!("human"));
    // The END_PROTECTED assistant: the human, cited or not (Q169).
    let aide = res(&w.raise("cto", "role.revoke", target("aide"))).clone();
    assert_eq!(
        (&aide["class"], &aide["routed_to"]),
        (&json!("gated"), &json!("human"))
    );

    // Before the arbiter resolves, the revoke has no approval; after, it
    // revokes the holder the decision named.
    let revoke = json!({"role": "dev", "decision": d["id"]});
    assert_eq!(
        err(&w.call("cto", "role.revoke", revoke.clone())),
        "decision-not-approved"
    );
    assert_eq!(
        err(&w.call(
            "cto",
            "decision.resolve",
            json!({"id": d["id"], "choice": "yes"})
        )),
        "not-resolver"
    );
    res(&w.call(
        "pm",
        "decision.resolve",
        json!({"id": d["id"], "choice": "yes"}),
    ));
    let r = res(&w.call("cto", "role.revoke", revoke.clone())).clone();
    assert_eq!(
        (&r["role"], &r["run"], &r["op"]),
        (&json!("dev"), &json!("run-dev"), &json!("revoke"))
    );
    assert_eq!(
        err(&w.call("dev", "message.receive", Value::Null)),
        "not-holder"
    );
    // The approval is spent: a second revoke is decision-consumed, as on
    // every path (3i L157), though nobody holds dev now.
    assert_eq!(
        err(&w.call("cto", "role.revoke", revoke)),
        "decision-consumed"
    );
    w.b.close();
}

#[test]
fn a_cited_raise_waits_on_git_off_the_writer_and_is_checked_again_after() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "v1\n", "Ada");
    let pause = Pause::at("open");
    let w = Cited::start_with(
        business(),
        &[("site", repo.path())],
        &["pm", "cto", "dev"],
        Some(&pause),
    );
    let raise_in_thread = |role: &str| {
        let socket = w.b.socket.clone();
        let cap = w.caps[role].clone();
        let mut args = cite("site", &c1);
        for (k, v) in [
            ("action", json!("prd.approve")),
            ("question", json!("Approve?")),
            (
                "options",
                json!([{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}]),
            ),
            ("recommendation", json!("yes")),
            ("blocking", json!(false)),
        ] {
            args[k] = v;
        }
        std::thread::spawn(move || {
            let req = json!({"cap": cap, "verb": "decision.raise", "args": args});
            raw_request(&socket, format!("{req}\n").as_bytes())
        })
    };

    // Held in Git: the writer still serves an uncited raise, a send and a
    // receive, which never touch Git.
    let raising = raise_in_thread("dev");
    pause.wait();
    let uncited = res(&w.raise("cto", "prd.approve", json!({}))).clone();
    assert_eq!(uncited["routed_to"], json!("human"));
    res(&w.call(
        "cto",
        "message.send",
        json!({"to": "pm", "body": "meanwhile"}),
    ));
    let got = res(&w.call("pm", "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["body"], json!("meanwhile"));
    assert!(
        !raising.is_finished(),
        "the cited raise waited on git all along"
    );
    pause.release();
    let r = raising.join().expect("raiser");
    let d = res(&r).clone();
    assert_eq!(
        (&d["routed_to"], &d["spec_commit"]),
        (&json!("pm"), &json!(c1))
    );

    // The writer checks again after Git: a raiser that let its role go
    // while Git was read raises nothing.
    pause.rearm();
    let before = row_counts(w.root.path());
    let raising = raise_in_thread("dev");
    pause.wait();
    res(&w.call("dev", "role.release", Value::Null));
    pause.release();
    let r = raising.join().expect("raiser");
    assert_eq!(err(&r), "not-holder");
    let mut after = row_counts(w.root.path());
    // Only the release's own claim row is new.
    after[3] -= 1;
    assert_eq!(after, before, "the refused raise stored nothing");
    let last = refusals(w.root.path()).pop().expect("refusal");
    assert_eq!(
        last,
        json!(["dev", "run-dev", null, "decision.raise", "not-holder"])
    );
    w.b.close();
}
