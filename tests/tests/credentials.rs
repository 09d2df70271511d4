//! Credentials: file and environment references checked at start, the
//! `credentials` read and the `credentialStatus` host op, and no token, path
//! or variable name anywhere a client, a log or the store could show it.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const GITEA_TOKEN: &str = "gitea-fixture-token-0123456789abcdef";
const VIKUNJA_TOKEN: &str = "vikunja.fixture~token_ABCDEFGHIJ";
const SYNC_TOKEN: &str = "sync-fixture-token-ZYXWVUTSRQPONM";
const ENV_VAR: &str = "MOSAIC_TEST_VIKUNJA_PM";

fn token_file(dir: &Path, name: &str, content: &[u8], mode: u32) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, PermissionsExt::from_mode(mode)).unwrap();
    p.to_str().unwrap().to_string()
}

fn config_with(root: &Path, gitea: Value, vikunja: Value, sync: Option<Value>) -> Value {
    let mut cfg = config(root);
    cfg["businesses"]["acme"]["roles"]["pm"]["credentials"] =
        json!({"gitea": gitea, "vikunja": vikunja});
    if let Some(s) = sync {
        cfg["businesses"]["acme"]["sync"] = json!({"vikunja": s});
    }
    cfg
}

fn far_date() -> &'static str {
    "2099-03-01"
}

#[test]
fn loaded_credentials_are_listed_without_secrets() {
    let root = data_root();
    let secrets = data_root();
    let g = token_file(
        secrets.path(),
        "gitea",
        format!("{GITEA_TOKEN}\n").as_bytes(),
        0o600,
    );
    let s = token_file(secrets.path(), "sync", SYNC_TOKEN.as_bytes(), 0o600);
    let cfg = config_with(
        root.path(),
        json!({"file": g, "rotateBy": "2020-01-01"}),
        json!({"env": ENV_VAR, "expires": far_date(), "bot": "acme-pm-bot"}),
        Some(json!({"file": s, "expires": "2020-06-01", "bot": "acme-sync"})),
    );
    let (mut b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let reader = b.reader_cap();
    let rows = b.call(&reader, "credentials", Value::Null);
    assert_eq!(
        rows["result"],
        json!([
            {"service": "gitea", "account": null, "role": "pm", "dateKind": "rotateBy", "date": "2020-01-01", "state": "rotation-due"},
            {"service": "vikunja", "account": "acme-pm-bot", "role": "pm", "dateKind": "expires", "date": far_date(), "state": "valid"},
            {"service": "vikunja", "account": "acme-sync", "role": "tracker sync", "dateKind": "expires", "date": "2020-06-01", "state": "expired"},
        ])
    );
    let status = b.op(json!({"op": "credentialStatus", "business": "acme", "role": "pm", "id": 3}));
    assert_eq!(
        status,
        json!({"ok": true, "id": 3, "result": [
            {"service": "gitea", "date": "2020-01-01", "state": "rotation-due"},
            {"service": "vikunja", "date": far_date(), "state": "valid"},
        ]})
    );
    assert_eq!(
        b.op(json!({"op": "credentialStatus", "business": "acme", "role": "nobody"}))["error"],
        json!("unknown-role")
    );
    // A role session may not list credentials; a reader may not claim.
    let p = sleeper();
    let cap = b.bind("pm", "run-cred", p.id());
    assert_eq!(
        b.call(&cap, "credentials", Value::Null)["error"],
        json!("human-required")
    );
    assert_eq!(
        b.call(&reader, "credentials", json!({"x": 1}))["error"],
        json!("invalid-request")
    );
    let mut replies = vec![rows.to_string(), status.to_string()];
    // A run of the bus with the tokens loaded: claims, messages, decisions,
    // tasks and every shared read; then nothing may show a token.
    let q = sleeper();
    let cto = b.bind("cto", "run-cto", q.id());
    for c in [&cap, &cto] {
        replies.push(b.call(c, "role.claim", Value::Null).to_string());
    }
    let sent = b.call(
        &cap,
        "message.send",
        json!({"to": "cto", "body": "review the site", "class": "REQUEST"}),
    );
    assert_eq!(sent["ok"], json!(true), "{sent}");
    replies.push(sent.to_string());
    let got = b.call(&cto, "message.receive", Value::Null);
    replies.push(got.to_string());
    let id = got["result"]["messages"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    replies.push(b.call(&cto, "message.read", json!({"id": id})).to_string());
    replies.push(
        b.call(
            &cto,
            "message.send",
            json!({"to": "pm", "body": "done", "in_reply_to": id}),
        )
        .to_string(),
    );
    let raise = b.call(
        &cap,
        "decision.raise",
        json!({"action": "prd.approve", "question": "Ship?",
        "options": [{"key": "yes", "text": "Ship it"}, {"key": "no", "text": "Wait"}],
        "recommendation": "yes", "blocking": false}),
    );
    assert_eq!(raise["ok"], json!(true), "{raise}");
    replies.push(raise.to_string());
    let task = b.op(json!({"op": "recordTask", "business": "acme", "task_ref": "vikunja:1/7",
        "read_at": "2026-01-01T00:00:00.000Z",
        "fields": {"title": "Site", "done": false, "assignees": ["acme-pm-bot"], "labels": [], "priority": 2}}));
    assert_eq!(task["ok"], json!(true), "{task}");
    // A request carrying a loaded token is refused, and the refusal names no token.
    let leak = b.call(
        &cap,
        "message.send",
        json!({"to": "cto", "body": format!("my token is {VIKUNJA_TOKEN}")}),
    );
    assert_eq!(leak["error"], json!("known-token"));
    replies.push(leak.to_string());
    for (verb, args) in [
        ("inbox", Value::Null),
        ("agents", Value::Null),
        ("tasks", Value::Null),
        ("state", Value::Null),
        ("messages", json!({})),
        ("decisions", json!({"list": "recent"})),
        ("trail", json!({"subject": "run-cred"})),
        ("trail", json!({"subject": id})),
        ("trail", json!({"subject": "vikunja:1/7"})),
        ("replies", json!({"id": id})),
    ] {
        let r = b.call(&reader, verb, args.clone());
        assert_eq!(r["ok"], json!(true), "{verb} {args}: {r}");
        replies.push(r.to_string());
    }
    replies.push(b.call(&cap, "inbox", Value::Null).to_string());
    replies.push(b.call(&cap, "requirements", Value::Null).to_string());
    replies.push(b.op(json!({"op": "identity", "cap": cap})).to_string());
    drop(q);
    let path = b.stderr_path.clone();
    b.close();
    let logs = std::fs::read_to_string(path).unwrap_or_default();
    let mut db = std::fs::read(root.path().join("bus/bus.sqlite")).unwrap();
    db.extend(std::fs::read(root.path().join("bus/bus.sqlite-wal")).unwrap_or_default());
    for secret in [
        GITEA_TOKEN,
        VIKUNJA_TOKEN,
        SYNC_TOKEN,
        ENV_VAR,
        secrets.path().to_str().unwrap(),
    ] {
        assert!(!logs.contains(secret), "{secret} in logs");
        assert!(
            !replies.iter().any(|r| r.contains(secret)),
            "{secret} in a reply"
        );
        assert!(
            !db.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} in the store"
        );
    }
}

#[test]
fn bad_references_refuse_the_start_with_a_code_that_names_no_path() {
    let root = data_root();
    let secrets = data_root();
    let good = token_file(secrets.path(), "good", GITEA_TOKEN.as_bytes(), 0o600);
    let loose = token_file(secrets.path(), "loose", GITEA_TOKEN.as_bytes(), 0o640);
    let exec = token_file(secrets.path(), "exec", GITEA_TOKEN.as_bytes(), 0o700);
    let link = secrets.path().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let big = token_file(
        secrets.path(),
        "big",
        "a".repeat(16 * 1024 + 1).as_bytes(),
        0o600,
    );
    let malformed = token_file(
        secrets.path(),
        "bad",
        b"has spaces in it, not a token",
        0o600,
    );
    let short = token_file(secrets.path(), "short", b"abc", 0o600);
    let two_lf = token_file(
        secrets.path(),
        "lf",
        format!("{GITEA_TOKEN}\n\n").as_bytes(),
        0o600,
    );
    let inside_root = token_file(root.path(), "inside", GITEA_TOKEN.as_bytes(), 0o600);
    let repo = data_root();
    let in_repo = token_file(repo.path(), "token", GITEA_TOKEN.as_bytes(), 0o600);
    let dir = secrets.path().join("adir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o600)).unwrap();
    let read_only = token_file(secrets.path(), "ro", GITEA_TOKEN.as_bytes(), 0o400);
    let setuid = token_file(secrets.path(), "suid", GITEA_TOKEN.as_bytes(), 0o4600);
    let project = data_root();
    let in_project = token_file(project.path(), "token", GITEA_TOKEN.as_bytes(), 0o600);
    let own_repo = own_repo_dir();
    let in_own_repo = token_file(own_repo.path(), "token", GITEA_TOKEN.as_bytes(), 0o600);
    let repo_link = secrets.path().join("repo-link");
    std::os::unix::fs::symlink(repo.path(), &repo_link).unwrap();
    let via_link = repo_link.join("token").to_str().unwrap().to_string();
    let viki = json!({"env": ENV_VAR, "expires": far_date()});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"file": loose, "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        (
            json!({"file": exec, "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        (
            json!({"file": link.to_str().unwrap(), "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        (
            json!({"file": dir.to_str().unwrap(), "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        (
            json!({"file": big, "rotateBy": far_date()}),
            "credential-size",
        ),
        (
            json!({"file": malformed, "rotateBy": far_date()}),
            "credential-format",
        ),
        (
            json!({"file": short, "rotateBy": far_date()}),
            "credential-format",
        ),
        (
            json!({"file": two_lf, "rotateBy": far_date()}),
            "credential-format",
        ),
        (
            json!({"file": inside_root, "rotateBy": far_date()}),
            "credential-path",
        ),
        (
            json!({"file": in_repo, "rotateBy": far_date()}),
            "credential-path",
        ),
        (
            json!({"file": secrets.path().join("missing").to_str().unwrap(), "rotateBy": far_date()}),
            "credential-missing",
        ),
        (
            json!({"file": good, "rotateBy": "2099-3-1"}),
            "credential-date",
        ),
        (
            json!({"file": good, "rotateBy": "2099-02-30"}),
            "credential-date",
        ),
        (
            json!({"file": good, "expires": far_date()}),
            "credential-date",
        ),
        (json!({"file": good}), "credential-date"),
        // A relative reference is `credential-path`, the documented code.
        (
            json!({"file": "relative/token", "rotateBy": far_date()}),
            "credential-path",
        ),
        (
            json!({"file": "", "rotateBy": far_date()}),
            "credential-path",
        ),
        // Exactly 0600: read-only for the owner is not 0600 either.
        (
            json!({"file": read_only, "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        (
            json!({"file": setuid, "rotateBy": far_date()}),
            "credential-unsafe",
        ),
        // Inside a declared project root.
        (
            json!({"file": in_project, "rotateBy": far_date()}),
            "credential-path",
        ),
        // Inside the broker's own repository, which no `repoRoots` names.
        (
            json!({"file": in_own_repo, "rotateBy": far_date()}),
            "credential-path",
        ),
        // Inside a repository reached through a symlinked directory.
        (
            json!({"file": via_link, "rotateBy": far_date()}),
            "credential-path",
        ),
    ];
    for (gitea, code) in cases {
        let mut cfg = config_with(root.path(), gitea.clone(), viki.clone(), None);
        cfg["repoRoots"] = json!([repo.path()]);
        cfg["businesses"]["acme"]["projects"] = json!({"site": {"repo": project.path()}});
        let (mut b, reply) = Broker::spawn_with(
            root.path(),
            json!({"op": "boot", "config": cfg}),
            &[(ENV_VAR, VIKUNJA_TOKEN)],
        );
        assert_eq!(reply, json!({"ok": false, "error": code}), "{gitea}");
        let exit = b.wait(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(exit.code(), Some(2));
        let err = b.stderr();
        assert!(err.contains(&format!(r#"{{"error":"{code}"}}"#)), "{err}");
        assert!(
            !err.contains(secrets.path().to_str().unwrap()),
            "a path in: {err}"
        );
        assert!(!err.contains(GITEA_TOKEN));
    }
    // A missing environment variable.
    let cfg = config_with(
        root.path(),
        json!({"file": good, "rotateBy": far_date()}),
        viki.clone(),
        None,
    );
    let (_b, reply) = Broker::spawn(root.path(), cfg);
    assert_eq!(reply, json!({"ok": false, "error": "credential-missing"}));
    // And the good configuration starts.
    let cfg = config_with(
        root.path(),
        json!({"file": good, "rotateBy": far_date()}),
        viki,
        None,
    );
    let (b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    b.close();
}

/// A private directory inside this workspace: the broker's own repository.
fn own_repo_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(".cred-test-")
        .tempdir_in(env!("CARGO_MANIFEST_DIR"))
        .unwrap()
}

/// `YYYY-MM-DD` of the UTC day `days` from today.
fn day_from_today(days: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = now.div_euclid(86_400) + days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn boot_code(root: &Path, cfg: Value) -> Value {
    let (mut b, reply) = Broker::spawn_with(
        root,
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    if reply["ok"] == json!(true) {
        b.close();
    } else {
        let _ = b.wait(std::time::Duration::from_secs(10));
    }
    reply
}

#[test]
fn vikunja_and_sync_references_need_a_strict_expires_date() {
    let root = data_root();
    let secrets = data_root();
    let good = token_file(secrets.path(), "good", GITEA_TOKEN.as_bytes(), 0o600);
    let gitea = json!({"file": good, "rotateBy": far_date()});
    for (vikunja, code) in [
        (
            json!({"env": ENV_VAR, "rotateBy": far_date()}),
            "credential-date",
        ),
        (json!({"env": ENV_VAR}), "credential-date"),
        (
            json!({"env": ENV_VAR, "expires": far_date(), "rotateBy": far_date()}),
            "credential-date",
        ),
        (
            json!({"env": ENV_VAR, "expires": "2099-13-01"}),
            "credential-date",
        ),
        (
            json!({"env": ENV_VAR, "expires": "99-03-01"}),
            "credential-date",
        ),
        (
            json!({"env": ENV_VAR, "expires": "2099-03-01T00:00:00Z"}),
            "credential-date",
        ),
    ] {
        let cfg = config_with(root.path(), gitea.clone(), vikunja.clone(), None);
        assert_eq!(
            boot_code(root.path(), cfg),
            json!({"ok": false, "error": code}),
            "{vikunja}"
        );
    }
    // The sync identity follows the same rules.
    let viki = json!({"env": ENV_VAR, "expires": far_date()});
    for (sync, code) in [
        (
            json!({"file": good, "rotateBy": far_date()}),
            "credential-date",
        ),
        (
            json!({"file": secrets.path().join("none").to_str().unwrap(), "expires": far_date()}),
            "credential-missing",
        ),
        (
            json!({"file": "sync-token", "expires": far_date()}),
            "credential-path",
        ),
    ] {
        let cfg = config_with(root.path(), gitea.clone(), viki.clone(), Some(sync.clone()));
        assert_eq!(
            boot_code(root.path(), cfg),
            json!({"ok": false, "error": code}),
            "{sync}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_file_owned_by_another_user_is_unsafe() {
    require_root("give a file to uid 65534");
    let root = data_root();
    let secrets = data_root();
    let theirs = token_file(secrets.path(), "theirs", GITEA_TOKEN.as_bytes(), 0o600);
    std::os::unix::fs::chown(&theirs, Some(65_534), Some(65_534)).unwrap();
    let cfg = config_with(
        root.path(),
        json!({"file": theirs, "rotateBy": far_date()}),
        json!({"env": ENV_VAR, "expires": far_date()}),
        None,
    );
    assert_eq!(
        boot_code(root.path(), cfg),
        json!({"ok": false, "error": "credential-unsafe"})
    );
}

#[test]
fn states_move_with_the_clock_and_status_covers_the_sync_identity() {
    let root = data_root();
    let secrets = data_root();
    // Exactly 16 KiB: the largest file, still one token.
    let big = token_file(
        secrets.path(),
        "big",
        "b".repeat(16 * 1024).as_bytes(),
        0o600,
    );
    let s = token_file(secrets.path(), "sync", SYNC_TOKEN.as_bytes(), 0o600);
    let soon = day_from_today(3);
    let today = day_from_today(0);
    let cfg = config_with(
        root.path(),
        json!({"file": big, "rotateBy": soon}),
        json!({"env": ENV_VAR, "expires": today, "bot": "acme-pm-bot"}),
        Some(json!({"file": s, "expires": soon, "bot": "acme-sync"})),
    );
    let (mut b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let reader = b.reader_cap();
    assert_eq!(
        b.call(&reader, "credentials", Value::Null)["result"],
        json!([
            {"service": "gitea", "account": null, "role": "pm", "dateKind": "rotateBy", "date": soon, "state": "expiring"},
            // Vikunja is expired from midnight UTC of its expiry day.
            {"service": "vikunja", "account": "acme-pm-bot", "role": "pm", "dateKind": "expires", "date": today, "state": "expired"},
            {"service": "vikunja", "account": "acme-sync", "role": "tracker sync", "dateKind": "expires", "date": soon, "state": "expiring"},
        ])
    );
    // credentialStatus: the sync identity is `@sync`; a role without
    // credentials has no rows.
    assert_eq!(
        b.op(json!({"op": "credentialStatus", "business": "acme", "role": "@sync"})),
        json!({"ok": true, "result": [{"service": "vikunja", "date": soon, "state": "expiring"}]})
    );
    assert_eq!(
        b.op(json!({"op": "credentialStatus", "business": "acme", "role": "cto"})),
        json!({"ok": true, "result": []})
    );
    for (op, code) in [
        (
            json!({"op": "credentialStatus", "business": "nope", "role": "pm"}),
            "unknown-business",
        ),
        (
            json!({"op": "credentialStatus", "business": "acme", "role": "tracker sync"}),
            "unknown-role",
        ),
        (
            json!({"op": "credentialStatus", "business": "acme", "role": "pm", "token": true}),
            "invalid-request",
        ),
        (
            json!({"op": "credentialStatus", "business": "acme"}),
            "invalid-request",
        ),
    ] {
        assert_eq!(
            b.op(op.clone()),
            json!({"ok": false, "error": code}),
            "{op}"
        );
    }
    b.close();
    // Without a sync identity, `@sync` names no one.
    let cfg = config_with(
        root.path(),
        json!({"file": big, "rotateBy": soon}),
        json!({"env": ENV_VAR, "expires": far_date()}),
        None,
    );
    let (mut b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    assert_eq!(
        b.op(json!({"op": "credentialStatus", "business": "acme", "role": "@sync"})),
        json!({"ok": false, "error": "unknown-role"})
    );
    b.close();
}

#[test]
fn tokens_are_read_once_and_checked_in_every_read_reply() {
    let root = data_root();
    let secrets = data_root();
    let g = token_file(secrets.path(), "gitea", GITEA_TOKEN.as_bytes(), 0o600);
    // A sync bot name that contains a loaded token: the `credentials` read
    // would show it, so the read refuses like every other.
    let cfg = config_with(
        root.path(),
        json!({"file": g, "rotateBy": far_date()}),
        json!({"env": ENV_VAR, "expires": far_date()}),
        Some(json!({"env": ENV_VAR, "expires": far_date(), "bot": format!("bot-{GITEA_TOKEN}")})),
    );
    let (mut b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[(ENV_VAR, VIKUNJA_TOKEN)],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let reader = b.reader_cap();
    assert_eq!(
        b.call(&reader, "credentials", Value::Null),
        json!({"ok": false, "error": "known-token"})
    );
    // Rotating the file after start changes nothing until a restart: the old
    // token is still the known one, the new one is not.
    const ROTATED: &str = "rotated-gitea-token-0000000000";
    std::fs::write(&g, ROTATED).unwrap();
    let p = sleeper();
    let cap = b.bind("pm", "run-rot", p.id());
    assert_eq!(b.call(&cap, "role.claim", Value::Null)["ok"], json!(true));
    assert_eq!(
        b.call(
            &cap,
            "message.send",
            json!({"to": "cto", "body": GITEA_TOKEN})
        )["error"],
        json!("known-token")
    );
    // In an argument key, too.
    assert_eq!(
        b.call(
            &cap,
            "message.send",
            json!({"to": "cto", "body": "x", GITEA_TOKEN: 1})
        )["error"],
        json!("known-token")
    );
    let sent = b.call(&cap, "message.send", json!({"to": "cto", "body": ROTATED}));
    assert_eq!(sent["ok"], json!(true), "{sent}");
    // Evidence a host op would write: an event body, a task snapshot.
    assert_eq!(
        b.op(
            json!({"op": "recordEvent", "cap": cap, "kind": "tracker.note",
            "body": {"note": VIKUNJA_TOKEN}})
        )["error"],
        json!("known-token")
    );
    assert_eq!(
        b.op(
            json!({"op": "recordTask", "business": "acme", "task_ref": "vikunja:1/8",
            "read_at": "2026-01-01T00:00:00.000Z",
            "fields": {"title": "t", "assignees": [GITEA_TOKEN]}})
        )["error"],
        json!("known-token")
    );
    let path = b.stderr_path.clone();
    b.close();
    let logs = std::fs::read_to_string(path).unwrap_or_default();
    let mut db = std::fs::read(root.path().join("bus/bus.sqlite")).unwrap();
    db.extend(std::fs::read(root.path().join("bus/bus.sqlite-wal")).unwrap_or_default());
    for secret in [GITEA_TOKEN, VIKUNJA_TOKEN] {
        assert!(!logs.contains(secret), "{secret} in logs");
        assert!(
            !db.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} in the store"
        );
    }
}

/// The broker's children: `(pid, exe file name)`, from `/proc`.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid = after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_default();
            out.push((pid, exe));
        }
    }
    out
}

/// Issue 29, "Also": a credential handed to the broker in its environment
/// is not inherited by the proof helper (spawned with an empty
/// environment: before, it got the broker's whole environment, token
/// included), is not in what `/proc/<broker>/environ` shows (taken out once
/// read, its bytes zeroed), and is still the broker's: the known-token
/// check refuses it.
#[test]
fn an_environment_credential_leaves_the_broker_s_environment_and_never_reaches_proofd() {
    let root = data_root();
    let cfg = config_with(
        root.path(),
        json!({"env": "MOSAIC_TEST_GITEA_PM", "rotateBy": far_date()}),
        json!({"env": ENV_VAR, "expires": far_date()}),
        None,
    );
    let (mut b, reply) = Broker::spawn_with(
        root.path(),
        json!({"op": "boot", "config": cfg}),
        &[
            (ENV_VAR, VIKUNJA_TOKEN),
            ("MOSAIC_TEST_GITEA_PM", GITEA_TOKEN),
        ],
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let broker = b.child.id();
    let helpers: Vec<u32> = children_of(broker)
        .into_iter()
        .filter(|(_, exe)| exe == "mosaic-proofd")
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(helpers.len(), 1, "the broker's proof helper");
    // The helper is not made undumpable: its environ is ours to read.
    let env = std::fs::read(format!("/proc/{}/environ", helpers[0])).expect("proofd's environ");
    assert!(env.is_empty(), "{:?}", String::from_utf8_lossy(&env));

    // The broker is undumpable, so only a root reader sees its environ at
    // all; there, the tokens are gone from it.
    match std::fs::read(format!("/proc/{broker}/environ")) {
        Ok(env) => {
            for secret in [GITEA_TOKEN, VIKUNJA_TOKEN] {
                assert!(
                    !env.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{secret} in the broker's environ"
                );
            }
            // The rest of its environment is still there.
            assert!(env.windows(5).any(|w| w == b"PATH="), "PATH kept");
        }
        Err(e) => {
            assert_ne!(nix_euid(), 0, "root reads any environ: {e}");
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        }
    }
    // Both tokens are still the broker's known ones.
    let p = sleeper();
    let cap = b.bind("pm", "run-env", p.id());
    assert_eq!(b.call(&cap, "role.claim", Value::Null)["ok"], json!(true));
    for secret in [GITEA_TOKEN, VIKUNJA_TOKEN] {
        assert_eq!(
            b.call(&cap, "message.send", json!({"to": "cto", "body": secret}))["error"],
            json!("known-token")
        );
    }
    b.close();
}

fn nix_euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}
