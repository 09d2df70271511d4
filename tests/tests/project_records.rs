//! Project records over Git (3i row 138, issue 22) through the real broker:
//! a `mosaic-bus` child, roles bound to real processes, and real Git
//! repositories the tests make with the real `git`.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The real `git`, found on the test's `PATH`.
fn real_git() -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .expect("sh");
    let p = String::from_utf8(out.stdout).expect("utf-8");
    let p = PathBuf::from(p.trim());
    assert!(p.is_absolute(), "git on PATH: {p:?}");
    p
}

/// A repository the test owns, driven by the real `git` with no outside
/// configuration.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-records-")
            .tempdir()
            .expect("tempdir");
        let r = Repo { dir };
        r.git(&["init", "-q", "-b", "main"], "nobody");
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str], author: &str) -> String {
        let out = Command::new(real_git())
            .args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", author)
            .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    }

    /// Writes `path` and commits it as `author`; returns the commit.
    fn commit(&self, path: &str, content: &str, author: &str) -> String {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(&full, content).expect("write");
        self.git(&["add", "--", path], author);
        self.git(&["commit", "-q", "-m", &format!("edit {path}")], author);
        self.git(&["rev-parse", "HEAD"], author)
    }
}

/// acme with its `site` project in `repo`; pm and cto bound and holding.
struct World {
    root: tempfile::TempDir,
    b: Broker,
    pm: String,
    cto: String,
    _runs: Vec<Sleeper>,
}

fn world(repo: &Path, git: Option<&Path>, env: &[(&str, &str)]) -> World {
    let root = data_root();
    let mut biz = business();
    biz["projects"] = json!({"site": {"repo": repo.to_str().expect("utf-8")}});
    let mut config = json!({
        "dataRoot": root.path().to_str().expect("utf-8"),
        "businesses": {"acme": biz},
        "readers": ["acme"],
    });
    if let Some(g) = git {
        config["git"] = json!(g.to_str().expect("utf-8"));
    }
    let (mut b, reply) =
        Broker::spawn_with(root.path(), json!({"op": "boot", "config": config}), env);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (s1, s2) = (sleeper(), sleeper());
    let pm = b.bind("pm", "run-pm", s1.id());
    let cto = b.bind("cto", "run-cto", s2.id());
    for cap in [&pm, &cto] {
        res(&b.call(cap, "role.claim", Value::Null));
    }
    World {
        root,
        b,
        pm,
        cto,
        _runs: vec![s1, s2],
    }
}

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
    // A `git` that is not there.
    w.b.close();
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    let w = world(repo.path(), Some(Path::new("/nonexistent/git")), &[]);
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
fn a_hostile_repository_config_or_environment_runs_nothing() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    let trap = tempfile::tempdir().expect("tempdir");
    let marker = trap.path().join("ran");
    let script = trap.path().join("evil.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho ran \"$0\" \"$@\" >> {}\nexit 0\n",
            marker.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let evil = script.to_str().expect("utf-8");
    // Every program slot a read could reach, in the repository's config...
    let config = repo.path().join(".git/config");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n\thooksPath = {hooks}\n\
         [log]\n\tshowSignature = true\n[gpg]\n\tprogram = {evil}\n\
         [diff]\n\texternal = {evil}\n[alias]\n\tlog = !{evil}\n",
        hooks = trap.path().display()
    ));
    std::fs::write(&config, text).expect("config");
    // ...its hooks...
    for hook in [
        "post-checkout",
        "pre-commit",
        "post-commit",
        "reference-transaction",
    ] {
        std::fs::copy(&script, repo.path().join(".git/hooks").join(hook)).expect("hook");
        std::fs::copy(&script, trap.path().join(hook)).expect("hook");
    }
    // ...and a global config and GIT_* variables in the broker's own environment.
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join(".gitconfig"),
        format!(
            "[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {evil}\n[core]\n\tpager = {evil}\n"
        ),
    )
    .expect("gitconfig");
    let home_s = home.path().to_str().expect("utf-8");
    let w = world(
        repo.path(),
        None,
        &[
            ("HOME", home_s),
            ("GIT_DIR", "/nonexistent"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
            ("GIT_CONFIG_VALUE_0", evil),
            ("GIT_EXTERNAL_DIFF", evil),
            ("GIT_PAGER", evil),
        ],
    );
    let r = res(&w.b.call(&w.pm, "spec.read", json!({"project": "site"}))).clone();
    assert_eq!(
        (&r["content"], &r["confirmed"]),
        (&json!("v1\n"), &json!(true))
    );
    let head = r["head"].as_str().expect("head").to_string();
    res(&w.b.call(
        &w.pm,
        "spec.read",
        json!({"project": "site", "commit": head}),
    ));
    assert!(
        !marker.exists(),
        "ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    w.b.close();
}

#[test]
fn a_spec_read_held_in_git_does_not_delay_an_unrelated_send() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    // A `git` that waits for the test's word before it runs the real one.
    let gate = tempfile::tempdir().expect("tempdir");
    let started = gate.path().join("started");
    let release = gate.path().join("release");
    let wrapper = gate.path().join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n: > {started}\nn=0\nwhile [ ! -e {release} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\nexec {git} \"$@\"\n",
            started = started.display(),
            release = release.display(),
            git = real_git().display(),
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let w = world(repo.path(), Some(&wrapper), &[]);
    let socket = w.b.socket.clone();
    let pm = w.pm.clone();
    let reading = std::thread::spawn(move || {
        let req = json!({"cap": pm, "verb": "spec.read", "args": {"project": "site"}});
        raw_request(&socket, format!("{req}\n").as_bytes())
    });
    let until = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < until, "git never started");
        std::thread::sleep(Duration::from_millis(10));
    }
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
    std::fs::write(&release, "").expect("release");
    let r = reading.join().expect("reader thread");
    assert_eq!(res(&r)["content"], json!("v1\n"));
    w.b.close();
}
