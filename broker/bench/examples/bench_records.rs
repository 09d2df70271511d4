//! Project records' cost in process: `spec.read` and `record.write` through
//! the verb dispatch (the writer's checks, the Git side run inline, the
//! receipt), on a real repository the real `git` makes. Prints JSON: per
//! verb, the p50 and mean latency in microseconds, operations per second,
//! and the CPU time one operation costs (user and system, the broker's and
//! any child's it waited for: `getrusage`), which a busy machine disturbs
//! less than the wall clock.
//!
//! `cargo run --release -p mosaic-bench --example bench_records [-- N [COMMITS]]`
//!
//! The repository has COMMITS commits (default 300), one in three changing
//! `spec/north-star.md` (the human's), the others a docs file, so a
//! `spec.read` walks about 300 commits for its 100 history entries. Each
//! `record.write` commits a new version of one of eight docs files.

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("bench_records: {what}: {e}");
    std::process::exit(1)
}

fn args(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

fn git(repo: &Path, args: &[&str], author: &str) {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", author)
        .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "b@example.invalid")
        .output()
        .unwrap_or_else(|e| fail("git", e));
    if !out.status.success() {
        fail("git", format!("{args:?}: {out:?}"));
    }
}

/// CPU time used so far, in microseconds: this process and its waited-for
/// children, user and system.
fn cpu_us() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: an all-zero rusage is a valid value of the plain C struct,
        // and getrusage only fills the struct it is given.
        let (r, u) = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            (libc::getrusage(who, &mut u), u)
        };
        if r == 0 {
            for t in [u.ru_utime, u.ru_stime] {
                total += t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
            }
        }
    }
    total
}

/// p50 and mean of `lat` (microseconds), operations per second, and CPU
/// microseconds per operation.
fn summary(mut lat: Vec<f64>, total_s: f64, cpu: f64) -> Value {
    lat.sort_by(f64::total_cmp);
    let n = lat.len();
    let mean = lat.iter().sum::<f64>() / n as f64;
    json!({
        "n": n,
        "p50_us": (lat[n / 2] * 10.0).round() / 10.0,
        "mean_us": (mean * 10.0).round() / 10.0,
        "ops_per_s": (n as f64 / total_s).round(),
        "cpu_us_per_op": (cpu / n as f64).round(),
    })
}

fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(300);
    let commits: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
    let _ = std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    );
    let repo = dir.path().join("records");
    std::fs::create_dir_all(repo.join("spec")).unwrap_or_else(|e| fail("mkdir", e));
    std::fs::create_dir_all(repo.join("docs")).unwrap_or_else(|e| fail("mkdir", e));
    git(&repo, &["init", "-q", "-b", "main"], "x");
    for i in 0..commits {
        let (path, author) = if i % 3 == 0 {
            ("spec/north-star.md", "Ada")
        } else {
            ("docs/plan.md", "pm.pm")
        };
        std::fs::write(repo.join(path), format!("# v{i}\n\nSome text.\n"))
            .unwrap_or_else(|e| fail("write", e));
        git(&repo, &["add", "--", path], author);
        git(
            &repo,
            &["commit", "-q", "-m", &format!("edit {path} {i}")],
            author,
        );
    }
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap_or_else(|e| fail("mkdir", e));
    let _ = std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let cfg = BootConfig::from_json(json!({
        "dataRoot": data.to_string_lossy(),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {
                "pm": {"definition": "pm",
                       "authority": {"withinRole": ["record.write"], "crossRole": []}}
            },
            "projects": {"site": {"repo": repo.to_string_lossy()}}}},
    }))
    .unwrap_or_else(|e| fail("config", e));
    let bus = BusDir::acquire(&data).unwrap_or_else(|e| fail("bus dir", e));
    let store = Store::open(&bus.db_path()).unwrap_or_else(|e| fail("store", e));
    let mut core = Core::new(store, Arc::new(cfg));
    let pm = Caller::Role {
        business: "acme".into(),
        role: "pm".into(),
        run: "run-bench".into(),
    };
    let call = |core: &mut Core, verb: &str, a: Value| {
        core.begin_batch().unwrap_or_else(|e| fail("begin", e));
        let r = dispatch(core, &pm, verb, args(a));
        core.commit_batch().unwrap_or_else(|e| fail("commit", e));
        r.unwrap_or_else(|e| fail(verb, e.as_str()))
    };
    call(&mut core, "role.claim", Value::Null);

    // spec.read: a warm-up, then n reads.
    let first = call(&mut core, "spec.read", json!({"project": "site"}));
    let history = first["history"].as_array().map_or(0, Vec::len);
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    let c0 = cpu_us();
    for _ in 0..n {
        let t = Instant::now();
        call(&mut core, "spec.read", json!({"project": "site"}));
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let read = summary(lat, t0.elapsed().as_secs_f64(), cpu_us() - c0);

    // record.write: n commits.
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    let c0 = cpu_us();
    for i in 0..n {
        let t = Instant::now();
        call(
            &mut core,
            "record.write",
            json!({"project": "site", "path": format!("docs/bench-{}.md", i % 8),
                   "record": format!("# Bench {i}\n")}),
        );
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let write = summary(lat, t0.elapsed().as_secs_f64(), cpu_us() - c0);
    println!(
        "{}",
        json!({"commits": commits, "history": history, "spec_read": read, "record_write": write})
    );
}
