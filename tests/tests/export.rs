//! `mosaic-bus export` (DESIGN.md, "Seals and the operator's tools"):
//! every evidence row once, as JSON lines in commit order, each with its
//! table, `seq`, seal and a cursor that resumes right after it; `--follow`
//! tails a broker under load, and every acknowledged send comes out exactly
//! once across a restart of the exporter (with its cursor) and of the
//! broker.

use mosaic_tests::{bin, config, data_root, raw_request, sleeper, Broker, KillOnDrop};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

fn export(root: &Path, after: Option<&str>) -> (i32, Vec<Value>, String) {
    let mut cmd = Command::new(bin("mosaic-bus"));
    cmd.arg("export").arg("--data-root").arg(root);
    if let Some(a) = after {
        cmd.arg("--after").arg(a);
    }
    let out = cmd.output().expect("run export");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every row of every sealed table in the store, as `(table, seq)`.
fn all_rows(root: &Path) -> HashSet<(String, i64)> {
    let c = mosaic_tests::db(root);
    let mut out = HashSet::new();
    for t in mosaic_bus::store::schema::SEALED_TABLES {
        let mut st = c.prepare(&format!("SELECT seq FROM {t}")).expect("prepare");
        for s in st.query_map([], |r| r.get::<_, i64>(0)).expect("rows") {
            out.insert((t.to_string(), s.expect("seq")));
        }
    }
    out
}

/// What every export stream must hold: each row once, each table's rows
/// in `seq` order, the broker's `at` strictly increasing down the stream
/// (commit order), and seals that never go back once given.
fn check_stream(lines: &[Value]) {
    let mut seen = HashSet::new();
    let mut last_seq: HashMap<String, i64> = HashMap::new();
    let mut last_at = String::new();
    for l in lines {
        let table = l["table"].as_str().expect("table").to_string();
        let seq = l["seq"].as_i64().expect("seq");
        assert_eq!(l["row"]["seq"], json!(seq), "{l}");
        assert!(seen.insert((table.clone(), seq)), "twice: {l}");
        if let Some(prev) = last_seq.insert(table.clone(), seq) {
            assert!(seq > prev, "{table} out of order: {l}");
        }
        if let Some(at) = l["row"]["at"].as_str() {
            assert!(
                at > last_at.as_str(),
                "not in commit order: {at} after {last_at}"
            );
            last_at = at.to_string();
        }
        assert!(
            l["cursor"]
                .as_str()
                .is_some_and(|c| c.contains(&format!("{table}:{seq}"))),
            "{l}"
        );
    }
}

#[test]
fn an_export_lists_every_row_once_in_commit_order_and_resumes_after_any_line() {
    let root = data_root();
    let run = sleeper();
    for round in 0..2 {
        let mut c = config(root.path());
        c["sealSeconds"] = json!(3600);
        let (mut b, reply) = Broker::spawn(root.path(), c);
        assert_eq!(reply["ok"], json!(true), "{reply}");
        let cap = if round == 0 {
            b.claimed("pm", "pm-1", run.id())
        } else {
            b.bind("pm", "pm-1", run.id())
        };
        for i in 0..5 {
            let r = b.call(
                &cap,
                "message.send",
                json!({"to": "human", "body": format!("r{round} m{i}")}),
            );
            assert_eq!(r["ok"], json!(true), "{r}");
        }
        // A comment cursor: the one evidence table without a timestamp.
        let comment =
            |id: i64| json!({"id": id, "author": "ada", "at": "2026-12-03T10:00:00Z", "body": "c"});
        let r = b.op(
            json!({"op": "recordComments", "business": "acme", "task_ref": "vikunja:3/41",
            "cursor": 10 * (round + 1), "comments": [comment(10 * (round + 1))]}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
        b.close();
    }
    let (code, lines, err) = export(root.path(), None);
    assert_eq!(code, 0, "{err}");
    check_stream(&lines);
    let exported: HashSet<(String, i64)> = lines
        .iter()
        .map(|l| {
            (
                l["table"].as_str().unwrap().to_string(),
                l["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(exported, all_rows(root.path()));
    assert!(exported.iter().any(|(t, _)| t == "task_comment_cursors"));
    // Closed brokers sealed everything: every line names its seal, and
    // the seals come in order.
    let seals: Vec<i64> = lines
        .iter()
        .map(|l| l["seal"].as_i64().expect("sealed"))
        .collect();
    assert!(seals.windows(2).all(|w| w[0] <= w[1]), "{seals:?}");
    // (Each start may seal what it finds at once, racing the first
    // requests: two runs make two seals or more.)
    let newest: i64 = rusqlite::Connection::open(root.path().join("bus/seals.sqlite"))
        .and_then(|c| c.query_row("SELECT max(seq) FROM seals", [], |r| r.get(0)))
        .expect("seals");
    assert!(newest >= 2);
    assert_eq!(seals.last(), Some(&newest));
    // The cursor-less row comes after the timestamped rows of its seal.
    for (i, l) in lines.iter().enumerate() {
        if l["table"] == "task_comment_cursors" {
            let next = lines.get(i + 1);
            assert!(
                next.is_none_or(|n| n["seal"] != l["seal"] || n["table"] == "task_comment_cursors"),
                "{l}"
            );
        }
    }
    // Resuming after any line gives exactly the lines after it.
    for i in [0, 1, lines.len() / 2, lines.len() - 2, lines.len() - 1] {
        let cursor = lines[i]["cursor"].as_str().expect("cursor");
        let (code, rest, err) = export(root.path(), Some(cursor));
        assert_eq!(code, 0, "{err}");
        assert_eq!(rest, lines[i + 1..].to_vec(), "after line {i}");
    }
}

/// A running `export --follow` whose lines a thread collects.
struct Follower {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    fn start(root: &Path, after: Option<&str>) -> Follower {
        let mut cmd = Command::new(bin("mosaic-bus"));
        cmd.arg("export")
            .arg("--data-root")
            .arg(root)
            .arg("--follow");
        if let Some(a) = after {
            cmd.arg("--after").arg(a);
        }
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn export");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            // Only complete lines count: a line cut by a kill is dropped,
            // as a shipper drops it.
            let mut r = BufReader::new(stdout);
            let mut buf = String::new();
            while let Ok(n) = r.read_line(&mut buf) {
                if n == 0 || !buf.ends_with('\n') {
                    break;
                }
                let v: Value = serde_json::from_str(buf.trim_end()).expect("JSON line");
                sink.lock().expect("lines").push(v);
                buf.clear();
            }
        });
        Follower {
            child: KillOnDrop(child),
            lines,
            reader: Some(reader),
        }
    }

    /// Kills it (SIGKILL, no goodbye) and returns every complete line.
    fn kill(mut self) -> Vec<Value> {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
        if let Some(r) = self.reader.take() {
            r.join().expect("reader");
        }
        let lines = self.lines.lock().expect("lines").clone();
        lines
    }

    fn message_ids(&self) -> HashSet<String> {
        ids(&self.lines.lock().expect("lines"))
    }
}

fn ids(lines: &[Value]) -> HashSet<String> {
    lines
        .iter()
        .filter(|l| l["table"] == "messages")
        .filter_map(|l| l["row"]["id"].as_str().map(str::to_string))
        .collect()
}

/// Sends from `clients` threads until stopped; the ids the broker acknowledged.
fn load(socket: &Path, cap: &str, clients: usize, stop: Arc<AtomicBool>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    for c in 0..clients {
        let (socket, cap, stop, tx) = (
            socket.to_path_buf(),
            cap.to_string(),
            stop.clone(),
            tx.clone(),
        );
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let req = json!({"cap": cap, "verb": "message.send",
                    "args": {"to": "human", "body": format!("client {c} message {i}")}});
                let r = raw_request(&socket, format!("{req}\n").as_bytes());
                if r["ok"] == json!(true) {
                    tx.send(r["result"]["id"].as_str().expect("id").to_string())
                        .expect("send id");
                }
                i += 1;
            }
        });
    }
    rx
}

fn boot(root: &Path) -> Broker {
    let mut c = config(root);
    c["sealSeconds"] = json!(1);
    let (b, reply) = Broker::spawn(root, c);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    b
}

#[test]
fn follow_under_load_gives_every_acknowledged_send_once_across_restarts_of_both() {
    let root = data_root();
    let run = sleeper();
    let mut b = boot(root.path());
    let cap = b.claimed("pm", "pm-1", run.id());
    let f1 = Follower::start(root.path(), None);

    // Load, then the exporter dies mid-stream.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = load(&b.socket, &cap, 8, stop.clone());
    let mut all_acked: HashSet<String> = HashSet::new();
    let wait_for = |f: &Follower, n: usize| {
        let end = Instant::now() + Duration::from_secs(60);
        while f.message_ids().len() < n {
            assert!(
                Instant::now() < end,
                "export fell behind: {}",
                f.message_ids().len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(&f1, 300);
    let first = f1.kill();
    all_acked.extend(acked.try_iter());
    let cursor = first.last().expect("lines")["cursor"]
        .as_str()
        .expect("cursor")
        .to_string();

    // It comes back with its cursor while the load goes on.
    let f2 = Follower::start(root.path(), Some(&cursor));
    wait_for(&f2, 300);

    // The broker restarts under the exporter.
    stop.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    all_acked.extend(acked.try_iter());
    b.close();
    let mut b = boot(root.path());
    let cap = b.bind("pm", "pm-1", run.id());
    let stop = Arc::new(AtomicBool::new(false));
    let acked = load(&b.socket, &cap, 8, stop.clone());
    let end = Instant::now() + Duration::from_secs(60);
    while f2.message_ids().len() < 600 {
        assert!(
            Instant::now() < end,
            "export stalled after the broker restarted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    all_acked.extend(acked.try_iter());
    b.close();

    // Everything acknowledged comes out, then nothing more.
    let before_kill = ids(&first);
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let got: HashSet<String> = f2.message_ids().union(&before_kill).cloned().collect();
        if all_acked.is_subset(&got) {
            break;
        }
        assert!(
            Instant::now() < end,
            "{} acknowledged sends never exported",
            all_acked.difference(&got).count()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The close's last seal comes through too (rows go out once, sealed or not).
    std::thread::sleep(Duration::from_millis(600));
    let second = f2.kill();

    let mut stream = first.clone();
    stream.extend(second.iter().cloned());
    check_stream(&stream);
    // Every acknowledged send exactly once (check_stream: no row twice).
    let exported = ids(&stream);
    assert!(all_acked.is_subset(&exported));
    assert!(all_acked.len() >= 600, "{}", all_acked.len());
    // And every row of the store: the followers missed nothing.
    let rows: HashSet<(String, i64)> = stream
        .iter()
        .map(|l| {
            (
                l["table"].as_str().unwrap().to_string(),
                l["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, all_rows(root.path()));
    // Rows exported before their seal say null; a fresh export names the
    // seal of every row, the same rows in the same order.
    let (code, fresh, err) = export(root.path(), None);
    assert_eq!(code, 0, "{err}");
    let key = |l: &Value| (l["table"].clone(), l["seq"].clone());
    assert_eq!(
        fresh.iter().map(key).collect::<Vec<_>>(),
        stream.iter().map(key).collect::<Vec<_>>()
    );
    assert!(fresh.iter().all(|l| l["seal"].is_i64()));
    let by_row: BTreeMap<(String, i64), &Value> = fresh
        .iter()
        .map(|l| {
            (
                (
                    l["table"].as_str().unwrap().to_string(),
                    l["seq"].as_i64().unwrap(),
                ),
                &l["seal"],
            )
        })
        .collect();
    for l in &stream {
        if !l["seal"].is_null() {
            let k = (
                l["table"].as_str().unwrap().to_string(),
                l["seq"].as_i64().unwrap(),
            );
            assert_eq!(&l["seal"], by_row[&k], "{l}");
        }
    }
}

#[test]
fn a_bad_cursor_or_command_line_or_no_store_refuses() {
    let root = data_root();
    let (code, lines, err) = export(root.path(), None);
    assert_eq!((code, lines.len()), (2, 0));
    assert_eq!(err.trim(), r#"{"error":"store-missing"}"#);
    let mut b = Broker::start(root.path());
    let run = sleeper();
    b.claimed("pm", "pm-1", run.id());
    b.close();
    for bad in [
        "",
        "x",
        "events",
        "events:",
        "events:x",
        "nosuch:1",
        "events:1,events:2",
        "events:1;messages:2",
        "meta:1",
    ] {
        let (code, lines, err) = export(root.path(), Some(bad));
        assert_eq!(code, 2, "{bad:?}");
        assert!(lines.is_empty());
        assert_eq!(err.trim(), r#"{"error":"export-cursor"}"#, "{bad:?}");
    }
    let p = root.path().to_str().expect("utf-8");
    for args in [
        vec!["export"],
        vec!["export", "--data-root", p, "extra"],
        vec!["export", "--data-root", p, "--follow", "--follow"],
        vec!["export", "--data-root", p, "--after"],
        vec!["export", "--data-root", p, "--anchor", "1:00"],
    ] {
        let out = Command::new(bin("mosaic-bus"))
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            r#"{"error":"usage"}"#
        );
    }
}

/// The shipping wrapper of docs/operations.md (`systemd/mosaic-export-to-file`):
/// killed at any point, even with a line cut short, it resumes from the
/// file it keeps, so the file holds every row exactly once.
#[test]
fn the_shipping_wrapper_resumes_from_its_own_file_after_a_kill_and_a_cut_line() {
    assert!(
        Path::new("/usr/bin/jq").exists() || Command::new("jq").arg("--version").output().is_ok(),
        "the wrapper needs jq (it is in this machine's image)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/mosaic-export-to-file");
    let root = data_root();
    let file = root.path().join("evidence.jsonl");
    let path = format!(
        "{}:{}",
        mosaic_tests::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run_wrapper = || {
        KillOnDrop(
            Command::new("sh")
                .arg(&script)
                .arg(root.path())
                .arg(&file)
                .env("PATH", &path)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("wrapper"),
        )
    };
    let lines_in = |f: &Path| -> Vec<Value> {
        // Complete lines only: the cut one stays until the wrapper drops it.
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str(l.trim_end()).expect("JSON line"))
            .collect()
    };
    let wait_all = |want: usize| {
        let end = Instant::now() + Duration::from_secs(60);
        while lines_in(&file).len() < want {
            assert!(Instant::now() < end, "the wrapper fell behind");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let run = sleeper();
    let grow = |round: usize| {
        let mut b = Broker::start(root.path());
        let cap = if round == 0 {
            b.claimed("pm", "pm-1", run.id())
        } else {
            b.bind("pm", "pm-1", run.id())
        };
        for i in 0..20 {
            let r = b.call(
                &cap,
                "message.send",
                json!({"to": "human", "body": format!("r{round} {i}")}),
            );
            assert_eq!(r["ok"], json!(true));
        }
        b.close();
    };
    grow(0);
    let w = run_wrapper();
    wait_all(all_rows(root.path()).len());
    drop(w);
    // A crash in the middle of a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, br#"{"table":"messages","seq":99"#))
        .expect("cut line");
    grow(1);
    let w = run_wrapper();
    wait_all(all_rows(root.path()).len());
    std::thread::sleep(Duration::from_millis(300));
    drop(w);
    let text = std::fs::read_to_string(&file).expect("file");
    assert!(
        text.ends_with('\n') && !text.contains("\"seq\":99{"),
        "the cut line is gone"
    );
    let lines = lines_in(&file);
    check_stream(&lines);
    let rows: HashSet<(String, i64)> = lines
        .iter()
        .map(|l| {
            (
                l["table"].as_str().unwrap().to_string(),
                l["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, all_rows(root.path()));
    assert_eq!(rows.len(), lines.len());
}
