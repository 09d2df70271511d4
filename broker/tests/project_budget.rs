//! The commit primitive within a staged job's budget (`mosaic_bus::budget`),
//! on a real repository the real `git` makes and checks: a job out of
//! budget writes nothing; moving `HEAD`, the one step that writes, is not
//! started with less than `REF_RESERVE` left, nor once the server stopped
//! waiting for the job (its `Fence`); the same write within a fresh budget
//! commits.

mod common;

use mosaic_bus::budget::Budget;
use mosaic_bus::error::Code;
use mosaic_bus::git::write::{commit_file, parse_path, Author, Write, REF_RESERVE};
use mosaic_bus::git::Fence;
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

    // Passed before the job ran: nothing is read or written, not even the blob.
    let gone = Budget::ending(Instant::now());
    assert_eq!(
        commit_file(repo, &w, gone, &Fence::default()),
        Err(Code::ProjectUnavailable)
    );
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);
    assert!(!stored(&blob), "no object written");

    // Less than the reserve left: whatever runs before HEAD moves may
    // leave unreferenced objects, but HEAD does not move.
    let late = Budget::ending(Instant::now() + REF_RESERVE - Duration::from_millis(500));
    assert_eq!(
        commit_file(repo, &w, late, &Fence::default()),
        Err(Code::ProjectUnavailable)
    );
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);
    assert_eq!(
        ok(repo, &["log", "--format=%H", "main"]).lines().count(),
        1,
        "the branch holds the first commit only"
    );

    // The lock was let go and nothing was left in the way: a fresh budget
    // makes the commit.
    let done = commit_file(repo, &w, Budget::start(), &Fence::default()).expect("commit");
    assert_eq!(done.previous, start);
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), done.commit);
    assert_eq!(
        ok(repo, &["show", "HEAD:docs/plan.md"]),
        "# Plan\nv2".to_string()
    );
}

/// The server stops waiting for a job at its budget (a worker held up in
/// the file system can't be killed): once it has abandoned the job, the job
/// never moves `HEAD` (a plain refusal is then the truth), and a job that
/// already began moving it makes the server's answer `outcome-unknown`.
#[test]
fn a_job_the_server_stopped_waiting_for_never_moves_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path();
    ok(repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(repo.join("docs")).expect("mkdir");
    std::fs::write(repo.join("docs/plan.md"), "# Plan\n").expect("write");
    ok(repo, &["add", "--", "docs/plan.md"]);
    ok(repo, &["commit", "-q", "-m", "plan"]);
    let start = ok(repo, &["rev-parse", "HEAD"]);
    let path = parse_path("docs/plan.md").expect("path");
    let author = Author::human("acme", "Ada");
    let w = Write {
        path: &path,
        content: b"# Plan\nv2\n",
        author: &author,
        message: "project.file.save docs/plan.md",
        base: None,
    };

    // Abandoned before it moved HEAD: nothing moves, and the server's
    // refusal is the truth.
    let abandoned = Fence::default();
    assert!(abandoned.abandon());
    assert_eq!(
        commit_file(repo, &w, Budget::start(), &abandoned),
        Err(Code::ProjectUnavailable)
    );
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), start);

    // A job that moved HEAD can't be abandoned: the server answers
    // outcome-unknown, and the commit stands.
    let fence = Fence::default();
    let done = commit_file(repo, &w, Budget::start(), &fence).expect("commit");
    assert!(!fence.abandon());
    assert_eq!(ok(repo, &["rev-parse", "HEAD"]), done.commit);
    assert_eq!(done.previous, start);
    // An outside Git sees an ordinary commit by the bus's authors.
    assert_eq!(
        ok(repo, &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%P|%s", "HEAD"]),
        format!(
            "Ada <human@acme.mosaic.invalid>|mosaic-bus <mosaic-bus@localhost>|{start}|project.file.save docs/plan.md"
        )
    );
    ok(repo, &["fsck", "--strict", "--no-progress"]);
}
