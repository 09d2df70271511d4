//! Shared setup of `usage.rs` and `usage_transcripts.rs`.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Text that must never leave a transcript (not in a reply, the store or
/// the log).
pub const SECRET: &str = "transcript-secret-7f3a";

pub struct Env {
    pub root: tempfile::TempDir,
    pub files: tempfile::TempDir,
    pub b: Broker,
    pub pm: String,
    pub _procs: Vec<Sleeper>,
}

impl Env {
    pub fn new() -> Env {
        let root = data_root();
        let files = tempfile::tempdir().expect("tempdir");
        let mut b = Broker::start(root.path());
        let p = sleeper();
        let pm = b.bind("pm", "run-pm", p.id());
        res(&b.call(&pm, "role.claim", Value::Null));
        Env {
            root,
            files,
            b,
            pm,
            _procs: vec![p],
        }
    }

    /// Binds `role` as `run` with `harness`, a transcript and an account,
    /// and claims the role.
    pub fn run(
        &mut self,
        role: &str,
        run: &str,
        harness: &str,
        transcript: Option<&Path>,
        account: Option<&str>,
    ) -> String {
        let p = sleeper();
        let mut rec = json!({"business": "acme", "role": role, "run": run, "harness": harness,
                             "pid": p.id(), "startTime": start_time(p.id())});
        if let Some(t) = transcript {
            rec["transcript"] = json!(t.to_str().unwrap());
        }
        if let Some(a) = account {
            rec["account"] = json!(a);
        }
        let r = self.b.op(json!({"op": "bindLaunch", "record": rec}));
        assert_eq!(r["ok"], json!(true), "bind: {r}");
        let cap = r["launch"]["cap"].as_str().unwrap().to_string();
        res(&self.b.call(&cap, "role.claim", Value::Null));
        self._procs.push(p);
        cap
    }

    /// A message from the pm to `role`, delivered to `cap`'s run: a turn.
    pub fn turn(&self, role: &str, cap: &str) -> String {
        let sent = res(&self
            .b
            .call(&self.pm, "message.send", json!({"to": role, "body": "go"})))
        .clone();
        let got = res(&self.b.call(cap, "message.receive", Value::Null)).clone();
        let id = sent["id"].as_str().unwrap().to_string();
        assert!(
            got["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == json!(id)),
            "{got}"
        );
        id
    }

    pub fn begin(&self, cap: &str, turn: &str) -> Value {
        res(&self.b.call(cap, "usage.begin", json!({"turn": turn}))).clone()
    }

    pub fn end(&self, cap: &str, turn: &str) -> Value {
        res(&self.b.call(cap, "usage.end", json!({"turn": turn}))).clone()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.files.path().join(name)
    }

    /// Every usage record of `turn`: (kind, source, account, input, output,
    /// cache_write, cache_read, code, provider, model).
    pub fn records(&self, turn: &str) -> Vec<Value> {
        let conn = db(self.root.path());
        let mut st = conn
            .prepare(
                "SELECT kind, source, account, input, output, cache_write, cache_read, code,
                   provider, model, baseline FROM usage_records WHERE turn = ?1 ORDER BY seq",
            )
            .unwrap();
        let rows = st
            .query_map([turn], |r| {
                Ok(json!({
                    "kind": r.get::<_, String>(0)?, "source": r.get::<_, String>(1)?,
                    "account": r.get::<_, Option<String>>(2)?,
                    "input": r.get::<_, Option<i64>>(3)?, "output": r.get::<_, Option<i64>>(4)?,
                    "cacheWrite": r.get::<_, Option<i64>>(5)?, "cacheRead": r.get::<_, Option<i64>>(6)?,
                    "code": r.get::<_, Option<String>>(7)?,
                    "provider": r.get::<_, Option<String>>(8)?, "model": r.get::<_, Option<String>>(9)?,
                    "baseline": r.get::<_, Option<String>>(10)?,
                }))
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    }
}

pub fn append(p: &Path, lines: &[Value]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

/// A Claude Code reply line.
pub fn cc(id: &str, usage: [u64; 4], stop: Value, block: &str) -> Value {
    json!({"type": "assistant", "sessionId": "s", "message": {
        "id": id, "model": "claude-sonnet-4-5", "role": "assistant", "stop_reason": stop,
        "content": [{"type": block, "text": SECRET}],
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                  "cache_creation_input_tokens": usage[2], "cache_read_input_tokens": usage[3]}}})
}

pub fn cc_user() -> Value {
    json!({"type": "user", "message": {"role": "user", "content": SECRET}})
}

/// A pi reply entry.
pub fn pi(id: &str, model: &str, usage: [u64; 4], stop: &str) -> Value {
    json!({"type": "message", "id": id, "parentId": null, "timestamp": "2026-01-01T00:00:00Z",
           "message": {"role": "assistant", "content": [{"type": "text", "text": SECRET}],
                       "provider": "openai", "model": model, "stopReason": stop,
                       "usage": {"input": usage[0], "output": usage[1], "cacheWrite": usage[2],
                                 "cacheRead": usage[3], "totalTokens": 0}}})
}

pub fn known(
    turn: &str,
    source: &str,
    account: Value,
    model: &str,
    provider: &str,
    n: [Value; 4],
) -> Value {
    json!({"turn": turn, "outcomes": [{"source": source, "known": true, "provider": provider,
           "model": model, "account": account, "input": n[0], "output": n[1],
           "cacheWrite": n[2], "cacheRead": n[3]}]})
}

pub fn unknown(turn: &str, source: &str, code: &str) -> Value {
    json!({"turn": turn, "outcomes": [{"source": source, "known": false, "code": code}]})
}

pub fn baselined(turn: &str, source: &str) -> Value {
    json!({"turn": turn, "sources": [{"source": source, "baseline": true}]})
}

/// The baseline is in the store before `usage.begin` answers: a broker
/// restarted between a turn's begin and its end (the run bound again with
/// its record) counts the turn against it.
/// Binds pm (`run-pm`) and dev (`run-dev`: Claude Code, transcript `t`,
/// account `acct-r`) to the two sleepers, as a restarted broker binds them
/// again; their capabilities.
pub fn bind_pm_and_dev(b: &mut Broker, procs: &[Sleeper], t: &Path) -> (String, String) {
    let pm = b.bind("pm", "run-pm", procs[0].id());
    let dev_rec = json!({"business": "acme", "role": "dev", "run": "run-dev",
        "harness": "claude-code", "pid": procs[1].id(), "startTime": start_time(procs[1].id()),
        "transcript": t.to_str().unwrap(), "account": "acct-r"});
    let r = b.op(json!({"op": "bindLaunch", "record": dev_rec}));
    let dev = r["launch"]["cap"].as_str().expect("cap").to_string();
    (pm, dev)
}

/// Both claim their roles and pm sends dev a message, which dev receives:
/// the turn's id.
pub fn delivered_turn(b: &Broker, pm: &str, dev: &str) -> String {
    res(&b.call(pm, "role.claim", Value::Null));
    res(&b.call(dev, "role.claim", Value::Null));
    let sent = res(&b.call(pm, "message.send", json!({"to": "dev", "body": "go"}))).clone();
    res(&b.call(dev, "message.receive", Value::Null));
    sent["id"].as_str().unwrap().to_string()
}

/// A Claude Code transcript line as the harness writes it: the envelope
/// (`parentUuid`, `isSidechain`, `sessionId`, `requestId`, `uuid`, ...)
/// around one content block of a reply whose usage repeats on each line.
pub fn cc_line(
    session: &str,
    id: &str,
    usage: [u64; 4],
    stop: Value,
    block: &str,
    side: bool,
) -> Value {
    json!({"parentUuid": null, "isSidechain": side, "userType": "external", "cwd": "/w",
           "sessionId": session, "version": "2.1.4", "gitBranch": "main",
           "requestId": format!("req_{id}"), "type": "assistant", "uuid": format!("u-{id}-{block}"),
           "timestamp": "2026-12-01T10:00:00.000Z",
           "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-opus-4-5",
                       "content": [{"type": block, "text": SECRET}], "stop_reason": stop,
                       "stop_sequence": null,
                       "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                                 "cache_creation_input_tokens": usage[2],
                                 "cache_read_input_tokens": usage[3],
                                 "cache_creation": {"ephemeral_5m_input_tokens": usage[2],
                                                    "ephemeral_1h_input_tokens": 0},
                                 "service_tier": "standard"}}})
}

/// The broker's peak resident size so far (`VmHWM`), in KiB.
pub fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM")
}

/// A user line `{"type":"user","pad":[0,0,…]}` of `len` bytes and its
/// newline: no reply, and as a JSON tree millions of values.
pub fn pad_line(len: usize) -> Vec<u8> {
    let mut l = Vec::with_capacity(len + 1);
    l.extend_from_slice(br#"{"type":"user","pad":[0"#);
    while l.len() + 2 + 2 <= len {
        l.extend_from_slice(b",0");
    }
    l.extend_from_slice(b"]}\n");
    l
}

/// `usage.end {turn}` from `n` connections at once; their replies.
pub fn ends_at_once(socket: &Path, cap: &str, turn: &str, n: usize) -> Vec<Value> {
    let line = format!(
        "{}\n",
        json!({"cap": cap, "verb": "usage.end", "args": {"turn": turn}})
    );
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    use std::io::Read;
                    let mut c = std::os::unix::net::UnixStream::connect(socket).expect("connect");
                    // Only a hang reaches this.
                    c.set_read_timeout(Some(std::time::Duration::from_secs(120)))
                        .expect("timeout");
                    c.write_all(line.as_bytes()).expect("send");
                    c.shutdown(std::net::Shutdown::Write).expect("half-close");
                    let mut out = String::new();
                    c.read_to_string(&mut out).expect("reply");
                    serde_json::from_str::<Value>(out.trim()).expect("reply is JSON")
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().expect("call")).collect()
    })
}
