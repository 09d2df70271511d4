//! `usage.end` on a long Claude Code transcript: what one turn's end costs
//! the broker's blocking worker when the session's history is tens of MB.
//!
//! `cargo run --release -p mosaic-bench --example bench_usage [-- --mb N --rounds R]`
//!
//! It writes a transcript of N MB (default 50) of Claude Code turns (user
//! prompts, streamed replies asking for tools, tool results with terminal
//! escapes, closing replies), takes its baseline with `usage::begin`, then
//! times `usage::end` in two cases:
//!
//! - `append`: the session file gains one turn of about 100 KB (four
//!   replies), the everyday case;
//! - `resume`: the transcript is a directory and the turn is a resumed
//!   session, a new file that starts with a copy of the whole history (its
//!   ids all in the history) and ends with the same 100 KB turn (left
//!   out, `null`, when that copy passes the 64 MiB one turn may append).
//!
//! The floor, measured in the same run and interleaved round by round, is a
//! plain read + SHA-256 of every byte of the transcript after the turn:
//! `usage.end` must at least hash the baselined bytes (to see a rewrite)
//! and read the appended ones. Each figure is the median of R rounds
//! (default 5); the answer of every timed end is checked against the turn's
//! known sums, so a fast wrong answer can't pass for a figure. Prints one
//! JSON object.

use mosaic_bus::budget::Budget;
use mosaic_bus::transcripts as usage;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("bench_usage: {what}: {e}");
    std::process::exit(1)
}

/// A small deterministic generator, so every run writes the same bytes.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// About `len` bytes of word-like text.
    fn text(&mut self, len: usize) -> String {
        const WORDS: &[&str] = &[
            "the",
            "broker",
            "reads",
            "each",
            "line",
            "of",
            "transcript",
            "and",
            "counts",
            "tokens",
            "fn",
            "main",
            "let",
            "mut",
            "cargo",
            "test",
            "passed",
            "error[E0308]:",
            "mismatched",
            "types",
            "src/usage/mod.rs:42",
            "{",
            "}",
            "=>",
            "Ok(())",
            "assert_eq!",
            "warning:",
            "unused",
            "variable",
            "message",
            "reply",
            "session",
            "commit",
        ];
        let mut s = String::with_capacity(len + 16);
        while s.len() < len {
            s.push_str(WORDS[(self.next() as usize) % WORDS.len()]);
            s.push(if self.next().is_multiple_of(11) {
                '\n'
            } else {
                ' '
            });
        }
        s
    }

    /// A message id shaped like the API's (`msg_01` and 22 letters).
    fn id(&mut self) -> String {
        const ALPHA: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut s = String::from("msg_01");
        for _ in 0..22 {
            s.push(ALPHA[(self.next() as usize) % ALPHA.len()] as char);
        }
        s
    }
}

fn envelope(kind: &str, n: u64, message: serde_json::Value) -> String {
    json!({"parentUuid": format!("u-{}", n.wrapping_sub(1)), "isSidechain": false,
           "userType": "external", "cwd": "/work/project", "sessionId": "s1",
           "version": "2.1.4", "gitBranch": "main", "type": kind, "uuid": format!("u-{n}"),
           "timestamp": "2026-12-01T10:00:00.000Z", "message": message})
    .to_string()
}

/// One assistant line of reply `id`.
fn reply(n: u64, id: &str, block: serde_json::Value, stop: Option<&str>, out: u64) -> String {
    envelope(
        "assistant",
        n,
        json!({"id": id, "type": "message", "role": "assistant", "model": "claude-opus-4-5",
               "content": [block], "stop_reason": stop, "stop_sequence": null,
               "usage": {"input_tokens": 3, "output_tokens": out,
                         "cache_creation_input_tokens": 200, "cache_read_input_tokens": 40000,
                         "cache_creation": {"ephemeral_5m_input_tokens": 200,
                                            "ephemeral_1h_input_tokens": 0},
                         "service_tier": "standard"}}),
    )
}

/// What one turn wrote and what it must be charged.
struct Turn {
    bytes: Vec<u8>,
    replies: u64,
    output: u64,
}

/// One turn of about 100 KB: a prompt, three replies each asking for a tool
/// (thinking, then the tool call) with a tool result of about 25 KB, and a
/// closing reply.
fn turn(g: &mut Lcg, n: &mut u64) -> Turn {
    let mut lines = Vec::new();
    let mut next = || {
        *n += 1;
        *n
    };
    lines.push(envelope(
        "user",
        next(),
        json!({"role": "user", "content": g.text(1_000)}),
    ));
    let mut output = 0;
    for _ in 0..3 {
        let id = g.id();
        lines.push(reply(
            next(),
            &id,
            json!({"type": "thinking", "thinking": g.text(1_500), "signature": g.text(300)}),
            None,
            12,
        ));
        lines.push(reply(
            next(),
            &id,
            json!({"type": "tool_use", "id": format!("toolu_{}", g.next()), "name": "Bash",
                   "input": {"command": "cargo test -p mosaic-bus"}}),
            Some("tool_use"),
            80,
        ));
        output += 80;
        // Terminal output: colour escapes become `\u001b` in the JSON.
        let result = g
            .text(25_000)
            .replace("passed", "\u{1b}[32mpassed\u{1b}[0m");
        lines.push(envelope(
            "user",
            next(),
            json!({"role": "user", "content": [{"type": "tool_result",
                   "tool_use_id": "toolu_x", "content": result}]}),
        ));
    }
    let id = g.id();
    lines.push(reply(
        next(),
        &id,
        json!({"type": "text", "text": g.text(2_000)}),
        Some("end_turn"),
        400,
    ));
    output += 400;
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend_from_slice(l.as_bytes());
        bytes.push(b'\n');
    }
    Turn {
        bytes,
        replies: 4,
        output,
    }
}

fn write(p: &Path, bytes: &[u8], append: bool) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(p)
        .unwrap_or_else(|e| fail("open", e));
    f.write_all(bytes).unwrap_or_else(|e| fail("write", e));
}

/// The floor: a plain read + SHA-256 of every byte of `files`.
fn floor(files: &[PathBuf]) -> f64 {
    let t = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    for p in files {
        let mut h = Sha256::new();
        let mut f = std::fs::File::open(p).unwrap_or_else(|e| fail("open", e));
        loop {
            let k = f.read(&mut buf).unwrap_or_else(|e| fail("read", e));
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
        }
        std::hint::black_box(h.finalize());
    }
    t.elapsed().as_secs_f64() * 1e3
}

/// One timed `usage.end`, its answer checked.
fn end(path: &Path, base: &usage::transcript::Baseline, want: &Turn) -> f64 {
    let t = Instant::now();
    let r = usage::end("claude-code", Some(path), Some(base), &Budget::start());
    let ms = t.elapsed().as_secs_f64() * 1e3;
    match r {
        Ok(r) if r.tokens.output == want.output && r.tokens.input == 3 * want.replies => ms,
        other => fail("usage.end answered", format!("{other:?}")),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn size(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// The `resume` case: its transcript's size, and the medians of its end
/// and floor.
fn resume(dir: &tempfile::TempDir, history: &[u8], last: &Turn, rounds: usize) -> (u64, f64, f64) {
    let sessions = dir.path().join("project");
    std::fs::create_dir(&sessions).unwrap_or_else(|e| fail("mkdir", e));
    let s1 = sessions.join("s1.jsonl");
    write(&s1, history, false);
    let rbase = usage::begin("claude-code", Some(&sessions), &Budget::start())
        .unwrap_or_else(|c| fail("begin", c));
    let s2 = sessions.join("s2.jsonl");
    write(&s2, history, false);
    write(&s2, &last.bytes, true);
    let rfiles = [s1, s2];
    let (mut ends, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        floors.push(floor(&rfiles));
        ends.push(end(&sessions, &rbase, last));
    }
    (size(&rfiles), median(ends), median(floors))
}

fn main() {
    let mut mb = 50u64;
    let mut rounds = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), v) {
            ("--mb", Some(v)) if v > 0 => mb = v,
            ("--rounds", Some(v)) if v > 0 => rounds = v as usize,
            _ => fail("usage", "bench_usage [--mb N] [--rounds R]"),
        }
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
    let mut g = Lcg(7);
    let mut n = 0u64;
    let mut history = Vec::with_capacity((mb as usize + 1) << 20);
    while (history.len() as u64) < mb << 20 {
        history.extend_from_slice(&turn(&mut g, &mut n).bytes);
    }
    let last = turn(&mut g, &mut n);

    // `append`: the session file gains one turn.
    let file = dir.path().join("s1.jsonl");
    write(&file, &history, false);
    let base = usage::begin("claude-code", Some(&file), &Budget::start())
        .unwrap_or_else(|c| fail("begin", c));
    write(&file, &last.bytes, true);
    let files = [file.clone()];
    let (mut ends, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        floors.push(floor(&files));
        ends.push(end(&file, &base, &last));
    }
    let (append_end, append_floor) = (median(ends), median(floors));

    // `resume`: a directory; the turn is a new file that copies the history
    // (only while that copy fits in what one turn may append).
    let copy = (history.len() + last.bytes.len()) as u64;
    let resume =
        (copy <= usage::transcript::APPENDED_MAX).then(|| resume(&dir, &history, &last, rounds));

    let fig = |end: f64, floor: f64| {
        json!({"end_ms": (end * 10.0).round() / 10.0, "floor_ms": (floor * 10.0).round() / 10.0,
               "ratio": (end / floor * 100.0).round() / 100.0})
    };
    let out = json!({
        "history_bytes": history.len(),
        "turn_bytes": last.bytes.len(),
        "rounds": rounds,
        "append": {"transcript_bytes": size(&files), "figures": fig(append_end, append_floor)},
        "resume": resume.map(|(bytes, end, floor)| json!({"transcript_bytes": bytes, "figures": fig(end, floor)})),
    });
    println!("{out}");
}
