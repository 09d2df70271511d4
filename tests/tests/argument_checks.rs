//! Every argument of every verb is type-checked on a real broker: each wrong type, size or shape refuses with the verb's exact code, and the human shim's verbs check theirs.

use mosaic_tests::*;
use serde_json::{json, Value};
#[path = "support/refusals_env.rs"]
mod refusals_env;
use refusals_env::{business, env, C1, NO_ID, TASK};

/// Argument hygiene: every argument of every served verb a role or a reader
/// may call, given each wrong JSON type, refuses with the verb's code for a
/// malformed value (`invalid-request` unless the spec names another), and
/// never reaches the verb's effects.
#[test]
fn every_argument_of_every_verb_is_type_checked() {
    let e = env();
    let wrong_for = |kind: char| -> Vec<Value> {
        let all = [
            json!(7),
            json!(1.5),
            json!(true),
            json!("x"),
            json!([]),
            json!({}),
            json!(-1),
        ];
        all.into_iter()
            .filter(|v| match kind {
                's' => !v.is_string(),
                'b' => !v.is_boolean(),
                // An integer argument: no string, bool, float, array, object
                // or negative number.
                'n' => !(v.is_u64()),
                'o' => !v.is_object(),
                'a' => !v.is_array(),
                _ => unreachable!(),
            })
            .collect()
    };
    // (caller, verb, valid-shaped args, [(key, kind, code for a wrong type)]).
    type Case = (
        &'static str,
        &'static str,
        Value,
        Vec<(&'static str, char, &'static str)>,
    );
    let ir = "invalid-request";
    let raise = json!({"action": "deploy", "question": "?", "options": [{"key": "yes", "text": "Y"}, {"key": "no", "text": "N"}],
                       "recommendation": "yes", "blocking": false});
    let cases: Vec<Case> = vec![
        (
            "pm",
            "spec.read",
            json!({"project": "site"}),
            vec![("project", 's', ir), ("commit", 's', ir)],
        ),
        (
            "dev",
            "record.write",
            json!({"project": "site", "path": "docs/plan.md", "record": "# Plan"}),
            vec![
                ("project", 's', ir),
                ("path", 's', ir),
                ("decision", 's', ir),
                // A docs record is a Markdown string: the data's own code.
                ("record", 's', "invalid-record"),
            ],
        ),
        (
            "dev",
            "role.revoke",
            json!({"role": "qa", "decision": NO_ID}),
            vec![("role", 's', ir), ("decision", 's', ir)],
        ),
        (
            "pm",
            "event.emit",
            json!({"kind": "action.allowed", "body": {"action": "routine"}, "subject": TASK}),
            vec![("kind", 's', ir), ("body", 'o', ir), ("subject", 's', ir)],
        ),
        (
            "pm",
            "message.send",
            json!({"to": "cto", "body": "x"}),
            vec![
                ("to", 's', ir),
                ("body", 's', ir),
                ("class", 's', ir),
                ("in_reply_to", 's', ir),
                ("corrects", 's', ir),
                ("decision", 's', ir),
            ],
        ),
        (
            "pm",
            "message.read",
            json!({"id": NO_ID}),
            vec![("id", 's', ir)],
        ),
        (
            "dev",
            "decision.raise",
            raise.clone(),
            vec![
                ("action", 's', ir),
                ("question", 's', ir),
                ("options", 'a', "invalid-options"),
                ("recommendation", 's', "invalid-recommendation"),
                ("blocking", 'b', ir),
                ("domain", 's', ir),
                ("target", 's', ir),
                ("project", 's', ir),
                ("task_ref", 's', ir),
                ("requirement_ref", 's', ir),
                ("supersedes", 's', ir),
                ("choice", 's', ir),
                ("approvalChoice", 's', "invalid-approval-choice"),
            ],
        ),
        (
            "pm",
            "decision.resolve",
            json!({"id": NO_ID, "choice": "yes"}),
            vec![("id", 's', ir), ("choice", 's', ir), ("note", 's', ir)],
        ),
        (
            "pm",
            "decision.seen",
            json!({"id": NO_ID}),
            vec![("id", 's', ir)],
        ),
        (
            "pm",
            "decision.withdraw",
            json!({"id": NO_ID}),
            vec![("id", 's', ir)],
        ),
        (
            "pm",
            "trail",
            json!({"subject": TASK}),
            vec![("subject", 's', ir)],
        ),
        (
            "pm",
            "tasks",
            json!({"done": false}),
            vec![
                ("done", 'b', ir),
                ("assignee", 's', ir),
                ("label", 'n', ir),
                ("requirement", 's', ir),
                ("limit", 'n', ir),
                ("after", 's', ir),
            ],
        ),
        (
            "pm",
            "tasks",
            json!({"task_ref": TASK}),
            vec![("task_ref", 's', ir)],
        ),
        (
            "reader",
            "replies",
            json!({"id": NO_ID}),
            vec![("id", 's', ir)],
        ),
        (
            "reader",
            "messages",
            json!({"limit": 5}),
            vec![("limit", 'n', ir), ("after", 's', ir)],
        ),
        (
            "reader",
            "decisions",
            json!({"list": "recent"}),
            vec![("list", 's', ir)],
        ),
        (
            "dev",
            "review.request",
            json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
            vec![
                ("task_ref", 's', ir),
                ("commit", 's', ir),
                ("to", 's', ir),
                ("note", 's', ir),
                ("decision", 's', ir),
            ],
        ),
        (
            "cto",
            "review.verdict",
            json!({"task_ref": TASK, "request": NO_ID, "verdict": "approve", "body": "ok"}),
            vec![
                ("task_ref", 's', ir),
                ("request", 's', ir),
                ("verdict", 's', ir),
                ("body", 's', ir),
                ("decision", 's', ir),
            ],
        ),
    ];
    let before = e.counts();
    let mut wrong = Vec::new();
    let mut tried = 0;
    for (who, verb, base, keys) in &cases {
        let cap = if *who == "reader" {
            e.reader.clone()
        } else {
            e.caps[who].clone()
        };
        for (key, kind, code) in keys {
            for bad in wrong_for(*kind) {
                let mut args = base.clone();
                args[*key] = bad.clone();
                tried += 1;
                let got = e.b.call(&cap, verb, args.clone());
                if got["error"] != json!(code) {
                    wrong.push(format!("{verb} {key}={bad}: {got}, want {code}"));
                }
            }
        }
        // And an argument the verb doesn't know.
        let mut args = base.clone();
        args["unknown_key"] = json!(1);
        let got = e.b.call(&cap, verb, args);
        if got["error"] != json!(ir) {
            wrong.push(format!("{verb} unknown_key: {got}"));
        }
    }
    // Verbs that take no args refuse any.
    for (who, verb) in [
        ("pm", "role.release"),
        ("qa", "role.claim"),
        ("pm", "message.receive"),
        ("pm", "inbox"),
        ("pm", "agents"),
        ("pm", "requirements"),
        ("pm", "state"),
        ("reader", "credentials"),
    ] {
        let cap = if who == "reader" {
            e.reader.clone()
        } else {
            e.caps[who].clone()
        };
        let got = e.b.call(&cap, verb, json!({"x": 1}));
        if got["error"] != json!(ir) {
            wrong.push(format!("{verb} with an arg: {got}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(tried > 200, "{tried}");
    assert_eq!(
        e.counts(),
        before,
        "no refused request wrote anything but its refusal"
    );
    e.b.close();
}

/// The human's and the tester's refusals, through the real shims and the
/// real proof: on record against `human`/`human-cli` and
/// `tester`/`tester-cli`, on the task's trail when the request names one;
/// and every argument of the human-only verbs is type-checked.
#[test]
fn the_human_and_the_tester_are_on_record_and_human_verbs_check_their_args() {
    let root = data_root();
    let mut biz = business();
    biz["vars"] = json!({"bus.tester": true});
    let config = json!({"dataRoot": root.path(), "businesses": {"acme": biz}, "readers": ["acme"]});
    let (b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let human = ShimSession::human(&b);
    let tester = ShimSession::tester(&b);
    let n0 = refusals(root.path()).len();
    let mut want = Vec::new();
    // A role verb naming a task: the human gets agent-required, on the trail.
    let r = human.call(
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
    );
    assert_eq!(r["error"], json!("agent-required"), "{r}");
    want.push(json!([
        "human",
        "human-cli",
        TASK,
        "review.request",
        "agent-required"
    ]));
    // The human-only verbs' arguments, each with a wrong type.
    let cases = [
        ("project.create", json!({"name": 5})),
        ("project.create", json!({"name": "Site", "repo": true})),
        ("project.list", json!({"x": 1})),
        ("thread.create", json!({"project": 1, "name": "x"})),
        ("thread.create", json!({"project": "p", "name": []})),
        ("thread.list", json!({"project": {}})),
        ("thread.open", json!({"thread": 7})),
        ("thread.send", json!({"thread": "t", "body": 5})),
        (
            "thread.send",
            json!({"thread": "t", "body": "b", "class": false}),
        ),
        ("thread.messages", json!({"thread": "t", "limit": "5"})),
        ("thread.messages", json!({"thread": "t", "after": 3})),
        ("assistant.stop", json!({"instance": 7})),
        ("launch.revoke", json!({"x": 1})),
        ("launch.restore", json!({"x": 1})),
        ("project.files", json!({"project": 5})),
        ("project.files", json!({})),
        ("project.file", json!({"project": "site", "path": 7})),
        (
            "project.file",
            json!({"project": ["site"], "path": "docs/plan.md"}),
        ),
        ("project.file", json!({"project": "site"})),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": C1, "content": 7}),
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": 1, "content": "x"}),
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": true, "base": C1, "content": "x"}),
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "content": "x"}),
        ),
        (
            "project.file.save",
            json!({"project": "site", "path": "docs/plan.md", "base": C1, "content": "x",
                   "by": "Ada"}),
        ),
    ];
    for (verb, args) in cases {
        let r = human.call(verb, args.clone());
        assert_eq!(r["error"], json!("invalid-request"), "{verb} {args}: {r}");
        want.push(json!(["human", "human-cli", null, verb, "invalid-request"]));
    }
    // The tester: a verb outside its set is tester-refused (L218), a
    // human-only verb too unless its row names human-required for the
    // tester (instances, routes, the editor's file verbs).
    for (verb, code) in [
        ("launch.revoke", "tester-refused"),
        ("thread.list", "tester-refused"),
        ("routes", "human-required"),
        ("role.claim", "tester-refused"),
        ("state", "tester-refused"),
    ] {
        let r = tester.call(verb, Value::Null);
        assert_eq!(r["error"], json!(code), "{verb}: {r}");
        want.push(json!(["tester", "tester-cli", null, verb, code]));
    }
    assert_eq!(refusals(root.path())[n0..], want[..]);
    // Nothing else was written: no project, no launch toggle.
    assert_eq!(
        db(root.path())
            .query_row(
                "SELECT count(*) FROM events WHERE kind != 'action.refused'",
                [],
                |r| r.get::<_, i64>(0)
            )
            .expect("count"),
        0
    );
    b.close();
}
