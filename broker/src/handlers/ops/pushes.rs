//! The git socket's host ops (row 93, #1587): `checkPush`, `recordPush` and
//! `reviewFetch`, run on the writer thread. A refusal from any of them is
//! recorded as `action.refused` `{action, op, code}` on the task's trail
//! (subject = the task ref when it is one, else null).

use super::authority::role_of;
use crate::core::Core;
use crate::error::Code;
use crate::handlers::fields::{opt_string, Fields, HOST_MAX};
use crate::handlers::handler::host_op;
use crate::handlers::refusal;
use crate::handlers::verbs::reviews::is_reviewer;
use crate::ids::is_task_ref;
use crate::store::evidence::{self, Actor};
use crate::store::reviews;
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
            refusal::record(core, &business, Actor::of(&role, &run), subject, &body)?;
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
    let biz = config.business(business)?;
    core.store
        .write(|t| crate::authorize::consume_in_tx(t, biz, role, run, PUSH, Some(task_ref), None))
        .map(|_| ())
}

/// `checkPush {cap, task_ref}` → `{allowed: true}`; records nothing unless it refuses.
fn check_push(core: &mut Core, cap: &str, task_ref: &str) -> Result<Value, Code> {
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

/// `checkPush {cap, task_ref}`.
pub struct CheckPush {
    pub cap: String,
    pub task_ref: String,
}

impl CheckPush {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let task_ref = f.str("task_ref", HOST_MAX)?;
        f.finish()?;
        Ok(CheckPush { cap, task_ref })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        check_push(core, &self.cap, &self.task_ref)
    }
}

/// An op's nested object (`recordPush`'s `push`, `reviewFetch`'s `args`),
/// parsed with the op. Its refusal is recorded on the capability's run like
/// any other, so it is kept and answered on the writer side once the
/// capability is resolved, on the trail of the task the object names.
struct Nested<T> {
    /// The task the object names, as far as it names one: the subject a
    /// refusal of it is recorded on.
    task_ref: Option<String>,
    parsed: Result<T, Code>,
}

impl<T> Nested<T> {
    fn new(
        m: Map<String, Value>,
        parse: impl FnOnce(Map<String, Value>) -> Result<T, Code>,
    ) -> Self {
        let task_ref = match m.get("task_ref") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        Nested {
            task_ref,
            parsed: parse(m),
        }
    }

    /// The refusal the object earned at parse, if any.
    fn refusal(&self) -> Option<Code> {
        self.parsed.as_ref().err().copied()
    }
}

/// `{cap, KEY: {…}}`: the capability and the nested object, nothing else.
fn cap_and_object(mut f: Fields, key: &str) -> Result<(String, Map<String, Value>), Code> {
    let cap = f.str("cap", HOST_MAX)?;
    let object = f.object(key)?;
    f.finish()?;
    Ok((cap, object))
}

/// `recordPush {cap, push}`.
pub struct RecordPush {
    pub cap: String,
    push: Nested<Push>,
}

/// `{task_ref, project, branch, ref, commit, previous}`.
struct Push {
    task_ref: String,
    project: String,
    branch: String,
    git_ref: String,
    commit: String,
    previous: Option<String>,
}

impl Push {
    fn parse(m: Map<String, Value>) -> Result<Push, Code> {
        let mut f = Fields::new(m);
        let task_ref = f.str("task_ref", HOST_MAX)?;
        let project = f.str("project", HOST_MAX)?;
        let branch = f.str("branch", HOST_MAX)?;
        let git_ref = f.str("ref", HOST_MAX)?;
        let commit = f.str("commit", HOST_MAX)?;
        let previous = opt_string(f.take("previous"), HOST_MAX)?;
        f.finish()?;
        if !is_task_ref(&task_ref) {
            return Err(Code::InvalidRequest);
        }
        Ok(Push {
            task_ref,
            project,
            branch,
            git_ref,
            commit,
            previous,
        })
    }
}

impl RecordPush {
    pub fn parse(f: Fields) -> Result<Self, Code> {
        let (cap, push) = cap_and_object(f, "push")?;
        Ok(RecordPush::new(cap, push))
    }

    /// The op for `push` as the host gave it.
    pub fn new(cap: String, push: Map<String, Value>) -> RecordPush {
        RecordPush {
            cap,
            push: Nested::new(push, Push::parse),
        }
    }

    /// The refusal the `push` object earned at parse, if any.
    pub fn nested_refusal(&self) -> Option<Code> {
        self.push.refusal()
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        record_push(core, &self.cap, self.push)
    }
}

/// `{task_ref, request}`.
fn parse_fetch(m: Map<String, Value>) -> Result<(String, String), Code> {
    let mut f = Fields::new(m);
    let task_ref = f.str("task_ref", HOST_MAX)?;
    let request = f.str("request", HOST_MAX)?;
    f.finish()?;
    if !is_task_ref(&task_ref) {
        return Err(Code::InvalidRequest);
    }
    Ok((task_ref, request))
}

/// `reviewFetch {cap, args: {task_ref, request}}`; like `recordPush`, a
/// refusal of `args` is recorded on the capability's run.
pub struct ReviewFetch {
    pub cap: String,
    args: Nested<(String, String)>,
}

impl ReviewFetch {
    pub fn parse(f: Fields) -> Result<Self, Code> {
        let (cap, args) = cap_and_object(f, "args")?;
        Ok(ReviewFetch::new(cap, args))
    }

    /// The op for `args` as the host gave them.
    pub fn new(cap: String, args: Map<String, Value>) -> ReviewFetch {
        ReviewFetch {
            cap,
            args: Nested::new(args, parse_fetch),
        }
    }

    /// The refusal the `args` object earned at parse, if any.
    pub fn nested_refusal(&self) -> Option<Code> {
        self.args.refusal()
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        review_fetch(core, &self.cap, self.args)
    }
}

/// `recordPush {cap, push: {task_ref, project, branch, ref, commit, previous}}`
/// → `{event, at}`: the push record (`action.allowed` for `git.push.working`,
/// subject = the task, `{action, class, target, project, branch, ref,
/// commit, previous}`). `previous` is null for a branch's first push.
fn record_push(core: &mut Core, cap: &str, push: Nested<Push>) -> Result<Value, Code> {
    recorded(
        core,
        cap,
        "recordPush",
        PUSH,
        push.task_ref.as_deref(),
        |core, business, role, run| {
            let Push {
                task_ref,
                project,
                branch,
                git_ref,
                commit,
                previous,
            } = push.parsed?;
            let config = core.config.clone();
            let biz = config.business(business)?;
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
                    Actor::of(role, run),
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
fn review_fetch(core: &mut Core, cap: &str, args: Nested<(String, String)>) -> Result<Value, Code> {
    recorded(
        core,
        cap,
        "reviewFetch",
        "review.verdict",
        args.task_ref.as_deref(),
        |core, business, role, run| {
            let (task_ref, request) = args.parsed?;
            let conn = core.store.db();
            if !evidence::holds(conn, business, role, run)? {
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

host_op!(CheckPush, "checkPush");
host_op!(RecordPush, "recordPush");
host_op!(ReviewFetch, "reviewFetch");
