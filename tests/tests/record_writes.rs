//! `record.write` (3i row 138, issue 22) through the real broker and real Git: one file committed as the session's author, and every contention (a concurrent write, a moved `HEAD`, a left or held lock, an unstored receipt) answered with its code and losing nothing.

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/records_env.rs"]
mod records_env;
use records_env::{events, show, world_of, writers, HeldLock, Pause, Repo};

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
