//! `runtime.credentials.use(instance, service, callback)` (3i L241, issue
//! 30 item 6): a trusted in-process adapter reaches a loaded token through
//! the embedded runtime, the callback alone sees it, and it shows up in no
//! reply, log line or row. A real broker started in process on a real
//! store, with its real socket.

mod common;

use mosaic_bus::client::Client;
use mosaic_bus::config::{BootConfig, LaunchRecord};
use mosaic_bus::error::Code;
use mosaic_bus::runtime::start_with;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const GITEA: &str = "gitea-use-token-0123456789abcdef";
const VIKUNJA: &str = "vikunja-use-token-ABCDEFGHIJKLMN";
const SYNC: &str = "sync-use-token-ZYXWVUTSRQPONMLK";

fn token_file(dir: &Path, name: &str, token: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, token).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    p.to_str().expect("utf-8").to_string()
}

fn start_time() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(19)
        .and_then(|f| f.parse().ok())
        .expect("field 22")
}

/// Every log line the broker writes in this process, at every level.
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_trusted_adapter_uses_a_loaded_token_through_the_runtime_and_nothing_shows_it() {
    let logs = Logs::default();
    let sink = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();
    let dir = common::private_root();
    let secrets = tempfile::tempdir().expect("tempdir");
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    let cfg = BootConfig::from_json(json!({
        "dataRoot": dir.path().to_str().expect("utf-8"),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {
                "pm": {"authority": send, "credentials": {
                    "gitea": {"file": token_file(secrets.path(), "g", GITEA), "rotateBy": "2099-01-01"},
                    "vikunja": {"file": token_file(secrets.path(), "v", VIKUNJA), "expires": "2020-01-01"}
                }},
                "cto": {"authority": send}
            },
            "sync": {"vikunja": {"file": token_file(secrets.path(), "s", SYNC), "expires": "2099-01-01"}}
        }},
    }))
    .expect("config");
    let rt = start_with(cfg, None).expect("start");
    let creds = rt.credentials();

    // The callback gets the token; what it returns comes back.
    let seen = creds
        .use_token("acme/pm", "gitea", |token| {
            Ok::<_, ()>(json!({"length": token.len(), "is_it": token == GITEA}))
        })
        .expect("use");
    assert_eq!(seen, json!({"length": GITEA.len(), "is_it": true}));
    // The tracker sync identity is `business/@sync`.
    let sync = creds.use_token("acme/@sync", "vikunja", |t| Ok::<_, ()>(t == SYNC));
    assert_eq!(sync, Ok(true));
    // Refusals, each a fixed code that names no token.
    let refusals: Vec<(Result<Value, Code>, Code)> = vec![
        // A returned value holding a loaded token (any of them).
        (
            creds.use_token("acme/pm", "gitea", |t| Ok::<_, ()>(json!({"echo": t}))),
            Code::KnownToken,
        ),
        (
            creds.use_token("acme/@sync", "vikunja", |_| {
                Ok::<_, ()>(json!({"note": format!("see {GITEA}")}))
            }),
            Code::KnownToken,
        ),
        (
            creds.use_token("acme/pm", "gitea", |t| {
                Ok::<_, ()>(json!({ t.to_string(): 1 }))
            }),
            Code::KnownToken,
        ),
        // The callback's own error, whatever it says.
        (
            creds.use_token("acme/pm", "gitea", |t| {
                Err::<Value, _>(format!("401 for {t}"))
            }),
            Code::ServiceFailed,
        ),
        // A Vikunja token past its expiry date.
        (
            creds.use_token("acme/pm", "vikunja", |_| Ok::<_, ()>(Value::Null)),
            Code::CredentialExpired,
        ),
        // No such credential, no such service.
        (
            creds.use_token("acme/cto", "gitea", |_| Ok::<_, ()>(Value::Null)),
            Code::UnknownRole,
        ),
        (
            creds.use_token("beta/pm", "gitea", |_| Ok::<_, ()>(Value::Null)),
            Code::UnknownRole,
        ),
        (
            creds.use_token("acme/pm", "github", |_| Ok::<_, ()>(Value::Null)),
            Code::InvalidRequest,
        ),
    ];
    for (got, want) in refusals {
        assert_eq!(got, Err(want));
    }

    // The broker is serving meanwhile, and its own checks still know the
    // tokens: a run can't send one.
    let rec = LaunchRecord::from_json(json!({
        "business": "acme", "role": "pm", "run": "pm-1", "harness": "pi",
        "pid": std::process::id(), "startTime": start_time()}))
    .expect("record");
    let launch = rt.bind_launch(rec).expect("bind");
    let pm = Client::new(
        rt.socket_path(),
        launch["cap"].as_str().expect("cap").to_string(),
    );
    pm.call("role.claim", Value::Null).expect("claim");
    assert_eq!(
        pm.call("message.send", json!({"to": "cto", "body": GITEA}))
            .unwrap_err()
            .code,
        "known-token"
    );
    rt.close();

    // Nothing logged or stored holds a token.
    let logged = logs.0.lock().expect("logs").clone();
    assert!(!logged.is_empty(), "the broker logs in this process");
    let bus = dir.path().join("bus");
    let mut stored = Vec::new();
    for name in ["bus.sqlite", "bus.sqlite-wal"] {
        stored.extend(std::fs::read(bus.join(name)).unwrap_or_default());
    }
    assert!(!stored.is_empty());
    for t in [GITEA, VIKUNJA, SYNC] {
        assert!(
            !stored.windows(t.len()).any(|w| w == t.as_bytes()),
            "{t} in the store"
        );
        assert!(
            !logged.windows(t.len()).any(|w| w == t.as_bytes()),
            "{t} in the log"
        );
    }
}
