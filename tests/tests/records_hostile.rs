//! A records repository is data, never code: hostile config, hooks, filters, helpers, lazy fetches, includes, symlinks and missing objects run nothing and read or refuse statically (issue 29); a loaded token in a file answers known-token.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
#[path = "support/records_env.rs"]
mod records_env;
use records_env::{
    a_lazy_fetch_route_runs_nothing, cite, hostile_program, lazy_fetch_routes, real_git, show,
    world, world_of, writers, Cited, Repo,
};

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
