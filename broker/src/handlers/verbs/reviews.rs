//! `review.request` and `review.verdict` (row 93, #1587): the review loop.
//!
//! Each verb is one transaction: the shared authority-and-consumption helper
//! (`authorize_in_tx`, target = the task), the review checks, the review
//! event and its message commit together; any refusal rolls all of it back,
//! leaving a cited decision unspent.

use super::messages::MAX_BODY;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{role_session, Verb};
use crate::ids;
use crate::ids::is_task_ref;
use crate::store::evidence::{self, Actor};
use crate::store::messages::NewMessage;
use crate::store::reviews;
use serde_json::{json, Value};

/// The two verdicts.
pub const VERDICTS: &[&str] = &["approve", "changes"];

/// Longest commit id accepted (a SHA-256 object name is 64 hex digits).
const COMMIT_MAX: usize = 64;

/// True when `role` of the business holds `review.verdict` authority
/// (within-role or cross-role).
pub(crate) fn is_reviewer(business: &crate::config::Business, role: &str) -> bool {
    business.roles.get(role).is_some_and(|r| {
        r.within_role
            .iter()
            .chain(r.cross_role.iter())
            .any(|a| a == "review.verdict")
    })
}

/// `review.request {task_ref, commit, to, note?, decision?}` →
/// `{request, message, commit, ref, held}`.
pub struct Request {
    task_ref: String,
    commit: String,
    to: String,
    note: Option<String>,
    decision: Option<String>,
}

impl Verb for Request {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let task_ref = args.str("task_ref", 256)?;
        let commit = args.str("commit", COMMIT_MAX)?;
        let to = args.str("to", 64)?;
        let note = args.opt_str("note", MAX_BODY)?;
        let decision = args.opt_str("decision", 64)?;
        args.finish()?;
        if !is_task_ref(&task_ref) {
            return Err(Code::InvalidRequest);
        }
        Ok(Request {
            task_ref,
            commit,
            to,
            note,
            decision,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        request(core, caller, self)
    }
}

fn request(core: &mut Core, caller: &Caller, args: Request) -> Result<Value, Code> {
    let (business_id, role, run) = role_session(caller)?;
    let Request {
        task_ref,
        commit,
        to,
        note,
        decision,
    } = args;
    let config = core.config.clone();
    let biz = config.business(business_id)?;
    if !biz.roles.contains_key(&to) {
        return Err(Code::UnknownRole);
    }
    if to == role {
        return Err(Code::SelfReview);
    }
    if !is_reviewer(biz, &to) {
        return Err(Code::NotAReviewer);
    }
    let b = biz.id.as_str();
    core.store.write(|t| {
        crate::authorize::authorize_in_tx(
            t,
            biz,
            role,
            run,
            "review.request",
            Some(&task_ref),
            decision.as_deref(),
        )?;
        let push = match reviews::latest_push(t.db(), b, &task_ref)? {
            Some(p) if p.commit == commit => p,
            _ if reviews::was_pushed(t.db(), b, &task_ref, &commit)? => {
                return Err(Code::StaleCommit)
            }
            _ => return Err(Code::UnknownCommit),
        };
        let held = t.holder(b, &to);
        let message = ids::uuid();
        let event = evidence::insert_event(
            t,
            b,
            "review.requested",
            Actor::of(role, run),
            Some(&task_ref),
            &json!({
                "task_ref": task_ref,
                "project": push.project,
                "ref": push.git_ref,
                "commit": commit,
                "to": to,
                "message": message,
                "held": held,
            }),
        )?;
        let mut body = format!(
            "Review request {} from {role} for {task_ref}: commit {commit} on {} ({}).",
            event.id, push.git_ref, push.project
        );
        if let Some(n) = &note {
            body.push_str("\nNote: ");
            body.push_str(n);
        }
        // Filed in the thread of a thread run asking (3i row 121).
        super::messages::post(
            t,
            biz,
            &NewMessage {
                id: &message,
                business: b,
                from_role: role,
                from_run: run,
                to_role: &to,
                class: "REVIEW-REQUEST",
                body: &body,
                decision: decision.as_deref(),
                ..Default::default()
            },
            None,
        )?;
        Ok(json!({
            "request": event.id,
            "message": message,
            "commit": commit,
            "ref": push.git_ref,
            "held": held,
        }))
    })
}

/// `review.verdict {task_ref, request, verdict, body, decision?}` →
/// `{verdict, message, commit}`.
pub struct Verdict {
    task_ref: String,
    request: String,
    verdict: String,
    text: String,
    decision: Option<String>,
}

impl Verb for Verdict {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let task_ref = args.str("task_ref", 256)?;
        let request = args.str("request", 64)?;
        let verdict = args.str("verdict", 16)?;
        let text = args.str("body", MAX_BODY)?;
        let decision = args.opt_str("decision", 64)?;
        args.finish()?;
        if !is_task_ref(&task_ref) || !VERDICTS.contains(&verdict.as_str()) {
            return Err(Code::InvalidRequest);
        }
        Ok(Verdict {
            task_ref,
            request,
            verdict,
            text,
            decision,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        verdict(core, caller, self)
    }
}

fn verdict(core: &mut Core, caller: &Caller, args: Verdict) -> Result<Value, Code> {
    let (business_id, role, run) = role_session(caller)?;
    let Verdict {
        task_ref,
        request,
        verdict,
        text,
        decision,
    } = args;
    let config = core.config.clone();
    let biz = config.business(business_id)?;
    let b = biz.id.as_str();
    core.store.write(|t| {
        crate::authorize::authorize_in_tx(
            t,
            biz,
            role,
            run,
            "review.verdict",
            Some(&task_ref),
            decision.as_deref(),
        )?;
        let req = reviews::request(t.db(), b, &task_ref, &request)?
            .filter(|r| r.to() == role)
            .ok_or(Code::RequestNotFound)?;
        if reviews::has_verdict(t.db(), b, &req.id)? {
            return Err(Code::VerdictExists);
        }
        let commit = req.commit();
        let message = ids::uuid();
        let event = evidence::insert_event(
            t,
            b,
            "review.verdict",
            Actor::of(role, run),
            Some(&task_ref),
            &json!({
                "task_ref": task_ref,
                "request": req.id,
                "commit": commit,
                "verdict": verdict,
                "message": message,
            }),
        )?;
        let body = format!(
            "Review verdict {} by {role} on request {} for {task_ref}: {verdict} (commit {commit}).\n{text}",
            event.id, req.id
        );
        let reply_to = req.message();
        // In reply to the request: a thread run's request's thread.
        super::messages::post(
            t,
            biz,
            &NewMessage {
                id: &message,
                business: b,
                from_role: role,
                from_run: run,
                to_role: &req.from_role,
                class: "REVIEW-RESULT",
                body: &body,
                in_reply_to: (!reply_to.is_empty()).then_some(reply_to.as_str()),
                decision: decision.as_deref(),
                ..Default::default()
            },
            None,
        )?;
        Ok(json!({"verdict": event.id, "message": message, "commit": commit}))
    })
}
