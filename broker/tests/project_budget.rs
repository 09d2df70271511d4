//! The commit primitive within a staged job's budget (`mosaic_bus::budget`),
//! on a real repository with the real `git`: a job out of budget writes
//! nothing; `update-ref`, the one step that writes, is not started with
//! less than `REF_RESERVE` left; the same write within a fresh budget
//! commits.

mod common;

use mosaic_bus::budget::Budget;
use mosaic_bus::error::Code;
use mosaic_bus::project::git::Git;
use mosaic_bus::project::write::{commit_file, parse_path, Author, Write, REF_RESERVE};
use std::path::Path;
use std::time::{Duration, Instant};

fn git(repo: &Path, args: &[&str], input: Option<&[u8]>) -> (bool, String) {
    let mut cmd = common::git_in(repo, "pm.pm");
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("git");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.unwrap_or_default()).expect("stdin");
    }
    let out = child.wait_with_output().expect("git");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    (out.status.success(), text.trim().to_string())
}

fn ok(repo: &Path, args: &[&str]) -> String {
    let (success, out) = git(repo, args, None);
    assert!(success, "git {args:?}");
    out
}

#[test]
fn a_write_out_of_budget_writes_nothing_and_a_fresh_budget_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path();
    ok(repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(repo.join("docs")).expect("mkdir");
    std::fs::write(repo.join("docs/plan.md"), "# Plan\n").expect("write");
    ok(repo, &["add", "--", "docs/plan.md"]);
    ok(repo, &["commit", "-q", "-m", "plan"]);
    let start = ok(repo, &["rev-parse", "HEAD"]);

    let content = b"# Plan\nv2\n";
    let path = parse_path("docs/plan.md").expect("path");
    let author = Author::human("acme", "Ada");
    let w = Write {
        path: &path,
        content,
        author: &author,
        message: "project.file.save docs/plan.md",
        base: None,
    };
    let (_, blob) = git(repo, &["hash-object", "--stdin"], Some(content));
    let stored = |sha: &str| git(repo, &["cat-file", "-e", sha], None).0;

    // Passed before the job ran: no `git` is started, not even the blob's.
    let gone = Git::new(None).within(Budget::ending(Instant::now()));
    assert_eq!(commit_file(&gone, repo, &w), Err(Code::ProjectUnavailable));
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);
    assert!(!stored(&blob), "no object written");

    // Less than the reserve left: whatever runs before `update-ref` may
    // leave unreferenced objects, but HEAD does not move.
    let late = Budget::ending(Instant::now() + REF_RESERVE - Duration::from_millis(500));
    let short = Git::new(None).within(late);
    assert_eq!(commit_file(&short, repo, &w), Err(Code::ProjectUnavailable));
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);
    assert_eq!(
        ok(repo, &["log", "--format=%H", "main"]).lines().count(),
        1,
        "the branch holds the first commit only"
    );

    // The lock was let go and nothing was left in the way: a fresh budget
    // makes the commit.
    let fresh = Git::new(None).within(Budget::start());
    let done = commit_file(&fresh, repo, &w).expect("commit");
    assert_eq!(done.previous, start);
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), done.commit);
    assert_eq!(
        ok(repo, &["show", "HEAD:docs/plan.md"]),
        "# Plan\nv2".to_string()
    );
}

/// A `git` that runs the real one, except that `update-ref` sleeps past
/// any deadline either after moving the ref (`after`) or before (`before`).
fn slow_update_ref(dir: &Path, when: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .expect("sh");
    let real = String::from_utf8(real.stdout).expect("utf-8");
    let real = real.trim();
    assert!(real.starts_with('/'), "git on PATH: {real}");
    let step = match when {
        "after" => format!("\"{real}\" \"$@\"; sleep 30"),
        _ => format!("sleep 30; \"{real}\" \"$@\""),
    };
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = update-ref ]; then {step}; exit $?; fi\ndone\nexec \"{real}\" \"$@\"\n"
    );
    let path = dir.join(format!("git-{when}"));
    std::fs::write(&path, script).expect("script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// `update-ref` cut off at the budget: the write is what HEAD says. Moved
/// to the new commit: the commit is answered, not a refusal for a commit
/// that stands. Not moved: the refusal, with nothing written.
#[test]
fn an_update_ref_cut_off_at_the_budget_is_judged_by_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = tempfile::tempdir().expect("tempdir");
    let repo = dir.path();
    ok(repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(repo.join("docs")).expect("mkdir");
    std::fs::write(repo.join("docs/plan.md"), "# Plan\n").expect("write");
    ok(repo, &["add", "--", "docs/plan.md"]);
    ok(repo, &["commit", "-q", "-m", "plan"]);
    let start = ok(repo, &["rev-parse", "HEAD"]);
    let path = parse_path("docs/plan.md").expect("path");
    let author = Author::human("acme", "Ada");
    let w = |content: &'static [u8]| Write {
        path: &path,
        content,
        author: &author,
        message: "project.file.save docs/plan.md",
        base: None,
    };
    let budget = || Budget::ending(Instant::now() + REF_RESERVE + Duration::from_secs(1));

    // Killed before it ran: HEAD is where it was, the refusal stands.
    let before = Git::new(Some(&slow_update_ref(bin.path(), "before"))).within(budget());
    assert_eq!(
        commit_file(&before, repo, &w(b"# Plan\nv2\n")),
        Err(Code::ProjectUnavailable)
    );
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);

    // Killed after it moved the ref: the commit is the answer.
    let after = Git::new(Some(&slow_update_ref(bin.path(), "after"))).within(budget());
    let done = commit_file(&after, repo, &w(b"# Plan\nv3\n")).expect("committed");
    assert_eq!(done.previous, start);
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), done.commit);
    assert_eq!(ok(repo, &["show", "HEAD:docs/plan.md"]), "# Plan\nv3");
}
