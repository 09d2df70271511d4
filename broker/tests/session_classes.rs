//! Which verbs each session class may call, in process: a real temp store,
//! a real `Core`, and the four callers the socket can bind (a role's run, a
//! reader capability, and the human and tester the shims prove). A class
//! that may call a verb never gets a class refusal from it; one that may
//! not gets the spec's code for it.

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The codes that mean "not for this kind of session".
const CLASS_CODES: &[Code] = &[
    Code::HumanRequired,
    Code::AgentRequired,
    Code::ReadOnly,
    Code::TesterRefused,
];

#[derive(Clone, Copy, Debug)]
enum Class {
    Role,
    Reader,
    Human,
    Tester,
}

fn caller(c: Class) -> Caller {
    let business = "acme".to_string();
    match c {
        Class::Role => Caller::Role {
            business,
            role: "pm".into(),
            run: "pm-1".into(),
        },
        Class::Reader => Caller::Reader { business },
        Class::Human => Caller::Human { business },
        Class::Tester => Caller::Tester { business },
    }
}

const NO_ID: &str = "00000000-0000-4000-8000-000000000000";

/// Plausible args for each verb, so the class gate is what decides.
fn args_for(verb: &str) -> Value {
    match verb {
        "role.revoke" => json!({"role": "cto", "decision": NO_ID}),
        "event.emit" => json!({"kind": "action.allowed", "body": {"action": "routine"}}),
        "message.send" => json!({"to": "pm", "body": "[mos test] hello"}),
        "message.read" | "replies" => json!({"id": NO_ID}),
        "decision.raise" => json!({
            "action": "git.merge.protected", "question": "Merge?",
            "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
            "recommendation": "yes", "blocking": false,
        }),
        "decision.resolve" => json!({"id": NO_ID, "choice": "yes"}),
        "decision.seen" | "decision.withdraw" => json!({"id": NO_ID}),
        "trail" => json!({"subject": NO_ID}),
        "decisions" => json!({"list": "recent"}),
        "usage.begin" | "usage.end" => json!({"turn": NO_ID}),
        "spec.read" | "project.files" => json!({"project": "site"}),
        "project.file" => json!({"project": "site", "path": "docs/plan.md"}),
        "project.file.save" => json!({
            "project": "site", "path": "docs/plan.md", "base": "a".repeat(40), "content": "# Plan"
        }),
        "record.write" => json!({"project": "site", "path": "docs/plan.md", "record": "# Plan"}),
        "review.request" => {
            json!({"task_ref": "vikunja:1/1", "commit": "a".repeat(40), "to": "cto"})
        }
        "review.verdict" => json!({
            "task_ref": "vikunja:1/1", "request": NO_ID, "verdict": "approve", "body": "ok"
        }),
        _ => Value::Null,
    }
}

/// What the spec has each class get: `None` when it may call the verb.
fn expected(verb: &str, c: Class) -> Option<Code> {
    use Class::*;
    let role_only = |c| match c {
        Role => None,
        Reader => Some(Code::ReadOnly),
        Human => Some(Code::AgentRequired),
        Tester => Some(Code::TesterRefused),
    };
    match verb {
        "role.claim" | "role.release" | "role.revoke" | "event.emit" | "decision.raise"
        | "requirements" | "review.request" | "review.verdict" | "organization.set"
        | "staff.request" | "spec.read" | "usage.begin" | "usage.end" | "record.write" => {
            role_only(c)
        }
        // Mutations a role, the human and the tester make; never a reader.
        "message.send" | "message.receive" | "message.read" => match c {
            Reader => Some(Code::ReadOnly),
            _ => None,
        },
        // The routed resolver or the human; the tester may not.
        "decision.resolve" | "decision.seen" | "decision.withdraw" | "name.set" => match c {
            Reader => Some(Code::ReadOnly),
            Tester => Some(Code::TesterRefused),
            _ => None,
        },
        // Outside-agent human CLI only; the tester gets L218's
        // tester-refused, as these rows name no code for it.
        "launch.revoke" | "launch.restore" | "project.create" | "project.list"
        | "thread.create" | "thread.list" | "thread.open" | "thread.send" | "thread.messages"
        | "assistant.stop" | "limits" | "limits.set" => match c {
            Human => None,
            Tester => Some(Code::TesterRefused),
            _ => Some(Code::HumanRequired),
        },
        // Human-only rows that name the tester's code: human-required
        // (L214, L216, L273 win over L218's general rule).
        "instances" | "instances.set" | "routes" | "routes.set" | "project.files"
        | "project.file" | "project.file.save" => match c {
            Human => None,
            _ => Some(Code::HumanRequired),
        },
        "trail" | "inbox" | "tasks" | "agents" => None,
        // Human and agent sessions (3i L78); not among a reader's views
        // (L215) nor the tester's (L218).
        "names" => match c {
            Reader => Some(Code::ReadOnly),
            Tester => Some(Code::TesterRefused),
            _ => None,
        },
        "state" | "usage" => match c {
            Tester => Some(Code::TesterRefused),
            _ => None,
        },
        // Human and reader sessions; the tester has the reader's views.
        "replies" | "messages" | "decisions" => match c {
            Role => Some(Code::HumanRequired),
            _ => None,
        },
        // Human and reader sessions: `seal` is the reader's anchor
        // (DESIGN.md, "Seals"); the tester has no business with it.
        "credentials" | "seal" => match c {
            Role => Some(Code::HumanRequired),
            Tester => Some(Code::TesterRefused),
            _ => None,
        },
        other => panic!("no expectation for {other}"),
    }
}

const VERBS: &[&str] = &[
    "role.claim",
    "role.release",
    "role.revoke",
    "event.emit",
    "message.send",
    "message.receive",
    "message.read",
    "decision.raise",
    "decision.resolve",
    "decision.seen",
    "decision.withdraw",
    "launch.revoke",
    "launch.restore",
    "trail",
    "inbox",
    "tasks",
    "agents",
    "requirements",
    "state",
    "replies",
    "messages",
    "decisions",
    "credentials",
    "review.request",
    "review.verdict",
    "project.create",
    "project.list",
    "thread.create",
    "thread.list",
    "thread.open",
    "thread.send",
    "thread.messages",
    "assistant.stop",
    "organization.set",
    "limits",
    "limits.set",
    "instances",
    "instances.set",
    "routes",
    "routes.set",
    "staff.request",
    "spec.read",
    "usage.begin",
    "usage.end",
    "record.write",
    "project.files",
    "project.file",
    "project.file.save",
    "name.set",
    "names",
    "usage",
    "seal",
];

/// The list above is this test's own (it is what the expectations cover);
/// it must name exactly the verbs the build serves, so a new verb can't go
/// untested here.
#[test]
fn the_table_covers_every_served_verb() {
    let mut ours: Vec<&str> = VERBS.to_vec();
    let mut served: Vec<&str> = mosaic_bus::handlers::served_verbs().collect();
    ours.sort_unstable();
    served.sort_unstable();
    assert_eq!(ours, served);
}

#[test]
fn each_session_class_gets_its_verbs_and_the_class_code_for_the_rest() {
    let root = tempfile::tempdir().expect("tempdir");
    let bus = BusDir::acquire(root.path()).expect("acquire");
    let store = Store::open(&bus.db_path()).expect("store");
    let config = BootConfig::from_json(json!({
        "dataRoot": root.path(),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "cto", "delivery": "pm"},
            "roles": {
                "pm": {"authority": {"withinRole": ["message.send"], "crossRole": ["git.merge.protected"]}},
                "cto": {"authority": {"withinRole": ["review.verdict"], "crossRole": []}}
            },
            "vars": {"bus.tester": true}
        }}
    }))
    .expect("config");
    let mut core = Core::new(store, Arc::new(config));
    dispatch(&mut core, &caller(Class::Role), "role.claim", None).expect("claim");
    let mut wrong = Vec::new();
    for verb in VERBS {
        for class in [Class::Role, Class::Reader, Class::Human, Class::Tester] {
            let args = match args_for(verb) {
                Value::Object(m) => Some(m),
                _ => None::<Map<String, Value>>,
            };
            let got = dispatch(&mut core, &caller(class), verb, args).err();
            let got_class = got.filter(|c| CLASS_CODES.contains(c));
            let want = expected(verb, class);
            if got_class != want {
                wrong.push(format!("{verb} as {class:?}: got {got:?}, want {want:?}"));
            }
        }
    }
    drop(core);
    bus.release();
    assert!(wrong.is_empty(), "{wrong:#?}");
}
