//! The organization file (DESIGN.md "Schema 3i", Organization; 3i rows
//! 65, 155, 165; issue 23) through the real broker: a `mosaic-bus` child on
//! a socketpair, the human through the real static shim and the real proof
//! helper, the chief of staff as a run bound to a real process, the file
//! on a real filesystem.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// acme: a chief of staff whose file lists `organization.change` and who
/// launches, a pm, a dev, and `ops`, whose definition declares a credential.
fn business() -> Value {
    let role = |def: &str, within: Value| json!({"definition": def, "authority": {"withinRole": within, "crossRole": []}});
    let mut ops = role("ops", json!([]));
    ops["credentials"] = json!({"gitea": {"env": "ACME_OPS_TOKEN", "rotateBy": "2099-01-01"}});
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "pm", "delivery": "pm"},
        "roles": {
            "chief": role("chief-of-staff", json!(["message.send", "organization.change"])),
            "pm": role("pm", json!(["message.send"])),
            "dev": role("dev", json!([])),
            "ops": ops,
        },
        "launch": {"by": "chief", "instances": ["pm", "dev"]},
        "vars": {"bus.tester": true},
    })
}

/// A valid file: `pi` on with two levels, `claude-code` off.
fn organization() -> Value {
    json!({
        "revision": 1,
        "limits": {"runs": 4, "perDefinition": {"dev": 2}},
        "models": {"local": {"harness": "pi"}},
        "instances": {"acme": {"dev": {"definition": "dev", "vars": {}, "launch": true}}},
        "assistants": {},
        "routes": {"default": {"model": "local", "thinking": "low"}},
        "plugins": {"harness": {
            "pi": {"on": true, "levels": ["low", "high"]},
            "claude-code": {"on": false, "levels": ["low"]},
        }},
    })
}

fn org_path(root: &Path) -> PathBuf {
    root.join("organization.json")
}

fn write_org(root: &Path, v: &Value) {
    let p = org_path(root);
    std::fs::write(&p, serde_json::to_vec_pretty(v).expect("json")).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn read_org(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(org_path(root)).expect("read")).expect("json")
}

fn boot(root: &Path, with_org: bool) -> (Broker, Value) {
    let mut config = json!({"dataRoot": root.to_str().expect("utf-8"),
                            "businesses": {"acme": business()}, "readers": ["acme"]});
    if with_org {
        config["organization"] = json!(org_path(root));
    }
    Broker::spawn_with(
        root,
        json!({"op": "boot", "config": config}),
        &[("ACME_OPS_TOKEN", "tok_0123456789abcdef0123")],
    )
}

fn launch_with(role: &str, run: &str, harness: &str, pid: u32) -> Value {
    let mut l = launch(role, run, pid);
    l["harness"] = json!(harness);
    l
}

fn changes(root: &Path) -> Vec<Value> {
    let c = db(root);
    let mut st = c
        .prepare(
            "SELECT role, run, body FROM events WHERE kind = 'organization.changed' ORDER BY at",
        )
        .expect("prepare");
    st.query_map([], |r| {
        let body: String = r.get(2)?;
        Ok(json!([
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            serde_json::from_str::<Value>(&body).expect("body")
        ]))
    })
    .expect("query")
    .map(|r| r.expect("row"))
    .collect()
}

/// Every organization verb and code, with the sessions each allows.
#[test]
fn the_organization_verbs_write_through_one_checked_atomic_writer() {
    let dir = data_root();
    let root = dir.path();
    write_org(root, &organization());
    let (mut b, reply) = boot(root, true);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let chief_p = sleeper();
    let pm_p = sleeper();
    let chief = b.bind("chief", "chief-1", chief_p.id());
    let pm = b.bind("pm", "pm-1", pm_p.id());
    res(&b.call(&chief, "role.claim", Value::Null));
    res(&b.call(&pm, "role.claim", Value::Null));
    let reader = b.reader_cap();

    // Reads: the human only.
    let limits = res(&human.call("limits", Value::Null)).clone();
    assert_eq!(
        limits,
        json!({"revision": 1, "limits": {"runs": 4, "perDefinition": {"dev": 2}},
               "models": {"local": {"harness": "pi"}}, "assistants": {}})
    );
    for verb in [
        "limits",
        "limits.set",
        "instances",
        "instances.set",
        "routes",
        "routes.set",
    ] {
        assert_eq!(
            err(&b.call(&chief, verb, json!({}))),
            "human-required",
            "{verb}"
        );
        assert_eq!(
            err(&b.call(&reader, verb, json!({}))),
            "human-required",
            "{verb}"
        );
    }
    let tester_off = ShimSession::tester(&b);
    // limits' row names no tester code: L218's tester-refused.
    assert_eq!(
        err(&tester_off.call("limits", Value::Null)),
        "tester-refused"
    );

    // A stale revision writes nothing.
    let before = std::fs::read(org_path(root)).expect("read");
    let r = human.call("limits.set", json!({"revision": 0, "limits": {"runs": 9}}));
    assert_eq!(err(&r), "organization-stale", "{r}");
    assert_eq!(std::fs::read(org_path(root)).expect("read"), before);
    assert!(changes(root).is_empty());
    // Shapes: leftovers and bad revisions are invalid-request, bad values organization-invalid.
    for (args, code) in [
        (
            json!({"revision": 1, "limits": {"runs": 9}, "routes": {}}),
            "invalid-request",
        ),
        (
            json!({"revision": 1, "instance": "dev", "op": "add"}),
            "invalid-request",
        ),
        (json!({"revision": "1", "limits": {}}), "invalid-request"),
        (json!({"revision": 1}), "invalid-request"),
        (
            json!({"revision": 1, "limits": {"runs": 1001}}),
            "organization-invalid",
        ),
        (
            json!({"revision": 1, "limits": {"hours": 1}}),
            "organization-invalid",
        ),
        (
            json!({"revision": 1, "models": {"Big": {"harness": "pi"}}}),
            "organization-invalid",
        ),
    ] {
        let r = human.call("limits.set", args.clone());
        assert_eq!(err(&r), code, "{args}: {r}");
    }
    assert_eq!(std::fs::read(org_path(root)).expect("read"), before);

    // The human's limits.set: revision 2, no restart, 0600, on record.
    let r = human.call("limits.set", json!({"revision": 1, "limits": {"runs": 9}}));
    assert_eq!(
        res(&r),
        &json!({"revision": 2, "restart": false, "actor": "human"})
    );
    let file = read_org(root);
    assert_eq!(file["revision"], json!(2));
    assert_eq!(file["limits"], json!({"runs": 9, "perDefinition": {}}));
    assert_eq!(file["routes"], organization()["routes"], "the rest is kept");
    let mode = std::fs::metadata(org_path(root))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!root.join(".organization.json.tmp").exists());

    // organization.set: the chief of staff (organization.change), actor
    // <definition>.<instance>; everyone else gets their class's code or
    // not-authorized; the instance and route keys refuse invalid-request.
    let set = json!({"revision": 2, "limits": {"runs": 6, "perDefinition": {"dev": 3}}});
    assert_eq!(
        err(&b.call(&pm, "organization.set", set.clone())),
        "not-authorized"
    );
    assert_eq!(
        err(&b.call(&reader, "organization.set", set.clone())),
        "read-only"
    );
    assert_eq!(
        err(&human.call("organization.set", set.clone())),
        "agent-required"
    );
    for extra in [
        json!({"instance": "dev"}),
        json!({"op": "add"}),
        json!({"routes": {}}),
    ] {
        let mut args = set.clone();
        args.as_object_mut()
            .expect("obj")
            .extend(extra.as_object().expect("obj").clone());
        assert_eq!(
            err(&b.call(&chief, "organization.set", args)),
            "invalid-request"
        );
    }
    let r = b.call(&chief, "organization.set", set.clone());
    assert_eq!(
        res(&r),
        &json!({"revision": 3, "restart": false, "actor": "chief-of-staff.chief"})
    );
    assert_eq!(
        err(&b.call(&chief, "organization.set", set)),
        "organization-stale"
    );
    // Assistants' vars run the route checks; a change waits for a restart.
    let r = b.call(
        &chief,
        "organization.set",
        json!({"revision": 3, "assistants": {"helper": {"vars": {"model": "local", "thinking": "max"}}}}),
    );
    assert_eq!(err(&r), "thinking-unsupported", "{r}");
    let r = b.call(
        &chief,
        "organization.set",
        json!({"revision": 3, "assistants": {"helper": {"vars": {"model": "local", "thinking": "high"}}}}),
    );
    assert_eq!(res(&r)["restart"], json!(true), "{r}");

    // instances / instances.set.
    let r = res(&human.call("instances", Value::Null)).clone();
    assert_eq!(r["revision"], json!(4));
    assert_eq!(
        r["instances"],
        json!({"dev": {"definition": "dev", "vars": {}, "launch": true}})
    );
    assert_eq!(r["definitions"], json!(["chief-of-staff", "dev", "pm"]));
    assert_eq!(
        r["loaded"]["pm"],
        json!({"definition": "pm", "launch": true})
    );
    for (args, code) in [
        (
            json!({"revision": 4, "instance": "dev", "op": "add", "definition": "dev"}),
            "organization-instance-exists",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "change", "launch": true}),
            "organization-unknown-instance",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "add", "definition": "qa"}),
            "organization-unknown-definition",
        ),
        (
            json!({"revision": 4, "instance": "ops2", "op": "add", "definition": "ops"}),
            "organization-credentials-out-of-scope",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "remove"}),
            "invalid-request",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "add"}),
            "invalid-request",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "add", "definition": "dev", "role": "x"}),
            "invalid-request",
        ),
        (
            json!({"revision": 4, "instance": "qa", "op": "add", "definition": "dev",
                "vars": {"x": {}}}),
            "organization-invalid",
        ),
        (
            json!({"revision": 3, "instance": "qa", "op": "add", "definition": "dev"}),
            "organization-stale",
        ),
    ] {
        let r = human.call("instances.set", args.clone());
        assert_eq!(err(&r), code, "{args}: {r}");
    }
    let r = human.call(
        "instances.set",
        json!({"revision": 4, "instance": "dev2", "op": "add", "definition": "dev",
               "vars": {"tone": "plain"}}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 5, "restart": true, "actor": "human", "instance": "dev2"})
    );
    let r = human.call(
        "instances.set",
        json!({"revision": 5, "instance": "dev2", "op": "change", "launch": true}),
    );
    assert_eq!(res(&r)["restart"], json!(false), "{r}");
    assert_eq!(
        read_org(root)["instances"]["acme"]["dev2"],
        json!({"definition": "dev", "vars": {"tone": "plain"}, "launch": true})
    );

    // routes / routes.set and the harness checks.
    let r = res(&human.call("routes", Value::Null)).clone();
    assert_eq!(r["revision"], json!(6));
    assert_eq!(r["routes"], organization()["routes"]);
    let r = human.call(
        "limits.set",
        json!({"revision": 6, "models": {"local": {"harness": "pi"},
                                         "cloud": {"harness": "claude-code"},
                                         "other": {"harness": "nowhere"}}}),
    );
    assert_eq!(err(&r), "harness-refused", "{r}");
    let r = human.call(
        "limits.set",
        json!({"revision": 6, "models": {"local": {"harness": "pi"},
                                         "cloud": {"harness": "claude-code"}}}),
    );
    assert_eq!(res(&r)["revision"], json!(7), "{r}");
    for (routes, code) in [
        (json!({"dev": {"model": "cloud"}}), "harness-off"),
        (
            json!({"dev": {"model": "local", "thinking": "max"}}),
            "thinking-unsupported",
        ),
        (json!({"dev": {"model": "nope"}}), "organization-invalid"),
        (
            json!({"dev": {"model": "local", "speed": 1}}),
            "organization-invalid",
        ),
        (json!(["dev"]), "invalid-request"),
    ] {
        let r = human.call("routes.set", json!({"revision": 7, "routes": routes}));
        assert_eq!(err(&r), code, "{r}");
    }
    assert_eq!(
        err(&human.call("routes.set", json!({"revision": 7, "routes": {}, "x": 1}))),
        "invalid-request"
    );
    let r = human.call(
        "routes.set",
        json!({"revision": 7, "routes": {"dev": {"model": "local", "thinking": "high"}}}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 8, "restart": true, "actor": "human"})
    );

    // Each change on record with its actor, in order.
    let got: Vec<Value> = changes(root)
        .iter()
        .map(|c| {
            json!([
                c[0],
                c[1],
                c[2]["operation"],
                c[2]["revision"],
                c[2]["actor"]
            ])
        })
        .collect();
    assert_eq!(
        got,
        vec![
            json!(["human", "human-cli", "limits.set", 2, "human"]),
            json!([
                "chief",
                "chief-1",
                "organization.set",
                3,
                "chief-of-staff.chief"
            ]),
            json!([
                "chief",
                "chief-1",
                "organization.set",
                4,
                "chief-of-staff.chief"
            ]),
            json!(["human", "human-cli", "instances.set", 5, "human"]),
            json!(["human", "human-cli", "instances.set", 6, "human"]),
            json!(["human", "human-cli", "limits.set", 7, "human"]),
            json!(["human", "human-cli", "routes.set", 8, "human"]),
        ]
    );

    // A file that can't be read: organization-unavailable; one that
    // doesn't check: organization-invalid. Nothing is written either way.
    let good = std::fs::read(org_path(root)).expect("read");
    let aside = root.join("org-aside.json");
    std::fs::rename(org_path(root), &aside).expect("rename");
    std::os::unix::fs::symlink(&aside, org_path(root)).expect("symlink");
    assert_eq!(
        err(&human.call("routes", Value::Null)),
        "organization-unavailable"
    );
    std::fs::remove_file(org_path(root)).expect("rm link");
    std::fs::write(org_path(root), b"{\"revision\": 8, \"extra\": 1}").expect("write");
    assert_eq!(
        err(&human.call("routes", Value::Null)),
        "organization-invalid"
    );
    let r = human.call("limits.set", json!({"revision": 8, "limits": {}}));
    assert_eq!(err(&r), "organization-invalid");
    std::fs::rename(&aside, org_path(root)).expect("restore");
    assert_eq!(std::fs::read(org_path(root)).expect("read"), good);
    assert_eq!(changes(root).len(), 7);
    b.close();

    // A broker without the boot key: organization-off; a bad file refuses the boot.
    let dir2 = data_root();
    let (b2, reply) = boot(dir2.path(), false);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human2 = ShimSession::human(&b2);
    assert_eq!(err(&human2.call("routes", Value::Null)), "organization-off");
    b2.close();
    let dir3 = data_root();
    let mut bad = organization();
    bad["routes"]["default"]["thinking"] = json!("max");
    write_org(dir3.path(), &bad);
    let (mut b3, reply) = boot(dir3.path(), true);
    assert_eq!(reply["error"], json!("thinking-unsupported"), "{reply}");
    assert!(b3.wait(Duration::from_secs(10)).is_some());
    let dir4 = data_root();
    let (mut b4, reply) = boot(dir4.path(), true);
    assert_eq!(reply["error"], json!("organization-unavailable"), "{reply}");
    assert!(b4.wait(Duration::from_secs(10)).is_some());
}

/// Row 65: a new run binds only while its harness is switched on now; a
/// run the store already has binds again after it is switched off.
#[test]
fn harness_switches_gate_new_runs_and_let_known_runs_bind_again() {
    let dir = data_root();
    let root = dir.path();
    write_org(root, &organization());
    let (mut b, reply) = boot(root, true);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let p1 = sleeper();
    let p2 = sleeper();
    let r = b.op(
        json!({"op": "bindLaunch", "record": launch_with("dev", "dev-1", "claude-code", p1.id())}),
    );
    assert_eq!(r["error"], json!("invalid-harness"), "switched off: {r}");
    let r = b
        .op(json!({"op": "bindLaunch", "record": launch_with("dev", "dev-1", "nowhere", p1.id())}));
    assert_eq!(r["error"], json!("invalid-harness"), "not listed: {r}");
    let r = b.op(json!({"op": "bindLaunch", "record": launch_with("dev", "dev-1", "pi", p1.id())}));
    assert_eq!(r["ok"], json!(true), "switched on: {r}");
    // Switch pi off now (as the human would edit the file): a new run is
    // refused at once, without a restart.
    let mut off = organization();
    off["plugins"]["harness"]["pi"]["on"] = json!(false);
    off["routes"] = json!({});
    write_org(root, &off);
    let r = b.op(json!({"op": "bindLaunch", "record": launch_with("pm", "pm-1", "pi", p2.id())}));
    assert_eq!(r["error"], json!("invalid-harness"), "{r}");
    b.close();
    // After a restart the run the store has binds again; a new one does not.
    let (mut b, reply) = boot(root, true);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let r = b.op(json!({"op": "bindLaunch", "record": launch_with("dev", "dev-1", "pi", p1.id())}));
    assert_eq!(r["ok"], json!(true), "known run: {r}");
    let cap = r["launch"]["cap"].as_str().expect("cap").to_string();
    let r = b.op(json!({"op": "endLaunch",
                        "record": {"business": "acme", "run": "dev-1", "reason": "done"}}));
    assert_eq!(r["ok"], json!(true), "ended: {r}");
    assert_eq!(
        err(&b.call(&cap, "inbox", Value::Null)),
        "unknown-capability"
    );
    let r = b.op(json!({"op": "bindLaunch", "record": launch_with("pm", "pm-2", "pi", p2.id())}));
    assert_eq!(r["error"], json!("invalid-harness"), "{r}");
    b.close();
}

/// The child half of the crash test: replaces the file in a loop, two
/// contents in turn, until killed. Does nothing unless the parent set the
/// variable.
#[test]
fn organization_writer_child() {
    let Some(path) = std::env::var_os("MOSAIC_ORG_WRITER_LOOP") else {
        return;
    };
    let path = PathBuf::from(path);
    let (a, b) = crash_contents();
    for i in 0u64.. {
        let org = if i % 2 == 0 { &a } else { &b };
        mosaic_bus::orgfile::write(&path, org).expect("write");
    }
}

/// Two valid files of different sizes, so a torn one can't pass for either.
fn crash_contents() -> (
    mosaic_bus::config::organization::Organization,
    mosaic_bus::config::organization::Organization,
) {
    use mosaic_bus::config::organization::Organization;
    let a = Organization::from_json(organization()).expect("a");
    let mut big = organization();
    big["revision"] = json!(2);
    for i in 0..200 {
        big["instances"]["acme"][format!("dev{i}")] =
            json!({"definition": "dev", "vars": {"note": "x".repeat(100)}, "launch": false});
    }
    (a, Organization::from_json(big).expect("b"))
}

/// A writer SIGKILLed mid-write leaves the old file or the new one, never
/// a torn one, and a 0600 one; the next write replaces a leftover temp file.
#[test]
fn a_writer_killed_mid_write_leaves_the_old_or_the_new_file() {
    use mosaic_bus::config::organization::Organization;
    let dir = data_root();
    let path = org_path(dir.path());
    let (a, b) = crash_contents();
    mosaic_bus::orgfile::write(&path, &a).expect("first write");
    let exe = std::env::current_exe().expect("exe");
    let mut seen = [0u32; 2];
    for round in 0..60u64 {
        if round >= 12 && seen.iter().all(|n| *n >= 2) {
            break;
        }
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "organization_writer_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MOSAIC_ORG_WRITER_LOOP", &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the writer");
        std::thread::sleep(Duration::from_millis(40 + 13 * (round % 12)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let text = std::fs::read(&path).expect("the file is there");
        let v: Value = serde_json::from_slice(&text).expect("never torn");
        let org = Organization::from_json(v).expect("valid");
        if org == a {
            seen[0] += 1;
        } else {
            assert_eq!(org, b, "round {round}: neither the old nor the new file");
            seen[1] += 1;
        }
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The writer ran (both contents were seen after kills), the file was
    // one of the two each time, and the next write goes through whatever
    // temp file a kill left.
    mosaic_bus::orgfile::write(&path, &a).expect("write after the kills");
    assert_eq!(mosaic_bus::orgfile::read(&path), Ok(a));
    assert!(
        seen.iter().all(|n| *n >= 2),
        "old/new after the kills: {seen:?}"
    );
}

// --- Several businesses on one broker (issue 29 item 5) -----------------

/// A broker serving acme and beta (each with a chief of staff whose file
/// lists `organization.change`, and a dev) from one organization file in
/// the one-business form both read at first; `env` for the broker.
struct Two {
    _dir: tempfile::TempDir,
    b: Broker,
    human: ShimSession,
    acme_chief: String,
    beta_chief: String,
    _runs: Vec<Sleeper>,
}

fn two_config(root: &Path) -> Value {
    let mut beta = business();
    beta["id"] = json!("beta");
    beta["human"] = json!("Bea");
    let roles = beta["roles"].as_object_mut().expect("roles");
    roles.remove("ops");
    json!({"dataRoot": root.to_str().expect("utf-8"),
           "businesses": {"acme": business(), "beta": beta},
           "organization": org_path(root)})
}

fn two(env: &[(&str, &str)]) -> Two {
    let dir = data_root();
    let root = dir.path();
    write_org(root, &organization());
    let mut env = env.to_vec();
    env.push(("ACME_OPS_TOKEN", "tok_0123456789abcdef0123"));
    let (mut b, reply) = Broker::spawn_with(
        root,
        json!({"op": "boot", "config": two_config(root)}),
        &env,
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (p1, p2) = (sleeper(), sleeper());
    let acme_chief = b.claimed_in("acme", "chief", "acme-chief-1", p1.id());
    let beta_chief = b.claimed_in("beta", "chief", "beta-chief-1", p2.id());
    let human = ShimSession::human(&b);
    Two {
        _dir: dir,
        b,
        human,
        acme_chief,
        beta_chief,
        _runs: vec![p1, p2],
    }
}

impl Two {
    fn root(&self) -> &Path {
        self._dir.path()
    }

    fn read(&self, business: &str, verb: &str) -> Value {
        res(&self.human.call_in(business, verb, Value::Null)).clone()
    }

    /// `organization.changed` rows as `[business, role, operation, revision]`.
    fn receipts(&self) -> Vec<Value> {
        let c = db(self.root());
        let mut st = c
            .prepare(
                "SELECT business, role, json_extract(body, '$.operation'),
                        json_extract(body, '$.revision')
                 FROM events WHERE kind = 'organization.changed' ORDER BY seq",
            )
            .expect("prepare");
        st.query_map([], |r| {
            Ok(json!([
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?
            ]))
        })
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
    }
}

/// acme's reads as they were before beta wrote anything.
fn acme_at_first() -> (Value, Value, Value) {
    let o = organization();
    (
        json!({"revision": 1, "limits": o["limits"], "models": o["models"], "assistants": {}}),
        json!({"revision": 1, "routes": o["routes"], "models": o["models"]}),
        json!({"dev": {"definition": "dev", "vars": {}, "launch": true}}),
    )
}

/// beta's chief of staff changes beta's limits and models: beta reads the
/// change, acme reads what it read before, the receipt is beta's alone, and
/// acme's chief still writes with the revision it had.
#[test]
fn organization_set_changes_only_the_callers_business() {
    let t = two(&[]);
    let (limits, routes, _) = acme_at_first();
    assert_eq!(t.read("beta", "limits"), limits, "one file, read by both");
    let set = json!({"revision": 1, "limits": {"runs": 9, "perDefinition": {}},
                     "models": {"local": {"harness": "pi"}, "big": {"harness": "pi"}}});
    let r = t.b.call(&t.beta_chief, "organization.set", set);
    assert_eq!(
        res(&r),
        &json!({"revision": 2, "restart": true, "actor": "chief-of-staff.chief"})
    );
    let beta = t.read("beta", "limits");
    assert_eq!(beta["revision"], json!(2));
    assert_eq!(beta["limits"], json!({"runs": 9, "perDefinition": {}}));
    assert_eq!(t.read("acme", "limits"), limits, "acme's limits untouched");
    assert_eq!(t.read("acme", "routes"), routes, "and its models");
    assert_eq!(
        t.receipts(),
        vec![json!(["beta", "chief", "organization.set", 2])]
    );
    let r = t.b.call(
        &t.acme_chief,
        "organization.set",
        json!({"revision": 1, "limits": {"runs": 3, "perDefinition": {}}}),
    );
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    assert_eq!(t.read("acme", "limits")["limits"]["runs"], json!(3));
    assert_eq!(t.read("beta", "limits")["limits"]["runs"], json!(9));
    t.b.close();
}

/// beta's human changes beta's limits; acme's human reads and writes its
/// own, at its own revision; after a restart each still reads its own.
#[test]
fn limits_set_changes_only_the_callers_business() {
    let t = two(&[]);
    let (limits, _, _) = acme_at_first();
    let r = t.human.call_in(
        "beta",
        "limits.set",
        json!({"revision": 1, "limits": {"runs": 7, "perDefinition": {"dev": 1}}}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 2, "restart": false, "actor": "human"})
    );
    assert_eq!(t.read("acme", "limits"), limits);
    assert_eq!(t.read("beta", "limits")["limits"]["runs"], json!(7));
    let r = t.human.call_in(
        "acme",
        "limits.set",
        json!({"revision": 1, "limits": {"runs": 5, "perDefinition": {}}}),
    );
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    assert_eq!(
        t.receipts(),
        vec![
            json!(["beta", "human", "limits.set", 2]),
            json!(["acme", "human", "limits.set", 2]),
        ]
    );
    // The file holds a part per business, the harness switches beside them.
    let file = read_org(t.root());
    assert_eq!(file["businesses"]["acme"]["limits"]["runs"], json!(5));
    assert_eq!(file["businesses"]["beta"]["limits"]["runs"], json!(7));
    assert_eq!(file["plugins"], organization()["plugins"]);
    assert!(file.get("limits").is_none(), "{file}");
    let Two { _dir, b, _runs, .. } = t;
    b.close();
    let root = _dir.path();
    let (b, reply) = Broker::spawn_with(
        root,
        json!({"op": "boot", "config": two_config(root)}),
        &[("ACME_OPS_TOKEN", "tok_0123456789abcdef0123")],
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    for (business, runs) in [("acme", 5), ("beta", 7)] {
        let l = res(&human.call_in(business, "limits", Value::Null)).clone();
        assert_eq!(
            (l["revision"].clone(), l["limits"]["runs"].clone()),
            (json!(2), json!(runs))
        );
    }
    b.close();
}

/// beta's human changes beta's routes; acme's routes and revision stay.
#[test]
fn routes_set_changes_only_the_callers_business() {
    let t = two(&[]);
    let (_, routes, _) = acme_at_first();
    let r = t.human.call_in(
        "beta",
        "routes.set",
        json!({"revision": 1, "routes": {"dev": {"model": "local", "thinking": "high"}}}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 2, "restart": true, "actor": "human"})
    );
    assert_eq!(
        t.read("beta", "routes")["routes"],
        json!({"dev": {"model": "local", "thinking": "high"}})
    );
    assert_eq!(t.read("acme", "routes"), routes);
    let r = t
        .human
        .call_in("acme", "routes.set", json!({"revision": 1, "routes": {}}));
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    assert_eq!(
        t.read("beta", "routes")["routes"],
        json!({"dev": {"model": "local", "thinking": "high"}})
    );
    t.b.close();
}

/// beta's human adds an instance to beta; acme's instances and revision
/// stay, so acme's human writes with the revision it read.
#[test]
fn instances_set_changes_only_the_callers_business() {
    let t = two(&[]);
    let (_, _, instances) = acme_at_first();
    let r = t.human.call_in(
        "beta",
        "instances.set",
        json!({"revision": 1, "instance": "dev2", "op": "add", "definition": "dev"}),
    );
    assert_eq!(
        res(&r),
        &json!({"revision": 2, "restart": true, "actor": "human", "instance": "dev2"})
    );
    let acme = t.read("acme", "instances");
    assert_eq!(acme["revision"], json!(1));
    assert_eq!(acme["instances"], instances);
    let beta = t.read("beta", "instances");
    assert_eq!(beta["revision"], json!(2));
    assert_eq!(
        beta["instances"],
        json!({"dev2": {"definition": "dev", "vars": {}, "launch": false}}),
        "beta had no instances in the file"
    );
    let r = t.human.call_in(
        "acme",
        "instances.set",
        json!({"revision": 1, "instance": "dev", "op": "change", "launch": false}),
    );
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    assert_eq!(
        t.receipts(),
        vec![
            json!(["beta", "human", "instances.set", 2]),
            json!(["acme", "human", "instances.set", 2]),
        ]
    );
    t.b.close();
}

// --- The file after the receipt (issue 30 item 7) -----------------------

/// A COMMIT that fails (the debug build's real failure, armed by a flag
/// file) answers `storage-unavailable` and leaves the file as it was: no
/// receipt, no change. The same write then goes through.
#[test]
fn a_failed_commit_leaves_the_organization_file_as_it_was() {
    let dir = data_root();
    let root = dir.path();
    write_org(root, &organization());
    let flag = root.join("fail-next-commit");
    let mut config = json!({"dataRoot": root.to_str().expect("utf-8"),
                            "businesses": {"acme": business()}});
    config["organization"] = json!(org_path(root));
    let (b, reply) = Broker::spawn_with(
        root,
        json!({"op": "boot", "config": config}),
        &[
            ("ACME_OPS_TOKEN", "tok_0123456789abcdef0123"),
            ("MOSAIC_BUS_TEST_FAIL_COMMIT", flag.to_str().expect("utf-8")),
        ],
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let before = std::fs::read_to_string(org_path(root)).expect("read");
    let set = json!({"revision": 1, "limits": {"runs": 9, "perDefinition": {}}});
    std::fs::write(&flag, b"").expect("arm");
    let r = human.call("limits.set", set.clone());
    assert_eq!(err(&r), "storage-unavailable", "{r}");
    assert!(!flag.exists(), "the failure was the armed COMMIT's");
    assert_eq!(
        std::fs::read_to_string(org_path(root)).expect("read"),
        before
    );
    assert!(changes(root).is_empty());
    assert_eq!(
        res(&human.call("limits", Value::Null))["revision"],
        json!(1)
    );
    let r = human.call("limits.set", set);
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    assert_eq!(read_org(root)["limits"]["runs"], json!(9));
    assert_eq!(changes(root).len(), 1);
    b.close();
}

/// A file step that fails after the receipt (a directory where the write's
/// temp file goes; then the file's directory made read-only) answers
/// `outcome-unknown`: the receipt stands, the file is as it was, and the
/// refusal is on record. Once the directory is writable again the next
/// write, at the file's revision, goes through.
#[test]
fn a_file_step_that_fails_after_the_receipt_answers_outcome_unknown() {
    let dir = data_root();
    let root = dir.path();
    let org_dir = root.join("org");
    std::fs::create_dir(&org_dir).expect("mkdir");
    let path = org_dir.join("organization.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&organization()).expect("json"),
    )
    .expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let config = json!({"dataRoot": root.to_str().expect("utf-8"),
                        "businesses": {"acme": business()}, "organization": path});
    let (b, reply) = Broker::spawn_with(
        root,
        json!({"op": "boot", "config": config}),
        &[("ACME_OPS_TOKEN", "tok_0123456789abcdef0123")],
    );
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let before = std::fs::read_to_string(&path).expect("read");
    let set = json!({"revision": 1, "limits": {"runs": 9, "perDefinition": {}}});

    // A directory with something in it where the temp file goes.
    let tmp = org_dir.join(".organization.json.tmp");
    std::fs::create_dir(&tmp).expect("mkdir tmp");
    std::fs::write(tmp.join("x"), b"x").expect("fill tmp");
    let r = human.call("limits.set", set.clone());
    assert_eq!(err(&r), "outcome-unknown", "{r}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), before);
    std::fs::remove_dir_all(&tmp).expect("rm tmp");

    // The file's directory read-only to the broker (which holds no
    // capability, so root's too).
    std::fs::set_permissions(&org_dir, std::fs::Permissions::from_mode(0o500)).expect("chmod");
    let r = human.call("limits.set", set.clone());
    std::fs::set_permissions(&org_dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    assert_eq!(err(&r), "outcome-unknown", "{r}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), before);

    // Each receipt stands, each with its refusal beside it.
    let receipts: Vec<Value> = changes(root)
        .iter()
        .map(|c| json!([c[0], c[2]["operation"], c[2]["revision"]]))
        .collect();
    assert_eq!(receipts, vec![json!(["human", "limits.set", 2]); 2]);
    let refused: Vec<Value> = refusals(root)
        .into_iter()
        .filter(|r| r[3] == json!("limits.set"))
        .collect();
    assert_eq!(
        refused,
        vec![json!(["human", "human-cli", null, "limits.set", "outcome-unknown"]); 2]
    );
    // The file still says revision 1, and the next write is read against it.
    let r = human.call("limits.set", set);
    assert_eq!(res(&r)["revision"], json!(2), "{r}");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    assert_eq!(file["limits"]["runs"], json!(9));
    b.close();
}
