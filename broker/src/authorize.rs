//! The one authority-and-consumption helper, on the writer side: it runs in
//! the caller's transaction over the rows the store returns (the holder,
//! the launch toggles, the cited decision) and the pure rules of
//! `policy::authority`, and writes through the store's writers. The store
//! itself decides nothing.
//!
//! `authorize`, `authorizeLaunch`, `role.revoke`, the review verbs and the
//! git socket's push checks use [`authorize_in_tx`]; cross-role
//! `message.send` uses [`consume_in_tx`] (it writes its own
//! `action.allowed`, naming the message); `record.write`, whose approval is
//! bound to its project as well as its path, uses [`check_in_project`]
//! before its Git side and [`authorize_in_project_tx`] with its receipt.

use crate::config::Business;
use crate::error::Code;
use crate::policy::actions;
use crate::policy::authority::{self, Ask, DecisionFacts};
use crate::policy::routing::{self, Class};
use crate::store::decisions::{insert_decision_event, launch_latest, load, DecisionRow};
use crate::store::evidence::{self, Actor, Written};
use crate::store::threads;
use crate::store::Db;
use crate::store::Tx;
use serde_json::json;

/// The recorded facts of a decision row the authority check matches against.
pub fn facts(d: &DecisionRow) -> Result<DecisionFacts<'_>, Code> {
    Ok(DecisionFacts {
        raised_by_role: &d.entry.raised_by_role,
        action: &d.entry.action,
        target: d.entry.target.as_deref(),
        project: d.entry.project.as_deref(),
        class: Class::parse(&d.entry.class).ok_or(Code::StorageUnavailable)?,
        approval_choice: &d.entry.approval_choice,
        resolved_choice: match d.closed_kind.as_deref() {
            Some("resolved") => d.choice.as_deref(),
            _ => None,
        },
        withdrawn: d.closed_kind.as_deref() == Some("withdrawn"),
        consumed: d.consumed,
    })
}

/// What an authorization allowed.
#[derive(Debug, Clone)]
pub struct AuthOutcome {
    /// The action's class for the caller under current policy.
    pub class: Class,
    /// The decision it consumed, when one backed it.
    pub decision: Option<String>,
    /// The `action.allowed` event.
    pub event: Written,
}

/// The one authority-and-consumption helper. Inside the caller's
/// transaction `t`:
///
/// 1. `run` must hold `role` (`not-holder`); the action must be in the
///    vocabulary (`unknown-action`); `role.launch` refuses while the
///    business's launches are revoked (`launch-revoked`).
/// 2. Without `decision`: only a within-role action passes (`decision-required`).
/// 3. With `decision`: it must exist in the business (`decision-not-found`)
///    and pass [`authority::check_with_decision`] (`decision-mismatch`,
///    `decision-not-approved`, `decision-consumed`); then a `consumed` row is
///    written (the unique index backs single use across every path and
///    restarts).
///
/// Returns the action's class. It writes no `action.allowed`: callers that
/// write their own (message.send, whose body names the message) use this;
/// everyone else uses [`authorize_in_tx`], which adds the event. The caller
/// writes its effect in the same `t`; any `Err` rolls the consumption back
/// with it, leaving the approval unspent.
pub fn consume_in_tx(
    t: &mut Tx<'_>,
    business: &Business,
    role: &str,
    run: &str,
    action: &str,
    target: Option<&str>,
    decision: Option<&str>,
) -> Result<Class, Code> {
    let asked = Asked {
        role,
        action,
        target,
        project: None,
    };
    consume_asked(t, business, run, asked, decision)
}

fn consume_asked(
    t: &mut Tx<'_>,
    business: &Business,
    run: &str,
    asked: Asked<'_>,
    decision: Option<&str>,
) -> Result<Class, Code> {
    let class = check_asked(t.db(), business, run, asked, decision)?;
    if let Some(id) = decision {
        // Checked unused above in this transaction; the unique
        // 'consumed' index and its trigger back it up (a refusal there
        // rolls everything back as storage-unavailable).
        insert_decision_event(t, id, "consumed", run, Some(run), None, None, None)?;
    }
    Ok(class)
}

/// Where a project-bound action (`policy::authority::PROJECT_BOUND`,
/// `record.write`) is asked: the path in the project.
#[derive(Debug, Clone, Copy)]
pub struct InProject<'a> {
    pub project: &'a str,
    pub path: &'a str,
}

/// What the checks are asked, before the class is known.
#[derive(Debug, Clone, Copy)]
struct Asked<'a> {
    role: &'a str,
    action: &'a str,
    target: Option<&'a str>,
    project: Option<&'a str>,
}

/// The checks of [`authorize_in_project_tx`] without its write: what a
/// staged verb (`record.write`) asks before its Git side runs, so an
/// approval for another project or path refuses before anything is read or
/// written. The writer consumes the decision only with the receipt, after
/// the commit, so a write refused on the way (`project-busy`) leaves the
/// approval unspent.
pub fn check_in_project(
    conn: &Db,
    business: &Business,
    role: &str,
    run: &str,
    action: &str,
    at: InProject<'_>,
    decision: Option<&str>,
) -> Result<Class, Code> {
    let asked = Asked {
        role,
        action,
        target: Some(at.path),
        project: Some(at.project),
    };
    check_asked(conn, business, run, asked, decision)
}

/// The checks of [`authorize_in_tx`] without its write: holder,
/// vocabulary, launch toggle, then the cited decision's match, resolution
/// and single use, in the order every path gives them.
pub fn check(
    conn: &Db,
    business: &Business,
    role: &str,
    run: &str,
    action: &str,
    target: Option<&str>,
    decision: Option<&str>,
) -> Result<Class, Code> {
    let asked = Asked {
        role,
        action,
        target,
        project: None,
    };
    check_asked(conn, business, run, asked, decision)
}

fn check_asked(
    conn: &Db,
    business: &Business,
    run: &str,
    asked: Asked<'_>,
    decision: Option<&str>,
) -> Result<Class, Code> {
    let Asked {
        role,
        action,
        target,
        project,
    } = asked;
    if !evidence::holds(conn, &business.id, role, run)? {
        return Err(Code::NotHolder);
    }
    if !actions::known(action) {
        return Err(Code::UnknownAction);
    }
    if action == "role.launch" {
        let latest = launch_latest(conn, &business.id)?;
        if !routing::launch_allowed(latest.as_ref().map(|l| l.0.as_str())) {
            return Err(Code::LaunchRevoked);
        }
    }
    let class = routing::classify_for(business, role, action, target);
    let ask = Ask {
        role,
        action,
        target,
        project,
        class,
    };
    match decision {
        None => authority::check_without_decision(&ask)?,
        Some(id) => {
            let d = load(conn, &business.id, id)?.ok_or(Code::DecisionNotFound)?;
            // A decision a thread run raised binds to its thread (3i row
            // 121): only a run holding that thread uses it, and one raised
            // in no thread serves no thread run.
            let raised_in = threads::of_run(conn, &business.id, &d.entry.raised_by_run)?;
            if raised_in != threads::held_by(conn, &business.id, run)? {
                return Err(Code::DecisionMismatch);
            }
            authority::check_with_decision(&facts(&d)?, &ask)?;
        }
    }
    Ok(class)
}

/// [`consume_in_tx`] plus the `action.allowed` event `{action, class,
/// target?, decision?}` with the target as subject, in the same transaction.
/// This is what `authorize`, `authorizeLaunch` and `role.revoke` use.
pub fn authorize_in_tx(
    t: &mut Tx<'_>,
    business: &Business,
    role: &str,
    run: &str,
    action: &str,
    target: Option<&str>,
    decision: Option<&str>,
) -> Result<AuthOutcome, Code> {
    let asked = Asked {
        role,
        action,
        target,
        project: None,
    };
    authorize_asked(t, business, run, asked, decision)
}

/// [`authorize_in_tx`] for a project-bound action (`record.write`): the
/// target is the path, and a decision must have been raised for that path
/// in that project (`decision-mismatch` otherwise).
pub fn authorize_in_project_tx(
    t: &mut Tx<'_>,
    business: &Business,
    role: &str,
    run: &str,
    action: &str,
    at: InProject<'_>,
    decision: Option<&str>,
) -> Result<AuthOutcome, Code> {
    let asked = Asked {
        role,
        action,
        target: Some(at.path),
        project: Some(at.project),
    };
    authorize_asked(t, business, run, asked, decision)
}

fn authorize_asked(
    t: &mut Tx<'_>,
    business: &Business,
    run: &str,
    asked: Asked<'_>,
    decision: Option<&str>,
) -> Result<AuthOutcome, Code> {
    let (role, action, target) = (asked.role, asked.action, asked.target);
    let class = consume_asked(t, business, run, asked, decision)?;
    let mut body = json!({"action": action, "class": class.as_str()});
    if let Some(tg) = target {
        body["target"] = json!(tg);
    }
    if let Some(d) = decision {
        body["decision"] = json!(d);
    }
    let event = evidence::insert_event(
        t,
        &business.id,
        "action.allowed",
        Actor::of(role, run),
        target,
        &body,
    )?;
    Ok(AuthOutcome {
        class,
        decision: decision.map(str::to_string),
        event,
    })
}
