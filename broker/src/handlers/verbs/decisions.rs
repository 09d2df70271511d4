//! `decision.raise`, `decision.resolve`, `decision.seen`,
//! `decision.withdraw` and the `decisions` read.
//!
//! Routing is fixed at raise (policy::routing); closing is one
//! `decision_events` row; a close by anyone but the raising run sends the
//! raising role one DECISION message in the same transaction.

use crate::config::Business;
use crate::core::HUMAN_ACTOR;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{role_session, ReadVerb, Verb};
use crate::ids;
use crate::policy::actions;
use crate::policy::routing::{self, Class, Domain, HUMAN};
use crate::store::decisions::{self as store, DecisionRow, NewDecision};
use crate::store::evidence::{self, Actor};
use crate::store::messages::NewMessage;
use crate::store::threads;
use crate::store::Tx;
use serde_json::{json, Map, Value};

use crate::core::HUMAN_RUN;
/// How many closed decisions `decisions {list:'recent'}` returns.
pub const RECENT: i64 = 50;
const QUESTION_MAX: usize = 4096;
const NOTE_MAX: usize = 1024;

/// `REQ-[A-Z]+-[1-9][0-9]*`.
fn is_requirement_ref(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("REQ-") else {
        return false;
    };
    let Some((area, n)) = rest.split_once('-') else {
        return false;
    };
    !area.is_empty()
        && area.bytes().all(|b| b.is_ascii_uppercase())
        && n.len() <= 18
        && n.bytes().next().is_some_and(|b| (b'1'..=b'9').contains(&b))
        && n.bytes().all(|b| b.is_ascii_digit())
}

fn option_key_ok(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && b.len() <= 160
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'/' | b'-'))
}

fn option_text_ok(t: &str) -> bool {
    let n = t.chars().count();
    (1..=1024).contains(&n) && !t.contains('\0')
}

/// Validates `options`: `invalid-options` for the list and its keys and
/// texts, `invalid-request` for an option that isn't exactly `{key,text}`.
pub fn parse_options(v: Option<Value>) -> Result<Vec<(String, String)>, Code> {
    let Some(Value::Array(items)) = v else {
        return Err(Code::InvalidOptions);
    };
    if !(2..=9).contains(&items.len()) {
        return Err(Code::InvalidOptions);
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(mut m) = item else {
            return Err(Code::InvalidRequest);
        };
        let (Some(key), Some(text)) = (m.remove("key"), m.remove("text")) else {
            return Err(Code::InvalidRequest);
        };
        if !m.is_empty() {
            return Err(Code::InvalidRequest);
        }
        let (Value::String(key), Value::String(text)) = (key, text) else {
            return Err(Code::InvalidOptions);
        };
        if !option_key_ok(&key) || !option_text_ok(&text) || out.iter().any(|(k, _)| *k == key) {
            return Err(Code::InvalidOptions);
        }
        out.push((key, text));
    }
    Ok(out)
}

fn is_key(options: &[(String, String)], v: &str) -> bool {
    options.iter().any(|(k, _)| k == v)
}

/// `decision.raise {action, question, options, recommendation, blocking,
/// domain?, target?, project?, task_ref?, requirement_ref?, supersedes?,
/// choice?, approvalChoice?, spec_path?, spec_commit?}`.
///
/// A raise that cites the spec (`spec_path` with `spec_commit`, and its
/// `project`) reads the project's Git repository before it is raised: the
/// server stages it (`cites_spec`, `projects::cited_raise`), the Git side checks the
/// citation against the current committed spec, and the writer then runs
/// every usual check again and stores the citation.
pub struct Raise {
    action: String,
    question: String,
    options: Vec<(String, String)>,
    recommendation: String,
    approval_choice: String,
    blocking: bool,
    domain: Option<Domain>,
    target: Option<String>,
    project: Option<String>,
    task_ref: Option<String>,
    requirement_ref: Option<String>,
    supersedes: Option<String>,
    choice: Option<String>,
    /// `(spec_path, spec_commit)`, checked whole at parse.
    citation: Option<(String, String)>,
}

/// A cited spec, as the raise hands it to the Git side.
pub fn cite_job(
    core: &Core,
    business: &str,
    project: &str,
    commit: &str,
) -> Result<crate::git::Job, Code> {
    let b = core.config.business(business)?;
    let repo = b.projects.get(project).ok_or(Code::UnknownProject)?.clone();
    Ok(crate::git::Job::new(
        repo,
        crate::git::Work::SpecCite {
            human: b.human.clone(),
            commit: commit.to_string(),
        },
    ))
}

/// The citation's two keys: absent (or null) both, or both a string, with
/// `project` given, the one spec path and a full SHA-1; anything else is
/// `invalid-spec-citation`.
fn parse_citation(
    project: Option<&str>,
    path: Option<Value>,
    commit: Option<Value>,
) -> Result<Option<(String, String)>, Code> {
    match (path, commit) {
        (None, None) => Ok(None),
        (Some(Value::String(p)), Some(Value::String(c)))
            if project.is_some() && p == crate::git::SPEC_PATH && crate::git::is_full_sha(&c) =>
        {
            Ok(Some((p, c)))
        }
        _ => Err(Code::InvalidSpecCitation),
    }
}

impl Verb for Raise {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let action = args.str("action", 64)?;
        let question = args.str("question", QUESTION_MAX)?;
        let options = args.take("options");
        let recommendation = args.take("recommendation");
        let blocking = match args.take("blocking") {
            Some(Value::Bool(b)) => b,
            _ => return Err(Code::InvalidRequest),
        };
        let domain = match args.opt_str("domain", 16)? {
            None => None,
            Some(d) => Some(Domain::parse(&d).ok_or(Code::InvalidRequest)?),
        };
        let target = args.opt_str("target", 256)?;
        let project = args.opt_str("project", 64)?;
        let task_ref = args.opt_str("task_ref", 64)?;
        let requirement_ref = args.opt_str("requirement_ref", 64)?;
        let supersedes = args.opt_str("supersedes", 64)?;
        let choice = args.opt_str("choice", 160)?;
        let approval = args.take("approvalChoice");
        let spec_path = args.take_present("spec_path");
        let spec_commit = args.take_present("spec_commit");
        args.finish()?;

        // The three choice checks, in the spec's order.
        let options = parse_options(options)?;
        match &recommendation {
            Some(Value::String(r)) if is_key(&options, r) => {}
            _ => return Err(Code::InvalidRecommendation),
        }
        let approval_choice = match approval {
            None | Some(Value::Null) => "yes".to_string(),
            Some(Value::String(s)) => s,
            Some(_) => return Err(Code::InvalidApprovalChoice),
        };
        if !is_key(&options, &approval_choice) {
            return Err(Code::InvalidApprovalChoice);
        }
        let recommendation = match recommendation {
            Some(Value::String(r)) => r,
            _ => return Err(Code::InvalidRecommendation),
        };

        if !actions::known(&action) {
            return Err(Code::UnknownAction);
        }
        if blocking && task_ref.is_none() {
            return Err(Code::TaskRequired);
        }
        if task_ref.as_deref().is_some_and(|t| !ids::is_task_ref(t))
            || requirement_ref
                .as_deref()
                .is_some_and(|r| !is_requirement_ref(r))
        {
            return Err(Code::InvalidRequest);
        }
        let citation = parse_citation(project.as_deref(), spec_path, spec_commit)?;
        Ok(Raise {
            action,
            question,
            options,
            recommendation,
            approval_choice,
            blocking,
            domain,
            target,
            project,
            task_ref,
            requirement_ref,
            supersedes,
            choice,
            citation,
        })
    }

    /// An uncited raise; a cited one is staged (`cites_spec`,
    /// `projects::cited_raise`).
    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        self.raise(core, caller)
    }
}

/// True for a raise that cites the spec (`spec_path` or `spec_commit`
/// given): the table stages it; an uncited raise stays inline.
pub fn cites_spec(args: Option<&Map<String, Value>>) -> bool {
    args.is_some_and(|a| {
        ["spec_path", "spec_commit"]
            .iter()
            .any(|k| a.get(*k).is_some_and(|v| !v.is_null()))
    })
}

impl Raise {
    /// The writer-side part before Git: for a cited raise, the usual checks
    /// (so that a raise refused anyway reads nothing) and the job reading
    /// the current spec; for an uncited one, nothing.
    pub(crate) fn git_job(
        &self,
        core: &mut Core,
        caller: &Caller,
    ) -> Result<Option<crate::git::Job>, Code> {
        let Some((_, commit)) = &self.citation else {
            return Ok(None);
        };
        let (business_id, role, run) = role_session(caller)?;
        let config = core.config.clone();
        let business = config.business(business_id)?;
        self.checked_route(core, business, (role, run))?;
        let held = core.store.write(|t| t.holds(business_id, role, run))?;
        if !held {
            return Err(Code::NotHolder);
        }
        let project = self.project.as_deref().ok_or(Code::InvalidSpecCitation)?;
        cite_job(core, business_id, project, commit).map(Some)
    }

    /// Raises the decision: every check, then one transaction. A cited
    /// raise gets here only after its Git side confirmed the citation.
    pub(crate) fn raise(&self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let (business_id, role, run) = role_session(caller)?;
        let config = core.config.clone();
        let business = config.business(business_id)?;
        let (class, routed_to) = self.checked_route(core, business, (role, run))?;
        core.store
            .write(|t| self.write(t, business_id, (role, run), class, &routed_to))
    }

    /// [`Raise::check`], then the route's messaging check (row 133).
    fn checked_route(
        &self,
        core: &mut Core,
        business: &Business,
        (role, run): (&str, &str),
    ) -> Result<(Class, String), Code> {
        let (class, routed_to) = self.check(business, role)?;
        if class != Class::WithinRole && !routing::close_route_allowed(business, role, &routed_to) {
            return Err(self.refuse_route(core, &business.id, role, run));
        }
        Ok((class, routed_to))
    }

    /// The checks against the business: project, target role, the action's
    /// class and route, and the within-role choice.
    fn check(&self, business: &Business, role: &str) -> Result<(Class, String), Code> {
        if let Some(p) = &self.project {
            if !business.projects.contains_key(p) {
                return Err(Code::UnknownProject);
            }
        }
        if matches!(self.action.as_str(), "role.revoke" | "role.launch") {
            let t = self.target.as_deref().ok_or(Code::InvalidRequest)?;
            if !business.roles.contains_key(t) {
                return Err(Code::UnknownRole);
            }
        }
        let class = routing::classify_for(business, role, &self.action, self.target.as_deref());
        let routed_to = routing::route_raise(
            business,
            role,
            &self.action,
            self.target.as_deref(),
            class,
            self.domain,
            self.citation.is_some(),
        );
        match (class, &self.choice) {
            (Class::WithinRole, None) => return Err(Code::ChoiceRequired),
            (Class::WithinRole, Some(c)) if !is_key(&self.options, c) => {
                return Err(Code::InvalidChoice)
            }
            (Class::WithinRole, Some(_)) => {}
            (_, Some(_)) => return Err(Code::InvalidChoice),
            (_, None) => {}
        }
        Ok((class, routed_to))
    }

    /// A route the raiser may not close to: refused and logged; nothing
    /// about the decision is stored. Returns the code the caller gets.
    fn refuse_route(&self, core: &mut Core, business_id: &str, role: &str, run: &str) -> Code {
        let mut body =
            json!({"action": "decision.raise", "code": Code::DecisionRouteRefused.as_str()});
        body["authorization"] = json!({"action": self.action, "target": self.target});
        let subject = self.task_ref.as_deref();
        crate::handlers::refusal::record(core, business_id, Actor::of(role, run), subject, &body)
            .map_or(Code::StorageUnavailable, |_| Code::DecisionRouteRefused)
    }

    /// The raise's transaction: holder and launch checks, the superseded
    /// decision's withdraw, the row, its context event and (within-role)
    /// its close.
    fn write(
        &self,
        t: &mut Tx<'_>,
        business_id: &str,
        (role, run): (&str, &str),
        class: Class,
        routed_to: &str,
    ) -> Result<Value, Code> {
        if !t.holds(business_id, role, run)? {
            return Err(Code::NotHolder);
        }
        if self.action == "role.launch" {
            let latest = store::launch_latest(t.db(), business_id)?;
            if !routing::launch_allowed(latest.as_ref().map(|l| l.0.as_str())) {
                return Err(Code::LaunchRevoked);
            }
        }
        if let Some(old) = &self.supersedes {
            supersede(t, business_id, (role, run), old)?;
        }
        let target_holder = match (self.action.as_str(), self.target.as_deref()) {
            ("role.revoke", Some(tg)) => t.holder(business_id, tg),
            _ => None,
        };
        let options_json = Value::Array(
            self.options
                .iter()
                .map(|(k, t)| json!({"key": k, "text": t}))
                .collect(),
        )
        .to_string();
        let w = store::insert_decision(
            t,
            &NewDecision {
                business: business_id,
                raised_by_role: role,
                raised_by_run: run,
                action: &self.action,
                target: self.target.as_deref(),
                class,
                routed_to,
                domain: self.domain.map(Domain::as_str),
                question: &self.question,
                options: &options_json,
                recommendation: &self.recommendation,
                approval_choice: &self.approval_choice,
                blocking: self.blocking,
                project: self.project.as_deref(),
                task_ref: self.task_ref.as_deref(),
                requirement_ref: self.requirement_ref.as_deref(),
                supersedes: self.supersedes.as_deref(),
                target_holder: target_holder.as_deref(),
                spec_path: self.citation.as_ref().map(|c| c.0.as_str()),
                spec_commit: self.citation.as_ref().map(|c| c.1.as_str()),
            },
        )?;
        // The raise's context event: what the decision would authorize. It
        // is evidence of the raise, not a use of the approval.
        let ev = evidence::insert_event(
            t,
            business_id,
            "action.allowed",
            Actor::of(role, run),
            Some(&w.id),
            &json!({
                "action": "decision.raise",
                "decision": w.id,
                "authorization": {
                    "action": self.action,
                    "target": self.target,
                    "approvalChoice": self.approval_choice,
                },
            }),
        )?;
        if class == Class::WithinRole {
            // Within-role closes atomically with the raiser's own choice.
            store::insert_decision_event(
                t,
                &w.id,
                "resolved",
                run,
                Some(run),
                self.choice.as_deref(),
                None,
                None,
            )?;
        }
        let d = store::load(t.db(), business_id, &w.id)?.ok_or(Code::StorageUnavailable)?;
        let mut out = crate::handlers::views::decision(&d);
        out["event"] = json!(ev.id);
        Ok(out)
    }
}

/// `supersedes`: the old decision must be open and raised by the same
/// role; it is withdrawn by the raising run (no close message).
fn supersede(
    t: &mut Tx<'_>,
    business_id: &str,
    (role, run): (&str, &str),
    old: &str,
) -> Result<(), Code> {
    let prior = if ids::is_uuid(old) {
        store::load(t.db(), business_id, old)?
    } else {
        None
    };
    // Within the thread the old one was raised in, when it was (3i row 121).
    let same_thread = match &prior {
        Some(p) => {
            threads::of_run(t.db(), business_id, &p.entry.raised_by_run)?
                == threads::held_by(t.db(), business_id, run)?
        }
        None => false,
    };
    match prior {
        Some(p) if p.is_open() && p.entry.raised_by_role == role && same_thread => {
            store::insert_decision_event(t, old, "withdrawn", run, Some(run), None, None, None)?;
            Ok(())
        }
        _ => Err(Code::SupersedeRefused),
    }
}

/// Who closes or acknowledges: the human through the CLI, or a role's run.
enum Closer<'a> {
    Human,
    Role { role: &'a str, run: &'a str },
}

fn closer(caller: &Caller) -> Result<Closer<'_>, Code> {
    match caller {
        Caller::Human { .. } => Ok(Closer::Human),
        Caller::Role { role, run, .. } => Ok(Closer::Role { role, run }),
        Caller::Reader { .. } => Err(Code::ReadOnly),
        Caller::Tester { .. } => Err(Code::TesterRefused),
    }
}

/// Who may resolve a decision or mark it seen (3i L71, L72): the human
/// through the CLI, any decision of its business (the routed role's too:
/// L48 has land-work take only a decision the human resolved, whoever it
/// was routed to), or the routed role's current holder (`not-holder` for a
/// run that no longer holds it). Anyone else is `not-resolver`.
fn check_resolver(t: &Tx<'_>, d: &DecisionRow, who: &Closer<'_>) -> Result<(), Code> {
    match who {
        Closer::Human => Ok(()),
        Closer::Role { role, run } if *role == d.entry.routed_to => {
            if !t.holds(&d.business, role, run)? {
                return Err(Code::NotHolder);
            }
            Ok(())
        }
        _ => Err(Code::NotResolver),
    }
}

fn human_input(
    t: &mut Tx<'_>,
    business: &str,
    subject: Option<&str>,
    body: &Value,
) -> Result<String, Code> {
    Ok(evidence::insert_event(t, business, "human.input", HUMAN_ACTOR, subject, body)?.id)
}

/// Writes a close (`resolved` or `withdrawn`) and, unless the raising run
/// closed it, the DECISION message to the raising role.
fn close(
    t: &mut Tx<'_>,
    business: &Business,
    d: &DecisionRow,
    who: &Closer<'_>,
    verb: &str,
    choice: Option<&str>,
    note: Option<&str>,
) -> Result<Value, Code> {
    let kind = if choice.is_some() {
        "resolved"
    } else {
        "withdrawn"
    };
    let (by, from_role, from_run, input) = match who {
        Closer::Human => {
            let mut body = json!({"verb": verb, "decision": d.entry.id});
            if let Some(c) = choice {
                body["choice"] = json!(c);
            }
            if let Some(n) = note {
                body["note"] = json!(n);
            }
            let input = human_input(t, &business.id, Some(&d.entry.id), &body)?;
            (business.human.as_str(), HUMAN, HUMAN_RUN, Some(input))
        }
        Closer::Role { role, run } => (*run, *role, *run, None),
    };
    let row = store::insert_decision_event(
        t,
        &d.entry.id,
        kind,
        by,
        Some(from_run),
        choice,
        note,
        input.as_deref(),
    )?;
    let message = if from_run != d.entry.raised_by_run {
        let resolved = match choice {
            Some(c) => Some((c, d.entry.option_text(c).ok_or(Code::InvalidChoice)?)),
            None => None,
        };
        let body = store::close_body(
            d,
            by,
            resolved.as_ref().map(|(c, txt)| (*c, txt.as_str())),
            note,
        );
        // A thread run's decision is answered in the thread it was raised
        // in; any other close is filed as every message is.
        let raised_in = threads::of_run(t.db(), &business.id, &d.entry.raised_by_run)?;
        let id = ids::uuid();
        super::messages::post(
            t,
            business,
            &NewMessage {
                id: &id,
                business: &business.id,
                from_role,
                from_run,
                to_role: &d.entry.raised_by_role,
                class: "DECISION",
                body: &body,
                decision: Some(&d.entry.id),
                request: input.as_deref(),
                ..Default::default()
            },
            raised_in.as_deref(),
        )?;
        Some(id)
    } else {
        None
    };
    let closed = store::closing_event(t.db(), &d.entry.id)?
        .as_ref()
        .map_or(Value::Null, crate::handlers::views::decision_event);
    Ok(json!({
        "decision": d.entry.id,
        "kind": kind,
        "closed": closed,
        "seq": row.id.parse::<i64>().ok(),
        "input": input,
        "message": message,
    }))
}

fn load_open(t: &Tx<'_>, business: &str, id: &str) -> Result<DecisionRow, Code> {
    if !ids::is_uuid(id) {
        return Err(Code::DecisionNotFound);
    }
    let d = store::load(t.db(), business, id)?.ok_or(Code::DecisionNotFound)?;
    if !d.is_open() {
        return Err(Code::DecisionClosed);
    }
    Ok(d)
}

/// `decision.resolve {id,choice,note?}`.
pub struct Resolve {
    id: String,
    choice: String,
    note: Option<String>,
}

impl Verb for Resolve {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let id = args.str("id", 64)?;
        let choice = args.str("choice", 160)?;
        let note = args.opt_str("note", NOTE_MAX)?;
        args.finish()?;
        Ok(Resolve { id, choice, note })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        resolve(core, caller, self)
    }
}

fn resolve(core: &mut Core, caller: &Caller, args: Resolve) -> Result<Value, Code> {
    let who = closer(caller)?;
    let Resolve { id, choice, note } = args;
    let config = core.config.clone();
    let business = config.business(caller.business())?;
    core.store.write(|t| {
        let d = load_open(t, &business.id, &id)?;
        check_resolver(t, &d, &who)?;
        if d.entry.option_text(&choice).is_none() {
            return Err(Code::InvalidChoice);
        }
        close(
            t,
            business,
            &d,
            &who,
            "decision.resolve",
            Some(&choice),
            note.as_deref(),
        )
    })
}

/// `{id, note?}`: the args of `decision.withdraw` and `decision.seen`.
pub struct IdNote {
    id: String,
    note: Option<String>,
}

impl IdNote {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let id = args.str("id", 64)?;
        let note = args.opt_str("note", NOTE_MAX)?;
        args.finish()?;
        Ok(IdNote { id, note })
    }
}

/// `decision.withdraw {id,note?}`: the raising role instance or the human.
pub struct Withdraw(IdNote);

impl Verb for Withdraw {
    fn parse(args: Fields) -> Result<Self, Code> {
        IdNote::parse(args).map(Withdraw)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        withdraw(core, caller, self.0)
    }
}

fn withdraw(core: &mut Core, caller: &Caller, args: IdNote) -> Result<Value, Code> {
    let who = closer(caller)?;
    let IdNote { id, note } = args;
    let config = core.config.clone();
    let business = config.business(caller.business())?;
    core.store.write(|t| {
        let d = load_open(t, &business.id, &id)?;
        if let Closer::Role { role, run } = &who {
            if *role != d.entry.raised_by_role {
                return Err(Code::NotRaiser);
            }
            if !t.holds(&business.id, role, run)? {
                return Err(Code::NotHolder);
            }
        }
        close(
            t,
            business,
            &d,
            &who,
            "decision.withdraw",
            None,
            note.as_deref(),
        )
    })
}

/// `decision.seen {id,note?}`: the resolver's acknowledgement; the decision stays open.
pub struct Seen(IdNote);

impl Verb for Seen {
    fn parse(args: Fields) -> Result<Self, Code> {
        IdNote::parse(args).map(Seen)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        seen(core, caller, self.0)
    }
}

fn seen(core: &mut Core, caller: &Caller, args: IdNote) -> Result<Value, Code> {
    let who = closer(caller)?;
    let IdNote { id, note } = args;
    let config = core.config.clone();
    let business = config.business(caller.business())?;
    core.store.write(|t| {
        let d = load_open(t, &business.id, &id)?;
        check_resolver(t, &d, &who)?;
        let (by, run) = match &who {
            Closer::Human => (business.human.as_str(), HUMAN_RUN),
            Closer::Role { run, .. } => (*run, *run),
        };
        let w = store::insert_decision_event(
            t,
            &d.entry.id,
            "seen",
            by,
            Some(run),
            None,
            note.as_deref(),
            None,
        )?;
        Ok(json!({"decision": d.entry.id, "kind": "seen", "by": by, "at": w.at}))
    })
}

/// `decisions {list: 'roles' | 'recent'}`: human and reader sessions only.
/// `roles` also takes the paging extension (`verbs::reads::open_for_roles_page`).
pub enum List {
    Roles(super::reads::PageArgs),
    Recent,
}

impl ReadVerb for List {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let which = args.str("list", 16)?;
        let list = match which.as_str() {
            "roles" => List::Roles(super::reads::PageArgs::take(
                &mut args,
                super::reads::DECISIONS_PAGE_MAX,
            )?),
            "recent" => List::Recent,
            _ => return Err(Code::InvalidRequest),
        };
        args.finish()?;
        Ok(list)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        match self {
            List::Roles(page) => super::reads::open_for_roles_page(core, caller, page),
            List::Recent => Ok(Value::Array(
                crate::store::reads::recent_closed(core.store.db(), caller.business(), RECENT)?
                    .iter()
                    .map(|(d, closed)| crate::handlers::views::closed_decision(d, closed.as_ref()))
                    .collect(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs() {
        assert!(is_requirement_ref("REQ-DEC-2"));
        for bad in ["REQ-DEC-0", "REQ-dec-2", "REQ--2", "REQ-DEC-", "REQ-DEC-2a"] {
            assert!(!is_requirement_ref(bad), "{bad}");
        }
    }

    #[test]
    fn option_lists() {
        let two = json!([{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}]);
        assert_eq!(parse_options(Some(two)).map(|o| o.len()), Ok(2));
        let cases = [
            (json!("yes"), Code::InvalidOptions),
            (json!([{"key": "yes", "text": "Yes"}]), Code::InvalidOptions),
            (
                json!([{"key": "a", "text": "A"}, {"key": "a", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": "-a", "text": "A"}, {"key": "b", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": "a b", "text": "A"}, {"key": "b", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": "a", "text": ""}, {"key": "b", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": "a", "text": "x\u{0}y"}, {"key": "b", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": 1, "text": "A"}, {"key": "b", "text": "B"}]),
                Code::InvalidOptions,
            ),
            (
                json!([{"key": "a"}, {"key": "b", "text": "B"}]),
                Code::InvalidRequest,
            ),
            (
                json!([{"key": "a", "text": "A", "x": 1}, {"key": "b", "text": "B"}]),
                Code::InvalidRequest,
            ),
            (json!(["a", "b"]), Code::InvalidRequest),
        ];
        for (v, code) in cases {
            assert_eq!(parse_options(Some(v.clone())), Err(code), "{v}");
        }
        let ten: Vec<Value> = (0..10)
            .map(|i| json!({"key": format!("k{i}"), "text": "t"}))
            .collect();
        assert_eq!(
            parse_options(Some(Value::Array(ten))),
            Err(Code::InvalidOptions)
        );
        let long_key = "k".repeat(161);
        assert_eq!(
            parse_options(Some(
                json!([{"key": long_key, "text": "A"}, {"key": "b", "text": "B"}])
            )),
            Err(Code::InvalidOptions)
        );
        let ok_key = format!("a{}", "_.:/-".repeat(31));
        assert!(parse_options(Some(
            json!([{"key": ok_key, "text": "A"}, {"key": "b", "text": "B"}])
        ))
        .is_ok());
        assert_eq!(parse_options(None), Err(Code::InvalidOptions));
    }
}
