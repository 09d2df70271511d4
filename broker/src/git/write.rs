//! The one commit primitive: write one project file as one commit, under
//! the project lock, in process (gix). Nothing of the work tree, its index
//! or the repository's hooks takes part: the blob goes in as the bytes
//! given (no attribute or filter is consulted), the new tree is the
//! `HEAD` tree with that one entry set, the commit names the authors the
//! bus gives, and `HEAD`'s branch moves by compare-and-swap under Git's
//! own ref lock (`<ref>.lock`), only if it still points where the write
//! started. Blocking: a worker thread runs it.

use super::repo::Repo;
use super::Fence;
use crate::budget::Budget;
use crate::error::Code;
use gix::objs::tree::EntryKind;
use gix::ObjectId;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The lock every project write holds, inside the repository's `.git`.
pub const LOCK_FILE: &str = "mosaic.lock";
/// The least of a job's budget that must be left to start moving `HEAD`
/// (it takes milliseconds; this keeps a job near the end of its budget from
/// starting it).
pub const REF_RESERVE: std::time::Duration = std::time::Duration::from_secs(2);
/// The private index the bus's writes used before they were made in
/// process: a leftover of a killed write of that version (with its
/// `.lock`) is removed under the project lock.
const OLD_INDEX_FILE: &str = "mosaic-index";
/// The committer of every bus commit.
pub const COMMITTER: (&str, &str) = ("mosaic-bus", "mosaic-bus@localhost");

/// What kind of record a writable path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `spec/north-star.md`: the human's alone.
    Spec,
    /// `docs/NAME.md`: Markdown.
    Doc,
    /// `requirements/REQ-X-N.json`.
    Requirement,
    /// `decisions/DEC-N.json`.
    Decision,
}

/// A writable project path, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPath {
    pub path: String,
    pub kind: Kind,
    /// The file's directory (every writable file sits one level down).
    pub dir: &'static str,
    /// The file's name without its directory and extension (`north-star`,
    /// `NAME`, `REQ-X-N`, `DEC-N`).
    pub stem: String,
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `NAME` of `docs/NAME.md`: `[a-z0-9][a-z0-9-]{0,63}`.
pub fn is_doc_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && lower_alnum(b[0])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// A record number: `[1-9][0-9]{0,5}` (1 to 999999, no leading zero).
fn is_number(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 6
        && (b'1'..=b'9').contains(&b[0])
        && b.iter().all(u8::is_ascii_digit)
}

/// A requirement's area: `[A-Z][A-Z0-9]{0,15}`.
fn is_area(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 16
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// `REQ-X-N`: X an area, N a record number.
pub fn is_requirement_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("REQ-") else {
        return false;
    };
    match rest.split_once('-') {
        Some((x, n)) => is_area(x) && is_number(n),
        None => false,
    }
}

/// `DEC-N`: N a record number.
pub fn is_decision_id(s: &str) -> bool {
    s.strip_prefix("DEC-").is_some_and(is_number)
}

/// True for a path under the spec's directory (`spec/...`), which only the
/// human writes, through the editor: `record.write` refuses every such path
/// `project-spec-human-only`, whether or not it is a writable file.
pub fn under_spec(path: &str) -> bool {
    path.starts_with("spec/")
}

/// Checks `path` against the writable files. Anything else (another
/// directory, `..`, an absolute path, a second level, another extension)
/// is `project-path-invalid`.
pub fn parse_path(path: &str) -> Result<RecordPath, Code> {
    let bad = Code::ProjectPathInvalid;
    if path == super::SPEC_PATH {
        return Ok(RecordPath {
            path: path.into(),
            kind: Kind::Spec,
            dir: "spec",
            stem: "north-star".into(),
        });
    }
    let (dir, file) = path.split_once('/').ok_or(bad)?;
    let (kind, dir, stem) = match dir {
        "docs" => {
            let stem = file.strip_suffix(".md").ok_or(bad)?;
            (is_doc_name(stem).then_some(Kind::Doc), "docs", stem)
        }
        "requirements" => {
            let stem = file.strip_suffix(".json").ok_or(bad)?;
            (
                is_requirement_id(stem).then_some(Kind::Requirement),
                "requirements",
                stem,
            )
        }
        "decisions" => {
            let stem = file.strip_suffix(".json").ok_or(bad)?;
            (
                is_decision_id(stem).then_some(Kind::Decision),
                "decisions",
                stem,
            )
        }
        _ => (None, "", ""),
    };
    Ok(RecordPath {
        path: path.into(),
        kind: kind.ok_or(bad)?,
        dir,
        stem: stem.into(),
    })
}

/// Who a commit is by. The committer is always `mosaic-bus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
}

impl Author {
    /// An agent: `<definition>.<instance>` (an instance with no definition
    /// stands for its own definition), mailed at the business.
    pub fn agent(business: &str, definition: &str, instance: &str) -> Author {
        let name = format!("{definition}.{instance}");
        Author {
            email: format!("{name}@{business}.mosaic.invalid"),
            name,
        }
    }

    /// The business's human: `business.human` as the name.
    pub fn human(business: &str, human: &str) -> Author {
        Author {
            name: human.into(),
            email: format!("human@{business}.mosaic.invalid"),
        }
    }
}

/// What a write made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The new commit (now `HEAD`).
    pub commit: String,
    /// The `HEAD` the write moved from.
    pub previous: String,
}

/// The project lock, held while it lives (closing the file drops it).
#[derive(Debug)]
pub struct ProjectLock {
    _file: nix::fcntl::Flock<File>,
}

/// Takes `<repo>/.git/mosaic.lock` without waiting: held elsewhere is
/// `project-busy`. `.git` must be a directory of its own (not a symlink,
/// not a `gitdir:` file) and the lock a regular file or absent.
pub fn lock(repo: &Path) -> Result<ProjectLock, Code> {
    let git_dir = repo.join(".git");
    match std::fs::symlink_metadata(&git_dir) {
        Ok(md) if md.file_type().is_dir() => {}
        _ => return Err(Code::ProjectUnavailable),
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(git_dir.join(LOCK_FILE))
        .map_err(|_| Code::ProjectUnavailable)?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(f) => Ok(ProjectLock { _file: f }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(Code::ProjectBusy),
        Err(_) => Err(Code::ProjectUnavailable),
    }
}

/// The committed file at `commit`: its blob and kind, or `None` when it is
/// not there. Its directory must be a plain tree and the file a plain blob
/// (a symlink, a submodule or a file where the directory goes is
/// `project-path-invalid`).
pub(crate) fn committed_blob(
    repo: &Repo,
    commit: ObjectId,
    rp: &RecordPath,
) -> Result<Option<(ObjectId, EntryKind)>, Code> {
    match repo.entry_at(commit, rp.dir)? {
        None => return Ok(None),
        Some(e) if e.kind != EntryKind::Tree => return Err(Code::ProjectPathInvalid),
        Some(_) => {}
    }
    match repo.entry_at(commit, &rp.path)? {
        None => Ok(None),
        Some(e) if matches!(e.kind, EntryKind::Blob | EntryKind::BlobExecutable) => {
            Ok(Some((e.id, e.kind)))
        }
        Some(_) => Err(Code::ProjectPathInvalid),
    }
}

/// The file's last changing commit at or before `commit` (`None` if no
/// commit there ever had it).
pub(crate) fn file_commit(
    repo: &Repo,
    commit: ObjectId,
    path: &str,
) -> Result<Option<ObjectId>, Code> {
    Ok(repo.history(commit, path, 1)?.first().copied())
}

/// What a write asks for.
#[derive(Debug, Clone)]
pub struct Write<'a> {
    pub path: &'a RecordPath,
    pub content: &'a [u8],
    pub author: &'a Author,
    /// The commit's message.
    pub message: &'a str,
    /// The editor's base: the file's current commit (its last changing
    /// commit at `HEAD`; `HEAD` itself for a file not in `HEAD`). A
    /// different one is `stale-base`. `None`: no base check.
    pub base: Option<&'a str>,
}

/// A write whose move of `HEAD` did not succeed, judged by one look at
/// `HEAD`: at the new commit the write stands and is answered as done;
/// moved elsewhere, or its ref locked by another Git, a contention
/// (`project-busy`); at the old commit, nothing was written
/// (`project-unavailable`). `started` is true when the move failed after
/// it began changing files (its commit phase): then an unreadable `HEAD` is
/// `outcome-unknown`, never a plain refusal for a commit that may stand.
fn judge_update(
    repo: &Repo,
    started: bool,
    commit: ObjectId,
    previous: ObjectId,
) -> Result<Committed, Code> {
    let done = || Committed {
        commit: commit.to_string(),
        previous: previous.to_string(),
    };
    match repo.gix().head_id().map(gix::Id::detach) {
        Ok(now) if now == commit => Ok(done()),
        Ok(now) if now != previous => Err(Code::ProjectBusy),
        Ok(_) if ref_locked(repo) => Err(Code::ProjectBusy),
        Ok(_) => Err(Code::ProjectUnavailable),
        Err(_) if started => Err(Code::OutcomeUnknown),
        Err(_) => Err(Code::ProjectUnavailable),
    }
}

/// True when another Git process holds a lock moving `HEAD` needs:
/// `HEAD.lock`, the branch's `<ref>.lock` or `packed-refs.lock` in `.git`.
fn ref_locked(repo: &Repo) -> bool {
    let dir = repo.gix().git_dir().to_path_buf();
    let mut locks = vec![dir.join("HEAD.lock"), dir.join("packed-refs.lock")];
    if let Ok(Some(name)) = repo.gix().head_name() {
        let name = name.as_bstr().to_string();
        let plain = name.starts_with("refs/heads/")
            && name
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if plain {
            locks.push(dir.join(format!("{name}.lock")));
        }
    }
    locks.iter().any(|l| std::fs::symlink_metadata(l).is_ok())
}

fn signature(name: &str, email: &str, seconds: i64) -> gix::actor::Signature {
    gix::actor::Signature {
        name: name.into(),
        email: email.into(),
        time: gix::date::Time { seconds, offset: 0 },
    }
}

/// Writes one file as one commit on `HEAD`'s branch. In order: the lock
/// (`project-busy`), `HEAD` (`project-unavailable` without a commit), the
/// path's place in the tree (`project-path-invalid`), the base
/// (`stale-base`), unchanged bytes (`project-file-unchanged`); then blob,
/// tree and commit objects, and the compare-and-swap of `HEAD`'s ref from
/// the `HEAD` read (moved meanwhile by something outside the lock, or its
/// ref locked by another Git: `project-busy`). A refusal before the move
/// leaves at most unreferenced objects behind; so does a job whose budget
/// ran out before it: the move is not started with less than
/// [`REF_RESERVE`] left, nor once the server stopped waiting (`fence`):
/// `project-unavailable`.
pub fn commit_file(
    repo_dir: &Path,
    w: &Write<'_>,
    budget: Budget,
    fence: &Fence,
) -> Result<Committed, Code> {
    let _lock = lock(repo_dir)?;
    // A leftover of a write killed under an older broker (which built its
    // tree in a private index): only a bus write used it, under the lock
    // we hold, so it is removed, never waited for.
    let old_index = repo_dir.join(".git").join(OLD_INDEX_FILE);
    let _ = std::fs::remove_file(&old_index);
    let _ = std::fs::remove_file(repo_dir.join(".git").join(format!("{OLD_INDEX_FILE}.lock")));
    let repo = Repo::open(repo_dir, budget)?;
    let previous = repo.head()?;
    let existing = committed_blob(&repo, previous, w.path)?;
    if let Some(base) = w.base {
        let current = match &existing {
            Some(_) => file_commit(&repo, previous, &w.path.path)?,
            None => Some(previous),
        };
        if current.map(|c| c.to_string()).as_deref() != Some(base) {
            return Err(Code::StaleBase);
        }
    }
    let git = repo.gix();
    let fail = |what: &'static str| {
        tracing::warn!(code = "project-unavailable", "{what}");
        Code::ProjectUnavailable
    };
    let blob = gix::objs::compute_hash(git.object_hash(), gix::objs::Kind::Blob, w.content)
        .map_err(|_| fail("cannot hash the file"))?;
    let kind = match existing {
        Some((old, _)) if old == blob => return Err(Code::ProjectFileUnchanged),
        Some((_, kind)) => kind,
        None => EntryKind::Blob,
    };
    if budget.passed() {
        return Err(fail("staged job passed its budget"));
    }
    // The bytes as given: no attribute, filter or conversion takes part.
    git.write_blob(w.content)
        .map_err(|_| fail("cannot write the blob"))?;
    let root = repo.tree_of(previous)?;
    let tree = git
        .edit_tree(root)
        .and_then(|mut e| {
            e.upsert(w.path.path.as_str(), kind, blob)?;
            e.write().map(gix::Id::detach)
        })
        .map_err(|_| fail("cannot write the tree"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let mut message = w.message.to_string();
    if !message.ends_with('\n') {
        message.push('\n');
    }
    let commit = gix::objs::Commit {
        tree,
        parents: [previous].into_iter().collect(),
        author: signature(&w.author.name, &w.author.email, now),
        committer: signature(COMMITTER.0, COMMITTER.1, now),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let commit = git
        .write_object(&commit)
        .map_err(|_| fail("cannot write the commit"))?
        .detach();
    super::repo::test_pause("ref", budget);
    // The one step that writes: started only with time for it, and only
    // while the server still waits for this job.
    if budget.left() < REF_RESERVE {
        return Err(fail("no budget left to move HEAD"));
    }
    if !fence.enter() {
        return Err(fail("the server stopped waiting before HEAD moved"));
    }
    move_head(&repo, commit, previous, now)
}

/// Moves `HEAD` (its branch, when it names one) from `previous` to
/// `commit` under Git's ref locks, failing at once if another Git holds
/// one, with a reflog entry by the committer as Git writes it.
fn move_head(
    repo: &Repo,
    commit: ObjectId,
    previous: ObjectId,
    now: i64,
) -> Result<Committed, Code> {
    use gix::lock::acquire::Fail;
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    use gix::refs::Target;
    let Ok(name) = gix::refs::FullName::try_from("HEAD") else {
        return Err(Code::ProjectUnavailable);
    };
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: "mosaic-bus: record write".into(),
            },
            expected: PreviousValue::MustExistAndMatch(Target::Object(previous)),
            new: Target::Object(commit),
        },
        name,
        deref: true,
    };
    // Locks taken and the expected value checked under them (a ref
    // transaction's `prepare`, named in full: it is no SQL statement).
    let locked = gix::refs::file::Transaction::prepare(
        repo.gix().refs.transaction(),
        [edit],
        Fail::Immediately,
        Fail::Immediately,
    );
    let prepared = match locked {
        Ok(t) => t,
        // Refused before anything changed: HEAD moved since it was read,
        // or a ref lock is held.
        Err(_) => return judge_update(repo, false, commit, previous),
    };
    let committer = signature(COMMITTER.0, COMMITTER.1, now);
    let mut time = gix::date::parse::TimeBuf::default();
    match prepared.commit(Some(committer.to_ref(&mut time))) {
        Ok(_) => Ok(Committed {
            commit: commit.to_string(),
            previous: previous.to_string(),
        }),
        Err(_) => judge_update(repo, true, commit, previous),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_paths_one_case_each() {
        let ok: &[(&str, Kind)] = &[
            ("spec/north-star.md", Kind::Spec),
            ("docs/plan.md", Kind::Doc),
            ("docs/0.md", Kind::Doc),
            ("docs/a-b-c.md", Kind::Doc),
            ("requirements/REQ-PROJ-4.json", Kind::Requirement),
            ("requirements/REQ-DEC-2.json", Kind::Requirement),
            ("requirements/REQ-A1-999999.json", Kind::Requirement),
            ("decisions/DEC-1.json", Kind::Decision),
            ("decisions/DEC-999999.json", Kind::Decision),
        ];
        for (p, k) in ok {
            assert_eq!(parse_path(p).map(|r| r.kind), Ok(*k), "{p}");
        }
        let long = format!("docs/{}.md", "a".repeat(65));
        let edge = format!("docs/{}.md", "a".repeat(64));
        assert!(parse_path(&edge).is_ok());
        for bad in [
            "",
            "spec/other.md",
            "spec/north-star.md/",
            "/spec/north-star.md",
            "./docs/plan.md",
            "docs/../spec/north-star.md",
            "docs/..md",
            "docs/.md",
            "docs/-plan.md",
            "docs/Plan.md",
            "docs/plan.MD",
            "docs/plan.txt",
            "docs/sub/plan.md",
            "docs//plan.md",
            "docs/plan.md\0",
            "docs/pl an.md",
            &long,
            "notes/plan.md",
            ".git/config",
            "requirements/REQ-proj-4.json",
            "requirements/REQ-PROJ-04.json",
            "requirements/REQ-PROJ-0.json",
            "requirements/REQ-PROJ.json",
            "requirements/REQ--4.json",
            "requirements/REQ-PROJ-1234567.json",
            "requirements/REQ-ABCDEFGHIJKLMNOPQ-1.json",
            "requirements/REQ-1A-1.json",
            "requirements/REQ-PROJ-4.md",
            "decisions/DEC-0.json",
            "decisions/DEC-01.json",
            "decisions/DEC-.json",
            "decisions/DEC-1.md",
            "decisions/dec-1.json",
        ] {
            assert_eq!(parse_path(bad), Err(Code::ProjectPathInvalid), "{bad:?}");
        }
    }

    #[test]
    fn authors_are_named_as_documented() {
        assert_eq!(
            Author::agent("acme", "pm", "pm2"),
            Author {
                name: "pm.pm2".into(),
                email: "pm.pm2@acme.mosaic.invalid".into()
            }
        );
        assert_eq!(Author::human("acme", "Ada").name, "Ada");
    }
}
