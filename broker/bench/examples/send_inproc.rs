//! In-process `message.send` cost: the writer-thread half of a send (the
//! verb, its savepoint and the batch COMMIT) without the socket, for
//! profiling (`valgrind --tool=callgrind`) and for timing the hop.
//!
//! `cargo run --release -p mosaic-bench --example send_inproc [-- N [direct|writer|sync-off]]`

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use mosaic_bus::writer::Writer;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

fn args(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let mode = a.next().unwrap_or_else(|| "direct".into());
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_str().expect("path"),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "r0", "delivery": "r0"},
            "roles": {
                "r0": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
            }}},
    }))
    .expect("config");
    let bus = BusDir::acquire(dir.path()).expect("lock");
    let store = Store::open(&bus.db_path()).expect("store");
    let mut core = Core::new(store, Arc::new(cfg));
    let caller = Caller::Role {
        business: "acme".into(),
        role: "r1".into(),
        run: "run-bench-1".into(),
    };
    dispatch(&mut core, &caller, "role.claim", None).expect("claim");
    // Experiments only: drop the named triggers and indexes to see what
    // they cost (DROP_TRIGGERS=a,b DROP_INDEXES=c).
    for (var, kind) in [("DROP_TRIGGERS", "TRIGGER"), ("DROP_INDEXES", "INDEX")] {
        if let Ok(names) = std::env::var(var) {
            for name in names.split(',').filter(|n| !n.is_empty()) {
                core.store
                    .db()
                    .sql()
                    .execute_batch(&format!("DROP {kind} {name}"))
                    .expect("drop");
            }
        }
    }
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    match mode.as_str() {
        "writer" => {
            let (w, h) = Writer::spawn(core);
            for i in 0..n {
                let t = Instant::now();
                let c = caller.clone();
                let r = w.run_blocking(move |core| {
                    dispatch(
                        core,
                        &c,
                        "message.send",
                        args(json!({"to": "r0", "body": format!("s-{i}")})),
                    )
                });
                assert!(matches!(r, Ok(Ok(_))), "{r:?}");
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
            drop(w);
            let _ = h.join();
        }
        _ => {
            if mode == "sync-off" {
                core.store
                    .db()
                    .sql()
                    .pragma_update(None, "synchronous", "OFF")
                    .expect("pragma");
            }
            let gap = std::env::var("GAP_US").ok().and_then(|g| g.parse().ok());
            // BATCH=k: k sends share one transaction, as under load.
            let batch: usize = std::env::var("BATCH")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(1);
            for i in (0..n).step_by(batch) {
                if let Some(g) = gap {
                    std::thread::sleep(std::time::Duration::from_micros(g));
                }
                let t = Instant::now();
                core.begin_batch().expect("begin");
                for j in i..(i + batch).min(n) {
                    let r = dispatch(
                        &mut core,
                        &caller,
                        "message.send",
                        args(json!({"to": "r0", "body": format!("s-{j}")})),
                    );
                    assert!(r.is_ok(), "{r:?}");
                }
                core.commit_batch().expect("commit");
                let per_send = t.elapsed().as_secs_f64() * 1e6 / batch as f64;
                lat.extend(std::iter::repeat_n(per_send, batch.min(n - i)));
            }
        }
    }
    let wall = t0.elapsed();
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{}",
        json!({"mode": mode, "n": n, "p50_us": lat[n / 2], "p99_us": lat[n * 99 / 100],
               "per_sec": n as f64 / wall.as_secs_f64()})
    );
    drop(bus);
}
