//! `mosaic-bench`: the broker's performance figures as JSON, each against a
//! floor measured in the same run on the same disk.
//!
//! Floors: a bare Unix-socket round trip with the broker's framing, and a
//! bare FULL-synchronous WAL commit of one comparable row into a WAL file
//! that already has its size, as the broker's does (see [`commit_floor`]).
//! Broker figures:
//! `message.send`, `message.receive` + `message.read`, and `inbox` at 1, 8
//! and 32 concurrent clients (p50, p99, throughput), peak RSS, then
//! `message.send` and startup on a store of `--messages` (default 1,000,000)
//! messages. The floors and the figures judged against them, and the
//! full-store and empty-store sends, run in three interleaved rounds (the
//! disk's fsync time drifts); those ratios are medians. Each round also
//! measures three bounds: the socket floor at 32 clients, the writer alone
//! (`message.send` in this process straight on a `Core`, see
//! [`writer_alone`]), and the spec minimum (only the two evidence rows a
//! send must write, see [`spec_minimum`]). Run it release-built:
//!
//! ```sh
//! cargo build --release --workspace --bins && target/release/mosaic-bench
//! ```
//!
//! `--profile N [--clients C]` only boots and makes N sends from each of C
//! clients, for a profiler wrapped around the broker (docs/performance.md).
//! `--seals` measures sealing (a send with sealing every second against
//! sealing only at close, the commit-to-seal lag) and the operator's tools
//! on a store of `--messages` messages (`verify` against a plain `SELECT`
//! of the same rows, `export`).
//!
//! `--instructions` prints the figures noise can't move: instructions per
//! send (callgrind) and WAL frames per send, for the writer in process and
//! for the spec minimum (`instructions.rs`); with `--guards`, what each
//! `BEFORE INSERT` guard of `events` and `messages` costs a send instead.

#![deny(unsafe_op_in_unsafe_fn)]

#[path = "../instructions.rs"]
mod instructions;

use mosaic_wire::cli;
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLES: usize = 33;

const HELP: &str = "\
mosaic-bench: the Mosaic bus broker's performance figures, as JSON ratios

Usage:
  mosaic-bench [--messages N] [--per-client N] [--threads | --seals]
  mosaic-bench --profile N [--clients C]
  mosaic-bench --instructions [--guards]
  mosaic-bench --help | --version

  --messages N     messages in the full store (default 1000000)
  --per-client N   requests per client in each load (default 200)
  --threads        the thread benchmark instead
  --seals          sealing's cost to a send, seal lag, verify and export
  --profile N      only boot and make N sends from each of C clients (default
                   1), for a profiler wrapped around the broker
  --instructions   instructions (callgrind; needs valgrind) and WAL frames per
                   send, the writer's and the spec minimum's, side by side
                   (it runs this binary as `--inproc KIND BATCH N [--frames]`)
  --guards         with --instructions: instead, what each BEFORE INSERT guard
                   of events and messages costs a send (each dropped alone
                   from a scratch store, then all of them)

Runs the mosaic-bus beside it; build release first (docs/performance.md).
Exit status: 0 with the figures on stdout; 2 with one line on stderr.
";

fn die(msg: &str) -> ! {
    eprintln!("{}", json!({"error": msg}));
    std::process::exit(2)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(mut lat_us: Vec<f64>, wall: Duration) -> Value {
    lat_us.sort_by(|a, b| a.total_cmp(b));
    json!({
        "n": lat_us.len(),
        "p50_us": percentile(&lat_us, 0.5),
        "p99_us": percentile(&lat_us, 0.99),
        "per_sec": lat_us.len() as f64 / wall.as_secs_f64(),
    })
}

fn exchange(path: &Path, line: &[u8]) -> Value {
    let mut s = UnixStream::connect(path).unwrap_or_else(|_| die("connect"));
    let _ = s.write_all(line);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    serde_json::from_slice(out.trim_ascii_end()).unwrap_or(Value::Null)
}

/// One request on its own connection, as an agent's client makes it:
/// connect, write the line, close the writing half, read to end of file,
/// parse. The timed clients all use this one (on one thread, see [`load`]).
async fn exchange_async(path: &Path, line: &[u8]) -> Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::UnixStream::connect(path).await else {
        die("connect")
    };
    if s.write_all(line).await.is_err() {
        die("write");
    }
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    serde_json::from_slice(out.trim_ascii_end()).unwrap_or(Value::Null)
}

fn request_line(cap: &str, verb: &str, args: Value) -> Vec<u8> {
    let mut req = json!({"cap": cap, "verb": verb});
    if !args.is_null() {
        req["args"] = args;
    }
    let mut line = req.to_string().into_bytes();
    line.push(b'\n');
    line
}

async fn call_async(path: &Path, cap: &str, verb: &str, args: Value) -> Value {
    exchange_async(path, &request_line(cap, verb, args)).await
}

fn call(path: &Path, cap: &str, verb: &str, args: Value) -> Value {
    exchange(path, &request_line(cap, verb, args))
}

/// The socket floor: a server that frames exactly like the broker and answers
/// at once, exchanging with `clients` concurrent clients `per` times each.
/// At 32 clients it is the ceiling of this host for one-request connections
/// driven by the benchmark's client thread: no broker can answer faster.
fn socket_floor(dir: &Path, clients: usize, per: usize) -> Value {
    let n = clients * per;
    let path = dir.join(format!("floor{clients}.sock"));
    let listener = UnixListener::bind(&path).unwrap_or_else(|_| die("bind floor"));
    let server = std::thread::spawn(move || {
        for conn in listener.incoming().take(n) {
            let Ok(mut c) = conn else { continue };
            let mut r = BufReader::new(c.try_clone().unwrap_or_else(|_| die("clone")));
            let mut line = Vec::new();
            let _ = r.read_until(b'\n', &mut line);
            let _ = c.write_all(
                b"{\"ok\":true,\"result\":{\"id\":\"00000000-0000-4000-8000-000000000000\"}}\n",
            );
        }
    });
    let req = json!({"cap": "x".repeat(43), "verb": "message.send", "args": {"to": "r1", "body": "hello"}});
    let line = format!("{req}\n").into_bytes();
    let r = load(clients, per, async |_, _| {
        let _ = exchange_async(&path, &line).await;
    });
    let _ = server.join();
    r
}

/// The commit floor: one comparable row per FULL-synchronous WAL commit.
///
/// `steady`: measured the way the broker runs, in a WAL file that already
/// has its size (400 warm-up commits, then a RESTART checkpoint, so the 300
/// measured commits rewrite the file from its start rather than extend it).
/// Otherwise on a fresh database, where every commit extends the WAL file
/// and its fsync must also make the new size durable: on this disk that
/// costs about 70% more per commit, a cost the broker's commits don't pay
/// once its first checkpoint has run, so that floor flatters the broker.
fn commit_floor(dir: &Path, n: usize, steady: bool) -> Value {
    let path = dir.join(if steady {
        "steady.sqlite"
    } else {
        "fresh.sqlite"
    });
    let c = Connection::open(&path).unwrap_or_else(|_| die("open floor db"));
    let _ = c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE m(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE, business TEXT,
           from_role TEXT, from_run TEXT, to_role TEXT, class TEXT, body TEXT, at TEXT);",
    );
    let insert = |prefix: &str, i: usize| {
        let _ = c.execute(
            "INSERT INTO m(id, business, from_role, from_run, to_role, class, body, at)
             VALUES (?1, 'acme', 'r1', 'run-1', 'r2', 'INFO', 'hello', ?2)",
            params![
                format!("{prefix}-0000-4000-8000-{i:012}"),
                format!("2030-01-01T00:00:00.{:03}Z", i % 1000)
            ],
        );
    };
    if steady {
        for i in 0..400 {
            insert("00000000", i);
        }
        let _ = c.execute_batch("PRAGMA wal_checkpoint(RESTART);");
    }
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        insert("10000000", i);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    summary(lat, t0.elapsed())
}

/// The writer alone: `message.send` run in this process straight on a
/// [`Core`] (no socket, no I/O thread, no thread hop), `batch` sends per
/// FULL-synchronous commit, in a store whose WAL has settled. With `batch`
/// 1 its p50 is what a single send costs the writer thread; with 32 its
/// throughput is the most a broker on this store could give 32 clients if
/// everything around the writer were free. Both bound the ratios above.
fn writer_alone(dir: &Path, batch: usize, n: usize) -> Value {
    use mosaic_bus::config::BootConfig;
    use mosaic_bus::core::{Caller, Core};
    use mosaic_bus::handlers::dispatch;
    use mosaic_bus::store::{root::BusDir, Store};
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.to_str().unwrap_or_else(|| die("path")),
        "businesses": {"acme": business()},
    }))
    .unwrap_or_else(|_| die("config"));
    let bus = BusDir::acquire(dir).unwrap_or_else(|_| die("bus dir"));
    let wal = bus.db_path().with_file_name("bus.sqlite-wal");
    let store = Store::open(&bus.db_path()).unwrap_or_else(|_| die("store"));
    let mut core = Core::new(store, std::sync::Arc::new(cfg));
    let caller = Caller::Role {
        business: "acme".into(),
        role: "r1".into(),
        run: "run-writer-alone".into(),
    };
    if dispatch(&mut core, &caller, "role.claim", None).is_err() {
        die("claim");
    }
    let mut sends = |from: usize, count: usize| -> f64 {
        let t = Instant::now();
        if core.begin_batch().is_err() {
            die("begin");
        }
        for i in from..from + count {
            let mut args = serde_json::Map::new();
            args.insert("to".into(), json!("r0"));
            args.insert("body".into(), json!(format!("w-{i}")));
            if dispatch(&mut core, &caller, "message.send", Some(args)).is_err() {
                die("message.send refused");
            }
        }
        if core.commit_batch().is_err() {
            die("commit");
        }
        t.elapsed().as_secs_f64() * 1e6
    };
    // Settle the WAL as [`settle_wal`] does for the broker.
    let out = settle_then_time(&wal, batch, n, &mut sends);
    drop(core);
    drop(bus);
    out
}

/// Runs `sends(from, batch)` (one commit of `batch` sends, returning its
/// µs) until the WAL file `wal` stops growing, as [`settle_wal`] does for
/// the broker, then times commits until `n` sends are done.
fn settle_then_time(
    wal: &Path,
    batch: usize,
    n: usize,
    mut sends: impl FnMut(usize, usize) -> f64,
) -> Value {
    let mut done = 0;
    until_settled(wal, || {
        for _ in 0..50 {
            sends(done, batch);
            done += batch;
        }
    });
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    while lat.len() < n {
        let per_send = sends(done, batch) / batch as f64;
        done += batch;
        lat.extend(std::iter::repeat_n(per_send, batch));
    }
    summary(lat, t0.elapsed())
}

/// The least any broker that keeps this spec's evidence must write for one
/// agent `message.send`: the message row and its `action.allowed` event
/// row, each keyed by a unique id, with no secondary index, no trigger, no
/// savepoint and no verb logic around them, `batch` sends per
/// FULL-synchronous commit into a settled WAL, on a bare connection in this
/// process. It is a bound for any implementation on this host, not a
/// figure of this broker's.
fn spec_minimum(dir: &Path, batch: usize, n: usize) -> Value {
    let path = dir.join("minimum.sqlite");
    let c = Connection::open(&path).unwrap_or_else(|_| die("open minimum db"));
    if c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             CREATE TABLE events(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
               business TEXT NOT NULL, kind TEXT NOT NULL, role TEXT, run TEXT,
               subject TEXT, body TEXT NOT NULL, at TEXT NOT NULL);
             CREATE TABLE messages(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
               business TEXT NOT NULL, from_role TEXT NOT NULL, from_run TEXT NOT NULL,
               to_role TEXT NOT NULL, class TEXT NOT NULL, body TEXT NOT NULL,
               request TEXT, at TEXT NOT NULL);",
    )
    .is_err()
    {
        die("minimum schema");
    }
    let wal = path.with_file_name("minimum.sqlite-wal");
    let sends = |from: usize, count: usize| -> f64 {
        let t = Instant::now();
        let ok = (|| -> rusqlite::Result<()> {
            c.execute_batch("BEGIN")?;
            let mut ev = c.prepare_cached(
                "INSERT INTO events(id, business, kind, role, run, subject, body, at)
                 VALUES (?1, 'acme', 'action.allowed', 'r1', 'run-1', 'r0', ?2, ?3)",
            )?;
            let mut msg = c.prepare_cached(
                "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
                 VALUES (?1, 'acme', 'r1', 'run-1', 'r0', 'INFO', ?2, ?3)",
            )?;
            for i in from..from + count {
                let id = mosaic_bus::ids::uuid();
                let at = format!(
                    "2030-01-01T{:02}:{:02}:{:02}.{:03}Z",
                    (i / 3_600_000) % 24,
                    (i / 60_000) % 60,
                    (i / 1000) % 60,
                    i % 1000
                );
                let body = format!(r#"{{"action":"message.send","target":"r0","message":"{id}"}}"#);
                ev.execute(params![mosaic_bus::ids::uuid(), body, at])?;
                msg.execute(params![id, format!("w-{i}"), at])?;
            }
            c.execute_batch("COMMIT")
        })();
        if ok.is_err() {
            die("minimum send");
        }
        t.elapsed().as_secs_f64() * 1e6
    };
    settle_then_time(&wal, batch, n, sends)
}

struct Broker {
    child: Child,
    host: BufReader<UnixStream>,
    socket: PathBuf,
    caps: Vec<String>,
    reader: String,
}

fn business() -> Value {
    let mut roles = serde_json::Map::new();
    for i in 0..ROLES {
        roles.insert(
            format!("r{i}"),
            json!({"authority": {"withinRole": ["message.send"], "crossRole": []}}),
        );
    }
    json!({"id": "acme", "human": "Ada", "arbiters": {"technical": "r0", "delivery": "r0"}, "roles": roles})
}

fn start_time() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_else(|_| die("stat"));
    let Some(close) = s.rfind(')') else {
        die("stat")
    };
    s[close + 2..]
        .split(' ')
        .nth(19)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| die("stat"))
}

impl Broker {
    /// Starts `mosaic-bus` beside this binary, boots, binds and claims every role.
    fn start(bus: &Path, root: &Path) -> (Broker, Duration) {
        Broker::start_sealing(bus, root, None)
    }

    /// [`Broker::start`] with the boot key `sealSeconds` when given.
    fn start_sealing(bus: &Path, root: &Path, seal_seconds: Option<u64>) -> (Broker, Duration) {
        let (mut b, startup) =
            Broker::boot_with(bus, root, json!({"acme": business()}), seal_seconds);
        let (pid, st) = (std::process::id(), start_time());
        let tag = Instant::now().elapsed().as_nanos() ^ u128::from(pid) ^ startup.as_nanos();
        for i in 0..ROLES {
            let r = b.op(
                json!({"op": "bindLaunch", "record": {"business": "acme", "role": format!("r{i}"),
                "run": format!("run-{tag:x}-{i}"), "harness": "pi", "pid": pid, "startTime": st}}),
            );
            let cap = r["launch"]["cap"]
                .as_str()
                .unwrap_or_else(|| die("bind"))
                .to_string();
            let c = call(&b.socket, &cap, "role.claim", Value::Null);
            if c["ok"] != json!(true) {
                die(&format!("claim: {c}"));
            }
            b.caps.push(cap);
        }
        (b, startup)
    }

    /// Starts `mosaic-bus` beside this binary and boots it with `businesses`.
    fn boot(bus: &Path, root: &Path, businesses: Value) -> (Broker, Duration) {
        Broker::boot_with(bus, root, businesses, None)
    }

    fn boot_with(
        bus: &Path,
        root: &Path,
        businesses: Value,
        seal_seconds: Option<u64>,
    ) -> (Broker, Duration) {
        let (ours, theirs) = UnixStream::pair().unwrap_or_else(|_| die("socketpair"));
        let fd = theirs.as_raw_fd();
        let mut cmd = Command::new(bus);
        cmd.args(["--host-fd", "3", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: dup2 between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let t0 = Instant::now();
        let child = cmd.spawn().unwrap_or_else(|_| die("spawn mosaic-bus"));
        drop(theirs);
        let mut b = Broker {
            child,
            host: BufReader::new(ours),
            socket: root.join("bus/bus.sock"),
            caps: Vec::new(),
            reader: String::new(),
        };
        let mut config = json!({
            "dataRoot": root.to_str().unwrap_or_else(|| die("path")),
            "businesses": businesses, "readers": ["acme"]});
        if let Some(s) = seal_seconds {
            config["sealSeconds"] = json!(s);
        }
        let boot = b.op(json!({"op": "boot", "config": config}));
        let startup = t0.elapsed();
        if boot["ok"] != json!(true) {
            die("boot refused");
        }
        b.reader = boot["readers"][0]["cap"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (b, startup)
    }

    fn op(&mut self, v: Value) -> Value {
        let _ = self.host.get_mut().write_all(format!("{v}\n").as_bytes());
        let mut s = String::new();
        let _ = self.host.read_line(&mut s);
        serde_json::from_str(&s).unwrap_or(Value::Null)
    }

    fn peak_rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        s.lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Releases every claim (a later broker on the same store claims again), then closes.
    fn close(mut self) {
        for cap in &self.caps {
            let _ = call(&self.socket, cap, "role.release", Value::Null);
        }
        let _ = self.op(json!({"op": "close"}));
        let _ = self.child.wait();
    }
}

/// `clients` concurrent clients each doing `per` calls of
/// `f(client_index, iteration)`, all driven by one thread (a tokio
/// current-thread runtime). One thread rather than one per client: on a
/// 2-core machine 32 client threads took more CPU than the broker itself
/// (context switches), and the figures measured the load generator.
fn load(clients: usize, per: usize, f: impl AsyncFn(usize, usize)) -> Value {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        die("runtime")
    };
    let t0 = Instant::now();
    let lat: Vec<f64> = rt.block_on(async {
        let f = &f;
        let mut clients: Vec<_> = (0..clients)
            .map(|c| {
                Box::pin(async move {
                    let mut lat = Vec::with_capacity(per);
                    for i in 0..per {
                        let t = Instant::now();
                        f(c, i).await;
                        lat.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    lat
                })
            })
            .map(Some)
            .collect();
        // Poll every unfinished client whenever any of them is woken.
        let mut done = Vec::new();
        std::future::poll_fn(|cx| {
            for slot in clients.iter_mut() {
                if let Some(fut) = slot {
                    if let std::task::Poll::Ready(l) = std::future::Future::poll(fut.as_mut(), cx) {
                        done.extend(l);
                        *slot = None;
                    }
                }
            }
            if clients.iter().all(Option::is_none) {
                std::task::Poll::Ready(std::mem::take(&mut done))
            } else {
                std::task::Poll::Pending
            }
        })
        .await
    });
    summary(lat, t0.elapsed())
}

/// `message.send` alone from `clients` clients, each holding its own role, to `r0`.
fn send_load(b: &Broker, clients: usize, per: usize) -> Value {
    // The request lines are made before the clock starts, as the socket
    // floor's is: what is timed is the exchange (connect, write, read to
    // end, parse the reply), the same work the floor times.
    let lines: Vec<Vec<Vec<u8>>> = (0..clients)
        .map(|c| {
            (0..per)
                .map(|i| {
                    let req = json!({"cap": b.caps[c + 1], "verb": "message.send",
                                     "args": {"to": "r0", "body": format!("s{c}-{i}")}});
                    format!("{req}\n").into_bytes()
                })
                .collect()
        })
        .collect();
    load(clients, per, async |c, i| {
        let r = exchange_async(&b.socket, &lines[c][i]).await;
        if r["ok"] != Value::Bool(true) {
            die("message.send refused");
        }
    })
}

/// Sends from one client until the broker's WAL file stops growing: until
/// then every commit extends the file and its fsync also makes the new size
/// durable. The commit floor is measured in a WAL that already has its size
/// (see [`commit_floor`]), so the broker is measured in one too; a broker
/// that has run for a while is always in that state.
fn settle_wal(b: &Broker) {
    until_settled(&b.socket.with_file_name("bus.sqlite-wal"), || {
        let _ = send_load(b, 1, 50);
    });
}

/// Runs `step` until a run of it leaves the file `wal` at the size it found.
fn until_settled(wal: &Path, mut step: impl FnMut()) {
    let size = || std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0);
    for _ in 0..40 {
        let before = size();
        step();
        if before > 0 && size() == before {
            return;
        }
    }
    die("a WAL file never stopped growing");
}

fn verbs_at(b: &Broker, clients: usize, per: usize) -> Value {
    let socket = &b.socket;
    let send = load(clients, per, async |c, i| {
        // client c holds role r(c+1) and sends to r0
        let r = call_async(
            socket,
            &b.caps[c + 1],
            "message.send",
            json!({"to": "r0", "body": format!("m{c}-{i}")}),
        )
        .await;
        if r["ok"] != json!(true) {
            die("message.send refused");
        }
    });
    // Each client sends itself a message, then receives and reads it.
    let recv = load(clients, per / 2, async |c, i| {
        let cap = &b.caps[c + 1];
        let _ = call_async(
            socket,
            &b.caps[0],
            "message.send",
            json!({"to": format!("r{}", c + 1), "body": format!("q{i}")}),
        )
        .await;
        let got = call_async(socket, cap, "message.receive", Value::Null).await;
        let items = got["result"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for m in items {
            if let Some(id) = m["id"].as_str() {
                let _ = call_async(socket, cap, "message.read", json!({"id": id})).await;
            }
        }
    });
    let inbox = load(clients, per, async |c, _| {
        let _ = call_async(socket, &b.caps[c + 1], "inbox", Value::Null).await;
    });
    json!({"message.send": send, "message.receive+read": recv, "inbox": inbox})
}

/// Fills a store with `n` messages across the roles (through the real schema
/// and its triggers) and returns how long a bare quick_check takes on it.
fn prefill(root: &Path, bus: &Path, n: usize) -> Duration {
    let (b, _) = Broker::start(bus, root);
    b.close();
    let db = root.join("bus/bus.sqlite");
    let mut c = Connection::open(&db).unwrap_or_else(|_| die("open store"));
    let _ = c.execute_batch("PRAGMA synchronous=OFF;");
    let base = 1_900_000_000_000i64; // far past anything the clock gave out
    let mut done = 0;
    while done < n {
        let Ok(tx) = c.transaction() else { die("tx") };
        {
            let Ok(mut st) = tx.prepare(
                "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
                 VALUES (?1, 'acme', ?2, 'run-prefill', ?3, 'INFO', ?4, ?5)",
            ) else {
                die("prepare")
            };
            for i in done..(done + 50_000).min(n) {
                let at = mosaic_bus::store::clock::format_ms(base + i as i64);
                let _ = st.execute(params![
                    format!("{:08x}-0000-4000-8000-{:012x}", i >> 16, i),
                    format!("r{}", i % ROLES),
                    format!("r{}", (i + 1) % ROLES),
                    format!("prefill {i}"),
                    at
                ]);
            }
        }
        let _ = tx.commit();
        done = (done + 50_000).min(n);
    }
    let _ = c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
    drop(c);
    let c = Connection::open(&db).unwrap_or_else(|_| die("open store"));
    let t = Instant::now();
    let _: String = c
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .unwrap_or_default();
    t.elapsed()
}

/// The thread benchmark's business: the assistant (`helper`) and a chief of staff.
fn thread_business() -> Value {
    let role = |def: &str| {
        json!({"definition": def,
        "authority": {"withinRole": ["message.send"], "crossRole": []}})
    };
    json!({"acme": {"id": "acme", "human": "Ada",
        "arbiters": {"technical": "chief", "delivery": "chief"},
        "roles": {"helper": role("assistant"), "chief": role("chief-of-staff")}}})
}

/// A store with one project and `threads` threads of `helper`, holding
/// `n` messages spread over them (alternately the human's to the
/// assistant and the assistant's to the human), each filed in its thread,
/// every one delivered (each thread claimed by a prefill run, then
/// released), through the real schema and its triggers. Returns the
/// thread the benchmark's run serves.
fn prefill_threads(root: &Path, bus: &Path, threads: usize, n: usize) -> String {
    let (b, _) = Broker::boot(bus, root, thread_business());
    b.close();
    let db = root.join("bus/bus.sqlite");
    let mut c = Connection::open(&db).unwrap_or_else(|_| die("open store"));
    let _ = c.execute_batch("PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON;");
    let base = 1_900_000_000_000i64;
    let at = |i: usize| mosaic_bus::store::clock::format_ms(base + i as i64);
    let thread_id = |t: usize| format!("thread-{t:06}");
    let Ok(tx) = c.transaction() else { die("tx") };
    let ok = tx
        .execute(
            "INSERT INTO projects(id, business, name, by, at) VALUES ('p', 'acme', 'Site', 'Ada', ?1)",
            [at(0)],
        )
        .is_ok();
    for t in 0..threads {
        let ok2 = tx
            .execute(
                "INSERT INTO threads(id, business, project, instance, user, name, at)
                 VALUES (?1, 'acme', 'p', 'helper', 'Ada', ?2, ?3)",
                params![thread_id(t), format!("t{t}"), at(t)],
            )
            .is_ok();
        let ok3 = tx
            .execute(
                "INSERT INTO thread_claims(business, thread, run, op, by, at)
                 VALUES ('acme', ?1, ?2, 'claim', ?2, ?3)",
                params![thread_id(t), format!("prefill-{t}"), at(t)],
            )
            .is_ok();
        if !(ok && ok2 && ok3) {
            die("prefill threads");
        }
    }
    if tx.commit().is_err() {
        die("commit");
    }
    let mut done = 0;
    while done < n {
        let Ok(tx) = c.transaction() else { die("tx") };
        {
            let (Ok(mut m), Ok(mut mt), Ok(mut d)) = (
                tx.prepare(
                    "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
                     VALUES (?1, 'acme', ?2, ?3, ?4, 'INFO', ?5, ?6)",
                ),
                tx.prepare("INSERT INTO message_threads(message, thread, at) VALUES (?1, ?2, ?3)"),
                tx.prepare("INSERT INTO deliveries(message, run, at) VALUES (?1, ?2, ?3)"),
            ) else {
                die("prepare")
            };
            for i in done..(done + 50_000).min(n) {
                let t = i % threads;
                let id = format!("{:08x}-0000-4000-8000-{:012x}", i >> 16, i);
                let (from, from_run, to, run) = if i % 2 == 0 {
                    (
                        "human",
                        "human-cli".to_string(),
                        "helper",
                        format!("prefill-{t}"),
                    )
                } else {
                    (
                        "helper",
                        format!("prefill-{t}"),
                        "human",
                        "human-cli".to_string(),
                    )
                };
                let r = m
                    .execute(params![
                        id,
                        from,
                        from_run,
                        to,
                        format!("prefill {i}"),
                        at(i)
                    ])
                    .and_then(|_| mt.execute(params![id, thread_id(t), at(i)]))
                    .and_then(|_| d.execute(params![id, run, at(i)]));
                if r.is_err() {
                    die("prefill message");
                }
            }
        }
        if tx.commit().is_err() {
            die("commit");
        }
        done = (done + 50_000).min(n);
    }
    let Ok(tx) = c.transaction() else { die("tx") };
    for t in 0..threads {
        let r = tx.execute(
            "INSERT INTO thread_claims(business, thread, run, op, by, at)
             VALUES ('acme', ?1, ?2, 'release', ?2, ?3)",
            params![thread_id(t), format!("prefill-{t}"), at(threads + t)],
        );
        if r.is_err() {
            die("prefill release");
        }
    }
    if tx.commit().is_err() {
        die("commit");
    }
    let _ = c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
    thread_id(threads - 1)
}

/// A broker serving one thread: the assistant's run bound to `thread` and
/// the chief of staff's run, both claimed; the chief holds a message from
/// the thread to reply to. Returns the broker, the two caps and that message.
fn thread_broker(bus: &Path, root: &Path, thread: &str) -> (Broker, String, String, String) {
    let (mut b, _) = Broker::boot(bus, root, thread_business());
    let (pid, st) = (std::process::id(), start_time());
    let tag = format!(
        "{:x}",
        Instant::now().elapsed().as_nanos() ^ u128::from(pid)
    );
    let mut bind = |role: &str, thread: Option<&str>| {
        let mut rec = json!({"business": "acme", "role": role, "run": format!("{role}-{tag}"),
                             "harness": "pi", "pid": pid, "startTime": st});
        if let Some(t) = thread {
            rec["thread"] = json!(t);
        }
        let r = b.op(json!({"op": "bindLaunch", "record": rec}));
        let cap = r["launch"]["cap"]
            .as_str()
            .unwrap_or_else(|| die(&format!("bind: {r}")))
            .to_string();
        cap
    };
    let helper = bind("helper", Some(thread));
    let chief = bind("chief", None);
    for cap in [&helper, &chief] {
        let c = call(&b.socket, cap, "role.claim", Value::Null);
        if c["ok"] != json!(true) {
            die(&format!("claim: {c}"));
        }
    }
    let seed = call(
        &b.socket,
        &helper,
        "message.send",
        json!({"to": "chief", "body": "seed"}),
    );
    let seed = seed["result"]["id"]
        .as_str()
        .unwrap_or_else(|| die("seed"))
        .to_string();
    let _ = call(&b.socket, &chief, "message.receive", Value::Null);
    (b, helper, chief, seed)
}

/// `per` turns of a thread: the chief's reply into the thread (the reply
/// chain walked to the thread), the assistant's `message.receive` of it,
/// and the assistant's `message.send` to the human from its thread; each
/// timed on its own (its `message.read` is not).
fn thread_turns(b: &Broker, helper: &str, chief: &str, seed: &str, per: usize) -> Value {
    let (mut reply, mut receive, mut send) = (Vec::new(), Vec::new(), Vec::new());
    let t0 = Instant::now();
    for i in 0..per {
        let timed = |lat: &mut Vec<f64>, cap: &str, verb: &str, args: Value| {
            let line = request_line(cap, verb, args);
            let t = Instant::now();
            let r = exchange(&b.socket, &line);
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            if r["ok"] != json!(true) {
                die(&format!("{verb}: {r}"));
            }
            r
        };
        timed(
            &mut reply,
            chief,
            "message.send",
            json!({"to": "helper", "body": format!("turn {i}"), "in_reply_to": seed}),
        );
        let got = timed(&mut receive, helper, "message.receive", Value::Null);
        for m in got["result"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let _ = call(&b.socket, helper, "message.read", json!({"id": m["id"]}));
        }
        timed(
            &mut send,
            helper,
            "message.send",
            json!({"to": "human", "body": format!("answer {i}")}),
        );
    }
    let wall = t0.elapsed();
    json!({"reply_into_thread": summary(reply, wall), "receive": summary(receive, wall),
           "send_from_thread": summary(send, wall)})
}

/// `--threads`: a thread run's send and receive on a store of `messages`
/// messages in 10,000 threads against the same on a store with one empty
/// thread, two brokers side by side, three interleaved rounds (medians).
fn threads_bench(bus: &Path, work: &Path, messages: usize, per: usize) -> Value {
    let full_root = work.join("threads-full");
    let empty_root = work.join("threads-empty");
    for d in [&full_root, &empty_root] {
        let _ = std::fs::create_dir_all(d);
    }
    let t = Instant::now();
    let full_thread = prefill_threads(&full_root, bus, 10_000, messages);
    let prefill_s = t.elapsed().as_secs_f64();
    let empty_thread = prefill_threads(&empty_root, bus, 1, 0);
    let (full, fh, fc, fs) = thread_broker(bus, &full_root, &full_thread);
    let (empty, eh, ec, es) = thread_broker(bus, &empty_root, &empty_thread);
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let e = thread_turns(&empty, &eh, &ec, &es, per);
        let f = thread_turns(&full, &fh, &fc, &fs, per);
        let ratio = |k: &str| {
            f[k]["p50_us"].as_f64().unwrap_or(0.0) / e[k]["p50_us"].as_f64().unwrap_or(1.0)
        };
        rounds.push(json!({"empty": e, "full": f,
            "send_full_vs_empty": ratio("send_from_thread"),
            "receive_full_vs_empty": ratio("receive"),
            "reply_full_vs_empty": ratio("reply_into_thread")}));
    }
    empty.close();
    full.close();
    let median = |key: &str| {
        let mut v: Vec<f64> = rounds.iter().filter_map(|r| r[key].as_f64()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    json!({
        "store": {"messages": messages, "threads": 10_000, "prefill_s": prefill_s},
        "rounds": rounds,
        "ratios": {
            "thread_send_p50_full_vs_empty, median of 3 rounds (goal <= 1.2)": median("send_full_vs_empty"),
            "thread_receive_p50_full_vs_empty, median of 3 rounds (goal <= 1.2)": median("receive_full_vs_empty"),
            "reply_into_thread_p50_full_vs_empty, median of 3 rounds": median("reply_full_vs_empty"),
        }
    })
}

/// Wall time of one `mosaic-bus` tool run and its stdout's line count
/// (the output itself is read and dropped, as a shipper's pipe would be).
fn run_tool(bus: &Path, args: &[&str]) -> (Duration, usize, Value) {
    let t = Instant::now();
    let mut child = Command::new(bus)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|_| die("spawn a tool"));
    let Some(out) = child.stdout.take() else {
        die("tool stdout")
    };
    let mut lines = 0;
    let mut last = String::new();
    for l in BufReader::with_capacity(1 << 16, out).lines() {
        let Ok(l) = l else { break };
        lines += 1;
        last = l;
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    if !ok {
        die(&format!("{args:?} failed"));
    }
    (
        t.elapsed(),
        lines,
        serde_json::from_str(&last).unwrap_or(Value::Null),
    )
}

/// Every row of every table but `meta`, every column read: the plain
/// `SELECT` `verify` is measured against.
fn plain_select(db: &Path) -> (Duration, u64) {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|_| die("open store"));
    let t = Instant::now();
    let mut n = 0u64;
    for table in mosaic_bus::store::schema::SEALED_TABLES {
        let Ok(mut st) = c.prepare(&format!("SELECT * FROM {table} ORDER BY seq")) else {
            die("prepare")
        };
        let cols = st.column_count();
        let Ok(mut rows) = st.query([]) else {
            die("query")
        };
        while let Ok(Some(r)) = rows.next() {
            for i in 0..cols {
                let _ = std::hint::black_box(r.get_ref(i));
            }
            n += 1;
        }
    }
    (t.elapsed(), n)
}

/// Commit-to-seal lag: one client sends `n` messages about 20 ms apart
/// and keeps when each was acknowledged (wall clock: the broker's `at`
/// runs ahead of it under load, one millisecond per row); then, per
/// message, the `at` of the first seal covering it (the sealer's wall
/// clock) less that. Milliseconds, sorted.
fn seal_lags(b: &Broker, root: &Path, n: usize) -> Vec<f64> {
    let mut acked = Vec::with_capacity(n);
    for i in 0..n {
        let r = call(
            &b.socket,
            &b.caps[1],
            "message.send",
            json!({"to": "r0", "body": format!("lag {i}")}),
        );
        let at = mosaic_bus::store::clock::now_ms() as f64;
        let Some(id) = r["result"]["id"].as_str() else {
            die("lag send")
        };
        acked.push((id.to_string(), at));
        std::thread::sleep(Duration::from_millis(20));
    }
    // The last one's seal comes within a second.
    std::thread::sleep(Duration::from_millis(1500));
    let ro = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let store = Connection::open_with_flags(root.join("bus/bus.sqlite"), ro)
        .unwrap_or_else(|_| die("open store"));
    let seals = Connection::open_with_flags(root.join("bus/seals.sqlite"), ro)
        .unwrap_or_else(|_| die("open seals"));
    let ms = |s: &str| mosaic_bus::store::clock::parse_canonical(s).unwrap_or(0) as f64;
    let mut lags = Vec::new();
    for (id, at) in acked {
        let seq: i64 = store
            .query_row("SELECT seq FROM messages WHERE id = ?1", [&id], |r| {
                r.get(0)
            })
            .unwrap_or_else(|_| die("lag message"));
        let sealed: Option<String> = seals
            .query_row(
                "SELECT at FROM seals WHERE json_extract(upto, '$.messages') >= ?1 ORDER BY seq LIMIT 1",
                [seq],
                |r| r.get(0),
            )
            .ok();
        match sealed {
            Some(s) => lags.push(ms(&s) - at),
            None => die("a message no seal covered"),
        }
    }
    lags.sort_by(|a, b| a.total_cmp(b));
    lags
}

/// `--seals`: what sealing costs a send (sealing every second against
/// sealing only at start and close, two brokers side by side, three
/// interleaved rounds), the commit-to-seal lag, and `verify`, a plain
/// `SELECT` and `export` over a store of `messages` messages.
fn seals_bench(bus: &Path, work: &Path, messages: usize, per: usize) -> Value {
    let mk = |name: &str| {
        let d = work.join(name);
        let _ = std::fs::create_dir_all(&d);
        d
    };
    let on_root = mk("seal-1s");
    let (on, _) = Broker::start_sealing(bus, &on_root, Some(1));
    let (off, _) = Broker::start_sealing(bus, &mk("seal-3600s"), Some(3600));
    settle_wal(&on);
    settle_wal(&off);
    let mut rounds = Vec::new();
    for r in 0..3 {
        // Alternate which goes first: the disk drifts within a round too.
        let (a, b) = if r % 2 == 0 { (&on, &off) } else { (&off, &on) };
        let (a1, a32) = (send_load(a, 1, 1000), send_load(a, 32, per));
        let (b1, b32) = (send_load(b, 1, 1000), send_load(b, 32, per));
        let (on1, on32, off1, off32) = if r % 2 == 0 {
            (a1, a32, b1, b32)
        } else {
            (b1, b32, a1, a32)
        };
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        rounds.push(json!({
            "send_1_sealing_1s": on1, "send_1_sealing_at_close": off1,
            "send_32_sealing_1s": on32, "send_32_sealing_at_close": off32,
            "p50_on_vs_off": f(&on1, "p50_us") / f(&off1, "p50_us"),
            "throughput_32_on_vs_off": f(&on32, "per_sec") / f(&off32, "per_sec"),
        }));
    }
    let median = |key: &str| {
        let mut v: Vec<f64> = rounds.iter().filter_map(|r| r[key].as_f64()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let lags = seal_lags(&on, &on_root, 200);
    on.close();
    off.close();

    // A store of `messages` messages, unsealed, then a start that seals it.
    let big = mk("seal-big");
    prefill(&big, bus, messages);
    let (b, startup) = Broker::start_sealing(bus, &big, None);
    b.close();
    let (_, small_startup) = {
        let (b, t) = Broker::start_sealing(bus, &mk("seal-small"), None);
        b.close();
        ((), t)
    };
    let root_arg = big.to_str().unwrap_or_else(|| die("path"));
    let (verify_time, _, summary) = run_tool(bus, &["verify", "--data-root", root_arg]);
    let rows = summary["rows"].as_u64().unwrap_or(0);
    let (select_time, selected) = plain_select(&big.join("bus/bus.sqlite"));
    let (export_time, exported, _) = run_tool(bus, &["export", "--data-root", root_arg]);
    let verify_rate = rows as f64 / verify_time.as_secs_f64();
    let select_rate = selected as f64 / select_time.as_secs_f64();
    let export_rate = exported as f64 / export_time.as_secs_f64();
    json!({
        "rounds": rounds,
        "seal_lag_ms": {"n": lags.len(), "p50": percentile(&lags, 0.5), "p99": percentile(&lags, 0.99),
                        "max": lags.last().copied().unwrap_or(0.0), "sealSeconds": 1},
        "store": {"messages": messages, "rows": rows, "selected": selected, "exported": exported,
                  "startup_sealing_it_ms": startup.as_secs_f64() * 1e3,
                  "startup_empty_ms": small_startup.as_secs_f64() * 1e3,
                  "verify_s": verify_time.as_secs_f64(), "select_s": select_time.as_secs_f64(),
                  "export_s": export_time.as_secs_f64()},
        "ratios": {
            "send_p50_sealing_1s_vs_at_close, median of 3 rounds (goal: within noise)": median("p50_on_vs_off"),
            "send_32_throughput_sealing_1s_vs_at_close, median of 3 rounds (goal: within noise)": median("throughput_32_on_vs_off"),
            "verify_rows_per_sec": verify_rate,
            "plain_select_rows_per_sec": select_rate,
            "verify_vs_plain_select (goal >= 0.25)": verify_rate / select_rate,
            "export_rows_per_sec": export_rate,
        }
    })
}

/// The options `mosaic-bench` takes.
const OPTIONS: &[&str] = &[
    "--messages",
    "--per-client",
    "--threads",
    "--profile",
    "--clients",
    "--seals",
    "--instructions",
    "--guards",
    "--inproc",
    "--frames",
];

fn main() -> std::process::ExitCode {
    let all: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(ask) = cli::asked(&all) {
        return cli::answer(ask, "mosaic-bench", env!("CARGO_PKG_VERSION"), HELP);
    }
    let known = |a: &std::ffi::OsString| OPTIONS.iter().any(|o| a == *o);
    if let Some(opt) = all.iter().find(|a| cli::is_option(a) && !known(a)) {
        return cli::unknown_option("mosaic-bench", opt);
    }
    bench(all);
    std::process::ExitCode::SUCCESS
}

fn bench(all: Vec<std::ffi::OsString>) {
    let mut messages = 1_000_000usize;
    let mut per = 200usize;
    let mut profile: Option<usize> = None;
    let mut profile_clients = 1usize;
    let mut threads = false;
    let mut seals = false;
    // Not `env::args`: an argument that is not UTF-8 is a usage error, not
    // a panic.
    let mut args = all.into_iter().map(|a| a.into_string().unwrap_or_default());
    let mut count_instructions = false;
    let mut price_guards = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            // The process `--instructions` counts (see `instructions.rs`).
            "--inproc" => instructions::inproc(args),
            "--instructions" => count_instructions = true,
            "--guards" => price_guards = true,
            "--messages" => {
                messages = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| die("usage"))
            }
            "--per-client" => {
                per = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| die("usage"))
            }
            "--threads" => threads = true,
            "--seals" => seals = true,
            "--profile" => {
                profile = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| die("usage")),
                )
            }
            "--clients" => {
                profile_clients = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|c| (1..ROLES).contains(c))
                    .unwrap_or_else(|| die("usage"))
            }
            _ => die(
                "usage: mosaic-bench [--messages N] [--per-client N] [--profile N [--clients C]] [--threads] [--seals] [--instructions [--guards]]",
            ),
        }
    }
    if price_guards && !count_instructions {
        die("usage: --guards goes with --instructions");
    }
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o077) };
    let exe = std::env::current_exe().unwrap_or_else(|_| die("exe"));
    let bus = exe.with_file_name("mosaic-bus");
    let work = std::env::temp_dir().join(format!("mosaic-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&work);
    let mk = |name: &str| {
        let d = work.join(name);
        let _ = std::fs::create_dir_all(&d);
        d
    };

    // Profiling: boot, then N sends from each of C clients (default 1) and
    // nothing else, so that
    // a profiler wrapped around the broker (a `mosaic-bus` script beside
    // this binary that execs the real one under `valgrind --tool=callgrind`)
    // sees the per-send cost plus a fixed startup.
    if let Some(n) = profile {
        let (b, _) = Broker::start(&bus, &mk("profile"));
        let one = send_load(&b, profile_clients, n);
        b.close();
        let _ = std::fs::remove_dir_all(&work);
        println!("{}", json!({"profile_sends": one}));
        return;
    }

    if count_instructions {
        let out = if price_guards {
            instructions::guards(&exe)
        } else {
            instructions::report(&exe)
        };
        let _ = std::fs::remove_dir_all(&work);
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }

    if seals {
        let out = seals_bench(&bus, &work, messages, per);
        let _ = std::fs::remove_dir_all(&work);
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }

    if threads {
        let out = threads_bench(&bus, &work, messages, per);
        let _ = std::fs::remove_dir_all(&work);
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }

    // The floors and the two send figures they judge, in three interleaved
    // rounds: the disk's fsync time drifts, so each round's ratios use the
    // floors measured right beside them, and the medians are reported.
    let (b, _) = Broker::start(&bus, &mk("empty"));
    settle_wal(&b);
    let mut rounds = Vec::new();
    for r in 0..3 {
        let socket = socket_floor(&mk(&format!("floor{r}")), 1, 1000);
        let socket_32 = socket_floor(&mk(&format!("floor{r}")), 32, per);
        let commit = commit_floor(&mk(&format!("floor{r}")), 300, true);
        let fresh = commit_floor(&mk(&format!("floor{r}")), 300, false);
        // As many single-client sends as the socket floor has exchanges:
        // a p50 of 200 samples moved by a tenth between runs.
        let one = send_load(&b, 1, 1000);
        let many = send_load(&b, 32, per);
        let alone_1 = writer_alone(&mk(&format!("alone1-{r}")), 1, 1000);
        let alone_32 = writer_alone(&mk(&format!("alone32-{r}")), 32, 32 * per);
        let minimum_1 = spec_minimum(&mk(&format!("minimum1-{r}")), 1, 1000);
        let minimum_32 = spec_minimum(&mk(&format!("minimum32-{r}")), 32, 32 * per);
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        rounds.push(json!({
            "socket": socket, "socket_32": socket_32, "commit": commit, "commit_fresh_wal": fresh,
            "send_1": one, "send_32": many,
            "writer_alone_1": alone_1, "writer_alone_32": alone_32,
            "writer_alone_1_plus_socket_vs_floors":
                (f(&alone_1, "p50_us") + f(&socket, "p50_us")) / (f(&socket, "p50_us") + f(&commit, "p50_us")),
            "writer_alone_32_vs_commit": f(&alone_32, "per_sec") / f(&commit, "per_sec"),
            "spec_minimum_1": minimum_1, "spec_minimum_32": minimum_32,
            "spec_minimum_1_plus_socket_vs_floors":
                (f(&minimum_1, "p50_us") + f(&socket, "p50_us")) / (f(&socket, "p50_us") + f(&commit, "p50_us")),
            "spec_minimum_32_vs_commit": f(&minimum_32, "per_sec") / f(&commit, "per_sec"),
            "send_p50_vs_floors": f(&one, "p50_us") / (f(&socket, "p50_us") + f(&commit, "p50_us")),
            "send_32_vs_commit": f(&many, "per_sec") / f(&commit, "per_sec"),
            "socket_32_vs_commit": f(&socket_32, "per_sec") / f(&commit, "per_sec"),
            "send_p50_vs_floors_fresh_wal": f(&one, "p50_us") / (f(&socket, "p50_us") + f(&fresh, "p50_us")),
            "send_32_vs_commit_fresh_wal": f(&many, "per_sec") / f(&fresh, "per_sec"),
        }));
    }
    let median = |key: &str| {
        let mut v: Vec<f64> = rounds.iter().filter_map(|r| r[key].as_f64()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (ratio_one, ratio_many) = (median("send_p50_vs_floors"), median("send_32_vs_commit"));
    let ceiling_many = median("socket_32_vs_commit");
    let (alone_one, alone_many) = (
        median("writer_alone_1_plus_socket_vs_floors"),
        median("writer_alone_32_vs_commit"),
    );
    let (minimum_one, minimum_many) = (
        median("spec_minimum_1_plus_socket_vs_floors"),
        median("spec_minimum_32_vs_commit"),
    );
    let (fresh_one, fresh_many) = (
        median("send_p50_vs_floors_fresh_wal"),
        median("send_32_vs_commit_fresh_wal"),
    );
    let mut by_clients = serde_json::Map::new();
    for clients in [1usize, 8, 32] {
        by_clients.insert(clients.to_string(), verbs_at(&b, clients, per));
    }
    let rss_kib = b.peak_rss_kib();
    b.close();

    // Flat costs: message.send on an empty store and on a full one, single
    // client, from two brokers running side by side and measured in three
    // interleaved rounds (the disk's fsync time drifts within a run just as
    // it does between runs); the ratio is the median of the rounds' ratios.
    let big = mk("big");
    let quick_check = prefill(&big, &bus, messages);
    // The prefill writes its rows in bulk, so nothing seals them; a broker
    // that served those sends would have sealed each within `sealSeconds`.
    // Its first start seals them all before serving (timed apart: a start
    // after a crash that left that much unsealed); the startup goal is the
    // ordinary restart of a store whose rows are sealed.
    let (first, startup_sealing) = Broker::start(&bus, &big);
    first.close();
    let (full, startup_big) = Broker::start(&bus, &big);
    let (empty, startup_empty) = Broker::start(&bus, &mk("empty2"));
    settle_wal(&full);
    settle_wal(&empty);
    let mut flat = Vec::new();
    for _ in 0..3 {
        let e = send_load(&empty, 1, per);
        let f = send_load(&full, 1, per);
        let ratio = f["p50_us"].as_f64().unwrap_or(0.0) / e["p50_us"].as_f64().unwrap_or(1.0);
        flat.push((ratio, e, f));
    }
    empty.close();
    full.close();
    let _ = std::fs::remove_dir_all(&work);
    flat.sort_by(|a, b| a.0.total_cmp(&b.0));
    let flat_ratios: Vec<f64> = flat.iter().map(|r| r.0).collect();
    let (flat_ratio, send_empty, send_big) = flat.swap_remove(1);

    let out = json!({
        "rounds": rounds,
        "clients": by_clients,
        "broker_peak_rss_kib": rss_kib,
        "store": {"messages": messages, "send_empty": send_empty, "send_full": send_big,
                  "send_full_vs_empty_rounds": flat_ratios,
                  "startup_empty_ms": startup_empty.as_secs_f64() * 1e3,
                  "startup_full_ms": startup_big.as_secs_f64() * 1e3,
                  "startup_full_sealing_it_ms": startup_sealing.as_secs_f64() * 1e3,
                  "quick_check_ms": quick_check.as_secs_f64() * 1e3},
        "ratios": {
            "send_p50_vs_floors, median of 3 rounds (goal <= 1.3)": ratio_one,
            "send_32_throughput_vs_commit_floor, median of 3 rounds (goal >= 4)": ratio_many,
            "socket_floor_32_throughput_vs_commit_floor, median of 3 rounds (this host's ceiling for the one above)": ceiling_many,
            "bounds from the writer alone, in process (what the two goals above would read if the socket side cost nothing more than its floor)": {
                "send_p50_vs_floors": alone_one, "send_32_throughput_vs_commit_floor": alone_many},
            "bounds for any broker keeping this spec's evidence (two id-keyed rows per send, nothing else), in process": {
                "send_p50_vs_floors": minimum_one, "send_32_throughput_vs_commit_floor": minimum_many},
            "the same two against a fresh-WAL commit floor (how the floor was measured before; flatters the broker)": {
                "send_p50_vs_floors": fresh_one, "send_32_throughput_vs_commit_floor": fresh_many},
            "send_p50_full_vs_empty, median of 3 rounds (goal <= 1.2)": flat_ratio,
            "startup_full_vs_quick_check (goal <= 2)": startup_big.as_secs_f64() / quick_check.as_secs_f64(),
            "peak_rss_mib (goal <= 32)": rss_kib as f64 / 1024.0,
        }
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
}
