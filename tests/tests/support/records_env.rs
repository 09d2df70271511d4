//! Shared setup of `spec_reads.rs`, `cited_raises.rs`, `record_writes.rs`, `records_hostile.rs`, `spec_editor.rs` and `approval_scope.rs`: the world (a broker, its roles, a records repository), Git helpers, pauses.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The real `git`, found on the test's `PATH`.
pub fn real_git() -> PathBuf {
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
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-records-")
            .tempdir()
            .expect("tempdir");
        let r = Repo { dir };
        r.git(&["init", "-q", "-b", "main"], "nobody");
        r
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str], author: &str) -> String {
        self.run_git(args, author, None)
    }

    /// [`Repo::git`] with the author and committer dates both `date`.
    pub fn git_dated(&self, args: &[&str], author: &str, date: &str) -> String {
        self.run_git(args, author, Some(date))
    }

    fn run_git(&self, args: &[&str], author: &str, date: Option<&str>) -> String {
        let mut cmd = Command::new(real_git());
        cmd.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", author)
            .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid");
        if let Some(date) = date {
            cmd.env("GIT_AUTHOR_DATE", date)
                .env("GIT_COMMITTER_DATE", date);
        }
        let out = cmd.output().expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    }

    /// The commit `HEAD` names.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"], "nobody")
    }

    /// Adds `text` to the repository's own `.git/config`.
    pub fn append_config(&self, text: &str) {
        let config = self.path().join(".git/config");
        let mut all = std::fs::read_to_string(&config).expect("config");
        all.push_str(text);
        std::fs::write(&config, all).expect("config");
    }

    /// Writes `path` and commits it as `author`; returns the commit.
    pub fn commit(&self, path: &str, content: &str, author: &str) -> String {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(&full, content).expect("write");
        self.git(&["add", "--", path], author);
        self.git(&["commit", "-q", "-m", &format!("edit {path}")], author);
        self.git(&["rev-parse", "HEAD"], author)
    }
}

/// acme with its `site` project in `repo`; pm and cto bound and holding.
pub struct World {
    pub root: tempfile::TempDir,
    pub b: Broker,
    pub pm: String,
    pub cto: String,
    pub _runs: Vec<Sleeper>,
}

/// A job held in Git at `step` until the test releases it: the broker's
/// test-only pause (`MOSAIC_TEST_PROJECT_PAUSE=STEP:DIR`, read by a debug
/// build only), at `open` (a read as it starts, a write once it holds the
/// project lock) or `ref` (a write just before `HEAD` moves). A broker
/// that ignores it (a release build) fails the test: `started` never
/// appears.
pub struct Pause {
    pub dir: tempfile::TempDir,
    pub step: &'static str,
}

impl Pause {
    pub fn at(step: &'static str) -> Pause {
        Pause {
            dir: tempfile::tempdir().expect("tempdir"),
            step,
        }
    }

    pub fn env(&self) -> String {
        format!("{}:{}", self.step, self.dir.path().display())
    }

    pub fn started(&self) -> PathBuf {
        self.dir.path().join("started")
    }

    /// Waits until a job reached the step.
    pub fn wait(&self) {
        wait_for(&self.started());
    }

    /// Lets every held job go on (and every later one pass).
    pub fn release(&self) {
        std::fs::write(self.dir.path().join("release"), "").expect("release");
    }

    /// Holds the next job again.
    pub fn rearm(&self) {
        std::fs::remove_file(self.dir.path().join("release")).expect("re-arm");
        std::fs::remove_file(self.started()).expect("re-arm");
    }
}

/// `env` with the pause's variable added, when there is a pause.
pub fn with_pause<'a>(
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

pub fn world(repo: &Path, pause: Option<&Pause>, env: &[(&str, &str)]) -> World {
    world_of(repo, pause, env, business())
}

pub fn world_of(repo: &Path, pause: Option<&Pause>, env: &[(&str, &str)], mut biz: Value) -> World {
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

/// A broker over `biz` with `projects` (key → repository path), and the
/// runs of `roles` bound and holding their roles.
pub struct Cited {
    pub root: tempfile::TempDir,
    pub b: Broker,
    pub caps: std::collections::BTreeMap<String, String>,
    pub _runs: Vec<Sleeper>,
}

impl Cited {
    pub fn start(biz: Value, projects: &[(&str, &Path)], roles: &[&str]) -> Cited {
        Cited::start_with(biz, projects, roles, None)
    }

    /// As [`Cited::start`], with its Git jobs held by `pause` when given.
    pub fn start_with(
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

    pub fn call(&self, role: &str, verb: &str, args: Value) -> Value {
        self.b.call(&self.caps[role], verb, args)
    }

    /// `decision.raise` of `action` by `role`, with `extra` args merged in.
    pub fn raise(&self, role: &str, action: &str, extra: Value) -> Value {
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
    pub fn stored(&self, id: &Value) -> Vec<Value> {
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
pub fn cite(project: &str, commit: &str) -> Value {
    json!({"project": project, "spec_path": "spec/north-star.md", "spec_commit": commit})
}

/// A program in `dir` that notes each run of it in `dir/ran` (its argv),
/// then runs `then`: its path and the note's.
pub fn hostile_program(dir: &Path, then: &str) -> (String, PathBuf) {
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
pub fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the program");
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
}

// --- record.write, the editor verbs, spec review notices (issue 22, part B)

/// The example business with record.write within-role for pm and cto (as
/// the v2 definitions grant it), none for dev, and a second pm instance
/// `pm2` that no run holds.
pub fn writers() -> Value {
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
pub fn show(repo: &Repo, fmt: &str, commit: &str) -> String {
    repo.git(&["show", "-s", &format!("--format={fmt}"), commit], "x")
}

/// The events of `kind`, oldest first, as `[role, run, subject, body]`.
pub fn events(root: &Path, kind: &str) -> Vec<Value> {
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
pub fn bus_messages(root: &Path) -> Vec<Value> {
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
pub struct HeldLock {
    pub _file: std::fs::File,
}

impl HeldLock {
    pub fn take(repo: &Repo) -> HeldLock {
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

pub fn wait_for(p: &Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while !p.exists() {
        assert!(Instant::now() < until, "never appeared: {}", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub const NOTICE_HEAD: &str = "The human saved spec/north-star.md in project site: commit ";

// --- review of issue 22 against 3i L263-L281 and row 143

// --- issue 29 item 1: the records repository is data, never code ---------

/// The program slots a partial clone's lazy fetch reaches, each a config a
/// same-user writer of `.git` could leave: the `ext::` remote helper, a
/// local remote's `uploadpack` program, and an `ssh://` remote's
/// `core.sshCommand`, each with its protocol allowed in the repository's
/// own config (which beats `-c protocol.allow=never`).
pub fn lazy_fetch_routes(evil: &str) -> Vec<(&'static str, String)> {
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
    pub fn drop_object(&self, sha: &str) {
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
pub fn a_lazy_fetch_route_runs_nothing(name: &str, config: impl Fn(&str) -> String) {
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
