//! A spec save whose receipt and review notices can't be stored (3i L279:
//! "if storing it fails the save answers outcome-unknown and the commit
//! stands"), in process: a real `Core` on a real store, a real Git
//! repository made by the test, and the three stages the server runs for a
//! staged verb (`handlers::prepare_staged` on the writer, the Git job, then
//! `handlers::finish_staged`). The store's write lock is held by a second
//! connection while the broker's connection does not wait for it, which
//! through the socket would be a five-second busy wait racing the shim's own
//! five-second deadline.

mod common;

use common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::error::Code;
use mosaic_bus::handlers;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

fn git(repo: &Path, args: &[&str]) -> String {
    let out = common::git_in(repo, "Ada")
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

fn count(e: &Inproc, sql: &str) -> i64 {
    e.core
        .store
        .db()
        .sql()
        .query_row(sql, [], |r| r.get(0))
        .expect("count")
}

/// The three stages of a staged request, as `server::staged` runs them.
fn staged(e: &mut Inproc, caller: &Caller, verb: &str, args: Value) -> Result<Value, Code> {
    let args = args.as_object().cloned();
    let mut p = handlers::prepare_staged(&mut e.core, caller, verb, args)?;
    let found = p.run_here(mosaic_bus::budget::Budget::start());
    assert!(found.is_some(), "{verb} has a Git job");
    handlers::finish_staged(&mut e.core, caller, verb, p, found)
}

#[test]
fn a_spec_save_whose_receipt_and_notices_cannot_be_stored_answers_outcome_unknown() {
    let repo = tempfile::tempdir().expect("repo");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::create_dir(repo.path().join("spec")).expect("mkdir");
    std::fs::write(repo.path().join("spec/north-star.md"), "# North star\n").expect("write");
    git(repo.path(), &["add", "--", "spec/north-star.md"]);
    git(repo.path(), &["commit", "-q", "-m", "spec"]);
    let c1 = git(repo.path(), &["rev-parse", "HEAD"]);
    let none = json!({"withinRole": [], "crossRole": []});
    let mut e = Inproc::boot(json!({"businesses": {"acme": {
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm", "authority": none},
            "cto": {"definition": "cto", "authority": none}
        },
        "projects": {"site": {"repo": repo.path().to_str().expect("utf-8")}}
    }}}));
    let human = Caller::Human {
        business: "acme".into(),
    };
    let save = |base: &str| {
        json!({"project": "site", "path": "spec/north-star.md", "base": base,
               "content": "# North star\nv2\n"})
    };

    // Another connection holds the store's write lock; the broker's
    // connection does not wait for it.
    e.core
        .store
        .db()
        .sql()
        .busy_timeout(Duration::ZERO)
        .expect("busy timeout");
    let other = rusqlite::Connection::open(e.bus.db_path()).expect("open");
    other.execute_batch("BEGIN IMMEDIATE").expect("lock");
    assert_eq!(
        staged(&mut e, &human, "project.file.save", save(&c1)),
        Err(Code::OutcomeUnknown)
    );
    other.execute_batch("ROLLBACK").expect("unlock");

    // The commit stands, the human's, on the editor's base; its receipt,
    // the notices and even the refusal's evidence are not in the store.
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    assert_ne!(head, c1);
    assert_eq!(
        git(repo.path(), &["show", "-s", "--format=%an %P", &head]),
        format!("Ada {c1}")
    );
    assert_eq!(count(&e, "SELECT count(*) FROM events"), 0);
    assert_eq!(count(&e, "SELECT count(*) FROM messages"), 0);

    // Not retried: the same save again is stale now (its base moved), and
    // that refusal is on record; the store takes writes again.
    assert_eq!(
        staged(&mut e, &human, "project.file.save", save(&c1)),
        Err(Code::StaleBase)
    );
    assert_eq!(
        count(
            &e,
            "SELECT count(*) FROM events WHERE kind = 'action.refused'
             AND json_extract(body, '$.code') = 'stale-base'"
        ),
        1
    );
    // A save on the new commit goes through, with its receipt and one
    // notice to each of pm and cto.
    let r = staged(&mut e, &human, "project.file.save", {
        let mut a = save(&head);
        a["content"] = json!("# North star\nv3\n");
        a
    })
    .expect("save");
    assert_eq!(r["path"], json!("spec/north-star.md"));
    assert_eq!(
        count(
            &e,
            "SELECT count(*) FROM events WHERE kind = 'project.file.saved'"
        ),
        1
    );
    assert_eq!(
        count(
            &e,
            "SELECT count(*) FROM messages WHERE from_role = '_bus' AND class = 'RESULT'"
        ),
        2
    );
}
