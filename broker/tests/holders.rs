//! The holders kept in memory (`store::evidence::Holders`, read through
//! `Tx::holder`) give the same answer as the store's own `role_claims`
//! (`evidence::holder`) at every point a verb can see: after kept verbs, a
//! verb that fails, a verb that reads its own claim, a batch whose COMMIT
//! fails, a batch SQLite ended itself, and a reopen.

mod common;

use mosaic_bus::core::Core;
use mosaic_bus::error::Code;
use mosaic_bus::store::evidence::{self, insert_claim, ClaimRow};
use mosaic_bus::store::Store;
use mosaic_bus::BootConfig;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// A core (for its batches) on the store at `db`, with a config the store's
/// functions never read.
fn core(dir: &Path, db: &Path) -> Core {
    let store = Store::open(db).expect("open");
    let config = BootConfig::from_json(json!({
        "dataRoot": dir.to_str().expect("utf-8"),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {"pm": {"authority": {"withinRole": [], "crossRole": []}}}}}
    }))
    .expect("config");
    Core::new(store, Arc::new(config))
}

const BUSINESSES: [&str; 2] = ["acme", "globex"];
const ROLES: [&str; 3] = ["pm", "cto", "qa"];
const RUNS: [&str; 4] = ["run-1", "run-2", "run-3", "run-4"];
const OPS: [&str; 4] = ["claim", "claim", "release", "revoke"];

/// A small deterministic generator (xorshift), so a failure replays.
struct Steps(u64);

impl Steps {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Every `(business, role)`'s holder by memory and by SQL, inside one
/// transaction (so both see the same rows).
fn both(store: &mut Store) -> (Vec<Option<String>>, Vec<Option<String>>) {
    store
        .write(|t| {
            let mut memory = Vec::new();
            let mut sql = Vec::new();
            for b in BUSINESSES {
                for r in ROLES {
                    memory.push(t.holder(b, r));
                    sql.push(evidence::holder(t.db(), b, r)?);
                }
            }
            Ok((memory, sql))
        })
        .expect("read the holders")
}

fn agree(store: &mut Store, when: &str) -> Vec<Option<String>> {
    let (memory, sql) = both(store);
    assert_eq!(memory, sql, "{when}");
    memory
}

/// One claim, release or revoke row (a revoke with a reason, as the host's
/// own revokes carry).
fn row<'a>(role: &'a str, run: &'a str, op: &'a str) -> ClaimRow<'a> {
    ClaimRow {
        reason: (op == "revoke").then_some("the test revokes it"),
        by: Some(if op == "revoke" { "human" } else { run }),
        ..ClaimRow::own(role, run, op)
    }
}

/// What the store's guards may refuse a random row with (a claim of a held
/// role, a release by another run, a claim by a revoked run).
const REFUSALS: [Code; 3] = [Code::RoleHeld, Code::NotHolder, Code::RunRevoked];

/// Writes one row as a verb of its own; a guard's refusal is an answer too.
fn claim(store: &mut Store, b: &str, role: &str, run: &str, op: &str) -> Result<(), Code> {
    let r = store.write(|t| insert_claim(t, b, &row(role, run, op)).map(|_| ()));
    if let Err(code) = r {
        assert!(
            REFUSALS.contains(&code),
            "{op} {b}/{role} by {run}: {code:?}"
        );
    }
    r
}

#[test]
fn the_holders_in_memory_are_the_stores_after_every_kind_of_end() {
    let dir = common::private_root();
    let bus = mosaic_bus::store::root::BusDir::acquire(dir.path()).expect("bus");
    let mut core = core(dir.path(), &bus.db_path());
    let mut steps = Steps(0x9e37_79b9_7f4a_7c15);
    let mut kept = 0;
    let mut most_held = 0;
    assert!(agree(&mut core.store, "a new store")
        .iter()
        .all(Option::is_none));

    for round in 0..40 {
        let batch = steps.next(3) != 0;
        if batch {
            core.begin_batch().expect("begin");
        }
        let store = &mut core.store;
        for _ in 0..1 + steps.next(6) {
            let b = BUSINESSES[steps.next(2)];
            let role = ROLES[steps.next(3)];
            let run = RUNS[steps.next(4)];
            let op = OPS[steps.next(4)];
            match steps.next(5) {
                // A verb that writes its claim and then fails: none of it stays.
                0 => {
                    let failed = store.write(|t| {
                        insert_claim(t, b, &row(role, run, op))?;
                        Err::<(), _>(Code::InvalidRequest)
                    });
                    assert!(failed.is_err());
                }
                // A verb that reads its own claim back, by memory and by SQL.
                1 => {
                    let seen = store.write(|t| {
                        insert_claim(t, b, &row(role, run, op))?;
                        Ok((t.holder(b, role), evidence::holder(t.db(), b, role)?))
                    });
                    match seen {
                        Ok((memory, sql)) => {
                            assert_eq!(memory, sql, "round {round}: a verb sees its own row");
                            let want = (op == "claim").then(|| run.to_string());
                            assert_eq!(memory, want, "round {round}");
                            kept += 1;
                        }
                        Err(code) => assert!(REFUSALS.contains(&code), "{code:?}"),
                    }
                }
                _ => {
                    if claim(store, b, role, run, op).is_ok() {
                        kept += 1;
                    }
                }
            }
            let now = agree(store, &format!("round {round}, inside"));
            most_held = most_held.max(now.iter().filter(|h| h.is_some()).count());
        }
        if batch {
            match steps.next(4) {
                // The COMMIT fails: the batch's claims are gone from both.
                0 => {
                    core.store.fail_next_commit();
                    assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
                }
                _ => core.commit_batch().expect("commit"),
            }
        }
        agree(&mut core.store, &format!("round {round}, after the batch"));
    }

    // And a reopen loads what was kept.
    let before = agree(&mut core.store, "before the reopen");
    drop(core);
    let mut store = Store::open(&bus.db_path()).expect("reopen");
    assert_eq!(agree(&mut store, "after the reopen"), before);
    assert!(
        most_held >= 3,
        "the sequence held several roles at once: {most_held}"
    );
    assert!(kept > 40, "most steps wrote a row: {kept}");
    drop(store);
    bus.release();
}

/// A batch SQLite ended under a request (as an I/O error can) commits
/// nothing, and the holders forget its claims with it.
#[test]
fn a_batch_sqlite_ended_itself_leaves_no_holder_behind() {
    let dir = common::private_root();
    let bus = mosaic_bus::store::root::BusDir::acquire(dir.path()).expect("bus");
    let mut core = core(dir.path(), &bus.db_path());
    claim(&mut core.store, "acme", "pm", "run-1", "claim").expect("kept claim");
    core.begin_batch().expect("begin");
    claim(&mut core.store, "acme", "cto", "run-2", "claim").expect("claim in the batch");
    claim(&mut core.store, "acme", "pm", "run-1", "release").expect("release in the batch");
    let ended = core.store.write(|t| {
        t.db().sql().execute_batch("ROLLBACK").expect("rollback");
        Err::<(), _>(Code::StorageUnavailable)
    });
    assert_eq!(ended, Err(Code::StorageUnavailable));
    assert_eq!(core.commit_batch(), Err(Code::StorageUnavailable));
    let held = agree(&mut core.store, "after the ended batch");
    // pm (acme) is still run-1's; cto was never kept.
    assert_eq!(held[0].as_deref(), Some("run-1"));
    assert_eq!(held[1], None);
    drop(core);
    bus.release();
}
