//! BLOCK (3i row 143) and the relay of an answer to a spec review notice,
//! in process: a real `Core` on a real store in a private data root,
//! calling `handlers::dispatch` as the socket does after the caller resolved.
//! The notices are stored as the spec review notice is: the bus's notice
//! (`store::messages::bus_notice`), in no thread.

mod common;

use common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::error::Code;
use mosaic_bus::store::messages::{bus_notice, insert_message, spec_notice_lead};
use serde_json::{json, Value};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn business() -> Value {
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    json!({
        "id": "acme", "human": "Ada",
        "arbiters": {"technical": "cto", "delivery": "pm"},
        "roles": {
            "pm": {"definition": "pm", "authority": send},
            "cto": {"definition": "cto", "authority": send},
            "dev": {"definition": "dev", "authority": send},
            "cos": {"definition": "chief-of-staff", "authority": send},
            "aide": {"definition": "assistant", "authority": send}
        },
        "projects": {
            "site": {"repo": "/nonexistent/site"},
            "shop": {"repo": "/nonexistent/shop"},
            "lab": {"repo": "/nonexistent/lab"}
        },
        "vars": {"bus.tester": true}
    })
}

type Env = Inproc;

fn role(r: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("run-{r}"),
    }
}

fn human() -> Caller {
    Caller::Human {
        business: "acme".into(),
    }
}

impl Env {
    fn new() -> Env {
        let mut e = Inproc::boot(json!({"businesses": {"acme": business()}}));
        for r in ["pm", "cto", "dev", "cos"] {
            e.ok(&role(r), "role.claim", Value::Null);
        }
        e
    }

    fn id(&mut self, c: &Caller, verb: &str, args: Value) -> String {
        self.ok(c, verb, args)["id"]
            .as_str()
            .expect("id")
            .to_string()
    }

    /// A notice from the bus to `to`, stored as the spec review notice is.
    fn notice(&mut self, to: &str, body: &str) -> String {
        let id = mosaic_bus::ids::uuid();
        self.core
            .store
            .write(|t| insert_message(t, &bus_notice(&id, "acme", to, body)))
            .expect("notice");
        id
    }

    fn spec_notice(&mut self, to: &str, project: &str) -> String {
        let body = format!(
            "{}\nRead the change with read_spec and answer the chief of staff once.",
            spec_notice_lead(project, SHA, SHA)
        );
        self.notice(to, &body)
    }

    /// `(from_role, class, to_role, in_reply_to)` of a stored message and its thread.
    fn stored(&self, id: &str) -> (Vec<Value>, Option<String>) {
        let conn = self.core.store.db().sql();
        let row = conn
            .query_row(
                "SELECT from_role, class, to_role, in_reply_to FROM messages WHERE id = ?1",
                [id],
                |r| {
                    let s = |i: usize| r.get::<_, Option<String>>(i);
                    Ok(vec![json!(s(0)?), json!(s(1)?), json!(s(2)?), json!(s(3)?)])
                },
            )
            .expect("message");
        let thread = conn
            .query_row(
                "SELECT thread FROM message_threads WHERE message = ?1",
                [id],
                |r| r.get(0),
            )
            .ok();
        (row, thread)
    }

    /// `(role, action, code)` of every `action.refused`, oldest first.
    fn refusals(&self) -> Vec<(String, String, String)> {
        let conn = self.core.store.db().sql();
        let mut st = conn
            .prepare(
                "SELECT role, json_extract(body, '$.action'), json_extract(body, '$.code')
                 FROM events WHERE kind = 'action.refused' ORDER BY seq",
            )
            .expect("prepare");
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    fn count(&self, table: &str) -> i64 {
        self.core
            .store
            .db()
            .sql()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .expect("count")
    }
}

fn block(to: &str, reply: Option<&str>) -> Value {
    let mut a =
        json!({"to": to, "body": "Conflicts with DEC-3: the scope grew.", "class": "BLOCK"});
    if let Some(r) = reply {
        a["in_reply_to"] = json!(r);
    }
    a
}

#[test]
fn a_block_comes_from_a_pm_or_cto_to_the_chief_of_staff_in_reply_to_its_own_notice() {
    let mut e = Env::new();
    let n_pm = e.spec_notice("pm", "site");
    let n_cto = e.spec_notice("cto", "site");
    // A `_bus` message that is no spec notice (a launch notice's shape).
    let other = e.notice(
        "pm",
        "Message x from dev to cto waits: cto has no running session.",
    );
    let plain = e.id(
        &role("dev"),
        "message.send",
        json!({"to": "pm", "body": "hello"}),
    );

    // The pm's BLOCK in reply to its notice: stored as sent, in no thread.
    let b = e.id(&role("pm"), "message.send", block("cos", Some(&n_pm)));
    let (row, thread) = e.stored(&b);
    assert_eq!(
        row,
        [json!("pm"), json!("BLOCK"), json!("cos"), json!(n_pm)]
    );
    assert_eq!(thread, None);
    // The cto's, to its own notice.
    e.ok(&role("cto"), "message.send", block("cos", Some(&n_cto)));
    // And the notice itself is what the bus sent: RESULT from _bus.
    let (row, thread) = e.stored(&n_pm);
    assert_eq!(
        row,
        [json!("_bus"), json!("RESULT"), json!("pm"), Value::Null]
    );
    assert_eq!(thread, None);
    let sent = e.count("messages");

    // The sender: only a pm or cto instance.
    for who in [role("dev"), role("cos"), human()] {
        assert_eq!(
            e.call(&who, "message.send", block("cos", Some(&n_pm))),
            Err(Code::BlockSender),
            "{who:?}"
        );
    }
    let tester = Caller::Tester {
        business: "acme".into(),
    };
    let mut t = block("cos", Some(&n_pm));
    t["body"] = json!("[mos test] block");
    assert_eq!(e.call(&tester, "message.send", t), Err(Code::BlockSender));
    // The recipient: only the chief of staff.
    for to in ["cto", "dev", "human", "aide", "nobody"] {
        assert_eq!(
            e.call(&role("pm"), "message.send", block(to, Some(&n_pm))),
            Err(Code::BlockRecipient),
            "{to}"
        );
    }
    // In reply to a notice the bus sent this sender, nothing else.
    let unknown = mosaic_bus::ids::uuid();
    for reply in [
        None,
        Some(&n_cto),
        Some(&other),
        Some(&plain),
        Some(&b),
        Some(&unknown),
    ] {
        assert_eq!(
            e.call(
                &role("pm"),
                "message.send",
                block("cos", reply.map(String::as_str))
            ),
            Err(Code::BlockReplyRequired),
            "{reply:?}"
        );
    }
    // thread.send refuses the class.
    let p = e.id(
        &human(),
        "project.create",
        json!({"name": "Site", "repo": "site"}),
    );
    let th = e.id(
        &human(),
        "thread.create",
        json!({"project": p, "name": "main"}),
    );
    assert_eq!(
        e.call(
            &human(),
            "thread.send",
            json!({"thread": th, "body": "x", "class": "BLOCK"})
        ),
        Err(Code::InvalidClass)
    );
    assert_eq!(e.count("messages"), sent, "no refused BLOCK was stored");

    let codes: Vec<(String, String, String)> = e.refusals();
    let r = |who: &str, code: &str| {
        (
            who.to_string(),
            "message.send".to_string(),
            code.to_string(),
        )
    };
    let mut want = vec![
        r("dev", "block-sender"),
        r("cos", "block-sender"),
        r("human", "block-sender"),
        r("tester", "block-sender"),
    ];
    want.extend(std::iter::repeat_n(r("pm", "block-recipient"), 5));
    want.extend(std::iter::repeat_n(r("pm", "block-reply-required"), 6));
    want.push(("human".into(), "thread.send".into(), "invalid-class".into()));
    assert_eq!(codes, want);
}

#[test]
fn the_chiefs_relay_lands_in_the_users_latest_opened_assistant_thread_of_the_notices_project() {
    let mut e = Env::new();
    let site = e.id(
        &human(),
        "project.create",
        json!({"name": "Site", "repo": "site"}),
    );
    let shop = e.id(
        &human(),
        "project.create",
        json!({"name": "Shop", "repo": "shop"}),
    );
    let t1 = e.id(
        &human(),
        "thread.create",
        json!({"project": site, "name": "one"}),
    );
    let t2 = e.id(
        &human(),
        "thread.create",
        json!({"project": site, "name": "two"}),
    );
    let t3 = e.id(
        &human(),
        "thread.create",
        json!({"project": shop, "name": "three"}),
    );

    let n = e.spec_notice("pm", "site");
    let b = e.id(&role("pm"), "message.send", block("cos", Some(&n)));
    let relay = |reply: &str| json!({"to": "aide", "body": "The pm blocks the save.", "in_reply_to": reply});

    // No thread of the project opened yet: refused.
    assert_eq!(
        e.call(&role("cos"), "message.send", relay(&b)),
        Err(Code::ThreadRequiredReplyToThreadMessage)
    );
    // Opened: one, then two, then the other project's three. The relay
    // goes to two, the latest opened of the notice's project.
    for th in [&t1, &t2, &t3] {
        e.ok(&human(), "thread.open", json!({"thread": th}));
    }
    let r1 = e.id(&role("cos"), "message.send", relay(&b));
    assert_eq!(e.stored(&r1).1.as_deref(), Some(t2.as_str()));
    // One opened again: a relay in reply to the notice itself goes there.
    e.ok(&human(), "thread.open", json!({"thread": t1}));
    let r2 = e.id(&role("cos"), "message.send", relay(&n));
    assert_eq!(e.stored(&r2).1.as_deref(), Some(t1.as_str()));
    // The chain's nearest thread message wins: a reply to the first relay
    // stays in two.
    let r3 = e.id(&role("cos"), "message.send", relay(&r1));
    assert_eq!(e.stored(&r3).1.as_deref(), Some(t2.as_str()));
    // The assistant's thread run receives it in that thread only: the
    // relays are pending there.
    let pending: i64 = e
        .core
        .store
        .db()
        .sql()
        .query_row(
            "SELECT count(*) FROM message_threads WHERE thread = ?1",
            [&t2],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(pending, 2);

    // Refused: a chain with no notice on it, a notice of a project with no
    // opened thread (lab has none; shop's is another project's), and
    // anyone but the chief of staff relaying.
    let plain = e.id(
        &role("pm"),
        "message.send",
        json!({"to": "cos", "body": "hi"}),
    );
    let lab = e.spec_notice("cto", "lab");
    let b_lab = e.id(&role("cto"), "message.send", block("cos", Some(&lab)));
    for (who, reply) in [("cos", &plain), ("cos", &b_lab), ("pm", &b), ("cto", &n)] {
        assert_eq!(
            e.call(&role(who), "message.send", relay(reply)),
            Err(Code::ThreadRequiredReplyToThreadMessage),
            "{who} {reply}"
        );
    }
    // The BLOCK itself is in no thread.
    assert_eq!(e.stored(&b).1, None);
    assert_eq!(e.stored(&b_lab).1, None);
}
