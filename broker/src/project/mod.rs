//! Project records over Git (3i row 138): the business's declared projects
//! resolve to local Git repositories (`Business::projects`), read through
//! the `git` executable ([`git`]). Everything here runs off the writer
//! thread and outside every store transaction: the writer side prepares a
//! [`Job`] (the caller checked, the repository resolved), the server runs
//! it on a blocking worker within the request's budget (`crate::budget`),
//! and the writer side finishes it (the reply's token check, or the
//! refusal's evidence).

pub mod git;
pub mod records;
pub mod write;

use crate::error::Code;
use git::Git;
use serde_json::{json, Value};
use std::path::PathBuf;
use write::{Author, RecordPath, Write};

/// The one spec file of a project.
pub const SPEC_PATH: &str = "spec/north-star.md";
/// At most this many path-history entries in a `spec.read` reply.
pub const HISTORY_MAX: usize = 100;
/// The largest record file the project reader accepts (the package's
/// file validation limit).
pub const FILE_MAX: usize = 1024 * 1024;

/// Git work the writer side prepared.
#[derive(Debug)]
pub struct Job {
    pub git: Git,
    pub repo: PathBuf,
    pub work: Work,
}

#[derive(Debug)]
pub enum Work {
    /// `spec.read`: the project key, the business's human (whose authorship
    /// confirms), and the commit asked for, if any.
    SpecRead {
        project: String,
        human: String,
        commit: Option<String>,
    },
    /// A cited `decision.raise`: the spec commit cited must be the spec's
    /// current file commit (`stale-spec`), and confirmed by the business's
    /// human (`spec-unconfirmed`).
    SpecCite { human: String, commit: String },
    /// `record.write`: the checked path, the bytes made from the record,
    /// the session's author, and the decision that backs it (consumed by
    /// the writer with the receipt).
    Record {
        project: String,
        path: RecordPath,
        bytes: Vec<u8>,
        author: Author,
        decision: Option<String>,
    },
    /// `project.files`: the spec and docs files at `HEAD`.
    Files { project: String },
    /// `project.file`: one spec or docs file at `HEAD`.
    File { path: RecordPath },
    /// `project.file.save`: the human's edit against the editor's base.
    Save {
        project: String,
        path: RecordPath,
        base: String,
        bytes: Vec<u8>,
        author: Author,
    },
}

/// What a job's Git side gave: the reply, and the commit it made, which the
/// writer must record before the reply goes out.
#[derive(Debug)]
pub struct Done {
    pub reply: Value,
    pub receipt: Option<Receipt>,
}

/// A commit a staged verb made, for the writer to record.
#[derive(Debug, Clone)]
pub enum Receipt {
    /// `record.write`: consume the authority (and its decision) and store
    /// `record.written {project, path, commit}`.
    Record {
        project: String,
        path: String,
        commit: String,
        decision: Option<String>,
    },
    /// `project.file.save`: store `project.file.saved {project, path,
    /// commit, base}` and, for the spec, the review notices.
    Save {
        project: String,
        path: String,
        commit: String,
        base: String,
    },
}

impl Job {
    /// Runs the Git side within `budget` (every `git` child gets what is
    /// left of it: [`Git::within`]). Blocking: call it on a worker thread.
    pub fn run(self, budget: crate::budget::Budget) -> Result<Done, Code> {
        let job = Job {
            git: self.git.within(budget),
            ..self
        };
        job.run_git()
    }

    fn run_git(self) -> Result<Done, Code> {
        let reply = |reply| Done {
            reply,
            receipt: None,
        };
        match self.work {
            Work::SpecRead {
                project,
                human,
                commit,
            } => {
                let snap = spec_snapshot(&self.git, &self.repo, &human, commit.as_deref())?;
                Ok(reply(snap.reply(&project)))
            }
            Work::SpecCite { human, commit } => {
                let snap = spec_snapshot(&self.git, &self.repo, &human, None)?;
                check_citation(&snap, &commit)?;
                Ok(reply(
                    json!({"spec_commit": snap.commit, "head": snap.head}),
                ))
            }
            Work::Files { project } => Ok(reply(files(&self.git, &self.repo, &project)?)),
            Work::File { path } => Ok(reply(file(&self.git, &self.repo, &path)?)),
            Work::Record {
                project,
                path,
                bytes,
                author,
                decision,
            } => {
                let message = format!("record.write {}\n\nby {}", path.path, author.name);
                let done = write::commit_file(
                    &self.git,
                    &self.repo,
                    &Write {
                        path: &path,
                        content: &bytes,
                        author: &author,
                        message: &message,
                        base: None,
                    },
                )?;
                Ok(Done {
                    reply: json!({"project": project, "path": path.path, "commit": done.commit}),
                    receipt: Some(Receipt::Record {
                        project,
                        path: path.path,
                        commit: done.commit,
                        decision,
                    }),
                })
            }
            Work::Save {
                project,
                path,
                base,
                bytes,
                author,
            } => {
                let message = format!("project.file.save {}", path.path);
                let done = write::commit_file(
                    &self.git,
                    &self.repo,
                    &Write {
                        path: &path,
                        content: &bytes,
                        author: &author,
                        message: &message,
                        base: Some(&base),
                    },
                )?;
                Ok(Done {
                    reply: json!({"path": path.path, "commit": done.commit}),
                    receipt: Some(Receipt::Save {
                        project,
                        path: path.path,
                        commit: done.commit,
                        base,
                    }),
                })
            }
        }
    }
}

/// At most this many files in a `project.files` reply.
pub const FILES_MAX: usize = 200;

/// The last changing commit of `path` at or before `at`: `(commit, author
/// name, author date)`.
fn last_change(
    git: &Git,
    repo: &std::path::Path,
    at: &str,
    path: &str,
) -> Result<(String, String, String), Code> {
    let out = git.run(
        repo,
        &[
            "log",
            "-1",
            "--no-renames",
            "--no-show-signature",
            "--format=%H%n%an%n%aI",
            "--end-of-options",
            at,
            "--",
            path,
        ],
        None,
    )?;
    let text = out.text()?;
    let mut f = text.trim_end_matches('\n').splitn(3, '\n');
    match (f.next(), f.next(), f.next()) {
        (Some(c), Some(a), Some(t)) if is_full_sha(c) => Ok((c.into(), a.into(), t.into())),
        _ => Err(Code::ProjectFileMissing),
    }
}

/// `project.files`: the spec and every `docs/NAME.md` at `HEAD` (plain
/// files only), each with its last changing commit, sorted by path; at
/// most [`FILES_MAX`] and `truncated` past it.
fn files(git: &Git, repo: &std::path::Path, project: &str) -> Result<Value, Code> {
    let tip = head(git, repo)?;
    let out = git.run(
        repo,
        &[
            "ls-tree",
            "-r",
            "-z",
            "--full-tree",
            "--end-of-options",
            &tip,
            "--",
            "spec",
            "docs",
        ],
        None,
    )?;
    let text = out.text()?;
    let mut paths = Vec::new();
    for rec in text.split('\0').filter(|r| !r.is_empty()) {
        let Some((meta, path)) = rec.split_once('\t') else {
            return Err(Code::ProjectUnavailable);
        };
        let plain = meta.starts_with("100644 blob ") || meta.starts_with("100755 blob ");
        let editable = write::parse_path(path)
            .is_ok_and(|p| matches!(p.kind, write::Kind::Spec | write::Kind::Doc));
        if plain && editable {
            paths.push(path.to_string());
        }
    }
    paths.sort();
    let truncated = paths.len() > FILES_MAX;
    paths.truncate(FILES_MAX);
    let mut list = Vec::with_capacity(paths.len());
    for p in paths {
        let (commit, author, at) = last_change(git, repo, &tip, &p)?;
        list.push(json!({"path": p, "commit": commit, "author": author, "at": at}));
    }
    Ok(json!({"project": project, "head": tip, "files": list, "truncated": truncated}))
}

/// The text of blob `object`: at most `FILE_MAX` bytes of UTF-8, else
/// `project-file-invalid`.
fn blob_text(git: &Git, repo: &std::path::Path, object: &str) -> Result<String, Code> {
    let out = git.run(repo, &["cat-file", "blob", object], None)?;
    if !out.ok() {
        return Err(Code::ProjectUnavailable);
    }
    if out.stdout.len() > FILE_MAX {
        return Err(Code::ProjectFileInvalid);
    }
    String::from_utf8(out.stdout).map_err(|_| Code::ProjectFileInvalid)
}

/// `project.file`: one committed spec or docs file at `HEAD`.
fn file(git: &Git, repo: &std::path::Path, path: &RecordPath) -> Result<Value, Code> {
    let tip = head(git, repo)?;
    let (blob, _) =
        write::committed_blob(git, repo, &tip, path)?.ok_or(Code::ProjectFileMissing)?;
    let content = blob_text(git, repo, &blob)?;
    let (commit, author, at) = last_change(git, repo, &tip, &path.path)?;
    Ok(json!({
        "path": path.path, "head": tip, "commit": commit,
        "content": content, "author": author, "at": at,
    }))
}

/// A citation of `commit` against the spec as it is now: a commit other
/// than the spec's last changing commit at `HEAD` is stale (a later commit
/// that changed no spec byte, a docs commit, does not make it so); the
/// current one must be the human's.
pub fn check_citation(now: &Snapshot, commit: &str) -> Result<(), Code> {
    if now.commit != commit {
        return Err(Code::StaleSpec);
    }
    if !now.confirmed {
        return Err(Code::SpecUnconfirmed);
    }
    Ok(())
}

/// True for a full SHA-1 as Git prints it: 40 lowercase hex digits. No
/// revision expression passes.
pub fn is_full_sha(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One entry of a file's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub commit: String,
    pub author: String,
    pub at: String,
    pub subject: String,
}

/// The committed spec as of a commit.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The commit read from (`HEAD`, or the one asked for).
    pub head: String,
    /// The file's last changing commit at or before `head`.
    pub commit: String,
    pub confirmed: bool,
    pub content: String,
    pub history: Vec<Entry>,
    pub truncated: bool,
}

impl Snapshot {
    fn reply(&self, project: &str) -> Value {
        let last = &self.history[0];
        json!({
            "project": project,
            "path": SPEC_PATH,
            "head": self.head,
            "commit": self.commit,
            "author": last.author,
            "at": last.at,
            "confirmed": self.confirmed,
            "content": self.content,
            "history": self.history.iter().map(|e| json!({
                "commit": e.commit, "author": e.author, "at": e.at, "subject": e.subject,
            })).collect::<Vec<_>>(),
            "truncated": self.truncated,
        })
    }
}

/// The repository's `HEAD` commit. A directory that is no repository (its
/// `.git` missing, a symlink or a file), or one with no commit, is
/// `project-unavailable`.
pub(crate) fn head(git: &Git, repo: &std::path::Path) -> Result<String, Code> {
    // A directory of its own, as the writer's lock requires: a symlinked
    // `.git` or a `gitdir:` file is no repository the bus reads.
    match std::fs::symlink_metadata(repo.join(".git")) {
        Ok(md) if md.file_type().is_dir() => {}
        _ => return Err(Code::ProjectUnavailable),
    }
    let out = git.run(
        repo,
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        None,
    )?;
    let ok = out.ok();
    let sha = String::from_utf8(out.stdout).map_err(|_| Code::ProjectUnavailable)?;
    let sha = sha.trim_end();
    if !ok || !is_full_sha(sha) {
        return Err(Code::ProjectUnavailable);
    }
    Ok(sha.to_string())
}

/// The committed `spec/north-star.md` at `commit` (a full SHA-1 reachable
/// from `HEAD`) or at `HEAD`: only committed bytes, its last changing
/// commit, and whether that commit's author is the business's human.
pub fn spec_snapshot(
    git: &Git,
    repo: &std::path::Path,
    human: &str,
    commit: Option<&str>,
) -> Result<Snapshot, Code> {
    let tip = head(git, repo)?;
    let at = match commit {
        None => tip,
        Some(c) if !is_full_sha(c) => return Err(Code::InvalidRequest),
        Some(c) => {
            let kind = git.run(repo, &["cat-file", "-t", "--end-of-options", c], None)?;
            if !kind.ok() || kind.stdout != b"commit\n" {
                return Err(Code::UnknownCommit);
            }
            let reach = git.run(
                repo,
                &["merge-base", "--is-ancestor", "--end-of-options", c, &tip],
                None,
            )?;
            match reach.code {
                Some(0) => c.to_string(),
                Some(1) => return Err(Code::UnknownCommit),
                _ => return Err(Code::ProjectUnavailable),
            }
        }
    };
    let limit = format!("--max-count={}", HISTORY_MAX + 1);
    let log = git.run(
        repo,
        &[
            "log",
            "-z",
            "--no-renames",
            "--no-show-signature",
            "--format=%H%n%an%n%aI%n%s",
            &limit,
            "--end-of-options",
            &at,
            "--",
            SPEC_PATH,
        ],
        None,
    )?;
    let text = log.text()?;
    let mut history = Vec::new();
    for rec in text.split('\0').filter(|r| !r.is_empty()) {
        let mut f = rec.trim_start_matches('\n').splitn(4, '\n');
        let (Some(c), Some(a), Some(t), s) = (f.next(), f.next(), f.next(), f.next()) else {
            return Err(Code::ProjectUnavailable);
        };
        if !is_full_sha(c) {
            return Err(Code::ProjectUnavailable);
        }
        history.push(Entry {
            commit: c.into(),
            author: a.into(),
            at: t.into(),
            subject: s.unwrap_or("").into(),
        });
    }
    let truncated = history.len() > HISTORY_MAX;
    history.truncate(HISTORY_MAX);
    let Some(last) = history.first() else {
        return Err(Code::ProjectFileMissing);
    };
    // The committed entry must be a plain file in a plain `spec` tree, as
    // the editor and the writer require (`project-path-invalid`): a symlink's
    // target text is no spec. Absent: deleted by its last changing commit.
    let spec = write::parse_path(SPEC_PATH)?;
    let (object, _) =
        write::committed_blob(git, repo, &at, &spec)?.ok_or(Code::ProjectFileMissing)?;
    let content = blob_text(git, repo, &object)?;
    Ok(Snapshot {
        head: at,
        commit: last.commit.clone(),
        confirmed: last.author == human,
        content,
        history,
        truncated,
    })
}
