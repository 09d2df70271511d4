//! The verbs whose Git side runs off the writer thread (3i rows 138 and
//! 148): `spec.read`, a cited `decision.raise`, `record.write`, and the
//! human's editor verbs `project.files`, `project.file`,
//! `project.file.save`. Their writer-side part ([`prepare`]) checks the
//! caller and resolves the project to a [`Job`]; the server runs the job on
//! a blocking worker and hands its outcome back to the writer
//! ([`super::finish_staged`]), which stores a commit's receipt
//! ([`store_receipt`]) and does what [`Then`] says with it. In process
//! (`dispatch`), the job runs inline.

use super::decisions::Raise;
use super::{messages, role_session, Args, Verb};
use crate::authorize;
use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::policy::routing;
use crate::project::write::{self, Author, Kind, RecordPath};
use crate::project::{is_full_sha, records, Done, Job, Receipt, Work, SPEC_PATH};
use crate::store::evidence::{self, Actor};
use crate::store::messages as msgs;
use serde_json::{json, Map, Value};

/// The verbs the server always runs in three stages (prepare on the
/// writer, Git on a worker, finish on the writer).
pub const STAGED: &[&str] = &[
    "spec.read",
    "record.write",
    "project.files",
    "project.file",
    "project.file.save",
];

/// The definitions whose instances get the spec review notice (3i row 143).
pub const SPEC_REVIEWERS: &[&str] = &["pm", "cto"];

/// True when the server runs this request in three stages: a [`STAGED`]
/// verb, or a `decision.raise` that cites the spec (`spec_path` or
/// `spec_commit` given; an uncited raise stays synchronous, unchanged).
pub fn is_staged(verb: &str, args: Option<&Map<String, Value>>) -> bool {
    if STAGED.contains(&verb) {
        return true;
    }
    verb == "decision.raise"
        && args.is_some_and(|a| {
            ["spec_path", "spec_commit"]
                .iter()
                .any(|k| a.get(*k).is_some_and(|v| !v.is_null()))
        })
}

/// What the writer does with a staged verb's Git outcome.
pub enum Then {
    /// Answer it (after the known-token check).
    Reply,
    /// The Git side confirmed the citation: raise the decision, with every
    /// usual check run again on the writer.
    Raise(Box<Raise>),
}

/// A prepared staged verb: its Git job (none when there is nothing to
/// read after all), what to do with the outcome, and the task its refusal
/// is filed under (`verbs::prepare_staged` sets it from the request, as
/// the dispatch files any refusal).
pub struct Staged {
    pub job: Option<Job>,
    pub then: Then,
    pub subject: Option<String>,
}

/// The writer-side part of a staged verb.
pub fn prepare(core: &mut Core, caller: &Caller, verb: &str, args: Args) -> Result<Staged, Code> {
    match verb {
        "spec.read" => Ok(Staged {
            job: Some(spec_read(core, caller, args)?),
            then: Then::Reply,
            subject: None,
        }),
        "record.write" | "project.files" | "project.file" | "project.file.save" => {
            let job = match verb {
                "record.write" => record_write(core, caller, args)?,
                "project.files" => files(core, caller, args)?,
                "project.file" => file(core, caller, args)?,
                _ => save(core, caller, args)?,
            };
            Ok(Staged {
                job: Some(job),
                then: Then::Reply,
                subject: None,
            })
        }
        "decision.raise" => {
            let raise = Raise::parse(args)?;
            let job = raise.git_job(core, caller)?;
            Ok(Staged {
                job,
                subject: raise.subject(),
                then: Then::Raise(Box::new(raise)),
            })
        }
        _ => Err(Code::UnknownVerb),
    }
}

/// What the writer does once the Git side answered: a commit's receipt
/// first (if it can't be stored, `outcome-unknown`: the commit stands),
/// then what `then` says.
pub fn finish(
    core: &mut Core,
    caller: &Caller,
    then: Then,
    outcome: Result<Done, Code>,
) -> Result<Value, Code> {
    let done = outcome?;
    if let Some(r) = &done.receipt {
        store_receipt(core, caller, r).map_err(|_| Code::OutcomeUnknown)?;
    }
    match then {
        Then::Reply => Ok(done.reply),
        Then::Raise(raise) => raise.raise(core, caller),
    }
}

/// A staged verb in one go on the writer thread, for in-process dispatch
/// (tests; the socket never runs Git here): prepare, Git, the receipt.
pub fn inline(core: &mut Core, caller: &Caller, verb: &str, args: Args) -> Result<Value, Code> {
    let staged = prepare(core, caller, verb, args)?;
    let outcome = match staged.job {
        Some(job) => job.run(crate::budget::Budget::start()),
        None => Ok(Done {
            reply: Value::Null,
            receipt: None,
        }),
    };
    finish(core, caller, staged.then, outcome)
}

pub fn spec_read_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    inline(core, caller, "spec.read", args)
}

pub fn record_write_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    inline(core, caller, "record.write", args)
}

pub fn files_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    inline(core, caller, "project.files", args)
}

pub fn file_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    inline(core, caller, "project.file", args)
}

pub fn save_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    inline(core, caller, "project.file.save", args)
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
fn spec_read(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Job, Code> {
    let project = args.str("project", 64)?;
    let commit = args.opt_str("commit", 64)?;
    args.finish()?;
    if commit.as_deref().is_some_and(|c| !is_full_sha(c)) {
        return Err(Code::InvalidRequest);
    }
    let (business, role, run) = role_session(caller)?;
    let held = core
        .store
        .write(|t| evidence::holds(&t.tx, business, role, run))?;
    if !held {
        return Err(Code::NotHolder);
    }
    let b = core.config.business(business)?;
    let repo = b
        .projects
        .get(&project)
        .ok_or(Code::UnknownProject)?
        .clone();
    Ok(Job::new(
        repo,
        Work::SpecRead {
            project,
            human: b.human.clone(),
            commit,
        },
    ))
}

/// `record.write {project, path, record, decision?}`: a writable path that
/// is not under `spec/` (`project-spec-human-only`), a held role's
/// `record.write` authority with the path as its target (within-role, or a
/// decision for that path, checked here and consumed with the receipt), a
/// valid record
/// (`invalid-record`). The author is the session's
/// `<definition>.<instance>`; no author is taken from the request.
fn record_write(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Job, Code> {
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
        core.store.conn(),
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
    Ok(Job::new(
        repo,
        Work::Record {
            project,
            path,
            bytes,
            author: Author::agent(business, definition, role),
            decision,
        },
    ))
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
fn files(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Job, Code> {
    let project = args.str("project", 64)?;
    args.finish()?;
    let (_, repo) = repo_of(core, caller.business(), &project)?;
    Ok(Job::new(repo, Work::Files { project }))
}

/// `project.file {project, path}`.
fn file(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Job, Code> {
    let project = args.str("project", 64)?;
    let path = args.str("path", 256)?;
    args.finish()?;
    let (_, repo) = repo_of(core, caller.business(), &project)?;
    let path = editor_path(&path)?;
    Ok(Job::new(repo, Work::File { path }))
}

/// `project.file.save {project, path, base, content}`: `base` a full SHA-1
/// (the `commit` `project.file` answered; `HEAD` for a new docs file),
/// `content` Markdown (`invalid-record`), committed as the business's human.
fn save(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Job, Code> {
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
    Ok(Job::new(
        repo,
        Work::Save {
            project,
            path,
            base,
            bytes: content.into_bytes(),
            author,
        },
    ))
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
                messages::HUMAN_ACTOR,
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
