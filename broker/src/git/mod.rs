//! Project records over Git (3i row 138): the business's declared projects
//! resolve to local Git repositories (`Business::projects`), read and
//! written in process ([`git`]: gix, no `git` child). Everything here runs
//! off the writer thread and outside every store transaction: the writer
//! side prepares a [`Job`] (the caller checked, the repository resolved),
//! the server runs it on a blocking worker within the request's budget
//! (`crate::budget`) and waits for it no longer ([`Fence`]), and the writer
//! side finishes it (the reply's token check, or the refusal's evidence).

pub mod records;
pub mod repo;
pub mod write;

use crate::error::Code;
use gix::objs::tree::EntryKind;
use gix::ObjectId;
use repo::Repo;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
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
    pub repo: PathBuf,
    pub work: Work,
    fence: Arc<Fence>,
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
    /// The Git side of a staged verb on the repository at `repo`.
    pub fn new(repo: PathBuf, work: Work) -> Job {
        Job {
            repo,
            work,
            fence: Arc::new(Fence::default()),
        }
    }

    /// The fence the server holds while it waits for this job.
    pub fn fence(&self) -> Arc<Fence> {
        Arc::clone(&self.fence)
    }

    /// Runs the Git side within `budget` (every step gets what is left of
    /// it: [`repo::Repo`]). Blocking: call it on a worker thread.
    pub fn run(self, budget: crate::budget::Budget) -> Result<Done, Code> {
        let reply = |reply| Done {
            reply,
            receipt: None,
        };
        let open = || Repo::open(&self.repo, budget);
        match self.work {
            Work::SpecRead {
                project,
                human,
                commit,
            } => {
                let snap = spec_snapshot(&open()?, &human, commit.as_deref())?;
                Ok(reply(snap.reply(&project)))
            }
            Work::SpecCite { human, commit } => {
                let snap = spec_snapshot(&open()?, &human, None)?;
                check_citation(&snap, &commit)?;
                Ok(reply(
                    json!({"spec_commit": snap.commit, "head": snap.head}),
                ))
            }
            Work::Files { project } => Ok(reply(files(&open()?, &project)?)),
            Work::File { path } => Ok(reply(file(&open()?, &path)?)),
            Work::Record {
                project,
                path,
                bytes,
                author,
                decision,
            } => {
                let message = format!("record.write {}\n\nby {}", path.path, author.name);
                let done = write::commit_file(
                    &self.repo,
                    &Write {
                        path: &path,
                        content: &bytes,
                        author: &author,
                        message: &message,
                        base: None,
                    },
                    budget,
                    &self.fence,
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
                    &self.repo,
                    &Write {
                        path: &path,
                        content: &bytes,
                        author: &author,
                        message: &message,
                        base: Some(&base),
                    },
                    budget,
                    &self.fence,
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

/// Whether a job's one write may still move `HEAD`. The server waits for a
/// job until its budget (and a grace) has passed; if it stops waiting it
/// abandons the job, and from then on the job may not start moving `HEAD`
/// (a worker held up in the file system, a FIFO where a file should be,
/// is never waited for past the budget). A job already moving `HEAD` when
/// the server stops waiting makes the answer `outcome-unknown`.
#[derive(Debug, Default)]
pub struct Fence(AtomicU8);

const FENCE_OPEN: u8 = 0;
const FENCE_WRITING: u8 = 1;
const FENCE_ABANDONED: u8 = 2;

impl Fence {
    /// The job's side, just before it moves `HEAD`: true if it may.
    pub fn enter(&self) -> bool {
        self.0
            .compare_exchange(
                FENCE_OPEN,
                FENCE_WRITING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The server's side, once it stops waiting: true when the job has not
    /// started moving `HEAD` and now never will.
    pub fn abandon(&self) -> bool {
        match self.0.compare_exchange(
            FENCE_OPEN,
            FENCE_ABANDONED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => true,
            Err(state) => state == FENCE_ABANDONED,
        }
    }
}

/// At most this many files in a `project.files` reply.
pub const FILES_MAX: usize = 200;

/// The last changing commit of `path` at or before `at`: `(commit, author
/// name, author date)`.
fn last_change(repo: &Repo, at: ObjectId, path: &str) -> Result<(String, String, String), Code> {
    let Some(c) = repo.history(at, path, 1)?.first().copied() else {
        return Err(Code::ProjectFileMissing);
    };
    let shown = repo.shown(c)?;
    Ok((c.to_string(), shown.author, shown.at))
}

/// `project.files`: the spec and every `docs/NAME.md` at `HEAD` (plain
/// files only), each with its last changing commit, sorted by path; at
/// most [`FILES_MAX`] and `truncated` past it.
fn files(repo: &Repo, project: &str) -> Result<Value, Code> {
    let tip = repo.head()?;
    let root = repo.tree_of(tip)?;
    let mut paths = Vec::new();
    for (dir, entry) in repo.tree_entries(root)? {
        if !(dir == "spec" || dir == "docs") || entry.kind != EntryKind::Tree {
            continue;
        }
        for (name, e) in repo.tree_entries(entry.id)? {
            let path = format!("{dir}/{name}");
            let plain = matches!(e.kind, EntryKind::Blob | EntryKind::BlobExecutable);
            let editable = write::parse_path(&path)
                .is_ok_and(|p| matches!(p.kind, write::Kind::Spec | write::Kind::Doc));
            if plain && editable {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths.dedup();
    let truncated = paths.len() > FILES_MAX;
    paths.truncate(FILES_MAX);
    let mut list = Vec::with_capacity(paths.len());
    for p in paths {
        let (commit, author, at) = last_change(repo, tip, &p)?;
        list.push(json!({"path": p, "commit": commit, "author": author, "at": at}));
    }
    Ok(json!({"project": project, "head": tip.to_string(), "files": list, "truncated": truncated}))
}

/// The text of blob `object`: at most `FILE_MAX` bytes of UTF-8, else
/// `project-file-invalid`.
fn blob_text(repo: &Repo, object: ObjectId) -> Result<String, Code> {
    let bytes = repo.blob(object, FILE_MAX)?;
    String::from_utf8(bytes).map_err(|_| Code::ProjectFileInvalid)
}

/// `project.file`: one committed spec or docs file at `HEAD`.
fn file(repo: &Repo, path: &RecordPath) -> Result<Value, Code> {
    let tip = repo.head()?;
    let (blob, _) = write::committed_blob(repo, tip, path)?.ok_or(Code::ProjectFileMissing)?;
    let content = blob_text(repo, blob)?;
    let (commit, author, at) = last_change(repo, tip, &path.path)?;
    Ok(json!({
        "path": path.path, "head": tip.to_string(), "commit": commit,
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

/// The committed `spec/north-star.md` at `commit` (a full SHA-1 reachable
/// from `HEAD`) or at `HEAD`: only committed bytes, its last changing
/// commit, and whether that commit's author is the business's human.
pub fn spec_snapshot(repo: &Repo, human: &str, commit: Option<&str>) -> Result<Snapshot, Code> {
    let tip = repo.head()?;
    let at = match commit {
        None => tip,
        Some(c) if !is_full_sha(c) => return Err(Code::InvalidRequest),
        Some(c) => {
            let id = ObjectId::from_hex(c.as_bytes()).map_err(|_| Code::InvalidRequest)?;
            if !repo.is_commit(id)? || !repo.is_ancestor(id, tip)? {
                return Err(Code::UnknownCommit);
            }
            id
        }
    };
    let changes = repo.history(at, SPEC_PATH, HISTORY_MAX + 1)?;
    let truncated = changes.len() > HISTORY_MAX;
    let mut history = Vec::with_capacity(changes.len().min(HISTORY_MAX));
    for c in changes.into_iter().take(HISTORY_MAX) {
        let shown = repo.shown(c)?;
        history.push(Entry {
            commit: c.to_string(),
            author: shown.author,
            at: shown.at,
            subject: shown.subject,
        });
    }
    let Some(last) = history.first() else {
        return Err(Code::ProjectFileMissing);
    };
    // The committed entry must be a plain file in a plain `spec` tree, as
    // the editor and the writer require (`project-path-invalid`): a symlink's
    // target text is no spec. Absent: deleted by its last changing commit.
    let spec = write::parse_path(SPEC_PATH)?;
    let (object, _) = write::committed_blob(repo, at, &spec)?.ok_or(Code::ProjectFileMissing)?;
    let content = blob_text(repo, object)?;
    Ok(Snapshot {
        head: at.to_string(),
        commit: last.commit.clone(),
        confirmed: last.author == human,
        content,
        history,
        truncated,
    })
}
