//! Project records over Git (3i row 138, issue 22) through the real broker:
//! a `mosaic-bus` child, roles bound to real processes, and real Git
//! repositories the tests make with the real `git`.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
#[path = "support/records_env.rs"]
mod records_env;
use records_env::{cite, events, show, world, world_of, writers, Cited, HeldLock, Pause, Repo};

#[test]
fn spec_read_answers_committed_bytes_confirmed_only_by_the_human() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\nv1\n", "Ada");
    let w = world(repo.path(), None, &[]);
    let read = |args: Value| w.b.call(&w.pm, "spec.read", args);

    // The human's commit confirms; uncommitted bytes are ignored.
    std::fs::write(repo.path().join("spec/north-star.md"), "not committed\n").expect("write");
    let r = res(&read(json!({"project": "site"}))).clone();
    assert_eq!(r["content"], json!("# North star\nv1\n"));
    assert_eq!(r["commit"], json!(c1));
    assert_eq!(r["head"], json!(c1));
    assert_eq!(r["path"], json!("spec/north-star.md"));
    assert_eq!(r["confirmed"], json!(true));
    assert_eq!(r["author"], json!("Ada"));
    assert_eq!(r["truncated"], json!(false));
    assert_eq!(r["history"].as_array().expect("history").len(), 1);
    assert_eq!(r["history"][0]["commit"], json!(c1));
    repo.git(&["checkout", "-q", "--", "spec/north-star.md"], "x");

    // A later docs commit does not change the spec's file commit.
    let d1 = repo.commit("docs/plan.md", "# Plan\n", "pm.pm");
    let r = res(&read(json!({"project": "site"}))).clone();
    assert_eq!((&r["commit"], &r["head"]), (&json!(c1), &json!(d1)));
    assert_eq!(r["confirmed"], json!(true));

    // An agent's latest change is visible but unconfirmed: no fallback to
    // the human's older version.
    let c2 = repo.commit("spec/north-star.md", "# North star\nv2\n", "pm.pm");
    let r = res(&read(json!({"project": "site"}))).clone();
    assert_eq!(r["content"], json!("# North star\nv2\n"));
    assert_eq!((&r["commit"], &r["confirmed"]), (&json!(c2), &json!(false)));
    assert_eq!(r["history"][0]["commit"], json!(c2));
    assert_eq!(r["history"][1]["commit"], json!(c1));
    assert_eq!(r["history"][1]["author"], json!("Ada"));

    // An older reachable commit reads the spec as it was then.
    let r = res(&read(json!({"project": "site", "commit": d1}))).clone();
    assert_eq!(r["content"], json!("# North star\nv1\n"));
    assert_eq!((&r["commit"], &r["head"]), (&json!(c1), &json!(d1)));
    assert_eq!(r["confirmed"], json!(true));

    // Only a full SHA-1 of a reachable commit: revision expressions, short
    // and upper-case forms refuse, and so do unknown and unreachable ones.
    for bad in [
        json!("HEAD"),
        json!("HEAD~1"),
        json!(&c1[..12]),
        json!(c1.to_uppercase()),
        json!(format!("{c1}^")),
        json!(7),
    ] {
        assert_eq!(
            err(&read(json!({"project": "site", "commit": bad}))),
            "invalid-request"
        );
    }
    assert_eq!(
        err(&read(
            json!({"project": "site", "commit": "0123456789abcdef0123456789abcdef01234567"})
        )),
        "unknown-commit"
    );
    // A commit on a branch HEAD does not reach.
    repo.git(&["checkout", "-q", "-b", "side"], "x");
    let side = repo.commit("spec/north-star.md", "side\n", "Ada");
    repo.git(&["checkout", "-q", "main"], "x");
    assert_eq!(
        err(&read(json!({"project": "site", "commit": side}))),
        "unknown-commit"
    );
    // The blob, not a commit.
    let blob = repo.git(&["rev-parse", "HEAD:spec/north-star.md"], "x");
    assert_eq!(
        err(&read(json!({"project": "site", "commit": blob}))),
        "unknown-commit"
    );

    // Unknown project, leftovers, other classes.
    assert_eq!(err(&read(json!({"project": "other"}))), "unknown-project");
    assert_eq!(
        err(&read(json!({"project": "site", "path": "x"}))),
        "invalid-request"
    );
    assert_eq!(err(&read(json!({}))), "invalid-request");
    let reader = w.b.reader_cap();
    assert_eq!(
        err(&w.b.call(&reader, "spec.read", json!({"project": "site"}))),
        "read-only"
    );

    // A run that no longer holds its role reads nothing.
    res(&w.b.call(&w.cto, "role.release", Value::Null));
    assert_eq!(
        err(&w.b.call(&w.cto, "spec.read", json!({"project": "site"}))),
        "not-holder"
    );

    // Each refusal of a role left its evidence (the reader's none); the
    // reads themselves wrote nothing.
    let refused = refusals(w.root.path());
    let codes: Vec<(&str, &str)> = refused
        .iter()
        .map(|r| (r[0].as_str().unwrap_or("?"), r[4].as_str().unwrap_or("?")))
        .collect();
    let mut want = vec![("pm", "invalid-request"); 6];
    want.extend([("pm", "unknown-commit"); 3]);
    want.extend([
        ("pm", "unknown-project"),
        ("pm", "invalid-request"),
        ("pm", "invalid-request"),
        ("cto", "not-holder"),
    ]);
    assert_eq!(codes, want);
    assert!(refused.iter().all(|r| r[3] == json!("spec.read")));
    w.b.close();
}

#[test]
fn spec_read_keeps_one_hundred_history_entries_and_says_when_there_are_more() {
    let repo = Repo::new();
    for i in 0..=100 {
        repo.commit(
            "spec/north-star.md",
            &format!("v{i}\n"),
            if i % 2 == 0 { "Ada" } else { "cto.cto" },
        );
    }
    let w = world(repo.path(), None, &[]);
    let r = res(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))).clone();
    let history = r["history"].as_array().expect("history");
    assert_eq!(history.len(), 100);
    assert_eq!(r["truncated"], json!(true));
    assert_eq!(r["content"], json!("v100\n"));
    assert_eq!(r["confirmed"], json!(true));
    assert_eq!(history[0]["commit"], r["commit"]);
    assert_eq!(history[1]["author"], json!("cto.cto"));
    // One commit less: all of it, not truncated.
    let older = history[1]["commit"].as_str().expect("sha").to_string();
    let r = res(&w.b.call(
        &w.pm,
        "spec.read",
        json!({"project": "site", "commit": older}),
    ))
    .clone();
    assert_eq!(r["history"].as_array().expect("history").len(), 100);
    assert_eq!(r["truncated"], json!(false));
    assert_eq!(r["confirmed"], json!(false));
    w.b.close();
}

#[test]
fn a_missing_spec_or_an_unusable_repository_refuses_with_the_readers_codes() {
    // Only docs: the spec was never committed.
    let repo = Repo::new();
    repo.commit("docs/plan.md", "# Plan\n", "Ada");
    std::fs::create_dir_all(repo.path().join("spec")).expect("mkdir");
    std::fs::write(repo.path().join("spec/north-star.md"), "uncommitted\n").expect("write");
    let w = world(repo.path(), None, &[]);
    let read = || w.b.call(&w.pm, "spec.read", json!({"project": "site"}));
    assert_eq!(err(&read()), "project-file-missing");
    // Committed, then deleted: missing again, no older version.
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    assert_eq!(res(&read())["content"], json!("v1\n"));
    repo.git(&["rm", "-q", "--", "spec/north-star.md"], "Ada");
    repo.git(&["commit", "-q", "-m", "drop"], "Ada");
    assert_eq!(err(&read()), "project-file-missing");
    // Not UTF-8.
    let full = repo.path().join("spec/north-star.md");
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(&full, [0xff, 0xfe, b'\n']).expect("write");
    repo.git(&["add", "--", "spec/north-star.md"], "Ada");
    repo.git(&["commit", "-q", "-m", "binary"], "Ada");
    assert_eq!(err(&read()), "project-file-invalid");
    w.b.close();

    // A directory that is no repository, a repository with no commit, and
    // a path that does not exist.
    let plain = tempfile::tempdir().expect("tempdir");
    let w = world(plain.path(), None, &[]);
    assert_eq!(
        err(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))),
        "project-unavailable"
    );
    w.b.close();
    let empty = Repo::new();
    let w = world(empty.path(), None, &[]);
    assert_eq!(
        err(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))),
        "project-unavailable"
    );
    w.b.close();
    let w = world(Path::new("/nonexistent/records"), None, &[]);
    assert_eq!(
        err(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))),
        "project-unavailable"
    );
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .map(|r| r[4].clone())
        .collect();
    assert_eq!(codes, [json!("project-unavailable")]);
    w.b.close();
}

#[test]
fn a_spec_read_held_in_git_does_not_delay_an_unrelated_send() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    // The read is held in Git until the test's word.
    let pause = Pause::at("open");
    let w = world(repo.path(), Some(&pause), &[]);
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let reading = std::thread::spawn(move || {
        let req = json!({"cap": pm, "verb": "spec.read", "args": {"project": "site"}});
        raw_request(&socket, format!("{req}\n").as_bytes())
    });
    pause.wait();
    // Git is held: the writer still serves a send, a receive and a read.
    let sent = res(&w.b.call(
        &w.cto,
        "message.send",
        json!({"to": "pm", "body": "meanwhile"}),
    ))
    .clone();
    assert!(sent["id"].is_string(), "{sent}");
    let got = res(&w.b.call(&w.pm, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["body"], json!("meanwhile"));
    assert!(!reading.is_finished(), "the read waited on git all along");
    pause.release();
    let r = reading.join().expect("reader thread");
    assert_eq!(res(&r)["content"], json!("v1\n"));
    w.b.close();
}

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

#[test]
fn record_write_commits_one_file_as_the_sessions_author() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let w = world_of(repo.path(), None, &[], writers());
    let write = |cap: &str, args: Value| w.b.call(cap, "record.write", args);

    // A docs file: one commit on HEAD's branch, by pm.pm, committed by the bus.
    let r = res(&write(
        &w.pm,
        json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n\nShip it.\n"}),
    ))
    .clone();
    let commit = r["commit"].as_str().expect("commit").to_string();
    assert_eq!(
        r,
        json!({"project": "site", "path": "docs/plan.md", "commit": commit})
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), commit);
    assert_eq!(repo.git(&["rev-parse", "main"], "x"), commit);
    assert_eq!(show(&repo, "%P", &commit), c1);
    assert_eq!(
        show(&repo, "%an <%ae>", &commit),
        "pm.pm <pm.pm@acme.mosaic.invalid>"
    );
    assert_eq!(show(&repo, "%cn", &commit), "mosaic-bus");
    assert_eq!(
        repo.git(
            &["diff-tree", "--no-commit-id", "--name-only", "-r", &commit],
            "x"
        ),
        "docs/plan.md"
    );
    assert_eq!(
        repo.git(&["show", &format!("{commit}:docs/plan.md")], "x"),
        "# Plan\n\nShip it."
    );
    // The work tree was not touched.
    assert!(!repo.path().join("docs").exists());

    // A requirement and a decision: written sorted and pretty, by cto.cto.
    let req = json!({"id": "REQ-PROJ-4", "title": "Spec review", "statement": "The pm reviews.",
                     "status": "accepted"});
    let r = res(&write(
        &w.cto,
        json!({"project": "site", "path": "requirements/REQ-PROJ-4.json", "record": req}),
    ))
    .clone();
    let rc = r["commit"].as_str().expect("commit").to_string();
    assert_eq!(show(&repo, "%an", &rc), "cto.cto");
    let text = repo.git(
        &["show", &format!("{rc}:requirements/REQ-PROJ-4.json")],
        "x",
    );
    assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), req);
    assert!(text.starts_with("{\n  \"id\""), "{text}");
    let dec = json!({"id": "DEC-1", "title": "Git", "context": "History.", "choice": "Git.",
                     "status": "accepted", "requirements": ["REQ-PROJ-4"]});
    let dc = res(&write(
        &w.pm,
        json!({"project": "site", "path": "decisions/DEC-1.json", "record": dec}),
    ))["commit"]
        .clone();

    // Each commit left its receipt (and the authority it used); the
    // spec's commit is still the human's.
    let written = events(w.root.path(), "record.written");
    assert_eq!(written.len(), 3);
    assert_eq!(written[0][0], json!("pm"));
    assert_eq!(
        written[0][3],
        json!({"project": "site", "path": "docs/plan.md", "commit": commit})
    );
    assert_eq!(written[1][3]["commit"], json!(rc));
    assert_eq!(written[2][3]["commit"], dc);
    let allowed: Vec<Value> = events(w.root.path(), "action.allowed")
        .into_iter()
        .filter(|e| e[3]["action"] == json!("record.write"))
        .collect();
    assert_eq!(allowed.len(), 3);
    assert_eq!(allowed[0][3]["class"], json!("within-role"));
    assert_eq!(allowed[0][2], json!("docs/plan.md"));
    let spec = res(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))).clone();
    assert_eq!(
        (&spec["commit"], &spec["confirmed"]),
        (&json!(c1), &json!(true))
    );
    let head = repo.git(&["rev-parse", "HEAD"], "x");

    // Refusals, each writing nothing to the repository.
    let args =
        |path: &str, record: Value| json!({"project": "site", "path": path, "record": record});
    let cases: Vec<(Value, &str)> = vec![
        (
            args("spec/north-star.md", json!("# Mine\n")),
            "project-spec-human-only",
        ),
        (args("../escape.md", json!("x")), "project-path-invalid"),
        (args("/etc/passwd", json!("x")), "project-path-invalid"),
        (
            args("docs/../spec/north-star.md", json!("x")),
            "project-path-invalid",
        ),
        (args(".git/config", json!("x")), "project-path-invalid"),
        (args("docs/a/b.md", json!("x")), "project-path-invalid"),
        (args("docs/Plan.md", json!("x")), "project-path-invalid"),
        (args("notes/plan.md", json!("x")), "project-path-invalid"),
        (args("docs/plan.md", json!({"text": "x"})), "invalid-record"),
        (args("docs/plan.md", json!("  \n")), "invalid-record"),
        (
            args("docs/plan.md", json!("# Plan\n\nShip it.\n")),
            "project-file-unchanged",
        ),
        (
            args(
                "requirements/REQ-PROJ-4.json",
                json!({"id": "REQ-PROJ-5", "title": "t",
                  "statement": "s", "status": "accepted"}),
            ),
            "invalid-record",
        ),
        (
            args(
                "decisions/DEC-2.json",
                json!({"id": "DEC-2", "title": "t", "context": "c",
                  "choice": "c", "status": "accepted", "author": "Ada"}),
            ),
            "invalid-record",
        ),
        (
            json!({"project": "site", "path": "docs/x.md", "record": "x", "author": "Ada"}),
            "invalid-request",
        ),
        (
            json!({"project": "site", "path": "docs/x.md"}),
            "invalid-request",
        ),
        (
            args("docs/x.md", json!("x"))
                .as_object()
                .map(|m| {
                    let mut m = m.clone();
                    m.insert("project".into(), json!("other"));
                    Value::Object(m)
                })
                .expect("args"),
            "unknown-project",
        ),
    ];
    for (a, code) in &cases {
        assert_eq!(err(&write(&w.pm, a.clone())), *code, "{a}");
    }
    // dev has no record.write: it needs a decision.
    let s3 = sleeper();
    let mut b = w.b;
    let dev = b.bind("dev", "run-dev", s3.id());
    res(&b.call(&dev, "role.claim", Value::Null));
    assert_eq!(
        err(&b.call(&dev, "record.write", args("docs/dev.md", json!("# Dev\n")))),
        "decision-required"
    );
    let reader = b.reader_cap();
    assert_eq!(
        err(&b.call(&reader, "record.write", args("docs/x.md", json!("x")))),
        "read-only"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .filter(|r| r[3] == json!("record.write"))
        .map(|r| r[4].clone())
        .collect();
    let mut want: Vec<Value> = cases.iter().map(|(_, c)| json!(c)).collect();
    want.push(json!("decision-required"));
    assert_eq!(codes, want);
    b.close();
}

#[test]
fn a_concurrent_record_write_gets_project_busy_and_a_decision_stays_unspent() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    let mut w = world_of(repo.path(), None, &[], writers());
    let doc = |name: &str| json!({"project": "site", "path": format!("docs/{name}.md"), "record": "# Doc\n"});

    // Another writer holds the project lock: refused before Git's index is
    // touched, nothing committed.
    let held = HeldLock::take(&repo);
    assert_eq!(
        err(&w.b.call(&w.pm, "record.write", doc("a"))),
        "project-busy"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);
    assert!(!repo.path().join(".git/index.lock").exists());

    // A decision-backed write refused project-busy leaves its approval
    // unspent: dev (no record.write of its own) uses it once the lock is free.
    let s3 = sleeper();
    let dev = w.b.bind("dev", "run-dev", s3.id());
    res(&w.b.call(&dev, "role.claim", Value::Null));
    let raised = res(&w.b.call(
        &dev,
        "decision.raise",
        json!({"action": "record.write", "target": "docs/dev.md", "project": "site",
               "question": "Write docs/dev.md?",
               "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "blocking": false}),
    ))
    .clone();
    let id = raised["id"].as_str().expect("decision id").to_string();
    let human = ShimSession::human(&w.b);
    res(&human.call("decision.resolve", json!({"id": id, "choice": "yes"})));
    let backed =
        json!({"project": "site", "path": "docs/dev.md", "record": "# Dev\n", "decision": id});
    assert_eq!(
        err(&w.b.call(&dev, "record.write", backed.clone())),
        "project-busy"
    );
    drop(held);
    // The decision is for docs/dev.md only.
    let mut other = backed.clone();
    other["path"] = json!("docs/other.md");
    assert_eq!(
        err(&w.b.call(&dev, "record.write", other)),
        "decision-mismatch"
    );
    let c = res(&w.b.call(&dev, "record.write", backed.clone()))["commit"].clone();
    assert_eq!(show(&repo, "%an", c.as_str().expect("sha")), "dev.dev");
    assert_eq!(
        err(&w.b.call(&dev, "record.write", backed)),
        "decision-consumed"
    );

    // Two writes at once: the first holds the lock inside Git (held at
    // the pause), the second is refused project-busy at once.
    w.b.close();
    let pause = Pause::at("open");
    let w = world_of(repo.path(), Some(&pause), &[], writers());
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let first = std::thread::spawn(move || {
        let req = json!({"cap": pm, "verb": "record.write",
                         "args": {"project": "site", "path": "docs/first.md", "record": "# 1\n"}});
        raw_request(&socket, format!("{req}\n").as_bytes())
    });
    pause.wait();
    assert_eq!(
        err(&w.b.call(
            &w.cto,
            "record.write",
            json!({"project": "site", "path": "docs/second.md", "record": "# 2\n"})
        )),
        "project-busy"
    );
    // And an unrelated send is not slowed by the write held in Git.
    res(&w.b.call(
        &w.cto,
        "message.send",
        json!({"to": "pm", "body": "meanwhile"}),
    ));
    assert!(!first.is_finished());
    pause.release();
    let r = first.join().expect("first writer");
    let c = res(&r)["commit"].as_str().expect("commit").to_string();
    assert_eq!(show(&repo, "%P", &c), head);
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), c);
    let codes: Vec<(Value, Value)> = refusals(w.root.path())
        .iter()
        .map(|r| (r[0].clone(), r[4].clone()))
        .collect();
    assert_eq!(codes, [(json!("cto"), json!("project-busy"))]);
    w.b.close();
}

#[test]
fn a_commit_whose_receipt_cannot_be_stored_answers_outcome_unknown() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let pause = Pause::at("open");
    let w = world_of(repo.path(), Some(&pause), &[], writers());
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let writing = std::thread::spawn(move || {
        let req = json!({"cap": pm, "verb": "record.write",
                         "args": {"project": "site", "path": "docs/plan.md", "record": "# Plan\n"}});
        raw_request(&socket, format!("{req}\n").as_bytes())
    });
    pause.wait();
    // The run gives its role up while its commit is being made: the
    // receipt (its authority) can't be recorded any more.
    res(&w.b.call(&w.pm, "role.release", Value::Null));
    pause.release();
    let r = writing.join().expect("writer");
    assert_eq!(err(&r), "outcome-unknown");
    // The commit stands, with no receipt; the refusal is on record.
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    assert_eq!(show(&repo, "%an", &head), "pm.pm");
    assert!(events(w.root.path(), "record.written").is_empty());
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .map(|r| r[4].clone())
        .collect();
    assert_eq!(codes, [json!("outcome-unknown")]);
    w.b.close();
}

#[test]
fn a_head_moved_outside_the_lock_during_a_write_gets_project_busy_and_loses_nothing() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    // A commit someone else makes while the bus writes: ready before, moved
    // onto HEAD by an outside `git update-ref` while the bus's write is held
    // just before it moves HEAD.
    let tree = repo.git(&["rev-parse", "HEAD^{tree}"], "x");
    let outside = repo.git(&["commit-tree", &tree, "-p", &c1, "-m", "outside"], "Bob");
    let pause = Pause::at("ref");
    let w = world_of(repo.path(), Some(&pause), &[], writers());
    let args = json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n"});
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let req = json!({"cap": pm, "verb": "record.write", "args": args.clone()});
    let writing = std::thread::spawn(move || raw_request(&socket, format!("{req}\n").as_bytes()));
    pause.wait();
    repo.git(&["update-ref", "HEAD", &outside], "x");
    pause.release();
    assert_eq!(err(&writing.join().expect("writer")), "project-busy");
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), outside);
    assert!(events(w.root.path(), "record.written").is_empty());
    // Written again, on top of the outside commit.
    let c = res(&w.b.call(&w.pm, "record.write", args))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    assert_eq!(show(&repo, "%P", &c), outside);
    w.b.close();
}

#[test]
fn an_invalid_spec_file_keeps_the_readers_code_for_a_read_and_a_cited_raise() {
    // The human committed a spec that is not UTF-8 (one repository) and one
    // past the 1 MiB file limit (another).
    let binary = Repo::new();
    let full = binary.path().join("spec/north-star.md");
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(&full, [b'#', b' ', 0xff, 0xfe, b'\n']).expect("write");
    binary.git(&["add", "--", "spec/north-star.md"], "Ada");
    binary.git(&["commit", "-q", "-m", "binary"], "Ada");
    let cb = binary.git(&["rev-parse", "HEAD"], "x");
    let big = Repo::new();
    let cg = big.commit(
        "spec/north-star.md",
        &format!("# Big\n{}", "b".repeat(1024 * 1024)),
        "Ada",
    );
    let w = Cited::start(
        business(),
        &[("bin", binary.path()), ("big", big.path())],
        &["pm", "cto", "dev"],
    );
    for (project, commit) in [("bin", &cb), ("big", &cg)] {
        assert_eq!(
            err(&w.call("dev", "spec.read", json!({"project": project}))),
            "project-file-invalid",
            "{project}"
        );
        // A blocking cited raise: refused with the reader's code, filed
        // under its task.
        let mut a = cite(project, commit);
        a["blocking"] = json!(true);
        a["task_ref"] = json!("vikunja:1/7");
        assert_eq!(
            err(&w.raise("dev", "prd.approve", a)),
            "project-file-invalid",
            "{project}"
        );
    }
    // A raise with no task_ref whose target is a task ref is filed under
    // the target (DESIGN.md, Refusal evidence), at either stage: its own
    // checks (before Git) and the Git side's.
    let mut a = cite("bin", &cb);
    a["target"] = json!("vikunja:1/8");
    assert_eq!(
        err(&w.raise("dev", "prd.approve", a.clone())),
        "project-file-invalid"
    );
    a["choice"] = json!("yes");
    assert_eq!(err(&w.raise("dev", "prd.approve", a)), "invalid-choice");
    let got: Vec<Value> = refusals(w.root.path());
    assert_eq!(
        got,
        [
            json!(["dev", "run-dev", null, "spec.read", "project-file-invalid"]),
            json!([
                "dev",
                "run-dev",
                "vikunja:1/7",
                "decision.raise",
                "project-file-invalid"
            ]),
            json!(["dev", "run-dev", null, "spec.read", "project-file-invalid"]),
            json!([
                "dev",
                "run-dev",
                "vikunja:1/7",
                "decision.raise",
                "project-file-invalid"
            ]),
            json!([
                "dev",
                "run-dev",
                "vikunja:1/8",
                "decision.raise",
                "project-file-invalid"
            ]),
            json!([
                "dev",
                "run-dev",
                "vikunja:1/8",
                "decision.raise",
                "invalid-choice"
            ]),
        ]
    );
    let stored: i64 = db(w.root.path())
        .query_row("SELECT count(*) FROM decisions", [], |r| r.get(0))
        .expect("count");
    assert_eq!(stored, 0);
    w.b.close();
}

#[test]
fn a_private_index_lock_left_by_a_killed_write_does_not_stop_the_next() {
    // A write killed inside `update-index` (the broker's deadline kills the
    // whole process group with SIGKILL, which leaves Git no chance to clean
    // up) leaves `.git/mosaic-index.lock` behind. Only the bus uses that
    // index, under its own lock, so the next write goes ahead.
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    std::fs::write(repo.path().join(".git/mosaic-index.lock"), "stale").expect("stale lock");
    std::fs::write(repo.path().join(".git/mosaic-index"), "stale").expect("stale index");
    let w = world_of(repo.path(), None, &[], writers());
    let r = res(&w.b.call(
        &w.pm,
        "record.write",
        json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n"}),
    ))
    .clone();
    let c = r["commit"].as_str().expect("commit").to_string();
    assert_eq!(show(&repo, "%P", &c), c1);
    assert_eq!(
        repo.git(&["ls-tree", "-r", "--name-only", &c], "x"),
        "docs/plan.md\nspec/north-star.md"
    );
    assert!(!repo.path().join(".git/mosaic-index.lock").exists());
    assert!(!repo.path().join(".git/mosaic-index").exists());
    w.b.close();
}

#[test]
fn an_outside_git_holding_its_locks_is_no_contention_for_the_index_and_busy_for_the_ref() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let w = world_of(repo.path(), None, &[], writers());
    let write = |name: &str| {
        w.b.call(
            &w.pm,
            "record.write",
            json!({"project": "site", "path": format!("docs/{name}.md"), "record": "# Doc\n"}),
        )
    };
    // Someone's `git commit` in the checkout holds the index lock: the bus
    // never contends for it (its index is its own) and leaves it alone.
    let index_lock = repo.path().join(".git/index.lock");
    std::fs::write(&index_lock, "theirs").expect("index.lock");
    let c = res(&write("a"))["commit"]
        .as_str()
        .expect("sha")
        .to_string();
    assert_eq!(show(&repo, "%P", &c), c1);
    assert_eq!(
        std::fs::read_to_string(&index_lock).expect("kept"),
        "theirs"
    );
    std::fs::remove_file(&index_lock).expect("rm");
    // The same commit about to move the branch holds the branch's ref lock:
    // the bus's update-ref can't take it, a contention, so project-busy
    // (nothing moved), and the next write once it is gone goes through.
    let ref_lock = repo.path().join(".git/refs/heads/main.lock");
    std::fs::write(&ref_lock, "theirs").expect("ref lock");
    assert_eq!(err(&write("b")), "project-busy");
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), c);
    std::fs::remove_file(&ref_lock).expect("rm");
    let d = res(&write("b"))["commit"]
        .as_str()
        .expect("sha")
        .to_string();
    assert_eq!(show(&repo, "%P", &d), c);
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .map(|r| r[4].clone())
        .collect();
    assert_eq!(codes, [json!("project-busy")]);
    w.b.close();
}

/// What the bus reads of a history is what `git log` prints: the spec's
/// changing commits under Git's default history simplification (a merge
/// that took one side's spec is not shown and only that side is followed;
/// one that changed it is), its author, `%aI` in the author's own zone, and
/// `%s`.
#[test]
fn spec_history_is_what_git_log_prints_through_merges_and_time_zones() {
    let repo = Repo::new();
    let at = |n: i64, zone: &str| format!("{} {zone}", 1_700_000_000 + n * 3600);
    let commit_at = |path: &str, content: &str, author: &str, date: &str, msg: &str| {
        let full = repo.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(&full, content).expect("write");
        repo.git(&["add", "--", path], author);
        repo.git_dated(&["commit", "-q", "-m", msg], author, date);
    };
    commit_at(
        "spec/north-star.md",
        "v1\n",
        "Ada",
        &at(1, "+0000"),
        "first\n\nbody",
    );
    commit_at("docs/a.md", "a\n", "pm.pm", &at(2, "-0130"), "docs a");
    repo.git(&["checkout", "-q", "-b", "side"], "x");
    commit_at(
        "spec/north-star.md",
        "side\n",
        "cto.cto",
        &at(3, "+0545"),
        "  side  \nspec  ",
    );
    commit_at("docs/b.md", "b\n", "cto.cto", &at(4, "+0000"), "docs b");
    repo.git(&["checkout", "-q", "main"], "x");
    commit_at("docs/c.md", "c\n", "pm.pm", &at(5, "+1400"), "docs c");
    // A merge that takes side's spec: TREESAME to side, not shown.
    repo.git_dated(
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
        "Ada",
        &at(6, "-1200"),
    );
    repo.git(&["checkout", "-q", "-b", "other", "HEAD~1"], "x");
    commit_at(
        "spec/north-star.md",
        "other\n",
        "pm.pm",
        &at(7, "+0100"),
        "other spec",
    );
    repo.git(&["checkout", "-q", "main"], "x");
    // A merge whose spec is neither side's: shown.
    repo.git_dated(
        &["merge", "-q", "--no-commit", "-s", "ours", "other"],
        "Ada",
        &at(8, "+0000"),
    );
    std::fs::write(repo.path().join("spec/north-star.md"), "merged\n").expect("write");
    repo.git(&["add", "--", "spec/north-star.md"], "Ada");
    repo.git_dated(
        &["commit", "-q", "-m", "merge other"],
        "Ada",
        &at(8, "+0000"),
    );
    commit_at("docs/d.md", "d\n", "pm.pm", &at(9, "+0000"), "docs d");
    let logged = repo.git(
        &[
            "log",
            "--format=%H%x00%an%x00%aI%x00%s",
            "HEAD",
            "--",
            "spec/north-star.md",
        ],
        "x",
    );
    let want: Vec<Value> = logged
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\0').collect();
            json!({"commit": f[0], "author": f[1], "at": f[2], "subject": f[3]})
        })
        .collect();
    assert!(want.len() >= 4, "{logged}");
    let w = world(repo.path(), None, &[]);
    let r = res(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))).clone();
    assert_eq!(r["history"], json!(want));
    assert_eq!(r["content"], json!("merged\n"));
    // The files list and the editor's file give the same last change.
    let human = ShimSession::human(&w.b);
    let f = res(&human.call(
        "project.file",
        json!({"project": "site", "path": "spec/north-star.md"}),
    ))
    .clone();
    assert_eq!(
        (&f["commit"], &f["at"]),
        (&want[0]["commit"], &want[0]["at"])
    );
    let docs = repo.git(
        &["log", "-1", "--format=%H %aI", "HEAD", "--", "docs/b.md"],
        "x",
    );
    let files = res(&human.call("project.files", json!({"project": "site"}))).clone();
    let b = files["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == json!("docs/b.md"))
        .cloned()
        .expect("docs/b.md");
    assert_eq!(
        format!(
            "{} {}",
            b["commit"].as_str().expect("sha"),
            b["at"].as_str().expect("at")
        ),
        docs
    );
    w.b.close();
}

/// A repository file the reader blocks on, a FIFO where `.git/HEAD` is: a
/// `git` child could be killed at its deadline, an in-process read can't,
/// so the server stops waiting for the job at its budget and answers
/// `project-unavailable` within the client's wait for the verb; the writer
/// serves everyone else meanwhile.
#[test]
fn a_read_held_up_in_the_file_system_is_answered_within_the_clients_wait() {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    let head = repo.path().join(".git/HEAD");
    std::fs::remove_file(&head).expect("HEAD");
    let c = std::ffi::CString::new(head.to_str().expect("utf-8")).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path the test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let w = world(repo.path(), None, &[]);
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let reading = std::thread::spawn(move || {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
        // The wait a client gives this verb: the job's budget plus a margin.
        s.set_read_timeout(Some(Duration::from_secs(30 + 5)))
            .expect("timeout");
        let req = json!({"cap": pm, "verb": "spec.read", "args": {"project": "site"}});
        s.write_all(format!("{req}\n").as_bytes()).expect("send");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    });
    std::thread::sleep(Duration::from_millis(300));
    res(&w.b.call(
        &w.cto,
        "message.send",
        json!({"to": "pm", "body": "meanwhile"}),
    ));
    let out = reading.join().expect("reader");
    assert!(!out.is_empty(), "no answer within the client's wait");
    let reply: Value = serde_json::from_slice(out.trim_ascii_end()).expect("json");
    assert_eq!(err(&reply), "project-unavailable");
    // The held worker is let go: a writer opens the FIFO (never waiting for
    // a reader) and closes it.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&head);
    w.b.close();
}
