//! Read scaling benchmark: fills a real store with 1,000,000 messages across
//! 50 roles and compares each shared read with the same read on a
//! 1,000-message store built the same way. Prints JSON: per read, the p50 on
//! each store and the ratio large/small (goal: at most 2).
//!
//! `cargo run --release -p mosaic-bench --example bench_reads [-- LARGE] [--history]`
//!
//! A second part, `history` (issue 34; `--history` runs it alone), measures
//! the reads whose answer grows with a business's history at a test-sized
//! store and at one 100 times larger: `usage` by run, the `trail` of a busy
//! subject, `decisions {list:'roles'}`, an `inbox` and `agents` with many
//! open decisions, `threadsState` and the board (`tasks`) under a long
//! snapshot history. For each: the p50 and the reply's bytes on both, and
//! whether the reply would pass the 4 MiB cap (`response-too-large`).
//!
//! What stays the same in both stores, so the ratio measures the cost of the
//! rest of the history rather than of a bigger answer: the human's feed (200
//! messages; `messages` counts the whole feed by definition), the board (500
//! tasks, 2 snapshots each), 10 open decisions routed to the human, and the
//! length of a session (a new run claims every role after every 1,000
//! messages, so each run receives about 20). Everything else scales: role
//! messages with their `action.allowed`, deliveries and read receipts, and
//! the claims of ever more runs.

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::evidence::{self, Actor};
use mosaic_bus::store::messages::{self as msgs, NewMessage};
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

const ROLES: usize = 50;
const HUMAN_FEED: usize = 200;
const TASKS: usize = 500;
const EPOCH: usize = 1_000;
const BATCH: usize = 20_000;

fn role_name(i: usize) -> String {
    format!("r{i:02}")
}

fn business() -> Value {
    let mut roles = Map::new();
    for i in 0..ROLES {
        roles.insert(
            role_name(i),
            json!({"authority": {"withinRole": ["message.send"], "crossRole": []},
                   "tracker": {"bot": format!("bot-{i}")}}),
        );
    }
    json!({"id": "acme", "human": "Ada", "arbiters": {"technical": "r00", "delivery": "r01"},
           "roles": roles})
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("bench_reads: {what}: {e}");
    std::process::exit(1)
}

struct Built {
    _dir: tempfile::TempDir,
    bus: BusDir,
    core: Core,
    probe: String,
}

/// Builds a store with `n` role messages (plus the fixed parts).
fn build(n: usize) -> Built {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
    let _ = std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    );
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_string_lossy(),
        "businesses": {"acme": business()},
        "readers": ["acme"],
    }))
    .unwrap_or_else(|e| fail("config", e));
    let bus = BusDir::acquire(dir.path()).unwrap_or_else(|e| fail("bus dir", e));
    let mut store = Store::open(&bus.db_path()).unwrap_or_else(|e| fail("store", e));
    let t0 = Instant::now();
    let epochs = n.div_ceil(EPOCH);
    let run = |r: usize, e: usize| format!("run-{r:02}-{e}");
    let mut probe = String::new();
    let mut i = 0usize;
    for epoch in 0..epochs {
        // A new run claims every role.
        store
            .write(|t| {
                for r in 0..ROLES {
                    let role = role_name(r);
                    if epoch > 0 {
                        let old = run(r, epoch - 1);
                        let row = evidence::ClaimRow::own(&role, &old, "release");
                        evidence::insert_claim(t, "acme", &row)?;
                    }
                    let new = run(r, epoch);
                    evidence::insert_claim(
                        t,
                        "acme",
                        &evidence::ClaimRow::own(&role, &new, "claim"),
                    )?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("claims", e));
        let end = ((epoch + 1) * EPOCH).min(n);
        while i < end {
            let stop = (i + BATCH).min(end);
            store
                .write(|t| {
                    for k in i..stop {
                        let from = k % ROLES;
                        let to = (k * 7 + 1) % ROLES;
                        let (from_role, to_role) = (role_name(from), role_name(to));
                        let (from_run, to_run) = (run(from, epoch), run(to, epoch));
                        let id = mosaic_bus::ids::uuid();
                        evidence::insert_event(
                            t,
                            "acme",
                            "action.allowed",
                            Actor {
                                role: Some(&from_role),
                                run: Some(&from_run),
                            },
                            Some(&to_role),
                            &json!({"action": "message.send", "target": to_role, "message": id}),
                        )?;
                        msgs::insert_message(
                            t,
                            &NewMessage {
                                id: &id,
                                business: "acme",
                                from_role: &from_role,
                                from_run: &from_run,
                                to_role: &to_role,
                                class: "INFO",
                                body: "benchmark message body of a typical short length",
                                ..Default::default()
                            },
                        )?;
                        // The last 250 messages wait; the rest were received,
                        // and all but one in 500 were read (the rest stranded).
                        if k + 250 < n {
                            msgs::insert_delivery(t, &id, &to_run)?;
                            if k % 500 != 0 {
                                msgs::insert_read_receipt(t, &id, &to_run)?;
                            }
                        }
                        if k == n / 2 {
                            probe = id.clone();
                        }
                    }
                    Ok(())
                })
                .unwrap_or_else(|e| fail("messages", e));
            i = stop;
        }
    }
    // The fixed parts: the human's feed, the board, decisions for the human.
    store
        .write(|t| {
            let last = epochs.saturating_sub(1);
            for k in 0..HUMAN_FEED {
                let from = k % ROLES;
                let id = mosaic_bus::ids::uuid();
                let (role, r) = (role_name(from), run(from, last));
                evidence::insert_event(
                    t,
                    "acme",
                    "action.allowed",
                    Actor {
                        role: Some(&role),
                        run: Some(&r),
                    },
                    Some("human"),
                    &json!({"action": "message.send", "target": "human", "message": id}),
                )?;
                msgs::insert_message(
                    t,
                    &NewMessage {
                        id: &id,
                        business: "acme",
                        from_role: &role,
                        from_run: &r,
                        to_role: "human",
                        class: "RESULT",
                        body: "a result for the human",
                        ..Default::default()
                    },
                )?;
                if k < HUMAN_FEED - 20 {
                    msgs::insert_delivery(t, &id, "human-cli")?;
                    if k % 3 != 0 {
                        msgs::insert_read_receipt(t, &id, "human-cli")?;
                    }
                }
            }
            let input = evidence::insert_event(
                t,
                "acme",
                "human.input",
                Actor {
                    role: Some("human"),
                    run: Some("human-cli"),
                },
                None,
                &json!({"verb": "task.create"}),
            )?;
            for k in 0..TASKS {
                let task_ref = format!("vikunja:3/{}", 1000 + k);
                for rev in 0..2 {
                    let fields = json!({"title": format!("Task {k} rev {rev}"), "done": k % 4 == 0,
                        "bucket": "Doing", "assignees": [format!("bot-{}", k % ROLES)],
                        "labels": [k % 7], "priority": k % 5, "description": "d", "project": 3});
                    msgs::insert_task_snapshot(t, "acme", &task_ref, "2026-01-01T00:00:00.000Z", Some(&fields))?;
                }
                if k % 2 == 0 {
                    evidence::insert_event(
                        t,
                        "acme",
                        "task.created",
                        Actor {
                            role: Some("r01"),
                            run: Some("run-01-0"),
                        },
                        Some(&task_ref),
                        &json!({"task_ref": task_ref, "request": input.id, "requirement": "REQ-MSG-1"}),
                    )?;
                }
            }
            for k in 0..10 {
                let at = t.now();
                t.db().sql().execute(
                    "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action,
                       target, class, routed_to, question, options, recommendation,
                       approval_choice, blocking, at)
                     VALUES (?1, 'acme', ?2, 'run-x', 'prd.approve', NULL, 'gated', 'human', 'Ship?',
                       '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
                       'yes', 'yes', 0, ?3)",
                    rusqlite::params![mosaic_bus::ids::uuid(), role_name(k), at],
                )
                .map_err(|e| mosaic_bus::store::map_sql_error(&e))?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| fail("fixed parts", e));
    // No ANALYZE: a broker never runs it (sqlite_stat1 would change the
    // pinned sqlite_master digest), so the plans measured are the broker's.
    let _ = store
        .db()
        .sql()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
    eprintln!(
        "bench_reads: built {n} role messages in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let core = Core::new(store, Arc::new(cfg));
    Built {
        _dir: dir,
        bus,
        core,
        probe,
    }
}

fn p50(core: &mut Core, caller: &Caller, verb: &str, args: &Value, iters: usize) -> f64 {
    let args = args.as_object().cloned();
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        if let Err(e) = dispatch(core, caller, verb, args.clone()) {
            fail(verb, e);
        }
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

fn main() {
    let history_only = std::env::args().any(|a| a == "--history");
    let history_out = history::run();
    if history_only {
        println!("{}", json!({"history": history_out}));
        return;
    }
    let large: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut small = build(1_000);
    let mut big = build(large);
    let human = Caller::Human {
        business: "acme".into(),
    };
    let role = Caller::Role {
        business: "acme".into(),
        role: "r07".into(),
        run: format!("run-07-{}", large.div_ceil(EPOCH) - 1),
    };
    let small_role = Caller::Role {
        business: "acme".into(),
        role: "r07".into(),
        run: "run-07-0".into(),
    };
    let reads: Vec<(&str, &str, Value, bool, usize)> = vec![
        ("inbox (human)", "inbox", Value::Null, false, 200),
        ("inbox (role)", "inbox", Value::Null, true, 200),
        (
            "agents (role session: claim rows)",
            "agents",
            Value::Null,
            true,
            200,
        ),
        (
            "agents (human session: with agent state)",
            "agents",
            Value::Null,
            false,
            10,
        ),
        ("trail (one message)", "trail", Value::Null, false, 200),
        (
            "messages (page of 50)",
            "messages",
            json!({"limit": 50}),
            false,
            200,
        ),
        (
            "tasks (page of 50)",
            "tasks",
            json!({"limit": 50}),
            false,
            200,
        ),
    ];
    // Opening a store scans for delivered, unread messages once (the unread index).
    let open_ms = |b: &Built| {
        let t = Instant::now();
        let s = Store::open(&b.bus.db_path()).unwrap_or_else(|e| fail("reopen", e));
        drop(s);
        (t.elapsed().as_secs_f64() * 1e4).round() / 10.0
    };
    let scan_ms = |b: &Built| {
        let t = Instant::now();
        let u = msgs::Unread::load(b.core.store.db()).unwrap_or_else(|e| fail("unread scan", e));
        drop(u);
        (t.elapsed().as_secs_f64() * 1e4).round() / 10.0
    };
    let opens = json!({"small_ms": open_ms(&small), "large_ms": open_ms(&big),
        "unread_scan_small_ms": scan_ms(&small), "unread_scan_large_ms": scan_ms(&big)});
    let mut out = Vec::new();
    for (name, verb, args, as_role, iters) in reads {
        let (sa, ba) = if verb == "trail" {
            (
                json!({"subject": small.probe}),
                json!({"subject": big.probe}),
            )
        } else {
            (args.clone(), args)
        };
        let (sc, bc) = if as_role {
            (&small_role, &role)
        } else {
            (&human, &human)
        };
        let s = p50(&mut small.core, sc, verb, &sa, iters);
        let b = p50(&mut big.core, bc, verb, &ba, iters);
        out.push(
            json!({"read": name, "p50_small_us": (s * 10.0).round() / 10.0,
            "p50_large_us": (b * 10.0).round() / 10.0, "ratio": ((b / s) * 100.0).round() / 100.0}),
        );
    }
    println!(
        "{}",
        json!({"small_messages": 1_000, "large_messages": large, "roles": ROLES,
               "goal_ratio_at_most": 2, "reads": out, "store_open": opens,
               "history": history_out})
    );
    small.bus.release();
    big.bus.release();
}

/// Reads whose answer grows with history (issue 34), at test size and at
/// 100 times it.
mod history {
    use super::fail;
    use mosaic_bus::config::BootConfig;
    use mosaic_bus::core::{Caller, Core};
    use mosaic_bus::handlers::dispatch;
    use mosaic_bus::store::evidence::{self, Actor};
    use mosaic_bus::store::messages::{self as msgs, NewMessage};
    use mosaic_bus::store::root::BusDir;
    use mosaic_bus::store::Store;
    use serde_json::{json, Value};
    use std::sync::Arc;
    use std::time::Instant;

    const CAP: usize = 4 << 20;

    struct Env {
        _dir: tempfile::TempDir,
        bus: BusDir,
        core: Core,
    }

    impl Drop for Env {
        fn drop(&mut self) {
            self.bus.release();
        }
    }

    fn env() -> Env {
        let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
        let _ = std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        );
        let role = |def: &str| {
            json!({"definition": def,
                   "authority": {"withinRole": ["message.send"], "crossRole": []}})
        };
        let cfg = BootConfig::from_json(json!({
            "dataRoot": dir.path().to_string_lossy(),
            "businesses": {"acme": {"id": "acme", "human": "Ada",
                "arbiters": {"technical": "r0", "delivery": "r0"},
                "roles": {
                    "r0": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                    "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                    "helper": role("assistant"), "chief": role("chief-of-staff")
                }}},
            "readers": ["acme"],
        }))
        .unwrap_or_else(|e| fail("config", e));
        let bus = BusDir::acquire(dir.path()).unwrap_or_else(|e| fail("bus dir", e));
        let store = Store::open(&bus.db_path()).unwrap_or_else(|e| fail("store", e));
        let mut core = Core::new(store, Arc::new(cfg));
        for r in ["r0", "r1"] {
            let c = Caller::Role {
                business: "acme".into(),
                role: r.into(),
                run: format!("run-{r}"),
            };
            dispatch(&mut core, &c, "role.claim", None).unwrap_or_else(|e| fail("claim", e));
        }
        Env {
            _dir: dir,
            bus,
            core,
        }
    }

    fn sql(
        t: &mut mosaic_bus::store::Tx<'_>,
        q: &str,
        p: impl rusqlite::Params,
    ) -> Result<(), mosaic_bus::error::Code> {
        t.db()
            .sql()
            .execute(q, p)
            .map(|_| ())
            .map_err(|e| mosaic_bus::store::map_sql_error(&e))
    }

    /// `runs` runs with one known usage record each.
    fn usage_runs(e: &mut Env, runs: usize) {
        e.core
            .store
            .write(|t| {
                msgs::insert_message(
                    t,
                    &NewMessage {
                        id: "turn-1",
                        business: "acme",
                        from_role: "r0",
                        from_run: "run-r0",
                        to_role: "r1",
                        class: "INFO",
                        body: "a turn",
                        ..Default::default()
                    },
                )?;
                for i in 0..runs {
                    let at = t.now();
                    sql(
                        t,
                        "INSERT INTO usage_records(business, run, role, turn, source, kind,
                           provider, model, input, output, cache_write, cache_read, at)
                         VALUES ('acme', ?1, 'r1', 'turn-1', 'pi', 'known', 'anthropic',
                           'claude', ?2, 10, 1, 2, ?3)",
                        rusqlite::params![format!("run-{i:07}"), i, at],
                    )?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("usage", e));
    }

    fn busy_task(e: &mut Env, events: usize) {
        e.core
            .store
            .write(|t| {
                for i in 0..events {
                    evidence::insert_event(
                        t,
                        "acme",
                        "task.comment",
                        Actor::of("r0", "run-r0"),
                        Some("vikunja:3/41"),
                        &json!({"task_ref": "vikunja:3/41", "comment": i,
                                "text": "a comment of a typical short length"}),
                    )?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("events", e));
    }

    fn open_decisions(e: &mut Env, n: usize, route: &str) {
        e.core
            .store
            .write(|t| {
                for _ in 0..n {
                    let at = t.now();
                    sql(
                        t,
                        "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action,
                           target, class, routed_to, question, options, recommendation,
                           approval_choice, blocking, at)
                         VALUES (?1, 'acme', 'r1', 'run-r1', 'prd.approve', NULL, 'cross-role', ?2,
                           'Ship the landing page?',
                           '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
                           'yes', 'yes', 0, ?3)",
                        rusqlite::params![mosaic_bus::ids::uuid(), route, at],
                    )?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("decisions", e));
    }

    fn threads(e: &mut Env, threads: usize, per: usize) {
        e.core
            .store
            .write(|t| {
                let at = t.now();
                sql(
                    t,
                    "INSERT INTO projects(id, business, name, by, at) VALUES ('p', 'acme', 'Site', 'Ada', ?1)",
                    [at],
                )?;
                for k in 0..threads {
                    let id = format!("thread-{k:06}");
                    let at = t.now();
                    sql(
                        t,
                        "INSERT INTO threads(id, business, project, instance, user, name, at)
                         VALUES (?1, 'acme', 'p', 'helper', 'Ada', ?2, ?3)",
                        rusqlite::params![id, format!("t{k}"), at],
                    )?;
                    for i in 0..per {
                        let m = mosaic_bus::ids::uuid();
                        msgs::insert_message(
                            t,
                            &NewMessage {
                                id: &m,
                                business: "acme",
                                from_role: "human",
                                from_run: "human-cli",
                                to_role: "helper",
                                class: "REQUEST",
                                body: "please",
                                ..Default::default()
                            },
                        )?;
                        let at = t.now();
                        sql(
                            t,
                            "INSERT INTO message_threads(message, thread, at) VALUES (?1, ?2, ?3)",
                            rusqlite::params![m, id, at],
                        )?;
                        let _ = i;
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("threads", e));
    }

    fn board(e: &mut Env, tasks: usize, snapshots: usize) {
        e.core
            .store
            .write(|t| {
                for rev in 0..snapshots {
                    for k in 0..tasks {
                        let fields = json!({"title": format!("Task {k} rev {rev}"), "done": false,
                            "bucket": "Doing", "assignees": [], "labels": [], "priority": 1,
                            "description": "d", "project": 3});
                        msgs::insert_task_snapshot(
                            t,
                            "acme",
                            &format!("vikunja:3/{}", 1000 + k),
                            "2026-01-01T00:00:00.000Z",
                            Some(&fields),
                        )?;
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("board", e));
    }

    fn reader() -> Caller {
        Caller::Reader {
            business: "acme".into(),
        }
    }

    /// p50 µs and reply bytes of `f` over `iters` calls.
    fn time(iters: usize, mut f: impl FnMut() -> Value) -> (f64, usize) {
        let mut t = Vec::with_capacity(iters);
        let mut bytes = 0;
        for _ in 0..iters {
            let t0 = Instant::now();
            let v = f();
            t.push(t0.elapsed().as_secs_f64() * 1e6);
            bytes = serde_json::to_vec(&v).map(|b| b.len() + 1).unwrap_or(0);
        }
        t.sort_by(|a, b| a.total_cmp(b));
        (t[t.len() / 2], bytes)
    }

    /// The reply, or `{error}` with its code (a broker without the paging
    /// extension refuses its arguments).
    fn call(core: &mut Core, verb: &str, args: Value) -> Value {
        let args = args.as_object().cloned();
        dispatch(core, &reader(), verb, args).unwrap_or_else(|e| json!({"error": e.as_str()}))
    }

    /// A read of a scenario: its name, the call (given the scenario's size)
    /// and how many times to time it.
    type HistoryRead<'a> = (&'a str, &'a dyn Fn(&mut Core, usize) -> Value, usize);

    /// One scenario at its test size and at 100 times it: a row per read.
    fn scenario(
        name: &str,
        small: usize,
        build: &dyn Fn(&mut Env, usize),
        reads: &[HistoryRead<'_>],
    ) -> Vec<Value> {
        let mut out = Vec::new();
        let mut s = env();
        build(&mut s, small);
        let mut l = env();
        let t0 = Instant::now();
        build(&mut l, small * 100);
        eprintln!(
            "bench_reads history: {name} at {} built in {:.1}s",
            small * 100,
            t0.elapsed().as_secs_f64()
        );
        for (read, f, iters) in reads {
            let (ps, bs) = time(*iters, || f(&mut s.core, small));
            let (pl, bl) = time(*iters, || f(&mut l.core, small * 100));
            out.push(json!({
                "scenario": name, "read": read, "small": small, "large": small * 100,
                "p50_small_us": (ps * 10.0).round() / 10.0, "p50_large_us": (pl * 10.0).round() / 10.0,
                "ratio": ((pl / ps) * 100.0).round() / 100.0,
                "reply_bytes_small": bs, "reply_bytes_large": bl,
                "large_is_response_too_large": bl > CAP,
            }));
        }
        out
    }

    pub fn run() -> Value {
        let mut rows = Vec::new();
        rows.extend(scenario(
            "usage: runs with usage records",
            1_000,
            &usage_runs,
            &[
                ("usage", &|c, _| call(c, "usage", Value::Null), 5),
                (
                    "usage, the page after 90% of the runs",
                    &|c, n| {
                        call(
                            c,
                            "usage",
                            json!({"after": format!("run-{:07}", n * 9 / 10)}),
                        )
                    },
                    5,
                ),
            ],
        ));
        rows.extend(scenario(
            "trail: events on one task",
            1_000,
            &busy_task,
            &[
                (
                    "trail (first page)",
                    &|c, _| call(c, "trail", json!({"subject": "vikunja:3/41"})),
                    5,
                ),
                (
                    "trail, the page of its last 100 records",
                    &|c, _| {
                        let after: String = c
                            .store
                            .db()
                            .sql()
                            .query_row(
                                "SELECT at FROM events ORDER BY seq DESC LIMIT 1 OFFSET 100",
                                [],
                                |r| r.get(0),
                            )
                            .unwrap_or_else(|e| fail("cursor", e));
                        call(
                            c,
                            "trail",
                            json!({"subject": "vikunja:3/41", "after": after}),
                        )
                    },
                    5,
                ),
            ],
        ));
        rows.extend(scenario(
            "decisions: open, routed to roles",
            100,
            &|e, n| open_decisions(e, n, "r0"),
            &[(
                "decisions {list:'roles'}",
                &|c, _| call(c, "decisions", json!({"list": "roles"})),
                5,
            )],
        ));
        rows.extend(scenario(
            "inbox and agents: open decisions routed to the human",
            100,
            &|e, n| open_decisions(e, n, "human"),
            &[
                ("inbox (human)", &|c, _| call(c, "inbox", Value::Null), 5),
                ("agents (reader)", &|c, _| call(c, "agents", Value::Null), 5),
            ],
        ));
        rows.extend(scenario(
            "threadsState: threads of 20 messages",
            10,
            &|e, n| threads(e, n, 20),
            &[(
                "threadsState",
                &|c, _| {
                    mosaic_bus::handlers::ops::threads::ThreadsState {
                        business: "acme".into(),
                    }
                    .apply(c)
                    .unwrap_or_else(|e| fail("threadsState", e))
                },
                5,
            )],
        ));
        rows.extend(scenario(
            "tasks: 100 tasks, snapshots each",
            10,
            &|e, n| board(e, 100, n),
            &[("tasks", &|c, _| call(c, "tasks", Value::Null), 5)],
        ));
        Value::Array(rows)
    }
}
