//! The project verbs: the human's `project.create` and `project.list`
//! (3i row 121: a project groups threads), and the verbs whose Git side
//! runs off the writer thread (3i rows 138 and
//! 148): `spec.read`, a cited `decision.raise`, `record.write`, and the
//! human's editor verbs `project.files`, `project.file`,
//! `project.file.save`. Each is a [`GitStaged`]: its writer-side part
//! checks the caller and resolves the project to a [`Job`]; the job runs
//! off the writer (`crate::handlers::staged`), and the finish stores a
//! commit's receipt ([`store_receipt`]) and does what [`Then`] says.

use super::decisions::Raise;
use super::messages;
use super::threads::name;
use crate::authorize;
use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::git::write::{self, Author, Kind, RecordPath};
use crate::git::{is_full_sha, records, Done, Job, Receipt, Work, SPEC_PATH};
use crate::handlers::fields::Fields;
use crate::handlers::handler::{role_session, ReadVerb, Verb};
use crate::handlers::staged::{Prepared, Slow, Staged};
use crate::ids;
use crate::policy::routing;
use crate::store::evidence::{self, Actor};
use crate::store::messages as msgs;
use crate::store::threads as store;
use serde_json::{json, Value};

/// The definitions whose instances get the spec review notice (3i row 143).
pub const SPEC_REVIEWERS: &[&str] = &["pm", "cto"];

/// What the writer does with a staged verb's Git outcome.
pub enum Then {
    /// Answer it (after the known-token check).
    Reply,
    /// The Git side confirmed the citation: raise the decision, with every
    /// usual check run again on the writer.
    Raise(Box<Raise>),
}

/// A prepared verb with a Git side: its job (none when there is nothing
/// to read after all) and what to do with the outcome.
pub struct GitStaged {
    job: Option<Job>,
    then: Then,
}

impl GitStaged {
    fn reply(job: Job) -> Prepared {
        Prepared::new(GitStaged {
            job: Some(job),
            then: Then::Reply,
        })
    }
}

impl Staged for GitStaged {
    type Found = Done;
    const LOST: Code = Code::ProjectUnavailable;

    fn slow(&mut self) -> Option<Slow<Done>> {
        let job = self.job.take()?;
        let fence = job.fence();
        Some(Slow {
            run: Box::new(move |budget| job.run(budget)),
            fence: Some(fence),
        })
    }

    /// A commit was made: it stands whatever happens next.
    fn committed(&self, found: Option<Result<&Done, Code>>) -> bool {
        matches!(found, Some(Ok(done)) if done.receipt.is_some())
    }

    /// A commit's receipt first (if it can't be stored, `outcome-unknown`:
    /// the commit stands), then what `then` says.
    fn finish(
        self,
        core: &mut Core,
        caller: &Caller,
        found: Option<Result<Done, Code>>,
    ) -> Result<Value, Code> {
        let done = found.unwrap_or(Ok(Done {
            reply: Value::Null,
            receipt: None,
        }))?;
        if let Some(r) = &done.receipt {
            store_receipt(core, caller, r).map_err(|_| Code::OutcomeUnknown)?;
        }
        match self.then {
            Then::Reply => Ok(done.reply),
            Then::Raise(raise) => raise.raise(core, caller),
        }
    }
}

/// A `decision.raise` that cites the spec (the table stages it only
/// then): the usual checks, and the Git job reading the current spec.
pub fn cited_raise(core: &mut Core, caller: &Caller, args: Fields) -> Result<Prepared, Code> {
    let raise = Raise::parse(args)?;
    let job = raise.git_job(core, caller)?;
    Ok(Prepared::new(GitStaged {
        job,
        then: Then::Raise(Box::new(raise)),
    }))
}

/// `project.create {name, repo?}` → `{id}`.
pub struct ProjectCreate {
    name: String,
    repo: Option<String>,
}

impl Verb for ProjectCreate {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let name = name(&mut args, "name")?;
        let repo = args.opt_str("repo", 64)?;
        args.finish()?;
        Ok(ProjectCreate { name, repo })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        if let Some(r) = &self.repo {
            if !biz.projects.contains_key(r) {
                return Err(Code::UnknownRepo);
            }
        }
        let id = ids::uuid();
        core.store.write(|t| {
            if store::project_named(t.db(), &biz.id, &self.name)? {
                return Err(Code::ProjectExists);
            }
            let at = store::insert_project(
                t,
                &biz.id,
                &id,
                &self.name,
                self.repo.as_deref(),
                &biz.human,
            )?;
            Ok(json!({"id": id, "at": at}))
        })
    }
}

/// `project.list` → the business's projects, oldest first.
pub struct ProjectList;

impl ReadVerb for ProjectList {
    fn parse(args: Fields) -> Result<Self, Code> {
        args.finish()?;
        Ok(ProjectList)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let rows = store::projects(core.store.db(), caller.business())?;
        Ok(rows
            .into_iter()
            .map(|p| json!({"id": p.id, "name": p.name, "repo": p.repo, "by": p.by, "at": p.at}))
            .collect())
    }
}

/// The business and the repository of `project`.
fn repo_of<'a>(
    core: &'a Core,
    business: &str,
    project: &str,
) -> Result<(&'a Business, std::path::PathBuf), Code> {
    let b = core.config.business(business)?;
    let repo = b.projects.get(project).ok_or(Code::UnknownProject)?.clone();
    Ok((b, repo))
}

/// `spec.read {project, commit?}`: a held role instance of the business.
pub fn spec_read(core: &mut Core, caller: &Caller, mut args: Fields) -> Result<Prepared, Code> {
    let project = args.str("project", 64)?;
    let commit = args.opt_str("commit", 64)?;
    args.finish()?;
    if commit.as_deref().is_some_and(|c| !is_full_sha(c)) {
        return Err(Code::InvalidRequest);
    }
    let (business, role, run) = role_session(caller)?;
    let held = core.store.write(|t| t.holds(business, role, run))?;
    if !held {
        return Err(Code::NotHolder);
    }
    let b = core.config.business(business)?;
    let repo = b
        .projects
        .get(&project)
        .ok_or(Code::UnknownProject)?
        .clone();
    Ok(GitStaged::reply(Job::new(
        repo,
        Work::SpecRead {
            project,
            human: b.human.clone(),
            commit,
        },
    )))
}

/// `record.write {project, path, record, decision?}`: a writable path that
/// is not under `spec/` (`project-spec-human-only`), a held role's
/// `record.write` authority with the path as its target (within-role, or a
/// decision for that path, checked here and consumed with the receipt), a
/// valid record
/// (`invalid-record`). The author is the session's
/// `<definition>.<instance>`; no author is taken from the request.
pub fn record_write(core: &mut Core, caller: &Caller, mut args: Fields) -> Result<Prepared, Code> {
    let project = args.str("project", 64)?;
    let path = args.str("path", 256)?;
    let record = args.take_present("record").ok_or(Code::InvalidRequest)?;
    let decision = args.opt_str("decision", 64)?;
    args.finish()?;
    let (business, role, run) = role_session(caller)?;
    // "spec/ always refuses" (L269): anything under it, before the path
    // rule, so an agent learns the spec is the human's whatever it named.
    if write::under_spec(&path) {
        return Err(Code::ProjectSpecHumanOnly);
    }
    let path = write::parse_path(&path)?;
    if path.kind == Kind::Spec {
        return Err(Code::ProjectSpecHumanOnly);
    }
    let config = core.config.clone();
    let b = config.business(business)?;
    // The approval must be for this path in this project (DESIGN.md
    // "Git"): checked before any Git work, consumed with the receipt.
    authorize::check_in_project(
        core.store.db(),
        b,
        role,
        run,
        "record.write",
        authorize::InProject {
            project: &project,
            path: &path.path,
        },
        decision.as_deref(),
    )?;
    let (_, repo) = repo_of(core, business, &project)?;
    let bytes = records::record_bytes(&path, record)?;
    let definition = routing::definition_of(b, role).unwrap_or(role);
    Ok(GitStaged::reply(Job::new(
        repo,
        Work::Record {
            project,
            path,
            bytes,
            author: Author::agent(business, definition, role),
            decision,
        },
    )))
}

/// A path the editor verbs take: the spec or a docs file; anything else
/// is `project-path-invalid`.
fn editor_path(path: &str) -> Result<RecordPath, Code> {
    let p = write::parse_path(path)?;
    match p.kind {
        Kind::Spec | Kind::Doc => Ok(p),
        _ => Err(Code::ProjectPathInvalid),
    }
}

/// `project.files {project}` (the human; the table refuses every other class).
pub fn files(core: &mut Core, caller: &Caller, mut args: Fields) -> Result<Prepared, Code> {
    let project = args.str("project", 64)?;
    args.finish()?;
    let (_, repo) = repo_of(core, caller.business(), &project)?;
    Ok(GitStaged::reply(Job::new(repo, Work::Files { project })))
}

/// `project.file {project, path}`.
pub fn file(core: &mut Core, caller: &Caller, mut args: Fields) -> Result<Prepared, Code> {
    let project = args.str("project", 64)?;
    let path = args.str("path", 256)?;
    args.finish()?;
    let (_, repo) = repo_of(core, caller.business(), &project)?;
    let path = editor_path(&path)?;
    Ok(GitStaged::reply(Job::new(repo, Work::File { path })))
}

/// `project.file.save {project, path, base, content}`: `base` a full SHA-1
/// (the `commit` `project.file` answered; `HEAD` for a new docs file),
/// `content` Markdown (`invalid-record`), committed as the business's human.
pub fn save(core: &mut Core, caller: &Caller, mut args: Fields) -> Result<Prepared, Code> {
    let project = args.str("project", 64)?;
    let path = args.str("path", 256)?;
    let base = args.str("base", 64)?;
    let content = match args.take("content") {
        Some(Value::String(s)) => s,
        _ => return Err(Code::InvalidRequest),
    };
    args.finish()?;
    if !is_full_sha(&base) {
        return Err(Code::InvalidRequest);
    }
    let (b, repo) = repo_of(core, caller.business(), &project)?;
    let author = Author::human(&b.id, &b.human);
    let path = editor_path(&path)?;
    records::check_markdown(&content)?;
    Ok(GitStaged::reply(Job::new(
        repo,
        Work::Save {
            project,
            path,
            base,
            bytes: content.into_bytes(),
            author,
        },
    )))
}

/// The spec review notice's text (3i row 143): it begins as the spec words
/// it ([`msgs::spec_notice_lead`]), then asks for the one answer.
pub fn review_notice_body(project: &str, commit: &str, base: &str) -> String {
    format!(
        "{} Read the change with read_spec, check it against settled decisions \
         and work in flight, and answer the chief of staff once, in reply to this \
         notice: an INFO beginning \"Accept\", or a BLOCK naming each conflict. \
         A BLOCK does not revert the commit.",
        msgs::spec_notice_lead(project, commit, base)
    )
}

/// Stores what a staged verb's commit needs on the writer side, in one
/// transaction. `record.write`: the authority consumed (its decision, if
/// any) with `action.allowed`, and `record.written {project, path,
/// commit}`. `project.file.save`: `project.file.saved {project, path,
/// commit, base}` and, for the spec, one RESULT from `_bus` in no thread to
/// each instance whose definition is pm or cto. A failure here leaves the
/// commit standing; the caller answers `outcome-unknown`.
pub fn store_receipt(core: &mut Core, caller: &Caller, receipt: &Receipt) -> Result<(), Code> {
    let config = core.config.clone();
    let b = config.business(caller.business())?;
    match receipt {
        Receipt::Record {
            project,
            path,
            commit,
            decision,
        } => {
            let (business, role, run) = role_session(caller)?;
            core.store.write(|t| {
                authorize::authorize_in_project_tx(
                    t,
                    b,
                    role,
                    run,
                    "record.write",
                    authorize::InProject { project, path },
                    decision.as_deref(),
                )?;
                evidence::insert_event(
                    t,
                    business,
                    "record.written",
                    Actor::of(role, run),
                    None,
                    &json!({"project": project, "path": path, "commit": commit}),
                )?;
                Ok(())
            })
        }
        Receipt::Save {
            project,
            path,
            commit,
            base,
        } => core.store.write(|t| {
            evidence::insert_event(
                t,
                &b.id,
                "project.file.saved",
                crate::core::HUMAN_ACTOR,
                None,
                &json!({"project": project, "path": path, "commit": commit, "base": base}),
            )?;
            if path != SPEC_PATH {
                return Ok(());
            }
            let body = review_notice_body(project, commit, base);
            for instance in b.roles.keys() {
                let definition = routing::definition_of(b, instance);
                if !definition.is_some_and(|d| SPEC_REVIEWERS.contains(&d)) {
                    continue;
                }
                let id = crate::ids::uuid();
                messages::post(t, b, &msgs::bus_notice(&id, &b.id, instance, &body), None)?;
            }
            Ok(())
        }),
    }
}
