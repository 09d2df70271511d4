//! Reading the spec over Git (3i row 138, issue 22) through the real broker: `spec.read` answers committed bytes confirmed only by the human and its history as `git log` prints it, refuses with the reader's codes, and is held in Git off the writer and answered within the client's wait.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
#[path = "support/records_env.rs"]
mod records_env;
use records_env::{cite, world, Cited, Pause, Repo};

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
