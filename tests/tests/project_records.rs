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

    /// As [`Cited::start`], with the boot key `git` when given.
    fn start_with(
        mut biz: Value,
        projects: &[(&str, &Path)],
        roles: &[&str],
        git: Option<&Path>,
    ) -> Cited {
        let root = data_root();
        let p: serde_json::Map<String, Value> = projects
            .iter()
            .map(|(k, r)| (k.to_string(), json!({"repo": r.to_str().expect("utf-8")})))
            .collect();
        biz["projects"] = Value::Object(p);
        let mut config = json!({
            "dataRoot": root.path().to_str().expect("utf-8"),
            "businesses": {"acme": biz},
            "readers": ["acme"],
        });
        if let Some(g) = git {
            config["git"] = json!(g.to_str().expect("utf-8"));
        }
        let (mut b, reply) = Broker::spawn(root.path(), config);
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

    // The arbiter resolves the cited one; the human may not.
    let human = ShimSession::human(&w.b);
    assert_eq!(
        err(&human.call("decision.resolve", json!({"id": d["id"], "choice": "yes"}))),
        "not-resolver"
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
    // The human's not-resolver came first.
    assert_eq!(refused[0][4], json!("not-resolver"));
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
    // Nobody holds dev now: a second revoke has no one to end.
    assert_eq!(err(&w.call("cto", "role.revoke", revoke)), "not-held");
    w.b.close();
}

/// A `git` that touches `started` and waits for `release` before it runs
/// the real one.
fn gated_git(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let started = dir.join("started");
    let release = dir.join("release");
    let wrapper = dir.join("git");
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
    (wrapper, started, release)
}

#[test]
fn a_cited_raise_waits_on_git_off_the_writer_and_is_checked_again_after() {
    let repo = Repo::new();
    let c1 = repo.commit("spec/north-star.md", "v1\n", "Ada");
    let gate = tempfile::tempdir().expect("tempdir");
    let (wrapper, started, release) = gated_git(gate.path());
    let w = Cited::start_with(
        business(),
        &[("site", repo.path())],
        &["pm", "cto", "dev"],
        Some(&wrapper),
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
    let wait_started = || {
        let until = Instant::now() + Duration::from_secs(20);
        while !started.exists() {
            assert!(Instant::now() < until, "git never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    // Held in Git: the writer still serves an uncited raise, a send and a
    // receive, which never touch Git.
    let raising = raise_in_thread("dev");
    wait_started();
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
    std::fs::write(&release, "").expect("release");
    let r = raising.join().expect("raiser");
    let d = res(&r).clone();
    assert_eq!(
        (&d["routed_to"], &d["spec_commit"]),
        (&json!("pm"), &json!(c1))
    );

    // The writer checks again after Git: a raiser that let its role go
    // while Git was read raises nothing.
    std::fs::remove_file(&release).expect("re-arm");
    std::fs::remove_file(&started).expect("re-arm");
    let before = row_counts(w.root.path());
    let raising = raise_in_thread("dev");
    wait_started();
    res(&w.call("dev", "role.release", Value::Null));
    std::fs::write(&release, "").expect("release");
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
