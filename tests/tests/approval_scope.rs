//! An approval is usable only for what the human saw (issue 29 item 4; 3i
//! L157, L269; DESIGN.md "Git": an approval for `record.write` is bound to
//! the business, project and path it was raised for), through the real
//! broker: two records repositories of one business, the human resolving
//! through the real shim, the agent spending the approval elsewhere.

#[path = "support/records_env.rs"]
mod records_env;

use mosaic_tests::*;
use records_env::Repo;
use serde_json::{json, Value};

/// A records repository with one commit of the human's spec.
fn spec_repo() -> Repo {
    let r = Repo::new();
    r.commit("spec/north-star.md", "# North star\n", "Ada");
    r
}

/// The `decision` of a `record.write` on `path` that dev raises (dev has
/// no `record.write` of its own, so it needs one), with `project` when
/// given, and the human resolves `yes` through the shim.
fn approved_write(b: &Broker, human: &ShimSession, dev: &str, project: Option<&str>) -> String {
    let mut args = json!({"action": "record.write", "target": "docs/x.md",
                          "question": "Write docs/x.md?",
                          "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
                          "recommendation": "yes", "blocking": false});
    if let Some(p) = project {
        args["project"] = json!(p);
    }
    let id = res(&b.call(dev, "decision.raise", args))["id"]
        .as_str()
        .expect("decision id")
        .to_string();
    res(&human.call("decision.resolve", json!({"id": id, "choice": "yes"})));
    id
}

/// An approval raised for project `site` spent on `record.write` in project
/// `app` refuses `decision-mismatch` before any Git work: nothing is
/// committed in either repository, nothing is consumed, and the approval
/// still writes the file in `site`, once. A `record.write` approval raised
/// with no project writes in none.
#[test]
fn a_record_write_approval_is_bound_to_its_project() {
    let (site, app) = (spec_repo(), spec_repo());
    let (site0, app0) = (site.head(), app.head());
    let dir = data_root();
    let mut biz = business();
    biz["projects"] = json!({"site": {"repo": site.path()}, "app": {"repo": app.path()}});
    let config = json!({"dataRoot": dir.path(), "businesses": {"acme": biz}});
    let (mut b, reply) = Broker::spawn(dir.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let p = sleeper();
    let dev = b.claimed("dev", "run-dev", p.id());
    let human = ShimSession::human(&b);
    let write = |project: &str, decision: &str| {
        b.call(
            &dev,
            "record.write",
            json!({"project": project, "path": "docs/x.md", "record": "# X\n",
                   "decision": decision}),
        )
    };

    let id = approved_write(&b, &human, &dev, Some("site"));
    let r = write("app", &id);
    assert_eq!(err(&r), "decision-mismatch", "{r}");
    assert_eq!(app.head(), app0, "nothing committed in app");
    assert_eq!(site.head(), site0, "nor in site");
    let consumed: i64 = db(dir.path())
        .query_row(
            "SELECT count(*) FROM decision_events WHERE decision = ?1 AND kind = 'consumed'",
            [&id],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(consumed, 0, "the approval is unspent");

    // The project the human saw: the write lands there, once.
    let c = res(&write("site", &id))["commit"]
        .as_str()
        .expect("commit")
        .to_string();
    assert_eq!(site.head(), c);
    assert_eq!(site.git(&["show", "HEAD:docs/x.md"], "Ada"), "# X");
    assert_eq!(err(&write("site", &id)), "decision-consumed");
    assert_eq!(app.head(), app0);

    // Raised for no project: the human saw none, so it writes in none.
    let bare = approved_write(&b, &human, &dev, None);
    for project in ["site", "app"] {
        assert_eq!(
            err(&write(project, &bare)),
            "decision-mismatch",
            "{project}"
        );
    }
    assert_eq!((site.head(), app.head()), (c, app0));
    b.close();
}

const TASK: &str = "vikunja:3/41";
const C1: &str = "1111111111111111111111111111111111111111";

/// The same for a landing: a merge approval raised for project `site`
/// does not land the task's work pushed to `app` (`decision-mismatch`,
/// no ticket), while one raised with no project lands it as before.
#[test]
fn a_merge_approval_raised_for_a_project_lands_only_there() {
    let dir = data_root();
    let mut biz = business();
    biz["projects"] = json!({"site": {"repo": "/srv/records/site"},
                             "app": {"repo": "/srv/records/app"}});
    biz["roles"]["dev"]["authority"] = json!({
        "withinRole": ["git.push.working", "review.request"],
        "crossRole": ["git.merge.protected"]});
    let config = json!({"dataRoot": dir.path(), "businesses": {"acme": biz}});
    let (mut b, reply) = Broker::spawn(dir.path(), config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let (pd, pc, pp) = (sleeper(), sleeper(), sleeper());
    let dev = b.claimed("dev", "run-dev", pd.id());
    let cto = b.claimed("cto", "run-cto", pc.id());
    let pm = b.claimed("pm", "run-pm", pp.id());
    let r = b.op(json!({"op": "recordPush", "cap": dev, "push": {
        "task_ref": TASK, "project": "app", "branch": "work/41",
        "ref": "refs/heads/work/41", "commit": C1, "previous": null}}));
    res(&r);
    let req = res(&b.call(
        &dev,
        "review.request",
        json!({"task_ref": TASK, "commit": C1, "to": "cto"}),
    ))["request"]
        .clone();
    res(&b.call(
        &cto,
        "review.verdict",
        json!({"task_ref": TASK, "request": req, "verdict": "approve", "body": "fine"}),
    ));
    let raise = |b: &Broker, project: Option<&str>| -> Value {
        let mut args = json!({"action": "git.merge.protected", "question": "Land?",
                              "target": TASK,
                              "options": [{"key": "yes", "text": "Land"}, {"key": "no", "text": "No"}],
                              "recommendation": "yes", "blocking": false});
        if let Some(p) = project {
            args["project"] = json!(p);
        }
        let d = res(&b.call(&dev, "decision.raise", args))["id"].clone();
        res(&b.call(&pm, "decision.resolve", json!({"id": d, "choice": "yes"})));
        d
    };
    let site = raise(&b, Some("site"));
    let r = b.op(json!({"op": "checkLand", "cap": dev,
                        "args": {"task_ref": TASK, "decision": site}}));
    assert_eq!(err(&r), "decision-mismatch", "{r}");
    let app = raise(&b, Some("app"));
    let r = b.op(json!({"op": "checkLand", "cap": dev,
                        "args": {"task_ref": TASK, "decision": app}}));
    assert_eq!(res(&r)["ticket"]["project"], json!("app"), "{r}");
    let bare = raise(&b, None);
    let r = b.op(json!({"op": "checkLand", "cap": dev,
                        "args": {"task_ref": TASK, "decision": bare}}));
    assert_eq!(res(&r)["ticket"]["project"], json!("app"), "{r}");
    b.close();
}
