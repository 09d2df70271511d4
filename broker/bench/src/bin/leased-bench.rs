//! `leased-bench [--iterations N] [--dir DIR]`: mint+consume round trips per
//! second against a real `mosaic-leased` (the binary beside this one), and,
//! in the same run and directory, a bare write+fsync+rename+dir-fsync loop
//! (the floor every durable state change pays). Prints one JSON object.

#![deny(unsafe_op_in_unsafe_fn)]

use mosaic_wire::cli;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn request(sock: &Path, v: &Value) -> Result<Value, String> {
    let mut s = UnixStream::connect(sock).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut line = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    line.push(b'\n');
    s.write_all(&line).map_err(|e| e.to_string())?;
    s.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.take(64 * 1024)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&out).map_err(|e| e.to_string())?;
    if v["ok"] != json!(true) {
        return Err(format!("refused: {}", v["code"]));
    }
    Ok(v)
}

fn fsync_rename_loop(dir: &Path, n: u32) -> Result<f64, String> {
    let target = dir.join("floor.json");
    let tmp = dir.join(".floor.json.tmp");
    let payload = vec![b'x'; 600];
    let t0 = Instant::now();
    for _ in 0..n {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| e.to_string())?;
        f.write_all(&payload).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
        drop(f);
        std::fs::rename(&tmp, &target).map_err(|e| e.to_string())?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(f64::from(n) / t0.elapsed().as_secs_f64())
}

fn run() -> Result<Value, String> {
    let mut iterations: u32 = 200;
    let mut base = std::env::temp_dir();
    // Not `env::args`: an argument that is not UTF-8 is a usage error, not
    // a panic.
    let mut args = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string().unwrap_or_default());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iterations" => {
                iterations = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("usage")?
            }
            "--dir" => base = PathBuf::from(args.next().ok_or("usage")?),
            _ => return Err("usage: leased-bench [--iterations N] [--dir DIR]".into()),
        }
    }
    let dir = base.join(format!("leased-bench-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
    let result = measure(&dir, iterations);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(dir: &Path, iterations: u32) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let daemon = exe.parent().ok_or("no exe dir")?.join("mosaic-leased");
    let sock = dir.join("leased.sock");
    let mut child = Command::new(&daemon)
        .arg("--socket")
        .arg(&sock)
        .arg("--state")
        .arg(dir.join("state.json"))
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn mosaic-leased: {e}"))?;
    let outcome = (|| {
        let until = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&sock).is_err() {
            if Instant::now() > until {
                return Err("daemon did not start".to_string());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let reg = request(
            &sock,
            &json!({"action":"register_anchor","runtime_generation":0}),
        )?;
        let sid = reg["session_id"].as_str().ok_or("no session")?.to_owned();
        let binding = json!({"compaction_epoch":1,"request_epoch":2,
            "h_source":"sha256:aa","h_payload":"sha256:bb","schema_version":1});
        let t0 = Instant::now();
        for _ in 0..iterations {
            let m = request(
                &sock,
                &json!({"action":"mint_token","session_id":sid,"runtime_generation":0,"binding":binding}),
            )?;
            let token = m["token"].as_str().ok_or("no token")?;
            request(
                &sock,
                &json!({"action":"consume_token","session_id":sid,"runtime_generation":0,"token":token}),
            )?;
        }
        let rt = f64::from(iterations) / t0.elapsed().as_secs_f64();
        let floor = fsync_rename_loop(dir, iterations)?;
        Ok(json!({
            "iterations": iterations,
            "mint_consume_round_trips_per_sec": (rt * 10.0).round() / 10.0,
            "fsync_rename_per_sec": (floor * 10.0).round() / 10.0,
            "ratio": (rt / floor * 1000.0).round() / 1000.0,
            "note": "each round trip makes two durable state replacements; ideal ratio 0.5"
        }))
    })();
    // SAFETY: kill(2) on our own child's pid, plain integers.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    outcome
}

const HELP: &str = "\
leased-bench: mint+consume round trips per second against a real mosaic-leased

Usage:
  leased-bench [--iterations N] [--dir DIR]
  leased-bench --help | --version

Runs the mosaic-leased beside it in a directory under DIR (default the
temporary directory) and prints one JSON object; exit 2 with one line on
stderr otherwise.
";

fn main() -> std::process::ExitCode {
    let all: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(ask) = cli::asked(&all) {
        return cli::answer(ask, "leased-bench", env!("CARGO_PKG_VERSION"), HELP);
    }
    let known = |a: &std::ffi::OsString| a == "--iterations" || a == "--dir";
    if let Some(opt) = all
        .iter()
        .step_by(2)
        .find(|a| cli::is_option(a) && !known(a))
    {
        return cli::unknown_option("leased-bench", opt);
    }
    match run() {
        Ok(v) => {
            println!("{v}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", json!({"error": e}));
            std::process::ExitCode::from(2)
        }
    }
}
