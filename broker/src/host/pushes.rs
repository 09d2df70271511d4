//! The git socket's host ops (row 93, #1587): `checkPush`, `recordPush` and
//! `reviewFetch`, run on the writer thread. A refusal from any of them is
//! recorded as `action.refused` `{action, op, code}` on the task's trail
//! (subject = the task ref when it is one, else null).

use crate::core::Core;
use crate::error::Code;
use crate::ids::is_task_ref;
use crate::store::evidence::{self, Actor};
use crate::store::reviews;
use crate::verbs::launch::{record_refusal, role_of};
use crate::verbs::reviews::is_reviewer;
use serde_json::{json, Map, Value};

const PUSH: &str = "git.push.working";

/// Runs `f` for the capability's role session; a refusal after the
/// capability resolved is recorded on `task_ref`'s trail.
fn recorded(
    core: &mut Core,
    cap: &str,
    op: &str,
    action: &str,
    task_ref: Option<&str>,
    f: impl FnOnce(&mut Core, &str, &str, &str) -> Result<Value, Code>,
) -> Result<Value, Code> {
    let (business, role, run) = role_of(core, cap)?;
    match f(core, &business, &role, &run) {
        Ok(v) => Ok(v),
        Err(code) => {
            let subject = task_ref.filter(|s| is_task_ref(s));
            let body = json!({"action": action, "op": op, "code": code.as_str()});
            record_refusal(core, &business, &role, &run, subject, &body)?;
            Err(code)
        }
    }
}

/// Holder and `git.push.working` authority under current policy, without a
/// decision (the git socket cites none): within-role passes, anything else
/// refuses `decision-required`. Writes nothing.
fn check_push_authority(
    core: &mut Core,
    business: &str,
    role: &str,
    run: &str,
    task_ref: &str,
) -> Result<(), Code> {
    let config = core.config.clone();
    let biz = config
        .businesses
        .get(business)
        .ok_or(Code::UnknownBusiness)?;
    core.store
        .write(|t| crate::authorize::consume_in_tx(t, biz, role, run, PUSH, Some(task_ref), None))
        .map(|_| ())
}

/// `checkPush {cap, task_ref}` → `{allowed: true}`; records nothing unless it refuses.
pub fn check_push(core: &mut Core, cap: &str, task_ref: &str) -> Result<Value, Code> {
    recorded(
        core,
        cap,
        "checkPush",
        PUSH,
        Some(task_ref),
        |core, business, role, run| {
            if !is_task_ref(task_ref) {
                return Err(Code::InvalidRequest);
            }
            check_push_authority(core, business, role, run, task_ref)?;
            Ok(json!({"allowed": true}))
        },
    )
}

fn req_str(m: &mut Map<String, Value>, key: &str) -> Result<String, Code> {
    match m.remove(key) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 && !s.contains('\0') => Ok(s),
        _ => Err(Code::InvalidRequest),
    }
}

/// `recordPush {cap, push: {task_ref, project, branch, ref, commit, previous}}`
/// → `{event, at}`: the push record (`action.allowed` for `git.push.working`,
/// subject = the task, `{action, class, target, project, branch, ref,
/// commit, previous}`). `previous` is null for a branch's first push.
pub fn record_push(
    core: &mut Core,
    cap: &str,
    mut push: Map<String, Value>,
) -> Result<Value, Code> {
    let task_ref = match push.get("task_ref") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    recorded(
        core,
        cap,
        "recordPush",
        PUSH,
        task_ref.as_deref(),
        |core, business, role, run| {
            let task_ref = req_str(&mut push, "task_ref")?;
            let project = req_str(&mut push, "project")?;
            let branch = req_str(&mut push, "branch")?;
            let git_ref = req_str(&mut push, "ref")?;
            let commit = req_str(&mut push, "commit")?;
            let previous = match push.remove("previous") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Some(s),
                Some(_) => return Err(Code::InvalidRequest),
            };
            if !push.is_empty() || !is_task_ref(&task_ref) {
                return Err(Code::InvalidRequest);
            }
            let config = core.config.clone();
            let biz = config
                .businesses
                .get(business)
                .ok_or(Code::UnknownBusiness)?;
            if !biz.projects.contains_key(&project) {
                return Err(Code::UnknownProject);
            }
            core.store.write(|t| {
                let class = crate::authorize::consume_in_tx(
                    t,
                    biz,
                    role,
                    run,
                    PUSH,
                    Some(&task_ref),
                    None,
                )?;
                let w = evidence::insert_event(
                    t,
                    business,
                    "action.allowed",
                    Actor {
                        role: Some(role),
                        run: Some(run),
                    },
                    Some(&task_ref),
                    &json!({
                        "action": PUSH,
                        "class": class.as_str(),
                        "target": task_ref,
                        "project": project,
                        "branch": branch,
                        "ref": git_ref,
                        "commit": commit,
                        "previous": previous,
                    }),
                )?;
                Ok(json!({"event": w.id, "at": w.at}))
            })
        },
    )
}

/// `reviewFetch {cap, args: {task_ref, request}}` → the request's
/// `{project, commit, ref}`. The caller's run must hold its role
/// (`not-holder`); the role must hold `review.verdict` authority and be the
/// one the request was addressed to (`request-not-found` otherwise).
pub fn review_fetch(
    core: &mut Core,
    cap: &str,
    mut args: Map<String, Value>,
) -> Result<Value, Code> {
    let task_ref = match args.get("task_ref") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    recorded(
        core,
        cap,
        "reviewFetch",
        "review.verdict",
        task_ref.as_deref(),
        |core, business, role, run| {
            let task_ref = req_str(&mut args, "task_ref")?;
            let request = req_str(&mut args, "request")?;
            if !args.is_empty() || !is_task_ref(&task_ref) {
                return Err(Code::InvalidRequest);
            }
            let conn = core.store.conn();
            if evidence::holder(conn, business, role)?.as_deref() != Some(run) {
                return Err(Code::NotHolder);
            }
            let reviewer = core
                .config
                .businesses
                .get(business)
                .is_some_and(|b| is_reviewer(b, role));
            let req = reviews::request(conn, business, &task_ref, &request)?
                .filter(|r| reviewer && r.to() == role)
                .ok_or(Code::RequestNotFound)?;
            Ok(json!({"project": req.project(), "commit": req.commit(), "ref": req.git_ref()}))
        },
    )
}
