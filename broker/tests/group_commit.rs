//! Group commit on a real store: requests queued behind a commit run as one
//! batch, each in its own savepoint; a failing one leaves no trace and the
//! others are committed; every answer comes after the batch is durable.

mod common;

use mosaic_bus::core::Core;
use mosaic_bus::error::Code;
use mosaic_bus::handlers::ops::launches::{identity, BindLaunch, EndLaunch};
use mosaic_bus::store::evidence::{insert_event, Actor};
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use mosaic_bus::writer::Writer;
use mosaic_bus::BootConfig;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn core(dir: &std::path::Path) -> (Core, BusDir) {
    let bus = BusDir::acquire(dir).unwrap();
    let store = Store::open(&bus.db_path()).unwrap();
    let config = BootConfig::from_json(json!({
        "dataRoot": dir.to_str().unwrap(),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {"pm": {"authority": {"withinRole": [], "crossRole": []}}}}}
    }))
    .unwrap();
    (Core::new(store, Arc::new(config)), bus)
}

/// A new store in its own private directory, and a core on it.
fn fresh() -> (tempfile::TempDir, Core, BusDir) {
    let d = common::private_root();
    let (core, bus) = core(d.path());
    (d, core, bus)
}

/// A request during which the batch transaction ends under it, as an I/O
/// error can make SQLite end it.
fn end_the_batch_under_a_request(core: &mut Core) {
    let ended = core.store.write(|t| {
        t.db().sql().execute_batch("ROLLBACK").unwrap();
        Err::<(), _>(Code::StorageUnavailable)
    });
    assert_eq!(ended, Err(Code::StorageUnavailable));
}

/// `SELECT count(*) …` on the core's connection (it sees the open batch).
fn count(core: &Core, sql: &str) -> i64 {
    core.store
        .db()
        .sql()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn emit(core: &mut Core, subject: &str, fail: bool) -> Result<String, Code> {
    core.store.write(|t| {
        let w = insert_event(
            t,
            "acme",
            "x.note",
            Actor {
                role: None,
                run: None,
            },
            Some(subject),
            &json!({}),
        )?;
        if fail {
            return Err(Code::NotAuthorized);
        }
        Ok(w.id)
    })
}

#[test]
fn a_failed_request_inside_a_group_rolls_back_alone() {
    let (_d, core, bus) = fresh();
    let (writer, thread) = Writer::spawn(core);

    // Keep the writer busy so the next requests queue up behind it.
    let w0 = writer.clone();
    let blocker = std::thread::spawn(move || {
        w0.run_blocking(|c| {
            std::thread::sleep(Duration::from_millis(300));
            c.store.batches_committed
        })
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(50));
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let w = writer.clone();
            std::thread::spawn(move || {
                w.run_blocking(move |c| {
                    (emit(c, &format!("s{i}"), i == 3), c.store.batches_committed)
                })
                .unwrap()
            })
        })
        .collect();
    let before = blocker.join().unwrap();
    let results: Vec<(Result<String, Code>, u64)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, (r, batch)) in results.iter().enumerate() {
        if i == 3 {
            assert_eq!(r, &Err(Code::NotAuthorized));
        } else {
            assert!(r.is_ok(), "{i}: {r:?}");
        }
        // Each ran after the blocker's batch committed and before its own did.
        assert_eq!(*batch, before + 1, "request {i} shared one batch");
    }
    let (after, subjects) = writer
        .run_blocking(|c| {
            let mut st = c
                .store
                .db()
                .sql()
                .prepare("SELECT subject FROM events ORDER BY seq")
                .unwrap();
            let subjects: Vec<String> = st
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            (c.store.batches_committed, subjects)
        })
        .unwrap();
    assert_eq!(after, before + 2, "the six requests committed once");
    // Arrival order between the threads is the scheduler's; the set is exact.
    let mut sorted = subjects.clone();
    sorted.sort();
    assert_eq!(sorted, ["s0", "s1", "s2", "s4", "s5"]);
    drop(writer);
    drop(thread.join().unwrap());
    bus.release();
}

/// The first request of a batch runs without a savepoint (the batch holds
/// nothing else yet); when it fails, the whole batch transaction is rolled
/// back and begun again, so it leaves no trace and the batch goes on.
#[test]
fn a_failed_first_request_of_a_batch_leaves_no_trace_and_the_batch_goes_on() {
    let (d, mut core, bus) = fresh();
    let events = |c: &Core| count(c, "SELECT count(*) FROM events");
    let start = events(&core);
    let before = core.store.batches_committed;

    // Fail, fail again (both first in the batch), succeed, fail, succeed.
    core.begin_batch().unwrap();
    assert_eq!(emit(&mut core, "f1", true), Err(Code::NotAuthorized));
    assert_eq!(events(&core), start, "the first failure is undone at once");
    assert_eq!(emit(&mut core, "f2", true), Err(Code::NotAuthorized));
    emit(&mut core, "ok1", false).unwrap();
    assert_eq!(emit(&mut core, "f3", true), Err(Code::NotAuthorized));
    emit(&mut core, "ok2", false).unwrap();
    assert!(
        !core.store.db().sql().is_autocommit(),
        "still one open batch"
    );
    core.commit_batch().unwrap();
    assert_eq!(core.store.batches_committed, before + 1);

    // A batch whose only request fails commits nothing.
    core.begin_batch().unwrap();
    assert_eq!(emit(&mut core, "f4", true), Err(Code::NotAuthorized));
    core.commit_batch().unwrap();

    let subjects: Vec<String> = {
        let mut st = core
            .store
            .db()
            .sql()
            .prepare("SELECT subject FROM events WHERE subject IS NOT NULL ORDER BY seq")
            .unwrap();
        let v = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        v
    };
    assert_eq!(subjects, ["ok1", "ok2"]);
    drop(core);
    bus.release();

    // What was kept is durable: a fresh open sees exactly it.
    let bus = BusDir::acquire(d.path()).unwrap();
    let store = Store::open(&bus.db_path()).unwrap();
    let n: i64 = store
        .db()
        .sql()
        .query_row(
            "SELECT count(*) FROM events WHERE subject IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    drop(store);
    bus.release();
}

/// If SQLite ends the batch transaction itself (as an I/O error can, rolling
/// it all back), what ran before in the batch is gone: later requests of
/// that batch refuse instead of committing on their own, and the batch's
/// COMMIT fails, so every request in it answers `storage-unavailable`.
#[test]
fn a_batch_sqlite_ended_itself_commits_nothing_after_it() {
    let (_d, mut core, bus) = fresh();
    core.begin_batch().unwrap();
    emit(&mut core, "before", false).unwrap();
    end_the_batch_under_a_request(&mut core);
    assert_eq!(
        emit(&mut core, "after", false),
        Err(Code::StorageUnavailable),
        "a later request of the batch does not commit alone"
    );
    assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
    let kept = count(
        &core,
        "SELECT count(*) FROM events WHERE subject IN ('before', 'after')",
    );
    assert_eq!(kept, 0);
    // The next batch works as usual.
    core.begin_batch().unwrap();
    emit(&mut core, "next", false).unwrap();
    core.commit_batch().unwrap();
    drop(core);
    bus.release();
}

/// The unread index takes in each request's deliveries when the request is
/// kept; if its batch then fails to commit, the index forgets them again.
#[test]
fn a_batch_that_fails_to_commit_leaves_no_unread_delivery_behind() {
    use mosaic_bus::store::messages::{insert_delivery, insert_message, NewMessage};
    let (_d, mut core, bus) = fresh();
    let deliver = |core: &mut Core, id: &str| {
        core.store.write(|t| {
            let m = NewMessage {
                id,
                business: "acme",
                from_role: "pm",
                from_run: "run-1",
                to_role: "pm",
                class: "INFO",
                body: "x",
                ..Default::default()
            };
            insert_message(t, &m)?;
            insert_delivery(t, id, "run-1")?;
            Ok(())
        })
    };
    let unread = |core: &Core| core.store.unread.of_role("acme", "pm").count();

    core.begin_batch().unwrap();
    deliver(&mut core, "m1").unwrap();
    core.commit_batch().unwrap();
    assert_eq!(unread(&core), 1);

    core.begin_batch().unwrap();
    deliver(&mut core, "m2").unwrap();
    assert_eq!(unread(&core), 2, "seen by the rest of the batch");
    end_the_batch_under_a_request(&mut core);
    assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
    let left: Vec<String> = core
        .store
        .unread
        .of_role("acme", "pm")
        .map(|e| e.message.clone())
        .collect();
    assert_eq!(left, ["m1"], "m2 was rolled back with its batch");
    drop(core);
    bus.release();
}

/// This process's start time, as `/proc` gives it.
fn own_start_time() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(19).unwrap().parse().unwrap()
}

/// This test process as a launch of `pm` (its own pid and start time).
fn launch_of_this_process(run: &str) -> mosaic_bus::config::LaunchRecord {
    let start_time = own_start_time();
    mosaic_bus::config::LaunchRecord::from_json(json!({
        "business": "acme", "role": "pm", "run": run, "harness": "pi",
        "pid": std::process::id(), "startTime": start_time
    }))
    .unwrap()
}

/// A run bound or ended inside a batch that then fails to commit goes back
/// to how it was: its evidence is not in the store, so neither is its
/// capability in memory (or the ended run's loss of it).
/// `endLaunch` of run-a, as the host sends it.
fn end_run_a(core: &mut Core) -> Result<serde_json::Value, Code> {
    EndLaunch {
        business: "acme".into(),
        run: "run-a".into(),
        reason: "exited".into(),
        exit_code: Some(0),
    }
    .apply(core)
}

#[test]
fn binds_and_ends_in_a_batch_that_fails_to_commit_are_undone() {
    let (_d, mut core, bus) = fresh();
    let fail_batch = |core: &mut Core| {
        end_the_batch_under_a_request(core);
        assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
    };
    let launched = |core: &Core, run: &str| -> i64 {
        core.store
            .db()
            .sql()
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'session.launched' AND run = ?1",
                [run],
                |r| r.get(0),
            )
            .unwrap()
    };

    // A bind whose batch fails: no evidence, and its capability is gone.
    core.begin_batch().unwrap();
    let lost = BindLaunch::new(launch_of_this_process("run-a"), Some(own_start_time()))
        .apply(&mut core)
        .unwrap();
    let lost_cap = lost["cap"].as_str().unwrap().to_string();
    fail_batch(&mut core);
    assert_eq!(launched(&core, "run-a"), 0);
    assert_eq!(identity(&core, &lost_cap), Err(Code::UnknownCapability));

    // Bound again for real: the evidence is written this time.
    core.begin_batch().unwrap();
    let bound = BindLaunch::new(launch_of_this_process("run-a"), Some(own_start_time()))
        .apply(&mut core)
        .unwrap();
    core.commit_batch().unwrap();
    let cap = bound["cap"].as_str().unwrap().to_string();
    assert_ne!(cap, lost_cap);
    assert_eq!(launched(&core, "run-a"), 1);

    // An end whose batch fails: the run is still bound, with its capability.
    core.begin_batch().unwrap();
    end_run_a(&mut core).unwrap();
    fail_batch(&mut core);
    assert_eq!(
        identity(&core, &cap).unwrap(),
        json!({"business": "acme", "role": "pm", "run": "run-a"})
    );
    // ... so it can still be ended, and then it is.
    core.begin_batch().unwrap();
    end_run_a(&mut core).unwrap();
    core.commit_batch().unwrap();
    assert_eq!(identity(&core, &cap), Err(Code::UnknownCapability));
    drop(core);
    bus.release();
}

/// A landing ticket follows its batch too: one issued in a batch that
/// fails to commit is forgotten (`land-unknown`), and one a `recordLand`
/// ended in such a batch is open again, with the decision unspent, so the
/// host's retry lands it once.
#[test]
fn landing_tickets_issued_or_ended_in_a_batch_that_fails_to_commit_are_undone() {
    use mosaic_bus::core::Caller;
    use mosaic_bus::handlers::dispatch;
    use mosaic_bus::handlers::HostOp;
    use serde_json::{Map, Value};

    const TASK: &str = "vikunja:3/41";
    const C1: &str = "1111111111111111111111111111111111111111";
    const MAIN0: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const MAIN1: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    let d = common::private_root();
    let bus = BusDir::acquire(d.path()).unwrap();
    let store = Store::open(&bus.db_path()).unwrap();
    let config = BootConfig::from_json(json!({
        "dataRoot": d.path().to_str().unwrap(),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {
                "pm": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}},
                "dev": {"authority": {"withinRole": ["git.push.working", "review.request"],
                                      "crossRole": ["git.merge.protected"]}}},
            "projects": {"site": {"repo": "/srv/records/site"}}}}
    }))
    .unwrap();
    let mut core = Core::new(store, Arc::new(config));
    let obj = |v: Value| -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object literal"),
        }
    };
    let op = |core: &mut Core, name: &str, v: Value| HostOp::parse(name, obj(v))?.apply(core);
    let role = |r: &str| Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("{r}-1"),
    };
    let fail_batch = |core: &mut Core| {
        end_the_batch_under_a_request(core);
        assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
    };
    let consumed = |core: &Core| {
        count(
            core,
            "SELECT count(*) FROM decision_events WHERE kind = 'consumed'",
        )
    };

    // A reviewed push and dev's merge decision, approved by pm.
    core.begin_batch().unwrap();
    let mut caps = Vec::new();
    for r in ["pm", "dev"] {
        let mut rec = launch_of_this_process(&format!("{r}-1"));
        rec.role = r.into();
        let b = BindLaunch::new(rec, Some(own_start_time()))
            .apply(&mut core)
            .unwrap();
        caps.push(b["cap"].as_str().unwrap().to_string());
        dispatch(&mut core, &role(r), "role.claim", None).unwrap();
    }
    let dev_cap = caps[1].clone();
    op(
        &mut core,
        "recordPush",
        json!({"cap": dev_cap, "push": {"task_ref": TASK, "project": "site",
               "branch": "work/41", "ref": "refs/heads/work/41", "commit": C1,
               "previous": null}}),
    )
    .unwrap();
    let req = dispatch(
        &mut core,
        &role("dev"),
        "review.request",
        Some(obj(json!({"task_ref": TASK, "commit": C1, "to": "pm"}))),
    )
    .unwrap();
    dispatch(
        &mut core,
        &role("pm"),
        "review.verdict",
        Some(obj(
            json!({"task_ref": TASK, "request": req["request"], "verdict": "approve",
                   "body": "fine"}),
        )),
    )
    .unwrap();
    let dec = dispatch(
        &mut core,
        &role("dev"),
        "decision.raise",
        Some(obj(
            json!({"action": "git.merge.protected", "question": "Land?", "target": TASK,
                   "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
                   "recommendation": "yes", "blocking": false}),
        )),
    )
    .unwrap()["id"]
        .clone();
    dispatch(
        &mut core,
        &role("pm"),
        "decision.resolve",
        Some(obj(json!({"id": dec, "choice": "yes"}))),
    )
    .unwrap();
    core.commit_batch().unwrap();

    let check = json!({"cap": dev_cap, "args": {"task_ref": TASK, "decision": dec}});
    let land = json!({"commit": MAIN1, "previous": MAIN0, "reviewed": C1, "base": MAIN0,
                      "patch_id": MAIN1});
    let record = |t: &Value| json!({"ticket": t, "land": land});

    // Issued in a batch that fails: forgotten.
    core.begin_batch().unwrap();
    let lost = op(&mut core, "checkLand", check.clone()).unwrap()["ticket"]["id"].clone();
    // checkLand writes nothing: another request's write shares the batch.
    emit(&mut core, "other", false).unwrap();
    fail_batch(&mut core);
    core.begin_batch().unwrap();
    assert_eq!(
        op(&mut core, "recordLand", record(&lost)),
        Err(Code::LandUnknown)
    );
    core.commit_batch().unwrap();

    // Ended by a recordLand whose batch fails: open again, nothing spent.
    core.begin_batch().unwrap();
    let t = op(&mut core, "checkLand", check.clone()).unwrap()["ticket"]["id"].clone();
    core.commit_batch().unwrap();
    core.begin_batch().unwrap();
    op(&mut core, "recordLand", record(&t)).unwrap();
    fail_batch(&mut core);
    assert_eq!(consumed(&core), 0);
    core.begin_batch().unwrap();
    op(&mut core, "recordLand", record(&t)).unwrap();
    core.commit_batch().unwrap();
    assert_eq!(consumed(&core), 1);
    core.begin_batch().unwrap();
    assert_eq!(
        op(&mut core, "recordLand", record(&t)),
        Err(Code::LandUnknown)
    );
    core.commit_batch().unwrap();
    drop(core);
    bus.release();
}

/// What a send job answers: the verb's result and the batches committed
/// when it ran, or the batch's failure.
type Answer = Result<(Result<serde_json::Value, Code>, u64), Code>;

/// Issue 31's mutant of `writer.rs`: a failed batch COMMIT answered ok.
/// Four human sends queue up behind a request that holds the writer, so
/// the real writer thread runs them as one batch; the first of them arms
/// the debug build's COMMIT failure (`Store::fail_next_commit`, a real
/// SQLite COMMIT failure through the commit hook). Every send of the batch
/// answers `storage-unavailable`, none of them is in the store, and the
/// next batch's send is kept and answered.
#[test]
fn every_send_of_a_batch_whose_commit_fails_answers_storage_unavailable_and_none_is_kept() {
    use mosaic_bus::core::Caller;
    use mosaic_bus::handlers::dispatch;
    use std::sync::mpsc;

    let (_d, core, bus) = fresh();
    let (writer, thread) = Writer::spawn(core);
    let human = Caller::Human {
        business: "acme".into(),
    };
    let send = move |c: &mut Core, body: String| {
        let args = json!({"to": "pm", "body": body});
        let args = args.as_object().cloned();
        (
            dispatch(c, &human, "message.send", args),
            c.store.batches_committed,
        )
    };

    // The holder runs alone in its batch and waits until the sends are queued.
    let (started_tx, started) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let (held_tx, held) = mpsc::channel();
    writer
        .submit(
            move |c: &mut Core| {
                let _ = started_tx.send(());
                let _ = go_rx.recv();
                c.store.batches_committed
            },
            move |r, _| {
                let _ = held_tx.send(r);
            },
        )
        .unwrap();
    started.recv().unwrap();
    let (answers_tx, answers) = mpsc::channel();
    for i in 0..4 {
        let send = send.clone();
        let tx = answers_tx.clone();
        writer
            .submit(
                move |c: &mut Core| {
                    if i == 0 {
                        c.store.fail_next_commit();
                    }
                    send(c, format!("lost {i}"))
                },
                move |r, _| {
                    let _ = tx.send((i, r));
                },
            )
            .unwrap();
    }
    go.send(()).unwrap();
    let before = held.recv().unwrap().unwrap();
    let mut got: Vec<(i32, Answer)> = (0..4).map(|_| answers.recv().unwrap()).collect();
    got.sort_by_key(|(i, _)| *i);
    for (i, answer) in &got {
        assert_eq!(
            answer.as_ref().map(|_| ()),
            Err(&Code::StorageUnavailable),
            "send {i} of the failed batch: {answer:?}"
        );
    }

    // Nothing of the batch is in the store; the next batch is kept.
    let next = writer
        .run_blocking(move |c| send(c, "kept".into()))
        .unwrap();
    let (sent, batch) = next;
    let sent = sent.unwrap();
    assert!(sent["id"].is_string(), "{sent}");
    assert!(batch > before, "a batch of its own");
    let bodies = writer
        .run_blocking(|c| {
            let mut st = c
                .store
                .db()
                .sql()
                .prepare("SELECT body FROM messages ORDER BY seq")
                .unwrap();
            let v: Vec<String> = st
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let inputs: i64 = c
                .store
                .db()
                .sql()
                .query_row(
                    "SELECT count(*) FROM events WHERE kind = 'human.input'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            (v, inputs)
        })
        .unwrap();
    assert_eq!(bodies, (vec!["kept".to_string()], 1));
    drop(writer);
    drop(thread.join().unwrap());
    bus.release();
}
