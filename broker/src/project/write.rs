//! The one commit primitive: write one project file as one commit, under
//! the project lock, through Git's plumbing only. Nothing of the work tree,
//! its index or the repository's hooks takes part: the blob goes in with
//! `hash-object --no-filters`, the tree is built in a private index file
//! (`read-tree`, `update-index`, `write-tree`), the commit is made with
//! `commit-tree`, and `update-ref` moves `HEAD`'s branch only if it still
//! points where the write started. Blocking: a worker thread runs it.

use super::git::{Extra, Git};
use super::{head, is_full_sha};
use crate::error::Code;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The lock every project write holds, inside the repository's `.git`.
pub const LOCK_FILE: &str = "mosaic.lock";
/// The least of a job's budget that must be left to start `update-ref`, the
/// step that moves `HEAD` (it takes milliseconds; this keeps the budget
/// from cutting it off midway).
pub const REF_RESERVE: std::time::Duration = std::time::Duration::from_secs(2);
/// The private index a write builds its tree in (under the lock, so one
/// name does; a crash's leftover is overwritten by the next write).
const INDEX_FILE: &str = "mosaic-index";

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

/// A tree entry as `ls-tree` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TreeEntry {
    mode: String,
    kind: String,
    object: String,
    path: String,
}

/// The entries of `dir` and `path` in `commit`'s tree (each absent or one).
fn entries(git: &Git, repo: &Path, commit: &str, rp: &RecordPath) -> Result<Vec<TreeEntry>, Code> {
    let out = git.run(
        repo,
        &[
            "ls-tree",
            "-z",
            "--full-tree",
            "--end-of-options",
            commit,
            "--",
            rp.dir,
            &rp.path,
        ],
        None,
    )?;
    let text = out.text()?;
    let mut list = Vec::new();
    for rec in text.split('\0').filter(|r| !r.is_empty()) {
        let (meta, path) = rec.split_once('\t').ok_or(Code::ProjectUnavailable)?;
        let mut f = meta.split(' ');
        let (Some(mode), Some(kind), Some(object), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(Code::ProjectUnavailable);
        };
        list.push(TreeEntry {
            mode: mode.into(),
            kind: kind.into(),
            object: object.into(),
            path: path.into(),
        });
    }
    Ok(list)
}

/// The committed file at `commit`: its blob and mode, or `None` when it is
/// not there. Its directory must be a plain tree and the file a plain blob
/// (a symlink, a submodule or a file where the directory goes is
/// `project-path-invalid`).
pub(crate) fn committed_blob(
    git: &Git,
    repo: &Path,
    commit: &str,
    rp: &RecordPath,
) -> Result<Option<(String, String)>, Code> {
    let list = entries(git, repo, commit, rp)?;
    let mut blob = None;
    for e in list {
        if e.path == rp.dir {
            if e.mode != "040000" || e.kind != "tree" {
                return Err(Code::ProjectPathInvalid);
            }
        } else if e.path == rp.path {
            if !(e.kind == "blob" && (e.mode == "100644" || e.mode == "100755")) {
                return Err(Code::ProjectPathInvalid);
            }
            if !is_full_sha(&e.object) {
                return Err(Code::ProjectUnavailable);
            }
            blob = Some((e.object, e.mode));
        }
    }
    Ok(blob)
}

/// The file's last changing commit at or before `commit` (`None` if no
/// commit there ever had it).
pub(crate) fn file_commit(
    git: &Git,
    repo: &Path,
    commit: &str,
    path: &str,
) -> Result<Option<String>, Code> {
    let out = git.run(
        repo,
        &[
            "log",
            "-1",
            "--no-renames",
            "--format=%H",
            "--end-of-options",
            commit,
            "--",
            path,
        ],
        None,
    )?;
    let text = out.text()?;
    let sha = text.trim_end();
    if sha.is_empty() {
        return Ok(None);
    }
    if !is_full_sha(sha) {
        return Err(Code::ProjectUnavailable);
    }
    Ok(Some(sha.into()))
}

fn one_sha(out: super::git::Output) -> Result<String, Code> {
    let text = out.text()?;
    let sha = text.trim_end();
    if !is_full_sha(sha) {
        return Err(Code::ProjectUnavailable);
    }
    Ok(sha.into())
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

/// Removes the private index (and a lock Git left beside it) when the
/// write ends, however it ends.
struct IndexFile(PathBuf);

impl Drop for IndexFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(index_lock(&self.0));
    }
}

/// How long the look at `HEAD` after a failed or lost `update-ref` may
/// take (the job's budget may be spent by then).
pub const AFTER_LOST_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// An `update-ref` that did not succeed, judged by one look at `HEAD`:
/// at the new commit the write stands and is answered as done; moved
/// elsewhere, or its ref locked by another Git, a contention
/// (`project-busy`); at the old commit, nothing was written
/// (`project-unavailable`). `answered` is false when the child ended
/// without an answer (killed at its deadline): then an unreadable `HEAD`
/// is `outcome-unknown`, never a plain refusal for a commit that may stand.
fn judge_update(
    git: &Git,
    repo: &Path,
    answered: bool,
    commit: String,
    previous: String,
) -> Result<Committed, Code> {
    let grace = crate::budget::Budget::ending(std::time::Instant::now() + AFTER_LOST_GRACE);
    let git = git.clone().within(grace);
    match head(&git, repo) {
        Ok(now) if now == commit => Ok(Committed { commit, previous }),
        Ok(now) if now != previous => Err(Code::ProjectBusy),
        Ok(_) if answered && ref_locked(&git, repo) => Err(Code::ProjectBusy),
        Ok(_) => Err(Code::ProjectUnavailable),
        Err(_) if answered => Err(Code::ProjectUnavailable),
        Err(_) => Err(Code::OutcomeUnknown),
    }
}

/// True when another Git process holds a lock `update-ref HEAD` needs:
/// `HEAD.lock`, the branch's `<ref>.lock` or `packed-refs.lock` in `.git`.
fn ref_locked(git: &Git, repo: &Path) -> bool {
    let dir = repo.join(".git");
    let mut locks = vec![dir.join("HEAD.lock"), dir.join("packed-refs.lock")];
    if let Ok(out) = git.run(repo, &["symbolic-ref", "-q", "HEAD"], None) {
        let ok = out.ok();
        let name = String::from_utf8(out.stdout).unwrap_or_default();
        let name = name.trim_end();
        let plain = name.starts_with("refs/heads/")
            && name
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if ok && plain {
            locks.push(dir.join(format!("{name}.lock")));
        }
    }
    locks.iter().any(|l| std::fs::symlink_metadata(l).is_ok())
}

/// Git's lock file for an index file: its name with `.lock` appended.
fn index_lock(index: &Path) -> PathBuf {
    let mut name = index.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Writes one file as one commit on `HEAD`'s branch. In order: the lock
/// (`project-busy`), `HEAD` (`project-unavailable` without a commit), the
/// path's place in the tree (`project-path-invalid`), the base
/// (`stale-base`), unchanged bytes (`project-file-unchanged`); then blob,
/// tree, commit, and `update-ref` from the `HEAD` read (moved meanwhile by
/// something outside the lock: `project-busy`). A refusal before
/// `update-ref` leaves at most unreferenced objects behind; so does a job
/// whose budget ran out before it (an earlier step is not started, or is
/// killed, at the budget; `update-ref` is not started with less than
/// [`REF_RESERVE`] left: `project-unavailable`).
pub fn commit_file(git: &Git, repo: &Path, w: &Write<'_>) -> Result<Committed, Code> {
    let _lock = lock(repo)?;
    let previous = head(git, repo)?;
    let existing = committed_blob(git, repo, &previous, w.path)?;
    if let Some(base) = w.base {
        let current = match &existing {
            Some(_) => file_commit(git, repo, &previous, &w.path.path)?,
            None => Some(previous.clone()),
        };
        if current.as_deref() != Some(base) {
            return Err(Code::StaleBase);
        }
    }
    let blob = one_sha(git.run_with(
        repo,
        &["hash-object", "-w", "--no-filters", "--stdin"],
        &Extra {
            input: Some(w.content),
            ..Extra::default()
        },
    )?)?;
    let mode = match &existing {
        Some((old, _)) if *old == blob => return Err(Code::ProjectFileUnchanged),
        Some((_, mode)) => mode.clone(),
        None => "100644".to_string(),
    };
    let index = IndexFile(repo.join(".git").join(INDEX_FILE));
    // Only a bus write uses this index, and only under the project lock we
    // hold: a leftover of a write killed mid-way (a SIGKILL at the deadline
    // leaves Git's own `.lock` behind) is removed, never waited for.
    let _ = std::fs::remove_file(&index.0);
    let _ = std::fs::remove_file(index_lock(&index.0));
    let in_index = Extra {
        index: Some(&index.0),
        ..Extra::default()
    };
    let read = git.run_with(
        repo,
        &["read-tree", "--end-of-options", &previous],
        &in_index,
    )?;
    if !read.ok() {
        return Err(Code::ProjectUnavailable);
    }
    let info = format!("{mode},{blob},{}", w.path.path);
    let add = git.run_with(
        repo,
        &["update-index", "--add", "--cacheinfo", &info],
        &in_index,
    )?;
    if !add.ok() {
        return Err(Code::ProjectUnavailable);
    }
    let tree = one_sha(git.run_with(repo, &["write-tree"], &in_index)?)?;
    drop(index);
    let commit = one_sha(git.run_with(
        repo,
        &["commit-tree", &tree, "-p", &previous, "-m", w.message],
        &Extra {
            author: Some((&w.author.name, &w.author.email)),
            ..Extra::default()
        },
    )?)?;
    // The one step that writes: started only with time for it, so a job
    // near the end of its budget refuses with nothing written rather than
    // have this step cut off midway.
    if git.left().is_some_and(|left| left < REF_RESERVE) {
        tracing::warn!(code = "project-unavailable", "no budget left to move HEAD");
        return Err(Code::ProjectUnavailable);
    }
    let moved = git.run(
        repo,
        &[
            "update-ref",
            "-m",
            "mosaic-bus: record write",
            "HEAD",
            &commit,
            &previous,
        ],
        None,
    );
    match moved {
        Ok(out) if out.ok() => {}
        // Refused (HEAD moved since it was read, or its ref is locked), or
        // killed at its deadline with the ref moved or not: HEAD says which.
        Ok(_) => return judge_update(git, repo, true, commit, previous),
        Err(_) => return judge_update(git, repo, false, commit, previous),
    }
    Ok(Committed { commit, previous })
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
