//! Reads whose answer grows with a business's history answer a page, never
//! `response-too-large` (issue 34): a busy subject's `trail`, `usage` by
//! run, `decisions {list:'roles'}`, an `inbox` with many open decisions or
//! large waiting messages, and `agents`' `inputNeeded`. A small answer
//! keeps exactly the spec's shape. In process, on a real store.

mod common;

use common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::store::evidence::{self, Actor};
use mosaic_bus::store::messages::{self as msgs, NewMessage};
use mosaic_wire::limits::RESPONSE_MAX;
use serde_json::{json, Value};

fn env() -> Inproc {
    let mut e = Inproc::boot(json!({
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "r0", "delivery": "r0"},
            "roles": {
                "r0": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
            }}},
        "readers": ["acme"],
    }));
    for r in ["r0", "r1"] {
        e.ok(&role(r), "role.claim", Value::Null);
    }
    e
}

fn role(r: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("run-{r}"),
    }
}

fn reader() -> Caller {
    Caller::Reader {
        business: "acme".into(),
    }
}

fn human() -> Caller {
    Caller::Human {
        business: "acme".into(),
    }
}

/// The reply as the socket would send it must fit the client's cap.
fn fits(reply: &Value) {
    let n = serde_json::to_vec(reply).expect("json").len() + 1;
    assert!(n <= RESPONSE_MAX, "{n} bytes");
}

/// `n` events about task `t`, each with a body of about `pad` bytes.
fn task_events(e: &mut Inproc, t: &str, n: usize, pad: usize) {
    let filler = "x".repeat(pad);
    e.core
        .store
        .write(|tx| {
            for i in 0..n {
                evidence::insert_event(
                    tx,
                    "acme",
                    "task.comment",
                    Actor::of("r0", "run-r0"),
                    Some(t),
                    &json!({"task_ref": t, "n": i, "text": filler}),
                )?;
            }
            Ok(())
        })
        .expect("events");
}

/// Walks a paged trail from its first page to its last; returns every
/// record and how many pages it took.
fn all_pages(e: &mut Inproc, subject: &str, limit: Option<usize>) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut after: Option<Value> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"subject": subject});
        if let Some(l) = limit {
            args["limit"] = json!(l);
        }
        if let Some(a) = &after {
            args["after"] = a.clone();
        }
        let page = e.ok(&reader(), "trail", args);
        fits(&page);
        pages += 1;
        out.extend(page["records"].as_array().expect("records").iter().cloned());
        match &page["next"] {
            Value::Null => return (out, pages),
            next => after = Some(next.clone()),
        }
    }
}

/// A task with 2,500 events of about 2 KB (5 MB of trail): the trail
/// answers its first 1,000 records and `next`, within the reply cap, and
/// the pages after it give every record once, in write order; `limit`
/// sets the page. A short trail is the spec's plain list.
#[test]
fn a_busy_subjects_trail_answers_pages_within_the_cap() {
    let mut e = env();
    let t = "vikunja:3/41";
    task_events(&mut e, t, 2500, 2000);
    let first = e.ok(&reader(), "trail", json!({"subject": t}));
    fits(&first);
    let records = first["records"].as_array().expect("a page");
    assert!(
        !records.is_empty() && records.len() <= 1000,
        "{}",
        records.len()
    );
    assert_eq!(first["next"], records.last().expect("last")["at"]);

    let (all, pages) = all_pages(&mut e, t, None);
    assert_eq!(all.len(), 2500);
    assert!(pages >= 3, "{pages}");
    let ats: Vec<&str> = all.iter().map(|r| r["at"].as_str().expect("at")).collect();
    assert!(
        ats.windows(2).all(|w| w[0] < w[1]),
        "write order, each once"
    );
    let ns: Vec<i64> = all
        .iter()
        .map(|r| r["body"]["n"].as_i64().expect("n"))
        .collect();
    assert_eq!(ns, (0..2500).collect::<Vec<_>>());
    let (by_300, pages) = all_pages(&mut e, t, Some(300));
    assert_eq!(by_300, all);
    assert_eq!(pages, 9);

    // A quiet subject: the list itself, as before.
    task_events(&mut e, "vikunja:3/42", 3, 10);
    let short = e.ok(&reader(), "trail", json!({"subject": "vikunja:3/42"}));
    assert_eq!(short.as_array().expect("a plain list").len(), 3);
    // Asked for a page, even a short trail is one.
    let paged = e.ok(
        &reader(),
        "trail",
        json!({"subject": "vikunja:3/42", "limit": 2}),
    );
    assert_eq!(paged["records"].as_array().expect("records").len(), 2);
    let rest = e.ok(
        &reader(),
        "trail",
        json!({"subject": "vikunja:3/42", "after": paged["next"]}),
    );
    assert_eq!(rest["records"].as_array().expect("records").len(), 1);
    assert_eq!(rest["next"], Value::Null);
    for bad in [
        json!({"subject": "x", "limit": 0}),
        json!({"subject": "x", "limit": 5001}),
        json!({"subject": "x", "limit": "10"}),
        json!({"subject": "x", "after": "yesterday"}),
    ] {
        assert_eq!(
            e.call(&reader(), "trail", bad.clone()),
            Err(mosaic_bus::error::Code::InvalidRequest),
            "{bad}"
        );
    }
}

/// `usage` of a business with 2,500 runs: `byRun` gives its first 1,000
/// runs and `next`; every page has the same totals and groups, and the
/// pages together give every run once, in key order, each with its own
/// sums. A business with few runs gets exactly the spec's shape.
#[test]
fn usage_pages_by_run_and_every_page_has_the_whole_totals() {
    let mut e = env();
    let small = e.ok(&reader(), "usage", Value::Null);
    assert_eq!(
        small
            .as_object()
            .expect("object")
            .keys()
            .collect::<Vec<_>>(),
        [
            "byAccount",
            "byInstance",
            "byModel",
            "byProvider",
            "byRun",
            "total"
        ]
    );
    e.core
        .store
        .write(|t| {
            msgs::insert_message(
                t,
                &NewMessage {
                    id: "m-1",
                    business: "acme",
                    from_role: "r0",
                    from_run: "run-r0",
                    to_role: "r1",
                    class: "INFO",
                    body: "a turn",
                    ..Default::default()
                },
            )?;
            for i in 0..2500 {
                let at = t.now();
                t.db().sql().execute(
                    "INSERT INTO usage_records(business, run, role, turn, source, kind, provider,
                       model, input, output, cache_write, cache_read, at)
                     VALUES ('acme', ?1, 'r1', 'm-1', 'pi', 'known', 'anthropic', 'm', ?2, 1, 0, 0, ?3)",
                    rusqlite::params![format!("run-{i:05}"), i, at],
                )
                .map_err(|e| mosaic_bus::store::map_sql_error(&e))?;
            }
            Ok(())
        })
        .expect("records");
    let first = e.ok(&reader(), "usage", Value::Null);
    fits(&first);
    assert_eq!(first["byRun"].as_array().expect("byRun").len(), 1000);
    assert_eq!(first["next"], json!("run-00999"));
    let total_input: i64 = (0..2500).sum();
    let mut runs = Vec::new();
    let mut after = Value::Null;
    loop {
        let mut args = json!({"limit": 700});
        if !after.is_null() {
            args["after"] = after.clone();
        }
        let page = e.ok(&reader(), "usage", args);
        assert_eq!(page["total"]["input"], json!(total_input));
        assert_eq!(page["total"]["output"], json!(2500));
        assert_eq!(page["byInstance"], first["byInstance"]);
        assert_eq!(page["byModel"], first["byModel"]);
        for r in page["byRun"].as_array().expect("byRun") {
            let run = r["run"].as_str().expect("run").to_string();
            let i: i64 = run["run-".len()..].parse().expect("number");
            assert_eq!(r["input"], json!(i), "{run}");
            runs.push(run);
        }
        after = page["next"].clone();
        if after.is_null() {
            break;
        }
    }
    let expected: Vec<String> = (0..2500).map(|i| format!("run-{i:05}")).collect();
    assert_eq!(runs, expected);
}

/// Raises `n` open decisions of `class` routed to `route`, by role `by`.
fn open_decisions(e: &mut Inproc, n: usize, by: &str, route: &str, class: &str) {
    e.core
        .store
        .write(|t| {
            for _ in 0..n {
                let at = t.now();
                t.db()
                    .sql()
                    .execute(
                        "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action,
                       target, class, routed_to, question, options, recommendation,
                       approval_choice, blocking, at)
                     VALUES (?1, 'acme', ?2, 'run-x', 'prd.approve', NULL, ?3, ?4, 'Ship?',
                       '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
                       'yes', 'yes', 0, ?5)",
                        rusqlite::params![mosaic_bus::ids::uuid(), by, class, route, at],
                    )
                    .map_err(|e| mosaic_bus::store::map_sql_error(&e))?;
            }
            Ok(())
        })
        .expect("decisions");
}

/// 1,200 open decisions routed to roles: `decisions {list:'roles'}` gives
/// 500 and `next`, and the pages give every one once, oldest first; a few
/// are the spec's plain list.
#[test]
fn open_decisions_for_roles_answer_pages() {
    let mut e = env();
    open_decisions(&mut e, 3, "r1", "r0", "cross-role");
    let few = e.ok(&reader(), "decisions", json!({"list": "roles"}));
    assert_eq!(few.as_array().expect("a plain list").len(), 3);
    open_decisions(&mut e, 1197, "r1", "r0", "cross-role");
    let first = e.ok(&reader(), "decisions", json!({"list": "roles"}));
    fits(&first);
    assert_eq!(first["decisions"].as_array().expect("page").len(), 500);
    let mut seqs = Vec::new();
    let mut page = first;
    loop {
        for d in page["decisions"].as_array().expect("page") {
            seqs.push(d["seq"].as_i64().expect("seq"));
        }
        if page["next"].is_null() {
            break;
        }
        page = e.ok(
            &reader(),
            "decisions",
            json!({"list": "roles", "after": page["next"]}),
        );
    }
    assert_eq!(seqs.len(), 1200);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        e.call(
            &reader(),
            "decisions",
            json!({"list": "roles", "after": "no-such-decision"})
        ),
        Err(mosaic_bus::error::Code::DecisionNotFound)
    );
    assert_eq!(
        e.call(
            &reader(),
            "decisions",
            json!({"list": "recent", "limit": 5})
        ),
        Err(mosaic_bus::error::Code::InvalidRequest)
    );
}

/// The human's inbox with 700 open decisions (gated and not) and 100
/// waiting messages of 60 KB: decisions come 500 to a page, gated first
/// and then oldest, with `next`; the messages stop where the reply would
/// pass the cap. `agents` lists at most 50 of a role's decisions under
/// `inputNeeded`.
#[test]
fn an_inbox_with_many_open_decisions_and_large_messages_fits_the_cap() {
    let mut e = env();
    open_decisions(&mut e, 400, "r1", "human", "cross-role");
    open_decisions(&mut e, 300, "r1", "human", "gated");
    let body = "y".repeat(60_000);
    for _ in 0..100 {
        e.ok(
            &role("r0"),
            "message.send",
            json!({"to": "human", "body": body}),
        );
    }
    let first = e.ok(&human(), "inbox", Value::Null);
    fits(&first);
    let decisions = first["decisions"].as_array().expect("decisions");
    assert_eq!(decisions.len(), 500);
    assert!(decisions[..300].iter().all(|d| d["class"] == "gated"));
    assert_eq!(first["next"], decisions[499]["id"]);
    let messages = first["messages"].as_array().expect("messages");
    assert!(
        !messages.is_empty() && messages.len() < 100,
        "{}",
        messages.len()
    );
    let second = e.ok(&human(), "inbox", json!({"after": first["next"]}));
    assert_eq!(
        second["decisions"].as_array().expect("decisions").len(),
        200
    );
    assert_eq!(second["next"], Value::Null);
    let mut ids: Vec<&Value> = decisions.iter().map(|d| &d["id"]).collect();
    ids.extend(
        second["decisions"]
            .as_array()
            .expect("d")
            .iter()
            .map(|d| &d["id"]),
    );
    let unique: std::collections::HashSet<String> = ids.iter().map(|v| v.to_string()).collect();
    assert_eq!(unique.len(), 700);

    let agents = e.ok(&reader(), "agents", Value::Null);
    let r1 = agents
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["role"] == "r1")
        .expect("r1");
    assert_eq!(r1["inputNeeded"].as_array().expect("inputNeeded").len(), 50);
    assert_eq!(r1["state"], "waiting");
    fits(&agents);
}
