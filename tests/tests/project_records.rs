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

    /// [`Repo::git`] with the author and committer dates both `date`.
    fn git_dated(&self, args: &[&str], author: &str, date: &str) -> String {
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
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    }

    /// Adds `text` to the repository's own `.git/config`.
    fn append_config(&self, text: &str) {
        let config = self.path().join(".git/config");
        let mut all = std::fs::read_to_string(&config).expect("config");
        all.push_str(text);
        std::fs::write(&config, all).expect("config");
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

/// A job held in Git at `step` until the test releases it: the broker's
/// test-only pause (`MOSAIC_TEST_PROJECT_PAUSE=STEP:DIR`, read by a debug
/// build only), at `open` (a read as it starts, a write once it holds the
/// project lock) or `ref` (a write just before `HEAD` moves). A broker
/// that ignores it (a release build) fails the test: `started` never
/// appears.
struct Pause {
    dir: tempfile::TempDir,
    step: &'static str,
}

impl Pause {
    fn at(step: &'static str) -> Pause {
        Pause {
            dir: tempfile::tempdir().expect("tempdir"),
            step,
        }
    }

    fn env(&self) -> String {
        format!("{}:{}", self.step, self.dir.path().display())
    }

    fn started(&self) -> PathBuf {
        self.dir.path().join("started")
    }

    /// Waits until a job reached the step.
    fn wait(&self) {
        wait_for(&self.started());
    }

    /// Lets every held job go on (and every later one pass).
    fn release(&self) {
        std::fs::write(self.dir.path().join("release"), "").expect("release");
    }

    /// Holds the next job again.
    fn rearm(&self) {
        std::fs::remove_file(self.dir.path().join("release")).expect("re-arm");
        std::fs::remove_file(self.started()).expect("re-arm");
    }
}

/// `env` with the pause's variable added, when there is a pause.
fn with_pause<'a>(
    pause: Option<&Pause>,
    env: &[(&'a str, &'a str)],
    value: &'a mut String,
) -> Vec<(&'a str, &'a str)> {
    let mut all = env.to_vec();
    if let Some(p) = pause {
        *value = p.env();
        all.push(("MOSAIC_TEST_PROJECT_PAUSE", value.as_str()));
    }
    all
}

fn world(repo: &Path, pause: Option<&Pause>, env: &[(&str, &str)]) -> World {
    world_of(repo, pause, env, business())
}

fn world_of(repo: &Path, pause: Option<&Pause>, env: &[(&str, &str)], mut biz: Value) -> World {
    let root = data_root();
    biz["projects"] = json!({"site": {"repo": repo.to_str().expect("utf-8")}});
    let config = json!({
        "dataRoot": root.path().to_str().expect("utf-8"),
        "businesses": {"acme": biz},
        "readers": ["acme"],
    });
    let mut value = String::new();
    let env = with_pause(pause, env, &mut value);
    let (mut b, reply) =
        Broker::spawn_with(root.path(), json!({"op": "boot", "config": config}), &env);
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
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .map(|r| r[4].clone())
        .collect();
    assert_eq!(codes, [json!("project-unavailable")]);
    w.b.close();
}

/// The boot key `git` is gone with the `git` child: a config that still
/// names one is refused like any unknown key, so no operator believes a
/// `git` of theirs is still run.
#[test]
fn a_boot_config_naming_a_git_executable_is_refused() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    let root = data_root();
    let mut biz = business();
    biz["projects"] = json!({"site": {"repo": repo.path().to_str().expect("utf-8")}});
    let config = json!({
        "dataRoot": root.path().to_str().expect("utf-8"),
        "businesses": {"acme": biz},
        "git": real_git().to_str().expect("utf-8"),
    });
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply, json!({"ok": false, "error": "invalid-config"}));
    assert_eq!(
        b.wait(Duration::from_secs(10)).expect("exits").code(),
        Some(2)
    );
}

#[test]
fn a_hostile_repository_config_or_environment_runs_nothing() {
    let repo = Repo::new();
    // A smudge/textconv filter for every path, committed.
    repo.commit(".gitattributes", "* filter=evil diff=evil\n", "Ada");
    repo.commit("spec/north-star.md", "v1\n", "Ada");
    let trap = tempfile::tempdir().expect("tempdir");
    let (evil, marker) = hostile_program(trap.path(), "exit 0");
    let evil = evil.as_str();
    // Every program slot a read could reach, in the repository's config...
    repo.append_config(&format!(
        "[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n\thooksPath = {hooks}\n\
         \tsshCommand = {evil}\n\taskPass = {evil}\n\teditor = {evil}\n\
         [log]\n\tshowSignature = true\n[gpg]\n\tprogram = {evil}\n\
         [commit]\n\tgpgSign = true\n\
         [filter \"evil\"]\n\tclean = {evil}\n\tsmudge = {evil}\n\tprocess = {evil}\n\
         [diff \"evil\"]\n\ttextconv = {evil}\n\
         [diff]\n\texternal = {evil}\n[credential]\n\thelper = !{evil}\n\
         [alias]\n\tlog = !{evil}\n\tcat-file = !{evil}\n\trev-parse = !{evil}\n\
         \tls-tree = !{evil}\n\tshow = !{evil}\n",
        hooks = trap.path().display()
    ));
    // ...a file it includes, which names them again...
    let included = trap.path().join("included.config");
    std::fs::write(
        &included,
        format!("[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n[alias]\n\tlog = !{evil}\n"),
    )
    .expect("included config");
    repo.append_config(&format!("[include]\n\tpath = {}\n", included.display()));
    // ...its hooks...
    for hook in [
        "post-checkout",
        "pre-commit",
        "post-commit",
        "reference-transaction",
    ] {
        std::fs::copy(evil, repo.path().join(".git/hooks").join(hook)).expect("hook");
        std::fs::copy(evil, trap.path().join(hook)).expect("hook");
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
    // A cited raise reads the same repository through the same git.
    let cited = res(&w.b.call(
        &w.cto,
        "decision.raise",
        json!({"action": "prd.approve", "question": "Approve?",
               "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "blocking": false,
               "project": "site", "spec_path": "spec/north-star.md", "spec_commit": head}),
    ))
    .clone();
    assert_eq!(
        (&cited["routed_to"], &cited["spec_commit"]),
        (&json!("pm"), &json!(head))
    );
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

/// A broker over `biz` with `projects` (key → repository path), and the
/// runs of `roles` bound and holding their roles.
struct Cited {
    root: tempfile::TempDir,
    b: Broker,
    caps: std::collections::BTreeMap<String, String>,
    _runs: Vec<Sleeper>,
}

impl Cited {
    fn start(biz: Value, projects: &[(&str, &Path)], roles: &[&str]) -> Cited {
        Cited::start_with(biz, projects, roles, None)
    }

    /// As [`Cited::start`], with its Git jobs held by `pause` when given.
    fn start_with(
        mut biz: Value,
        projects: &[(&str, &Path)],
        roles: &[&str],
        pause: Option<&Pause>,
    ) -> Cited {
        let root = data_root();
        let p: serde_json::Map<String, Value> = projects
            .iter()
            .map(|(k, r)| (k.to_string(), json!({"repo": r.to_str().expect("utf-8")})))
            .collect();
        biz["projects"] = Value::Object(p);
        let config = json!({
            "dataRoot": root.path().to_str().expect("utf-8"),
            "businesses": {"acme": biz},
            "readers": ["acme"],
        });
        let mut value = String::new();
        let env = with_pause(pause, &[], &mut value);
        let (mut b, reply) =
            Broker::spawn_with(root.path(), json!({"op": "boot", "config": config}), &env);
        assert_eq!(reply["ok"], json!(true), "boot: {reply}");
        let mut caps = std::collections::BTreeMap::new();
        let mut runs = Vec::new();
        for role in roles {
            let s = sleeper();
            let cap = b.bind(role, &format!("run-{role}"), s.id());
            res(&b.call(&cap, "role.claim", Value::Null));
            caps.insert(role.to_string(), cap);
            runs.push(s);
        }
        Cited {
            root,
            b,
            caps,
            _runs: runs,
        }
    }

    fn call(&self, role: &str, verb: &str, args: Value) -> Value {
        self.b.call(&self.caps[role], verb, args)
    }

    /// `decision.raise` of `action` by `role`, with `extra` args merged in.
    fn raise(&self, role: &str, action: &str, extra: Value) -> Value {
        let mut args = json!({
            "action": action, "question": "Do it?",
            "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
            "recommendation": "yes", "blocking": false,
        });
        if let (Some(a), Value::Object(x)) = (args.as_object_mut(), extra) {
            a.extend(x);
        }
        self.call(role, "decision.raise", args)
    }

    /// The stored `(class, routed_to, project, spec_path, spec_commit)` of a decision.
    fn stored(&self, id: &Value) -> Vec<Value> {
        db(self.root.path())
            .query_row(
                "SELECT class, routed_to, project, spec_path, spec_commit FROM decisions WHERE id = ?1",
                [id.as_str().expect("id")],
                |r| {
                    let s = |i: usize| r.get::<_, Option<String>>(i);
                    Ok(vec![json!(s(0)?), json!(s(1)?), json!(s(2)?), json!(s(3)?), json!(s(4)?)])
                },
            )
            .expect("decision row")
    }
}

/// `{project, spec_path, spec_commit}` citing `commit` of `project`.
fn cite(project: &str, commit: &str) -> Value {
    json!({"project": project, "spec_path": "spec/north-star.md", "spec_commit": commit})
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

/// A program in `dir` that notes each run of it in `dir/ran` (its argv),
/// then runs `then`: its path and the note's.
fn hostile_program(dir: &Path, then: &str) -> (String, PathBuf) {
    let marker = dir.join("ran");
    let script = dir.join("evil.sh");
    executable(
        &script,
        &format!(
            "#!/bin/sh\necho ran \"$0\" \"$@\" >> {}\n{then}\n",
            marker.display()
        ),
    );
    (script.to_str().expect("utf-8").to_string(), marker)
}

/// Writes `text` to `path` as a program (mode 0755).
fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the program");
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
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

// --- record.write, the editor verbs, spec review notices (issue 22, part B)

/// The example business with record.write within-role for pm and cto (as
/// the v2 definitions grant it), none for dev, and a second pm instance
/// `pm2` that no run holds.
fn writers() -> Value {
    let mut biz = business();
    for r in ["pm", "cto"] {
        biz["roles"][r]["authority"]["withinRole"]
            .as_array_mut()
            .expect("list")
            .push(json!("record.write"));
    }
    biz["roles"]["pm2"] =
        json!({"definition": "pm", "authority": {"withinRole": ["record.write"]}});
    biz
}

/// `git show -s --format=FMT COMMIT`.
fn show(repo: &Repo, fmt: &str, commit: &str) -> String {
    repo.git(&["show", "-s", &format!("--format={fmt}"), commit], "x")
}

/// The events of `kind`, oldest first, as `[role, run, subject, body]`.
fn events(root: &Path, kind: &str) -> Vec<Value> {
    let conn = db(root);
    let mut st = conn
        .prepare("SELECT role, run, subject, body FROM events WHERE kind = ?1 ORDER BY seq")
        .expect("prepare");
    let rows = st
        .query_map([kind], |r| {
            let s = |i: usize| r.get::<_, Option<String>>(i);
            let body: String = r.get(3)?;
            Ok(json!([
                s(0)?,
                s(1)?,
                s(2)?,
                serde_json::from_str::<Value>(&body).expect("json")
            ]))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The bus's messages, oldest first, as `[to_role, class, body, in a thread]`.
fn bus_messages(root: &Path) -> Vec<Value> {
    let conn = db(root);
    let mut st = conn
        .prepare(
            "SELECT m.to_role, m.class, m.body,
                    EXISTS(SELECT 1 FROM message_threads t WHERE t.message = m.id)
             FROM messages m WHERE m.from_role = '_bus' AND m.from_run = 'bus' ORDER BY m.seq",
        )
        .expect("prepare");
    let rows = st
        .query_map([], |r| {
            Ok(json!([
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?
            ]))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// Holds `<repo>/.git/mosaic.lock` as another writer would.
struct HeldLock {
    _file: std::fs::File,
}

impl HeldLock {
    fn take(repo: &Repo) -> HeldLock {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(repo.path().join(".git/mosaic.lock"))
            .expect("lock file");
        // SAFETY: flock on a descriptor this struct owns.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, 0, "the test takes the project lock");
        HeldLock { _file: f }
    }
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

fn wait_for(p: &Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while !p.exists() {
        assert!(Instant::now() < until, "never appeared: {}", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
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

const NOTICE_HEAD: &str = "The human saved spec/north-star.md in project site: commit ";

#[test]
fn the_editor_verbs_are_the_humans_and_a_spec_save_tells_each_pm_and_cto() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\nv1\n", "Ada");
    let d1 = repo.commit("docs/plan.md", "# Plan\n", "pm.pm");
    // Not editable: a requirement, a symlinked doc, another directory.
    repo.commit("requirements/REQ-A-1.json", "{}\n", "pm.pm");
    repo.commit("notes/x.md", "x\n", "pm.pm");
    std::os::unix::fs::symlink("plan.md", repo.path().join("docs/link.md")).expect("symlink");
    repo.git(&["add", "--", "docs/link.md"], "x");
    repo.git(&["commit", "-q", "-m", "link"], "x");
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    let w = world_of(repo.path(), None, &[], writers());
    let human = ShimSession::human(&w.b);

    // project.files: the spec and the plain docs files, each with its last commit.
    let r = res(&human.call("project.files", json!({"project": "site"}))).clone();
    assert_eq!(r["head"], json!(head));
    assert_eq!(r["truncated"], json!(false));
    let files = r["files"].as_array().expect("files");
    let paths: Vec<&Value> = files.iter().map(|f| &f["path"]).collect();
    assert_eq!(
        paths,
        [&json!("docs/plan.md"), &json!("spec/north-star.md")]
    );
    assert_eq!(files[0]["commit"], json!(d1));
    assert_eq!(files[0]["author"], json!("pm.pm"));
    assert_eq!(files[1]["commit"], json!(c1));

    // project.file: committed bytes, the head, the file's commit, its author and time.
    std::fs::write(repo.path().join("spec/north-star.md"), "uncommitted\n").expect("write");
    let f = res(&human.call(
        "project.file",
        json!({"project": "site", "path": "spec/north-star.md"}),
    ))
    .clone();
    assert_eq!(f["content"], json!("# North star\nv1\n"));
    assert_eq!(
        (&f["head"], &f["commit"], &f["author"]),
        (&json!(head), &json!(c1), &json!("Ada"))
    );
    assert_eq!(f["path"], json!("spec/north-star.md"));
    assert!(f["at"].as_str().is_some_and(|t| t.starts_with("20")), "{f}");
    let keys: Vec<&String> = f.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["at", "author", "commit", "content", "head", "path"]);

    // Saves: a stale base writes nothing and tells nobody.
    let save = |path: &str, base: &str, content: &str| {
        human.call(
            "project.file.save",
            json!({"project": "site", "path": path, "base": base, "content": content}),
        )
    };
    assert_eq!(
        err(&save("spec/north-star.md", &d1, "# v2\n")),
        "stale-base"
    );
    assert_eq!(
        err(&save("spec/north-star.md", &head, "# v2\n")),
        "stale-base"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);

    // A docs save: one commit by the human, no notice.
    let r = res(&save("docs/plan.md", &d1, "# Plan\nv2\n")).clone();
    let dc = r["commit"].as_str().expect("commit").to_string();
    assert_eq!(r, json!({"path": "docs/plan.md", "commit": dc}));
    assert_eq!(
        show(&repo, "%an <%ae> %cn", &dc),
        "Ada <human@acme.mosaic.invalid> mosaic-bus"
    );
    assert_eq!(show(&repo, "%P", &dc), head);
    // A new docs file: its base is HEAD.
    let nc = res(&save("docs/new-page.md", &dc, "# New\n"))["commit"].clone();
    assert_eq!(err(&save("docs/other.md", &d1, "# Other\n")), "stale-base");
    // Unchanged bytes make no commit.
    assert_eq!(
        err(&save(
            "docs/new-page.md",
            nc.as_str().expect("sha"),
            "# New\n"
        )),
        "project-file-unchanged"
    );
    assert!(bus_messages(w.root.path()).is_empty());

    // The spec save: one commit, confirmed, and one RESULT from the bus to
    // each pm and cto instance (pm, cto, pm2), in no thread.
    let r = res(&save("spec/north-star.md", &c1, "# North star\nv2\n")).clone();
    let sc = r["commit"].as_str().expect("commit").to_string();
    let spec = res(&w.b.call(&w.cto, "spec.read", json!({"project": "site"}))).clone();
    assert_eq!(
        (&spec["commit"], &spec["confirmed"]),
        (&json!(sc), &json!(true))
    );
    let notices = bus_messages(w.root.path());
    let to: Vec<&Value> = notices.iter().map(|n| &n[0]).collect();
    assert_eq!(to, [&json!("cto"), &json!("pm"), &json!("pm2")]);
    let body = format!("{NOTICE_HEAD}{sc}, from the editor's base {c1}. ");
    for n in &notices {
        assert_eq!(n[1], json!("RESULT"));
        assert!(n[2].as_str().is_some_and(|b| b.starts_with(&body)), "{n}");
        assert!(
            n[2].as_str().is_some_and(|b| b.contains("read_spec")),
            "{n}"
        );
        assert_eq!(n[3], json!(false), "in no thread");
    }
    let got = res(&w.b.call(&w.pm, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["from_role"], json!("_bus"));
    assert!(got["messages"][0]["body"]
        .as_str()
        .is_some_and(|b| b.starts_with(&body)));
    // pm2's notice waits for a run to claim it.
    let s3 = sleeper();
    let mut b = w.b;
    let pm2 = b.bind("pm2", "run-pm2", s3.id());
    res(&b.call(&pm2, "role.claim", Value::Null));
    let got = res(&b.call(&pm2, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"].as_array().map(Vec::len), Some(1));
    assert!(got["messages"][0]["body"]
        .as_str()
        .is_some_and(|b| b.starts_with(&body)));
    let w = World { b, ..w };
    let saved = events(w.root.path(), "project.file.saved");
    assert_eq!(saved.len(), 3);
    assert_eq!(
        (&saved[2][0], &saved[2][1]),
        (&json!("human"), &json!("human-cli"))
    );
    assert_eq!(
        saved[2][3],
        json!({"project": "site", "path": "spec/north-star.md", "commit": sc, "base": c1})
    );
    // An agent's record.write and an outside commit send none.
    res(&w.b.call(
        &w.pm,
        "record.write",
        json!({"project": "site", "path": "docs/pm.md", "record": "# pm\n"}),
    ));
    repo.commit("spec/north-star.md", "# outside\n", "Ada");
    assert_eq!(bus_messages(w.root.path()).len(), 3);

    // The refusals so far: three stale bases and an unchanged save.
    let save_refused = |code: &str| (json!("human"), json!("project.file.save"), json!(code));
    let mut want = vec![
        save_refused("stale-base"),
        save_refused("stale-base"),
        save_refused("stale-base"),
        save_refused("project-file-unchanged"),
    ];
    // Refusals: paths other than the spec and docs, leftovers, bad bases
    // and content, other projects.
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    for (verb, args, code) in [
        (
            "project.file",
            json!({"project": "site", "path": "requirements/REQ-A-1.json"}),
            "project-path-invalid",
        ),
        (
            "project.file",
            json!({"project": "site", "path": "notes/x.md"}),
            "project-path-invalid",
        ),
        (
            "project.file",
            json!({"project": "site", "path": "docs/link.md"}),
            "project-path-invalid",
        ),
        (
            "project.file",
            json!({"project": "site", "path": "../x.md"}),
            "project-path-invalid",
        ),
        (
            "project.file",
            json!({"project": "site", "path": "docs/none.md"}),
            "project-file-missing",
        ),
        (
            "project.file",
            json!({"project": "site", "path": "docs/plan.md", "x": 1}),
            "invalid-request",
        ),
        (
            "project.files",
            json!({"project": "site", "path": "docs/plan.md"}),
            "invalid-request",
        ),
        (
            "project.files",
            json!({"project": "nope"}),
            "unknown-project",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "decisions/DEC-1.json", "base": head, "content": "{}"}),
            "project-path-invalid",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/link.md", "base": head, "content": "x"}),
            "project-path-invalid",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": "HEAD", "content": "x"}),
            "invalid-request",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": head, "content": 7}),
            "invalid-request",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": head}),
            "invalid-request",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": head, "content": "x", "author": "pm"}),
            "invalid-request",
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": head, "content": "bell\u{7}"}),
            "invalid-record",
        ),
    ] {
        assert_eq!(err(&human.call(verb, args.clone())), code, "{verb} {args}");
        want.push((json!("human"), json!(verb), json!(code)));
    }
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);
    // Agents, readers and the tester get human-required.
    let reader = w.b.reader_cap();
    let tester = ShimSession::tester(&w.b);
    for verb in ["project.files", "project.file", "project.file.save"] {
        let a = json!({"project": "site"});
        assert_eq!(err(&w.b.call(&w.pm, verb, a.clone())), "human-required");
        assert_eq!(err(&w.b.call(&reader, verb, a.clone())), "human-required");
        assert_eq!(err(&tester.call(verb, a)), "human-required");
        want.push((json!("pm"), json!(verb), json!("human-required")));
        want.push((json!("tester"), json!(verb), json!("human-required")));
    }
    assert_eq!(bus_messages(w.root.path()).len(), 3);
    // Every refusal of the human, pm and the tester is on record (the
    // reader's are not), in order.
    let got: Vec<(Value, Value, Value)> = refusals(w.root.path())
        .iter()
        .map(|r| (r[0].clone(), r[3].clone(), r[4].clone()))
        .collect();
    assert_eq!(got, want);
    w.b.close();
}

#[test]
fn a_hostile_repository_runs_nothing_when_the_bus_commits() {
    let repo = Repo::new();
    // A clean filter for every path, committed, so a write through the
    // work tree's machinery would run it.
    let c1 = repo.commit(".gitattributes", "* filter=evil diff=evil\n", "Ada");
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let trap = tempfile::tempdir().expect("tempdir");
    let (evil, marker) = hostile_program(trap.path(), "cat");
    let evil = evil.as_str();
    repo.append_config(&format!(
        "[core]\n\tfsmonitor = {evil}\n\thooksPath = {hooks}\n\tpager = {evil}\n\
         \tsshCommand = {evil}\n\teditor = {evil}\n\
         [filter \"evil\"]\n\tclean = {evil}\n\tsmudge = {evil}\n\tprocess = {evil}\n\trequired = true\n\
         [diff \"evil\"]\n\ttextconv = {evil}\n\
         [commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {evil}\n\
         [gpg \"ssh\"]\n\tprogram = {evil}\n[gpg \"x509\"]\n\tprogram = {evil}\n\
         [alias]\n\tcommit-tree = !{evil}\n\tupdate-ref = !{evil}\n\thash-object = !{evil}\n\
         [gc]\n\tauto = 1\n[maintenance]\n\tauto = true\n\
         [user]\n\tname = Mallory\n\temail = m@example.invalid\n",
        hooks = trap.path().display()
    ));
    let included = trap.path().join("included.config");
    std::fs::write(
        &included,
        format!("[core]\n\tfsmonitor = {evil}\n[commit]\n\tgpgSign = true\n"),
    )
    .expect("included config");
    repo.append_config(&format!("[include]\n\tpath = {}\n", included.display()));
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        std::fs::copy(evil, repo.path().join(".git/hooks").join(hook)).expect("hook");
        std::fs::copy(evil, trap.path().join(hook)).expect("hook");
    }
    let w = world_of(
        repo.path(),
        None,
        &[("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/tmp'")],
        writers(),
    );
    let c = res(&w.b.call(
        &w.pm,
        "record.write",
        json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n"}),
    ))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    let human = ShimSession::human(&w.b);
    let f = res(&human.call(
        "project.file",
        json!({"project": "site", "path": "spec/north-star.md"}),
    ))
    .clone();
    let base = f["commit"].as_str().expect("commit").to_string();
    let s = res(&human.call(
        "project.file.save",
        json!({"project": "site", "path": "spec/north-star.md", "base": base, "content": "# v2\n"}),
    ))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    res(&human.call("project.files", json!({"project": "site"})));
    assert!(
        !marker.exists(),
        "ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    // The bytes went in as sent (no filter), unsigned, by the bus's authors.
    assert_eq!(
        repo.git(&["cat-file", "blob", &format!("{c}:docs/plan.md")], "x"),
        "# Plan"
    );
    assert_eq!(show(&repo, "%an %cn", &c), "pm.pm mosaic-bus");
    assert_eq!(show(&repo, "%an %cn", &s), "Ada mosaic-bus");
    assert_eq!(
        repo.git(&["cat-file", "-p", &s], "x")
            .matches("gpgsig")
            .count(),
        0
    );
    assert_ne!(c1, s);
    // An outside Git sees ordinary commits on the branch, with their
    // reflog entries, and a sound repository.
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), s);
    assert_eq!(repo.git(&["rev-parse", "main"], "x"), s);
    assert_eq!(show(&repo, "%P", &s), c);
    repo.git(
        &[
            "-c",
            "core.fsmonitor=false",
            "fsck",
            "--strict",
            "--no-progress",
        ],
        "x",
    );
    let log = repo.git(&["reflog", "show", "--format=%H %gs", "main"], "x");
    assert!(
        log.starts_with(&format!("{s} mosaic-bus: record write")),
        "{log}"
    );
    w.b.close();
}

#[test]
fn a_symlink_in_the_committed_tree_is_never_followed() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let outside = tempfile::tempdir().expect("outside");
    // `docs` is a committed symlink out of the repository.
    std::os::unix::fs::symlink(outside.path(), repo.path().join("docs")).expect("symlink");
    repo.git(&["add", "--", "docs"], "x");
    repo.git(&["commit", "-q", "-m", "docs link"], "x");
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    let w = world_of(repo.path(), None, &[], writers());
    assert_eq!(
        err(&w.b.call(
            &w.pm,
            "record.write",
            json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n"})
        )),
        "project-path-invalid"
    );
    let human = ShimSession::human(&w.b);
    assert_eq!(
        err(&human.call(
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": head, "content": "# x\n"})
        )),
        "project-path-invalid"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);
    assert_eq!(std::fs::read_dir(outside.path()).expect("dir").count(), 0);
    w.b.close();
}

#[test]
fn only_the_save_verb_may_carry_a_megabyte_at_server_and_client() {
    use mosaic_bus::Client;
    let repo = Repo::new();
    let c1 = repo.commit("docs/big.md", "# Big\n", "Ada");
    let w = world_of(repo.path(), None, &[], writers());
    let human = ShimSession::human(&w.b);
    // A 1 MiB file through the human shim: saved, and read back whole.
    let content = format!("# Big\n{}", "b".repeat(1024 * 1024 - 6));
    assert_eq!(content.len(), 1024 * 1024);
    let r = res(&human.call(
        "project.file.save",
        json!({"project": "site", "path": "docs/big.md", "base": c1, "content": content}),
    ))
    .clone();
    let f = res(&human.call(
        "project.file",
        json!({"project": "site", "path": "docs/big.md"}),
    ))
    .clone();
    assert_eq!(
        (&f["commit"], f["content"].as_str().map(str::len)),
        (&r["commit"], Some(1024 * 1024))
    );
    // One byte more is over the package's file limit.
    let over = format!("{content}b");
    assert_eq!(
        err(&human.call(
            "project.file.save",
            json!({"project": "site", "path": "docs/big.md", "base": r["commit"], "content": over}),
        )),
        "invalid-record"
    );

    // The server: a save frame past 64 KiB is taken in only from the
    // human shim's own process (the 1 MiB save above, issue 29 item 3);
    // from anyone else it is too large at 64 KiB, as any other verb's frame
    // that size is; one within 64 KiB reaches the verb (here refused for a
    // capability's session); a save frame past 1 MiB + 64 KiB is too large
    // for everyone.
    let frame = |verb: &str, len: usize| {
        let head = json!({"cap": w.pm, "verb": verb, "args": {"project": "site", "content": ""}})
            .to_string();
        let pad = "p".repeat(len - head.len() - 1);
        let line = format!(
            "{}\n",
            json!({"cap": w.pm, "verb": verb, "args": {"project": "site", "content": pad}})
        );
        assert_eq!(line.len(), len);
        line
    };
    let small = 64 * 1024;
    let large = 1024 * 1024 + 64 * 1024;
    let send = |line: String| raw_request(&w.b.socket, line.as_bytes());
    assert_eq!(
        err(&send(frame("project.file.save", small))),
        "human-required"
    );
    assert_eq!(
        err(&send(frame("project.file.save", small + 1))),
        "request-too-large"
    );
    assert_eq!(
        err(&send(frame("project.file.save", large))),
        "request-too-large"
    );
    assert_eq!(
        err(&send(frame("project.file.save", large + 1))),
        "request-too-large"
    );
    assert_eq!(
        err(&send(frame("record.write", small + 1))),
        "request-too-large"
    );
    assert_eq!(
        err(&send(frame("project.file", small + 1))),
        "request-too-large"
    );
    assert_eq!(err(&send(frame("record.write", small))), "invalid-request");
    // Unterminated past 64 KiB: too large, whatever it was.
    assert_eq!(
        err(&raw_request(&w.b.socket, &vec![b'{'; small + 10])),
        "request-too-large"
    );

    // The Rust client checks the same bounds before it sends (a save of
    // 200 KB leaves it, and the server refuses it at 64 KiB: no shim).
    let c = Client::new(&w.b.socket, w.pm.clone());
    let args = |n: usize| json!({"project": "site", "content": "c".repeat(n)});
    assert_eq!(
        c.call("project.file.save", args(200_000)).unwrap_err().code,
        "request-too-large"
    );
    assert_eq!(
        c.call("project.file.save", args(large)).unwrap_err().code,
        "request-too-large"
    );
    assert_eq!(
        c.call("record.write", args(small)).unwrap_err().code,
        "request-too-large"
    );
    // Nothing of it reached the store as a commit.
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"], "x"),
        r["commit"].as_str().expect("sha")
    );
    w.b.close();
}

#[test]
fn the_spec_review_notice_is_what_a_block_answers() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let mut biz = writers();
    biz["roles"]["cos"] = json!({"definition": "chief-of-staff",
                                 "authority": {"withinRole": ["message.send"]}});
    let mut w = world_of(repo.path(), None, &[], biz);
    let s = sleeper();
    let cos = w.b.bind("cos", "run-cos", s.id());
    res(&w.b.call(&cos, "role.claim", Value::Null));
    let human = ShimSession::human(&w.b);
    let sc = res(&human.call(
        "project.file.save",
        json!({"project": "site", "path": "spec/north-star.md", "base": c1, "content": "# v2\n"}),
    ))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    // The chief of staff is no pm or cto: no notice for it.
    let got = res(&w.b.call(&cos, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"].as_array().map(Vec::len), Some(0));
    // pm answers its notice with a BLOCK, cto with an INFO "Accept".
    let notice = |cap: &str| {
        let got = res(&w.b.call(cap, "message.receive", Value::Null)).clone();
        assert!(got["messages"][0]["body"]
            .as_str()
            .is_some_and(|b| b.starts_with(&format!("{NOTICE_HEAD}{sc}"))));
        got["messages"][0]["id"].as_str().expect("id").to_string()
    };
    let (np, nc) = (notice(&w.pm), notice(&w.cto));
    res(&w.b.call(
        &w.pm,
        "message.send",
        json!({"to": "cos", "class": "BLOCK", "in_reply_to": np,
               "body": "Conflicts with DEC-1: the spec drops the review step."}),
    ));
    res(&w.b.call(
        &w.cto,
        "message.send",
        json!({"to": "cos", "class": "INFO", "in_reply_to": nc, "body": "Accept"}),
    ));
    // The commit stands either way.
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), sc);
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
fn a_spec_save_notice_a_block_and_the_chiefs_relay_end_to_end() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\nv1\n", "Ada");
    let mut biz = business();
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    biz["roles"]["cos"] = json!({"definition": "chief-of-staff", "authority": send});
    biz["roles"]["aide"] = json!({"definition": "assistant", "authority": send});
    let w = Cited::start(biz, &[("site", repo.path())], &["pm", "cto", "dev", "cos"]);
    let human = ShimSession::human(&w.b);
    let id = |r: &Value| res(r)["id"].as_str().expect("id").to_string();

    // The user's assistant thread in the Console project of the records
    // repository, opened.
    let p = id(&human.call("project.create", json!({"name": "Site", "repo": "site"})));
    let th = id(&human.call("thread.create", json!({"project": p, "name": "Plan"})));
    res(&human.call("thread.open", json!({"thread": th})));

    // The human saves the spec from the editor: the pm and the cto each get
    // one notice from the bus.
    let file = res(&human.call(
        "project.file",
        json!({"project": "site", "path": "spec/north-star.md"}),
    ))
    .clone();
    assert_eq!(file["commit"], json!(c1));
    let saved = res(&human.call(
        "project.file.save",
        json!({"project": "site", "path": "spec/north-star.md", "base": c1,
               "content": "# North star\nv2\n"}),
    ))
    .clone();
    let c2 = saved["commit"].as_str().expect("commit").to_string();
    let notice_of = |role: &str| {
        let got = res(&w.call(role, "message.receive", Value::Null)).clone();
        let n = got["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .find(|m| m["from_role"] == json!("_bus"))
            .cloned()
            .expect("a notice");
        assert_eq!(n["class"], json!("RESULT"));
        let lead = format!(
            "The human saved spec/north-star.md in project site: commit {c2}, from the editor's base {c1}."
        );
        assert!(n["body"].as_str().expect("body").starts_with(&lead), "{n}");
        n["id"].as_str().expect("id").to_string()
    };
    let n_pm = notice_of("pm");
    let n_cto = notice_of("cto");

    // The saved spec is the human's: a cited raise stands on it.
    let d = res(&w.raise("dev", "prd.approve", cite("site", &c2))).clone();
    assert_eq!(d["routed_to"], json!("pm"));
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &c1))),
        "stale-spec"
    );

    // BLOCK: the pm answers its own notice; the cto's notice is not its;
    // dev may not block; only the chief of staff hears a BLOCK.
    let block = |to: &str, reply: &str| {
        json!({"to": to, "body": "Conflicts with the settled scope.", "class": "BLOCK",
               "in_reply_to": reply})
    };
    assert_eq!(
        err(&w.call("pm", "message.send", block("cos", &n_cto))),
        "block-reply-required"
    );
    assert_eq!(
        err(&w.call("dev", "message.send", block("cos", &n_pm))),
        "block-sender"
    );
    assert_eq!(
        err(&w.call("pm", "message.send", block("cto", &n_pm))),
        "block-recipient"
    );
    let b = id(&w.call("pm", "message.send", block("cos", &n_pm)));
    assert_eq!(
        err(&human.call(
            "thread.send",
            json!({"thread": th, "body": "x", "class": "BLOCK"})
        )),
        "invalid-class"
    );
    let got = res(&w.call("cos", "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["id"], json!(b));
    assert_eq!(got["messages"][0]["class"], json!("BLOCK"));

    // The chief of staff relays to the assistant in reply to the BLOCK: the
    // relay is in the user's thread, and the human sees it there.
    let relay = id(&w.call(
        "cos",
        "message.send",
        json!({"to": "aide", "body": "The pm blocks the spec save.", "in_reply_to": b}),
    ));
    let shown = res(&human.call("thread.messages", json!({"thread": th}))).clone();
    let in_thread: Vec<&Value> = shown["messages"]
        .as_array()
        .expect("thread messages")
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(in_thread, [&json!(relay)]);
    w.b.close();
}

// --- review of issue 22 against 3i L263-L281 and row 143

#[test]
fn every_path_under_spec_is_human_only_and_a_narrowed_role_needs_a_decision() {
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    // `lead` is a pm instance whose business narrowed the v2 grant away:
    // no record.write within its role.
    let mut biz = writers();
    biz["roles"]["lead"] = json!({"definition": "pm",
                                  "authority": {"withinRole": [], "crossRole": []}});
    let mut w = world_of(repo.path(), None, &[], biz);
    let s = sleeper();
    let lead = w.b.bind("lead", "run-lead", s.id());
    res(&w.b.call(&lead, "role.claim", Value::Null));
    let write = |cap: &str, path: &str| {
        w.b.call(
            cap,
            "record.write",
            json!({"project": "site", "path": path, "record": "# Mine\n"}),
        )
    };
    // "spec/ always refuses project-spec-human-only" (L269): the spec file
    // and anything else under spec/, writable shape or not.
    let spec_paths = [
        "spec/north-star.md",
        "spec/other.md",
        "spec/NORTH-STAR.md",
        "spec/north-star.json",
        "spec/a/b.md",
        "spec/",
    ];
    for p in spec_paths {
        assert_eq!(err(&write(&w.pm, p)), "project-spec-human-only", "{p}");
    }
    // Not under spec/: the path rule.
    for p in ["spec", "specs/north-star.md", "./spec/north-star.md"] {
        assert_eq!(err(&write(&w.pm, p)), "project-path-invalid", "{p}");
    }
    // No caller author or business identity is accepted (L269).
    for extra in ["author", "business", "definition", "instance"] {
        let mut a = json!({"project": "site", "path": "docs/x.md", "record": "# x\n"});
        a[extra] = json!("acme");
        assert_eq!(
            err(&w.b.call(&w.pm, "record.write", a)),
            "invalid-request",
            "{extra}"
        );
    }
    // Narrowing limits still apply: the narrowed pm needs a decision.
    assert_eq!(err(&write(&lead, "docs/lead.md")), "decision-required");
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), head);
    let got: Vec<(Value, Value, Value)> = refusals(w.root.path())
        .iter()
        .map(|r| (r[0].clone(), r[3].clone(), r[4].clone()))
        .collect();
    let pm = |code: &str| (json!("pm"), json!("record.write"), json!(code));
    let mut want = vec![pm("project-spec-human-only"); spec_paths.len()];
    want.extend(vec![pm("project-path-invalid"); 3]);
    want.extend(vec![pm("invalid-request"); 4]);
    want.push((
        json!("lead"),
        json!("record.write"),
        json!("decision-required"),
    ));
    assert_eq!(got, want);
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
fn definition_less_pm_and_cto_get_the_notice_and_may_block_and_a_busy_save_tells_nobody() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    // pm and cto with no definition (each stands for its own), `lead` with
    // none either (a key that is neither), the chief of staff.
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    let mut biz = business();
    for r in ["pm", "cto"] {
        biz["roles"][r] = json!({"authority": send});
    }
    biz["roles"]["lead"] = json!({"authority": send});
    biz["roles"]["cos"] = json!({"definition": "chief-of-staff", "authority": send});
    let w = Cited::start(biz, &[("site", repo.path())], &["pm", "cto", "lead", "cos"]);
    let human = ShimSession::human(&w.b);
    let save = |base: &str, content: &str| {
        human.call(
            "project.file.save",
            json!({"project": "site", "path": "spec/north-star.md", "base": base,
                   "content": content}),
        )
    };

    // The project lock held by another writer: the save is project-busy,
    // commits nothing and tells nobody.
    let held = HeldLock::take(&repo);
    assert_eq!(err(&save(&c1, "# North star\nv2\n")), "project-busy");
    drop(held);
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), c1);
    assert!(bus_messages(w.root.path()).is_empty());

    // The save: one notice to pm and one to cto, none to lead or cos.
    let sc = res(&save(&c1, "# North star\nv2\n"))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    let to: Vec<Value> = bus_messages(w.root.path())
        .iter()
        .map(|n| n[0].clone())
        .collect();
    assert_eq!(to, [json!("cto"), json!("pm")]);
    let notice = |role: &str| {
        let got = res(&w.call(role, "message.receive", Value::Null)).clone();
        let n = &got["messages"][0];
        assert!(
            n["body"]
                .as_str()
                .is_some_and(|b| b.starts_with(&format!("{NOTICE_HEAD}{sc}"))),
            "{got}"
        );
        n["id"].as_str().expect("id").to_string()
    };
    let n_pm = notice("pm");
    let n_cto = notice("cto");
    let none = res(&w.call("lead", "message.receive", Value::Null)).clone();
    assert_eq!(none["messages"], json!([]));

    // The definition-less pm and cto may BLOCK in reply to their notices;
    // lead, with no pm or cto definition or key, may not.
    let block = |reply: &str| {
        json!({"to": "cos", "class": "BLOCK", "in_reply_to": reply,
               "body": "Conflicts with DEC-1."})
    };
    assert_eq!(
        err(&w.call("lead", "message.send", block(&n_pm))),
        "block-sender"
    );
    res(&w.call("pm", "message.send", block(&n_pm)));
    res(&w.call("cto", "message.send", block(&n_cto)));
    let got = res(&w.call("cos", "message.receive", Value::Null)).clone();
    let classes: Vec<&Value> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["class"])
        .collect();
    assert_eq!(classes, [&json!("BLOCK"), &json!("BLOCK")]);
    // The BLOCKs did not revert the commit.
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), sc);
    let got: Vec<(Value, Value, Value)> = refusals(w.root.path())
        .iter()
        .map(|r| (r[0].clone(), r[3].clone(), r[4].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                json!("human"),
                json!("project.file.save"),
                json!("project-busy")
            ),
            (json!("lead"), json!("message.send"), json!("block-sender")),
        ]
    );
    w.b.close();

    // A business with no pm or cto instance: a spec save sends nothing.
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let mut biz = business();
    let none = json!({"withinRole": [], "crossRole": []});
    biz["roles"] = json!({
        "lead": {"definition": "architect", "authority": none},
        "ops": {"definition": "ops", "authority": none},
        "dev": {"definition": "dev", "authority": none},
    });
    biz["arbiters"] = json!({"technical": "lead", "delivery": "ops"});
    biz.as_object_mut().expect("object").remove("launch");
    let w = Cited::start(biz, &[("site", repo.path())], &["lead", "ops", "dev"]);
    let human = ShimSession::human(&w.b);
    let r = res(&human.call(
        "project.file.save",
        json!({"project": "site", "path": "spec/north-star.md", "base": c1,
               "content": "# North star\nv2\n"}),
    ))
    .clone();
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"], "x"),
        r["commit"].as_str().expect("sha")
    );
    assert!(bus_messages(w.root.path()).is_empty());
    assert_eq!(events(w.root.path(), "project.file.saved").len(), 1);
    w.b.close();
}

#[test]
fn a_symlinked_spec_or_git_directory_reads_as_the_editor_and_the_writer_see_it() {
    // The human's latest spec commit makes the spec a symlink to a docs
    // file: not a plain file, for a read and a citation as for the editor.
    let repo = Repo::new();
    repo.commit("spec/north-star.md", "# North star\n", "Ada");
    repo.commit("docs/plan.md", "# Plan\n", "Ada");
    repo.git(&["rm", "-q", "--", "spec/north-star.md"], "Ada");
    std::fs::create_dir_all(repo.path().join("spec")).expect("mkdir");
    std::os::unix::fs::symlink("../docs/plan.md", repo.path().join("spec/north-star.md"))
        .expect("symlink");
    repo.git(&["add", "--", "spec/north-star.md"], "Ada");
    repo.git(&["commit", "-q", "-m", "link"], "Ada");
    let link = repo.git(&["rev-parse", "HEAD"], "x");
    // A second repository whose `.git` is a symlink to a real one.
    let real = Repo::new();
    real.commit("spec/north-star.md", "# North star\n", "Ada");
    let linked = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(real.path().join(".git"), linked.path().join(".git"))
        .expect("symlink");
    let w = Cited::start(
        business(),
        &[("site", repo.path()), ("linked", linked.path())],
        &["pm", "cto", "dev"],
    );
    let human = ShimSession::human(&w.b);
    assert_eq!(
        err(&human.call(
            "project.file",
            json!({"project": "site", "path": "spec/north-star.md"})
        )),
        "project-path-invalid"
    );
    assert_eq!(
        err(&w.call("dev", "spec.read", json!({"project": "site"}))),
        "project-path-invalid"
    );
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &link))),
        "project-path-invalid"
    );
    // A save's path may not escape the repository either.
    for p in [
        "../escape.md",
        "docs/../../escape.md",
        "/tmp/escape.md",
        "docs/./plan.md",
    ] {
        assert_eq!(
            err(&human.call(
                "project.file.save",
                json!({"project": "site", "path": p, "base": link, "content": "# x\n"})
            )),
            "project-path-invalid",
            "{p}"
        );
    }
    assert_eq!(repo.git(&["rev-parse", "HEAD"], "x"), link);
    // Writes refuse a symlinked .git; reads do too.
    assert_eq!(
        err(&w.call("dev", "spec.read", json!({"project": "linked"}))),
        "project-unavailable"
    );
    assert_eq!(
        err(&human.call("project.files", json!({"project": "linked"}))),
        "project-unavailable"
    );
    let codes: Vec<Value> = refusals(w.root.path())
        .iter()
        .map(|r| json!([r[0], r[3], r[4]]))
        .collect();
    assert_eq!(
        codes,
        [
            json!(["human", "project.file", "project-path-invalid"]),
            json!(["dev", "spec.read", "project-path-invalid"]),
            json!(["dev", "decision.raise", "project-path-invalid"]),
            json!(["human", "project.file.save", "project-path-invalid"]),
            json!(["human", "project.file.save", "project-path-invalid"]),
            json!(["human", "project.file.save", "project-path-invalid"]),
            json!(["human", "project.file.save", "project-path-invalid"]),
            json!(["dev", "spec.read", "project-unavailable"]),
            json!(["human", "project.files", "project-unavailable"]),
        ]
    );
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

/// A save whose Git side takes longer than the ordinary 5 s a client waits
/// (held ~6 s by the test before it moves `HEAD`, under a step's 10 s and the
/// job's 30 s budget): the human shim waits the staged verb's longer time
/// (`mosaic_wire::limits::call_timeout`) and prints the broker's real answer,
/// the commit now at `HEAD`, not its own `outcome-unknown`. Asserts the
/// answer, not a duration.
#[test]
fn a_save_slower_than_the_ordinary_timeout_reaches_the_human_as_its_commit() {
    let repo = Repo::new();
    let d1 = repo.commit("docs/plan.md", "# Plan\n", "pm.pm");
    let pause = std::sync::Arc::new(Pause::at("ref"));
    let w = world_of(repo.path(), Some(&pause), &[], writers());
    let holder = std::sync::Arc::clone(&pause);
    let holding = std::thread::spawn(move || {
        let pause = holder;
        pause.wait();
        std::thread::sleep(Duration::from_secs(6));
        pause.release();
    });
    let human = ShimSession::human(&w.b);
    let reply = human.call(
        "project.file.save",
        json!({"project": "site", "path": "docs/plan.md", "base": d1, "content": "# Plan\nv2\n"}),
    );
    assert_eq!(reply["ok"], json!(true), "the broker's answer: {reply}");
    let head = repo.git(&["rev-parse", "HEAD"], "x");
    assert_ne!(head, d1, "the save committed");
    assert_eq!(
        reply,
        json!({"ok": true, "result": {"path": "docs/plan.md", "commit": head}})
    );
    assert_eq!(show(&repo, "%P %an", &head), format!("{d1} Ada"));
    holding.join().expect("the holder");
    let saved = events(w.root.path(), "project.file.saved");
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0][3]["commit"], json!(head));
    w.b.close();
}

// --- issue 29 item 1: the records repository is data, never code ---------

/// The program slots a partial clone's lazy fetch reaches, each a config a
/// same-user writer of `.git` could leave: the `ext::` remote helper, a
/// local remote's `uploadpack` program, and an `ssh://` remote's
/// `core.sshCommand`, each with its protocol allowed in the repository's
/// own config (which beats `-c protocol.allow=never`).
fn lazy_fetch_routes(evil: &str) -> Vec<(&'static str, String)> {
    let promisor = "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n";
    vec![
        (
            "ext",
            format!(
                "{promisor}[remote \"origin\"]\n\turl = ext::sh -c {evil}\n\tpromisor = true\n\
                 [protocol \"ext\"]\n\tallow = always\n"
            ),
        ),
        (
            "uploadpack",
            format!(
                "{promisor}[remote \"origin\"]\n\turl = file:///nonexistent/origin\n\tuploadpack = {evil}\n\
                 \tpromisor = true\n[protocol \"file\"]\n\tallow = always\n"
            ),
        ),
        (
            "sshCommand",
            format!(
                "{promisor}[remote \"origin\"]\n\turl = ssh://example.invalid/origin\n\tpromisor = true\n\
                 [protocol \"ssh\"]\n\tallow = always\n[core]\n\tsshCommand = {evil}\n"
            ),
        ),
    ]
}

impl Repo {
    /// Deletes the loose object `sha` (as a partial clone lacks it).
    fn drop_object(&self, sha: &str) {
        let path = self
            .path()
            .join(".git/objects")
            .join(&sha[..2])
            .join(&sha[2..]);
        std::fs::remove_file(&path).expect("a loose object");
    }
}

/// A partial clone whose spec blob is gone and whose promisor remote runs
/// the trap's program (route `config`): `spec.read`, `project.file` of the
/// spec and a cited raise each need that blob, and a Git that fetches it
/// lazily runs the program. Each is refused with the reader's static code
/// and runs nothing; `project.files` and a `record.write` need no blob and
/// go through, running nothing either.
fn a_lazy_fetch_route_runs_nothing(name: &str, config: impl Fn(&str) -> String) {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "# North star\n", "Ada");
    let blob = repo.git(&["rev-parse", "HEAD:spec/north-star.md"], "x");
    let trap = tempfile::tempdir().expect("tempdir");
    let (evil, marker) = hostile_program(trap.path(), "exit 1");
    repo.append_config(&config(&evil));
    repo.drop_object(&blob);
    let w = Cited::start(writers(), &[("site", repo.path())], &["pm", "cto", "dev"]);
    let human = ShimSession::human(&w.b);
    let ran = |after: &str| {
        assert!(
            !marker.exists(),
            "{name}: {after} ran {:?}",
            std::fs::read_to_string(&marker)
        );
    };
    assert_eq!(
        err(&w.call("dev", "spec.read", json!({"project": "site"}))),
        "project-unavailable"
    );
    ran("spec.read");
    assert_eq!(
        err(&w.call("dev", "spec.read", json!({"project": "site", "commit": c1}))),
        "project-unavailable"
    );
    ran("spec.read at a commit");
    assert_eq!(
        err(&w.raise("dev", "prd.approve", cite("site", &c1))),
        "project-unavailable"
    );
    ran("a cited decision.raise");
    assert_eq!(
        err(&human.call(
            "project.file",
            json!({"project": "site", "path": "spec/north-star.md"})
        )),
        "project-unavailable"
    );
    ran("project.file");
    let listed = res(&human.call("project.files", json!({"project": "site"}))).clone();
    assert_eq!(listed["files"][0]["path"], json!("spec/north-star.md"));
    ran("project.files");
    let c = res(&w.call(
        "pm",
        "record.write",
        json!({"project": "site", "path": "docs/plan.md", "record": "# Plan\n"}),
    ))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    ran("record.write");
    assert_eq!(show(&repo, "%P %an", &c), format!("{c1} pm.pm"));
    // Nothing was fetched: the blob is still missing.
    assert!(!repo
        .path()
        .join(".git/objects")
        .join(&blob[..2])
        .join(&blob[2..])
        .exists());
    w.b.close();
}

#[test]
fn a_partial_clone_s_lazy_fetch_runs_no_ext_helper() {
    let routes = |evil: &str| lazy_fetch_routes(evil).swap_remove(0).1;
    a_lazy_fetch_route_runs_nothing("ext", routes);
}

#[test]
fn a_partial_clone_s_lazy_fetch_runs_no_upload_pack_program() {
    let routes = |evil: &str| lazy_fetch_routes(evil).swap_remove(1).1;
    a_lazy_fetch_route_runs_nothing("uploadpack", routes);
}

#[test]
fn a_partial_clone_s_lazy_fetch_runs_no_ssh_command() {
    let routes = |evil: &str| lazy_fetch_routes(evil).swap_remove(2).1;
    a_lazy_fetch_route_runs_nothing("sshCommand", routes);
}

#[test]
fn an_included_config_file_runs_nothing() {
    // The repository's config only includes a file elsewhere; that file
    // holds the ext:: partial-clone route and every other program slot.
    a_lazy_fetch_route_runs_nothing("include.path", |evil: &str| {
        let dir = Path::new(evil).parent().expect("trap dir");
        let included = dir.join("evil.config");
        let ext = lazy_fetch_routes(evil).swap_remove(0).1;
        std::fs::write(
            &included,
            format!(
                "{ext}[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n\thooksPath = {hooks}\n\
                 [alias]\n\tlog = !{evil}\n\tcat-file = !{evil}\n",
                hooks = dir.display()
            ),
        )
        .expect("included config");
        format!("[include]\n\tpath = {}\n", included.display())
    });
}

/// A repository whose objects are partly packed, partly loose, and partly
/// missing (no promisor: nothing to fetch from): what is there reads, from
/// the pack and loose alike; a missing object is `project-unavailable`.
#[test]
fn packed_loose_and_missing_objects_read_or_refuse_statically() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "v1\n", "Ada");
    let c2 = repo.commit("spec/north-star.md", "v2\n", "cto.cto");
    repo.commit("docs/plan.md", "# Plan\n", "pm.pm");
    repo.git(&["repack", "-q", "-a", "-d"], "x");
    repo.git(&["prune-packed"], "x");
    let c3 = repo.commit("spec/north-star.md", "v3\n", "Ada");
    let packed = repo.path().join(".git/objects/pack");
    assert!(std::fs::read_dir(&packed).expect("pack dir").any(|e| e
        .expect("entry")
        .path()
        .extension()
        == Some("pack".as_ref())));
    let trap = tempfile::tempdir().expect("tempdir");
    let (evil, marker) = hostile_program(trap.path(), "exit 1");
    repo.append_config(&lazy_fetch_routes(&evil).swap_remove(0).1);
    let w = world_of(repo.path(), None, &[], writers());
    let read = |args: Value| w.b.call(&w.pm, "spec.read", args);
    // Loose tip, packed history.
    let r = res(&read(json!({"project": "site"}))).clone();
    assert_eq!((&r["content"], &r["commit"]), (&json!("v3\n"), &json!(c3)));
    let commits: Vec<&Value> = r["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|e| &e["commit"])
        .collect();
    assert_eq!(commits, [&json!(c3), &json!(c2), &json!(c1)]);
    // A packed commit read as it was.
    let r = res(&read(json!({"project": "site", "commit": c2}))).clone();
    assert_eq!(
        (&r["content"], &r["confirmed"]),
        (&json!("v2\n"), &json!(false))
    );
    // The tip's loose spec blob goes missing: a static refusal, nothing run.
    let blob = repo.git(&["rev-parse", "HEAD:spec/north-star.md"], "x");
    repo.drop_object(&blob);
    assert_eq!(
        err(&read(json!({"project": "site"}))),
        "project-unavailable"
    );
    // The packed history still reads.
    assert_eq!(
        res(&read(json!({"project": "site", "commit": c2})))["content"],
        json!("v2\n")
    );
    // A write on the mixed store, with the branch only in packed-refs: an
    // ordinary commit an outside Git accepts (the tip's blob aside, which
    // the write does not need).
    repo.git(&["pack-refs", "--all"], "x");
    let c4 = res(&w.b.call(
        &w.pm,
        "record.write",
        json!({"project": "site", "path": "docs/plan.md", "record": "# Plan v2\n"}),
    ))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    assert_eq!(repo.git(&["rev-parse", "main"], "x"), c4);
    assert_eq!(show(&repo, "%P %an", &c4), format!("{c3} pm.pm"));
    assert_eq!(
        repo.git(&["cat-file", "blob", &format!("{c4}:docs/plan.md")], "x"),
        "# Plan v2"
    );
    // The tip's loose commit before it goes missing: the history can't be
    // walked past it.
    repo.drop_object(&c3);
    assert_eq!(
        err(&read(json!({"project": "site"}))),
        "project-unavailable"
    );
    // The branch set back to the missing commit (by hand: a `git` here
    // would fetch it through the trap): HEAD names nothing there.
    std::fs::write(repo.path().join(".git/refs/heads/main"), format!("{c3}\n")).expect("ref");
    assert_eq!(
        err(&read(json!({"project": "site"}))),
        "project-unavailable"
    );
    assert!(
        !marker.exists(),
        "ran: {:?}",
        std::fs::read_to_string(&marker)
    );
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

/// Issue 31's mutant of `verbs/mod.rs` (`finish_staged`): the replies of
/// the staged verbs, which carry bytes of the records repository, skipping
/// the known-token check. A loaded token (pm's Vikunja credential, from
/// the broker's environment) in a committed spec, in a docs file and as a
/// docs file's author: `spec.read`, `project.file` and `project.files` each
/// answer `known-token`, with the refusal on record under the verb, and
/// the token reaches neither a reply nor the store. A file without it
/// reads as usual.
#[test]
fn a_records_file_holding_a_loaded_token_answers_known_token() {
    const TOKEN: &str = "records.fixture~token_0123456789";
    const VAR: &str = "MOSAIC_TEST_RECORDS_TOKEN";
    let repo = Repo::new();
    repo.commit(
        "spec/north-star.md",
        &format!("# North star\nkey {TOKEN}\n"),
        "Ada",
    );
    repo.commit("docs/plan.md", &format!("# Plan\n{TOKEN}\n"), "pm.pm");
    repo.commit("docs/clean.md", "# Clean\n", "pm.pm");
    let mut biz = writers();
    biz["roles"]["pm"]["credentials"] = json!({"vikunja": {"env": VAR, "expires": "2099-03-01"}});
    let w = world_of(repo.path(), None, &[(VAR, TOKEN)], biz);
    let human = ShimSession::human(&w.b);
    let file = |path: &str| human.call("project.file", json!({"project": "site", "path": path}));

    // The clean file reads: the check is on what the reply holds.
    let clean = file("docs/clean.md");
    assert_eq!(res(&clean)["content"], json!("# Clean\n"));

    let spec = w.b.call(&w.pm, "spec.read", json!({"project": "site"}));
    assert_eq!(spec, json!({"ok": false, "error": "known-token"}));
    let plan = file("docs/plan.md");
    assert_eq!(plan, json!({"ok": false, "error": "known-token"}));
    // The token as a docs file's last author: the listing would show it.
    repo.commit("docs/named.md", "# Named\n", TOKEN);
    let files = human.call("project.files", json!({"project": "site"}));
    assert_eq!(files, json!({"ok": false, "error": "known-token"}));

    let refused: Vec<Value> = refusals(w.root.path())
        .into_iter()
        .filter(|r| r[4] == json!("known-token"))
        .collect();
    assert_eq!(
        refused,
        vec![
            json!(["pm", "run-pm", null, "spec.read", "known-token"]),
            json!(["human", "human-cli", null, "project.file", "known-token"]),
            json!(["human", "human-cli", null, "project.files", "known-token"]),
        ]
    );
    let logs = w.b.stderr();
    assert!(!logs.contains(TOKEN), "the token in the logs");
    w.b.close();
    let mut stored = std::fs::read(w.root.path().join("bus/bus.sqlite")).expect("store");
    stored.extend(std::fs::read(w.root.path().join("bus/bus.sqlite-wal")).unwrap_or_default());
    assert!(
        !stored.windows(TOKEN.len()).any(|x| x == TOKEN.as_bytes()),
        "the token in the store"
    );
}
