//! The verbs whose Git side runs off the writer thread (3i row 138):
//! `spec.read` and a cited `decision.raise`. Their writer-side part
//! ([`prepare`]) checks the caller and resolves the project to a [`Job`];
//! the server runs the job on a blocking worker and hands its outcome back
//! to the writer ([`super::finish_staged`]), which does what [`Then`] says
//! with it. In process (`dispatch`), the job runs inline.

use super::decisions::Raise;
use super::{role_session, Args, Verb};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::project::git::Git;
use crate::project::{is_full_sha, Job, Work};
use crate::store::evidence;
use serde_json::{Map, Value};

/// The verbs the server always runs in three stages (prepare on the
/// writer, Git on a worker, finish on the writer).
pub const STAGED: &[&str] = &["spec.read"];

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
/// is filed under.
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

/// What the writer does once the Git side answered.
pub fn finish(
    core: &mut Core,
    caller: &Caller,
    then: Then,
    outcome: Result<Value, Code>,
) -> Result<Value, Code> {
    let checked = outcome?;
    match then {
        Then::Reply => Ok(checked),
        Then::Raise(raise) => raise.raise(core, caller),
    }
}

/// A cited spec, as the raise hands it to the Git side.
pub fn cite_job(core: &Core, business: &str, project: &str, commit: &str) -> Result<Job, Code> {
    let b = core
        .config
        .businesses
        .get(business)
        .ok_or(Code::UnknownBusiness)?;
    let repo = b.projects.get(project).ok_or(Code::UnknownProject)?.clone();
    Ok(Job {
        git: Git::new(core.config.git.as_deref()),
        repo,
        work: Work::SpecCite {
            human: b.human.clone(),
            commit: commit.to_string(),
        },
    })
}

/// `spec.read` in one go, for in-process dispatch.
pub fn spec_read_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    spec_read(core, caller, args)?.run()
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
    let b = core
        .config
        .businesses
        .get(business)
        .ok_or(Code::UnknownBusiness)?;
    let repo = b
        .projects
        .get(&project)
        .ok_or(Code::UnknownProject)?
        .clone();
    Ok(Job {
        git: Git::new(core.config.git.as_deref()),
        repo,
        work: Work::SpecRead {
            project,
            human: b.human.clone(),
            commit,
        },
    })
}
