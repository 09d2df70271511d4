//! `mosaic-bench --instructions`: the two send figures that the host's load
//! cannot move, side by side for the writer's `message.send` and for the
//! spec minimum (the two bare evidence rows a send must write):
//!
//! - **instructions per send**, counted by `valgrind --tool=callgrind` on
//!   this binary run in process (`--inproc`), as the difference between a
//!   run of `long` sends and one of `short` sends after the same warm-up,
//!   so start-up, the warm-up and the exit cancel out;
//! - **WAL frames per send**: the pages each commit appends to the WAL,
//!   read from the WAL index header (`mxFrame`, and the salt that changes
//!   when the WAL restarts) in the `-shm` file after every commit, in a run
//!   without valgrind.
//!
//! Both are given for one send per commit (what a single client's send
//! costs) and for 32 sends per commit (a group commit under load). Every
//! commit is `synchronous=FULL`, as the broker's are; the fsyncs cost time,
//! not instructions.

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Sends before anything is counted (the same in every run of a kind).
const WARM_SENDS: usize = 256;

/// The sizes of the two counted runs, per batch size.
fn runs(batch: usize) -> (usize, usize) {
    if batch == 1 {
        (200, 1200)
    } else {
        (batch * 20, batch * 80)
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("{}", json!({"error": msg}));
    std::process::exit(2)
}

/// What the WAL index says after a commit: `(mxFrame, salt)`.
fn wal_index(shm: &Path) -> (u32, [u8; 8]) {
    let f = std::fs::File::open(shm).unwrap_or_else(|_| fail("open -shm"));
    let mut hdr = [0u8; 48];
    f.read_exact_at(&mut hdr, 0)
        .unwrap_or_else(|_| fail("read -shm"));
    let mx = u32::from_ne_bytes([hdr[16], hdr[17], hdr[18], hdr[19]]);
    let mut salt = [0u8; 8];
    salt.copy_from_slice(&hdr[32..40]);
    (mx, salt)
}

/// Counts the frames each commit adds to a WAL: the growth of `mxFrame`,
/// or all of it when the WAL restarted (its salt changed) for this commit.
struct FrameCounter {
    shm: PathBuf,
    last: (u32, [u8; 8]),
    frames: u64,
}

impl FrameCounter {
    fn new(db: &Path) -> FrameCounter {
        let mut shm = db.as_os_str().to_owned();
        shm.push("-shm");
        let shm = PathBuf::from(shm);
        let last = wal_index(&shm);
        FrameCounter {
            shm,
            last,
            frames: 0,
        }
    }

    fn committed(&mut self) {
        let now = wal_index(&self.shm);
        self.frames += u64::from(if now.1 == self.last.1 && now.0 >= self.last.0 {
            now.0 - self.last.0
        } else {
            now.0
        });
        self.last = now;
    }
}

/// One kind of send, ready to run `count` sends as one commit.
trait Sender {
    fn commit(&mut self, from: usize, count: usize);
    fn db(&self) -> PathBuf;
}

/// The broker's writer: `message.send` from `r1` to `r0` (both held, as in
/// the socket benchmark) straight on a `Core`, one batch per commit.
struct Writer {
    core: mosaic_bus::core::Core,
    caller: mosaic_bus::core::Caller,
    db: PathBuf,
    _bus: mosaic_bus::store::root::BusDir,
}

impl Writer {
    fn open(dir: &Path) -> Writer {
        use mosaic_bus::config::BootConfig;
        use mosaic_bus::core::{Caller, Core};
        use mosaic_bus::handlers::dispatch;
        use mosaic_bus::store::{root::BusDir, Store};
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        let cfg = BootConfig::from_json(json!({
            "dataRoot": dir.to_str().unwrap_or_else(|| fail("path")),
            "businesses": {"acme": {"id": "acme", "human": "Ada",
                "arbiters": {"technical": "r0", "delivery": "r0"},
                "roles": {
                    "r0": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                    "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
                }}},
        }))
        .unwrap_or_else(|_| fail("config"));
        let bus = BusDir::acquire(dir).unwrap_or_else(|_| fail("bus dir"));
        let db = bus.db_path();
        let store = Store::open(&db).unwrap_or_else(|_| fail("store"));
        // Experiments only (never a proposal): SQL run on the scratch
        // store before the first request, e.g. to see what a trigger or an
        // index costs by dropping it.
        if let Ok(sql) = std::env::var("MOSAIC_INPROC_SQL") {
            store
                .db()
                .sql()
                .execute_batch(&sql)
                .unwrap_or_else(|_| fail("MOSAIC_INPROC_SQL"));
        }
        let mut core = Core::new(store, std::sync::Arc::new(cfg));
        let role = |r: &str| Caller::Role {
            business: "acme".into(),
            role: r.into(),
            run: format!("run-instructions-{r}"),
        };
        for r in ["r0", "r1"] {
            if dispatch(&mut core, &role(r), "role.claim", None).is_err() {
                fail("claim");
            }
        }
        Writer {
            core,
            caller: role("r1"),
            db,
            _bus: bus,
        }
    }
}

impl Sender for Writer {
    fn commit(&mut self, from: usize, count: usize) {
        if self.core.begin_batch().is_err() {
            fail("begin");
        }
        for i in from..from + count {
            let mut args = serde_json::Map::new();
            args.insert("to".into(), json!("r0"));
            args.insert("body".into(), json!(format!("w-{i}")));
            let r = mosaic_bus::handlers::dispatch(
                &mut self.core,
                &self.caller,
                "message.send",
                Some(args),
            );
            if r.is_err() {
                fail("message.send refused");
            }
        }
        if self.core.commit_batch().is_err() {
            fail("commit");
        }
    }

    fn db(&self) -> PathBuf {
        self.db.clone()
    }
}

/// The spec minimum: the message row and its `action.allowed` row, each
/// keyed by a unique id, nothing else (as `spec_minimum` in the main
/// benchmark).
struct Minimum {
    conn: Connection,
    db: PathBuf,
}

impl Minimum {
    fn open(dir: &Path) -> Minimum {
        let db = dir.join("minimum.sqlite");
        let conn = Connection::open(&db).unwrap_or_else(|_| fail("open minimum db"));
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             CREATE TABLE events(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
               business TEXT NOT NULL, kind TEXT NOT NULL, role TEXT, run TEXT,
               subject TEXT, body TEXT NOT NULL, at TEXT NOT NULL);
             CREATE TABLE messages(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
               business TEXT NOT NULL, from_role TEXT NOT NULL, from_run TEXT NOT NULL,
               to_role TEXT NOT NULL, class TEXT NOT NULL, body TEXT NOT NULL,
               request TEXT, at TEXT NOT NULL);",
        )
        .unwrap_or_else(|_| fail("minimum schema"));
        Minimum { conn, db }
    }
}

impl Sender for Minimum {
    fn commit(&mut self, from: usize, count: usize) {
        let c = &self.conn;
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
            fail("minimum send");
        }
    }

    fn db(&self) -> PathBuf {
        self.db.clone()
    }
}

/// `--inproc writer|minimum BATCH N [--frames]`: the process callgrind
/// counts. Makes `WARM_SENDS` sends, then `N` more in commits of `BATCH`;
/// with `--frames` it counts the WAL frames of those `N` and prints them.
pub fn inproc(mut args: impl Iterator<Item = String>) -> ! {
    let kind = args.next().unwrap_or_default();
    let batch: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .filter(|b| *b > 0)
        .unwrap_or_else(|| fail("usage"));
    let n: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail("usage"));
    let frames = args.next().as_deref() == Some("--frames");
    let dir = std::env::temp_dir().join(format!("mosaic-inproc-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut sender: Box<dyn Sender> = match kind.as_str() {
        "writer" => Box::new(Writer::open(&dir)),
        "minimum" => Box::new(Minimum::open(&dir)),
        _ => fail("usage"),
    };
    let mut done = 0;
    while done < WARM_SENDS {
        sender.commit(done, batch);
        done += batch;
    }
    let mut counter = frames.then(|| FrameCounter::new(&sender.db()));
    let (mut sends, mut commits) = (0usize, 0usize);
    while sends < n {
        sender.commit(done, batch);
        if let Some(c) = counter.as_mut() {
            c.committed();
        }
        done += batch;
        sends += batch;
        commits += 1;
    }
    drop(sender);
    let _ = std::fs::remove_dir_all(&dir);
    let total = counter.map(|c| c.frames).unwrap_or(0);
    println!(
        "{}",
        json!({"sends": sends, "commits": commits, "wal_frames": total,
               "wal_frames_per_send": total as f64 / sends as f64,
               "wal_frames_per_commit": total as f64 / commits as f64})
    );
    std::process::exit(0)
}

/// Runs `exe --inproc kind batch n` under callgrind (with `sql` run on the
/// writer's scratch store first, as `MOSAIC_INPROC_SQL`, when given;
/// otherwise the variable passes through as this process has it, for
/// experiments by hand); returns the instructions it executed (all threads).
fn counted(exe: &Path, work: &Path, kind: &str, batch: usize, n: usize, sql: Option<&str>) -> u64 {
    let out = work.join(format!("cg.{kind}.{batch}.{n}.out"));
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--quiet",
        "--cache-sim=no",
        "--branch-sim=no",
    ])
    .arg(format!("--callgrind-out-file={}", out.display()))
    .arg(exe)
    .args(["--inproc", kind, &batch.to_string(), &n.to_string()])
    .stdout(std::process::Stdio::null());
    if let Some(sql) = sql {
        cmd.env("MOSAIC_INPROC_SQL", sql);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|_| fail("cannot run valgrind (is it installed?)"));
    if !status.success() {
        fail("the process under callgrind failed");
    }
    let text = std::fs::read_to_string(&out).unwrap_or_else(|_| fail("callgrind output"));
    let total = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| fail("no total in the callgrind output"));
    let _ = std::fs::remove_file(&out);
    total
}

/// Instructions per send of `kind` at `batch` sends per commit: the
/// difference between a long and a short counted run, over the sends
/// between them.
fn per_send(exe: &Path, work: &Path, kind: &str, batch: usize, sql: Option<&str>) -> f64 {
    let (short, long) = runs(batch);
    let a = counted(exe, work, kind, batch, short, sql);
    let b = counted(exe, work, kind, batch, long, sql);
    (b.saturating_sub(a) as f64 / (long - short) as f64).round()
}

/// The frames a run of `n` sends in commits of `batch` adds to the WAL.
fn frames(exe: &Path, kind: &str, batch: usize, n: usize) -> Value {
    let out = Command::new(exe)
        .args([
            "--inproc",
            kind,
            &batch.to_string(),
            &n.to_string(),
            "--frames",
        ])
        .output()
        .unwrap_or_else(|_| fail("cannot run --inproc"));
    if !out.status.success() {
        fail("--inproc failed");
    }
    serde_json::from_slice(out.stdout.trim_ascii_end()).unwrap_or_else(|_| fail("--inproc output"))
}

/// `--instructions`: both figures for the writer and the spec minimum, at
/// one and at 32 sends per commit.
pub fn report(exe: &Path) -> Value {
    let work = std::env::temp_dir().join(format!("mosaic-instructions-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&work);
    let mut out = serde_json::Map::new();
    for batch in [1usize, 32] {
        let (_, long) = runs(batch);
        let mut per = serde_json::Map::new();
        for kind in ["writer", "minimum"] {
            let instructions = per_send(exe, &work, kind, batch, None);
            let f = frames(exe, kind, batch, long);
            per.insert(
                kind.into(),
                json!({
                    "instructions_per_send": instructions,
                    "wal_frames_per_send": f["wal_frames_per_send"],
                    "wal_frames_per_commit": f["wal_frames_per_commit"],
                }),
            );
        }
        let ratio = |k: &str| {
            per["writer"][k].as_f64().unwrap_or(0.0) / per["minimum"][k].as_f64().unwrap_or(1.0)
        };
        per.insert(
            "writer_vs_minimum".into(),
            json!({"instructions": ratio("instructions_per_send"),
                   "wal_frames": ratio("wal_frames_per_send")}),
        );
        out.insert(format!("sends_per_commit_{batch}"), Value::Object(per));
    }
    let _ = std::fs::remove_dir_all(&work);
    let one = &out["sends_per_commit_1"];
    json!({
        "goals": {
            "writer instructions per send / spec minimum's, one send per commit (goal <= 2)":
                one["writer_vs_minimum"]["instructions"],
            "writer WAL frames per 1-client send (goal <= 5)": one["writer"]["wal_frames_per_send"],
        },
        "figures": out,
    })
}

/// The `BEFORE INSERT` guards of the two tables a send writes, by name, as a
/// new store has them.
fn send_guards(work: &Path) -> Vec<String> {
    let dir = work.join("guards");
    let _ = std::fs::create_dir_all(&dir);
    let db = Writer::open(&dir).db();
    let conn = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|_| fail("open the scratch store"));
    let names = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'
               AND tbl_name IN ('events', 'messages') AND sql LIKE '%BEFORE INSERT%'
             ORDER BY tbl_name, name",
        )
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .unwrap_or_else(|_| fail("read the guards"));
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
    names
}

/// `--instructions --guards`: what each `BEFORE INSERT` guard of `events`
/// and `messages` costs the writer's send, at one send per commit: the
/// instructions a send takes with that guard dropped alone from a scratch
/// store (an experiment, never a proposal), and with all of them dropped,
/// beside the store as it is and the spec minimum.
pub fn guards(exe: &Path) -> Value {
    let work = std::env::temp_dir().join(format!("mosaic-guards-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&work);
    let names = send_guards(&work);
    let with_all = per_send(exe, &work, "writer", 1, None);
    let minimum = per_send(exe, &work, "minimum", 1, None);
    let mut each = serde_json::Map::new();
    for name in &names {
        let without = per_send(
            exe,
            &work,
            "writer",
            1,
            Some(&format!("DROP TRIGGER {name};")),
        );
        each.insert(
            name.clone(),
            json!({"writer_without_it": without, "its_cost": with_all - without}),
        );
    }
    let drop_all: String = names.iter().map(|n| format!("DROP TRIGGER {n};")).collect();
    let without_all = per_send(exe, &work, "writer", 1, Some(&drop_all));
    let _ = std::fs::remove_dir_all(&work);
    json!({
        "instructions per send, one send per commit": {
            "writer": with_all,
            "spec_minimum": minimum,
            "writer_without_every_guard": without_all,
            "every_guard_together": with_all - without_all,
        },
        "writer / spec minimum": {
            "as it is": with_all / minimum,
            "without every guard": without_all / minimum,
        },
        "each guard dropped alone": each,
    })
}
