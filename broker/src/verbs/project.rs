//! The project verbs whose Git side runs off the writer thread (3i row
//! 138): `spec.read`. Their writer-side part ([`prepare`]) checks the
//! caller and resolves the project to a [`Job`]; the server runs the job on
//! a blocking worker and hands its outcome back to the writer
//! ([`super::finish_staged`]). In process (`dispatch`), the job runs inline.

use super::{role_session, Args};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::project::git::Git;
use crate::project::{is_full_sha, Job, Work};
use crate::store::evidence;
use serde_json::Value;

/// The verbs the server runs in three stages (prepare on the writer, Git
/// on a worker, finish on the writer).
pub const STAGED: &[&str] = &["spec.read"];

pub fn is_staged(verb: &str) -> bool {
    STAGED.contains(&verb)
}

/// The writer-side part of a staged verb.
pub fn prepare(core: &mut Core, caller: &Caller, verb: &str, args: Args) -> Result<Job, Code> {
    match verb {
        "spec.read" => spec_read(core, caller, args),
        _ => Err(Code::UnknownVerb),
    }
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
