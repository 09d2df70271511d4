//! The records' Git, in process (`gix`, gitoxide): one repository opened
//! for one job, read and written by the broker itself. No `git` child, so
//! nothing a repository's files say (a config's program slots, hooks,
//! attributes and filters, a promisor remote, an include) can make the
//! broker run a program or fetch: the `gix` build has no network, no
//! credentials, no attributes or filters and no `command` feature (the only
//! part of gix that starts programs), and the repository is opened with
//! isolated permissions (its own config only: no system, global or
//! environment config, no includes). A missing object is a refusal, never
//! a fetch.
//!
//! Every step keeps to its job's budget (`crate::budget`): one step (a
//! history walk, a reachability walk, a file read) gets what is left of the
//! budget, never more than [`DEADLINE`], and looks at the clock at each
//! commit it visits, so a huge or deep history ends in time with
//! `project-unavailable`. No object bigger than [`OBJECT_MAX`] is inflated.
//! Never called on the writer thread or inside a store transaction (the
//! server runs it on a blocking worker, `server::staged`).

use crate::budget::Budget;
use crate::error::Code;
use gix::objs::tree::EntryKind;
use gix::ObjectId;
use std::cell::{Cell, RefCell};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long one step may take (less when its job's budget has less left).
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The largest object the broker inflates (`gitoxide.objects.allocLimit`):
/// a bigger commit or tree makes the repository unusable to the bus, a
/// bigger file is `project-file-invalid` before it is read.
pub const OBJECT_MAX: usize = 16 * 1024 * 1024;

/// Settings laid over the repository's own config (they win, as `git -c`
/// would): no replacement objects, and the inflation cap.
fn overrides() -> [String; 2] {
    [
        "core.useReplaceRefs=false".to_string(),
        format!("gitoxide.objects.allocLimit={OBJECT_MAX}"),
    ]
}

/// One entry of a tree: its object and its kind (the mode, as Git reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub id: ObjectId,
    pub kind: EntryKind,
}

/// What the walks need of a commit.
#[derive(Debug)]
struct Node {
    tree: ObjectId,
    parents: Vec<ObjectId>,
    /// The committer's time, which orders a walk as `git log` does.
    time: i64,
}

/// A commit as a history entry shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub author: String,
    /// The author date, ISO 8601 strict as `git log --format=%aI` prints it.
    pub at: String,
    pub subject: String,
}

/// The repository of one job, opened in process.
pub struct Repo {
    git: gix::Repository,
    budget: Budget,
    /// When the current step must be done by.
    step_end: Cell<Instant>,
    /// Commits `.git/shallow` lists: walked as if they had no parent.
    shallow: HashSet<ObjectId>,
    nodes: RefCell<HashMap<ObjectId, Rc<Node>>>,
    /// `(tree, name)` → the entry `name` in that tree, if any.
    entries: RefCell<HashMap<(ObjectId, String), Option<Entry>>>,
}

impl std::fmt::Debug for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repo").finish_non_exhaustive()
    }
}

fn unavailable(what: &'static str) -> Code {
    tracing::warn!(code = "project-unavailable", "{what}");
    Code::ProjectUnavailable
}

impl Repo {
    /// Opens `repo/.git` for a job with `budget`. `.git` must be a directory
    /// of its own (a symlink or a `gitdir:` file is no repository the bus
    /// reads or writes); the repository must be owned as Git requires (an
    /// untrusted one is refused). Anything else that stops it opening is
    /// `project-unavailable`, as is a budget already spent.
    pub fn open(repo: &Path, budget: Budget) -> Result<Repo, Code> {
        if budget.passed() {
            return Err(unavailable("staged job passed its budget"));
        }
        let dir = repo.join(".git");
        match std::fs::symlink_metadata(&dir) {
            Ok(md) if md.file_type().is_dir() => {}
            _ => return Err(Code::ProjectUnavailable),
        }
        test_pause("open", budget);
        let options = gix::open::Options::isolated()
            .cli_overrides(overrides())
            .bail_if_untrusted(true)
            .open_path_as_is(true);
        let git =
            gix::open_opts(&dir, options).map_err(|_| unavailable("cannot open the repository"))?;
        let shallow = match git.shallow_commits() {
            Ok(Some(list)) => list.iter().copied().collect(),
            Ok(None) => HashSet::new(),
            Err(_) => return Err(unavailable("unreadable shallow file")),
        };
        Ok(Repo {
            git,
            budget,
            step_end: Cell::new(Instant::now()),
            shallow,
            nodes: RefCell::new(HashMap::new()),
            entries: RefCell::new(HashMap::new()),
        })
    }

    /// The job's budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Starts a step: it has what is left of the budget, at most
    /// [`DEADLINE`]; none is started once the budget has passed.
    fn step(&self) -> Result<(), Code> {
        let time = self
            .budget
            .for_step(DEADLINE)
            .ok_or_else(|| unavailable("staged job passed its budget"))?;
        self.step_end.set(Instant::now() + time);
        Ok(())
    }

    /// The current step's look at the clock.
    fn tick(&self) -> Result<(), Code> {
        if Instant::now() >= self.step_end.get() {
            return Err(unavailable("a Git step passed its deadline"));
        }
        Ok(())
    }

    /// The commit `HEAD` names (peeled, as `HEAD^{commit}`). A repository
    /// with no commit, or whose `HEAD` is no commit, is
    /// `project-unavailable`.
    pub fn head(&self) -> Result<ObjectId, Code> {
        self.step()?;
        let id = self
            .git
            .head_id()
            .map_err(|_| Code::ProjectUnavailable)?
            .detach();
        match self.git.find_header(id) {
            Ok(h) if h.kind() == gix::objs::Kind::Commit => Ok(id),
            _ => Err(Code::ProjectUnavailable),
        }
    }

    /// True when `id` is a commit object here (absent, or another kind:
    /// false).
    pub fn is_commit(&self, id: ObjectId) -> Result<bool, Code> {
        self.step()?;
        Ok(
            matches!(self.git.try_find_header(id), Ok(Some(h)) if h.kind() == gix::objs::Kind::Commit),
        )
    }

    /// An object's raw bytes, checked to be of `kind`. Absent (in a partial
    /// clone too: nothing is fetched), unreadable, past [`OBJECT_MAX`] or
    /// of another kind: `project-unavailable`.
    fn raw(&self, id: ObjectId, kind: gix::objs::Kind) -> Result<gix::Object<'_>, Code> {
        match self.git.try_find_object(id) {
            Ok(Some(o)) if o.kind == kind => Ok(o),
            Ok(Some(_)) => Err(unavailable("an object of the wrong kind")),
            Ok(None) => Err(unavailable("an object is missing")),
            Err(_) => Err(unavailable("an object is unreadable")),
        }
    }

    fn node(&self, id: ObjectId) -> Result<Rc<Node>, Code> {
        if let Some(n) = self.nodes.borrow().get(&id) {
            return Ok(Rc::clone(n));
        }
        let obj = self.raw(id, gix::objs::Kind::Commit)?;
        let c = gix::objs::CommitRef::from_bytes(&obj.data, self.git.object_hash())
            .map_err(|_| unavailable("an unreadable commit"))?;
        let parents = if self.shallow.contains(&id) {
            Vec::new()
        } else {
            c.parents().collect()
        };
        let time = c
            .committer()
            .map_err(|_| unavailable("an unreadable commit"))?
            .seconds();
        let node = Rc::new(Node {
            tree: c.tree(),
            parents,
            time,
        });
        self.nodes.borrow_mut().insert(id, Rc::clone(&node));
        Ok(node)
    }

    /// The entry `name` of tree `tree` (the first of that name, as Git
    /// finds it), or `None`.
    fn entry_in(&self, tree: ObjectId, name: &str) -> Result<Option<Entry>, Code> {
        let key = (tree, name.to_string());
        if let Some(e) = self.entries.borrow().get(&key) {
            return Ok(*e);
        }
        let obj = self.raw(tree, gix::objs::Kind::Tree)?;
        let t = gix::objs::TreeRef::from_bytes(&obj.data, self.git.object_hash())
            .map_err(|_| unavailable("an unreadable tree"))?;
        let found = t
            .entries
            .iter()
            .find(|e| e.filename == name.as_bytes())
            .map(|e| Entry {
                id: e.oid.to_owned(),
                kind: e.mode.kind(),
            });
        self.entries.borrow_mut().insert(key, found);
        Ok(found)
    }

    /// The entry at `path` (`dir/name` or `name`) in `commit`'s tree: a
    /// path under something that is no tree is absent.
    pub fn entry_at(&self, commit: ObjectId, path: &str) -> Result<Option<Entry>, Code> {
        let node = self.node(commit)?;
        self.entry_of(node.tree, path)
    }

    fn entry_of(&self, root: ObjectId, path: &str) -> Result<Option<Entry>, Code> {
        let mut tree = root;
        let mut parts = path.split('/').peekable();
        while let Some(part) = parts.next() {
            let Some(e) = self.entry_in(tree, part)? else {
                return Ok(None);
            };
            if parts.peek().is_none() {
                return Ok(Some(e));
            }
            if e.kind != EntryKind::Tree {
                return Ok(None);
            }
            tree = e.id;
        }
        Ok(None)
    }

    /// True when `ancestor` is `tip` or reachable from it (as `git
    /// merge-base --is-ancestor`). One step: a history too big to walk in
    /// time is `project-unavailable`.
    pub fn is_ancestor(&self, ancestor: ObjectId, tip: ObjectId) -> Result<bool, Code> {
        self.step()?;
        let mut walk = Walk::new();
        walk.push(tip, self.node(tip)?.time);
        while let Some(id) = walk.pop() {
            self.tick()?;
            if id == ancestor {
                return Ok(true);
            }
            let node = self.node(id)?;
            for p in &node.parents {
                self.tick()?;
                if !walk.seen(*p) {
                    walk.push(*p, self.node(*p)?.time);
                }
            }
        }
        Ok(false)
    }

    /// The commits at or before `start` that changed `path`, newest first,
    /// at most `max`: `git log --max-count=MAX START -- PATH` with Git's
    /// default history simplification (a commit whose entry at `path` is
    /// that of a parent is not shown, and only that parent is followed; a
    /// root commit is shown when it has the path). One step.
    pub fn history(&self, start: ObjectId, path: &str, max: usize) -> Result<Vec<ObjectId>, Code> {
        self.step()?;
        let mut shown = Vec::new();
        let mut walk = Walk::new();
        walk.push(start, self.node(start)?.time);
        while let Some(id) = walk.pop() {
            if shown.len() >= max {
                break;
            }
            self.tick()?;
            let node = self.node(id)?;
            let mine = self.entry_of(node.tree, path)?;
            let mut same = None;
            for p in &node.parents {
                self.tick()?;
                let pn = self.node(*p)?;
                if self.entry_of(pn.tree, path)? == mine {
                    same = Some((*p, pn.time));
                    break;
                }
            }
            match same {
                Some((p, time)) => {
                    if !walk.seen(p) {
                        walk.push(p, time);
                    }
                }
                None => {
                    if !node.parents.is_empty() || mine.is_some() {
                        shown.push(id);
                    }
                    for p in &node.parents {
                        self.tick()?;
                        if !walk.seen(*p) {
                            walk.push(*p, self.node(*p)?.time);
                        }
                    }
                }
            }
        }
        Ok(shown)
    }

    /// How a history entry shows `commit`: its author's name, the author
    /// date and the subject. A name or subject that is not UTF-8 is
    /// `project-unavailable`.
    pub fn shown(&self, commit: ObjectId) -> Result<Shown, Code> {
        let obj = self.raw(commit, gix::objs::Kind::Commit)?;
        let c = gix::objs::CommitRef::from_bytes(&obj.data, self.git.object_hash())
            .map_err(|_| unavailable("an unreadable commit"))?;
        let author = c
            .author()
            .map_err(|_| unavailable("an unreadable commit"))?;
        let time = author
            .time()
            .map_err(|_| unavailable("an unreadable commit date"))?;
        let name = std::str::from_utf8(author.name.as_ref())
            .map_err(|_| unavailable("an author name that is not UTF-8"))?;
        Ok(Shown {
            author: name.to_string(),
            at: iso_strict(time.seconds, time.offset)
                .ok_or_else(|| unavailable("a date out of range"))?,
            subject: subject(c.message.as_ref())
                .ok_or_else(|| unavailable("a subject that is not UTF-8"))?,
        })
    }

    /// The bytes of blob `id`, at most `max` of them: a bigger file is
    /// `project-file-invalid` before it is read.
    pub fn blob(&self, id: ObjectId, max: usize) -> Result<Vec<u8>, Code> {
        self.step()?;
        match self.git.try_find_header(id) {
            Ok(Some(h)) if h.kind() == gix::objs::Kind::Blob => {
                if h.size() > max as u64 {
                    return Err(Code::ProjectFileInvalid);
                }
            }
            Ok(Some(_)) => return Err(unavailable("an object of the wrong kind")),
            Ok(None) => return Err(unavailable("an object is missing")),
            Err(_) => return Err(unavailable("an object is unreadable")),
        }
        Ok(self.raw(id, gix::objs::Kind::Blob)?.detach().data)
    }

    /// The entries of tree `id`: `(name, entry)`, names that are not UTF-8
    /// left out (no writable path has one).
    pub fn tree_entries(&self, id: ObjectId) -> Result<Vec<(String, Entry)>, Code> {
        let obj = self.raw(id, gix::objs::Kind::Tree)?;
        let t = gix::objs::TreeRef::from_bytes(&obj.data, self.git.object_hash())
            .map_err(|_| unavailable("an unreadable tree"))?;
        Ok(t.entries
            .iter()
            .filter_map(|e| {
                let name = std::str::from_utf8(e.filename.as_ref()).ok()?;
                Some((
                    name.to_string(),
                    Entry {
                        id: e.oid.to_owned(),
                        kind: e.mode.kind(),
                    },
                ))
            })
            .collect())
    }

    /// The tree of `commit`.
    pub fn tree_of(&self, commit: ObjectId) -> Result<ObjectId, Code> {
        Ok(self.node(commit)?.tree)
    }

    /// The in-process repository, for the writer (`write.rs`).
    pub(crate) fn gix(&self) -> &gix::Repository {
        &self.git
    }
}

/// The priority queue of a walk: newest committer time first, ties in the
/// order queued (as Git's), each commit queued once.
struct Walk {
    heap: BinaryHeap<(i64, std::cmp::Reverse<u64>, ObjectId)>,
    seen: HashSet<ObjectId>,
    n: u64,
}

impl Walk {
    fn new() -> Walk {
        Walk {
            heap: BinaryHeap::new(),
            seen: HashSet::new(),
            n: 0,
        }
    }

    fn seen(&self, id: ObjectId) -> bool {
        self.seen.contains(&id)
    }

    fn push(&mut self, id: ObjectId, time: i64) {
        if self.seen.insert(id) {
            self.n += 1;
            self.heap.push((time, std::cmp::Reverse(self.n), id));
        }
    }

    fn pop(&mut self) -> Option<ObjectId> {
        self.heap.pop().map(|(_, _, id)| id)
    }
}

/// A commit message's subject as `%s` prints it: leading blank lines
/// skipped, then the lines up to the first blank one, each without its
/// trailing white space, joined by one space. `None` if not UTF-8.
pub fn subject(message: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(message).ok()?;
    let mut out = String::new();
    let mut started = false;
    for line in text.split('\n') {
        let line = line.trim_end_matches(|c: char| c.is_ascii_whitespace());
        if line.is_empty() {
            if started {
                break;
            }
            continue;
        }
        if started {
            out.push(' ');
        }
        out.push_str(line);
        started = true;
    }
    Some(out)
}

/// `seconds` since the epoch at UTC offset `offset` (seconds), as `git log
/// --format=%aI` prints it: `YYYY-MM-DDTHH:MM:SS+HH:MM`, `Z` for a zero
/// offset. `None` for a date past year 9999 or before year 0.
pub fn iso_strict(seconds: i64, offset: i32) -> Option<String> {
    let local = seconds.checked_add(i64::from(offset))?;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let zone = if offset == 0 {
        "Z".to_string()
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let a = offset.unsigned_abs();
        format!("{sign}{:02}:{:02}", a / 3600, (a % 3600) / 60)
    };
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{zone}",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    ))
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard
/// Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The test-only pause (debug builds only; a release build never looks):
/// `MOSAIC_TEST_PROJECT_PAUSE=STEP:DIR` makes a job reaching `STEP`
/// (`open`, after a write took its lock; `ref`, just before `HEAD` moves)
/// create `DIR/started` and wait until `DIR/release` exists or its budget
/// has passed. It lets a test hold a job in Git, as a slow disk would.
pub fn test_pause(step: &str, budget: Budget) {
    if !cfg!(debug_assertions) {
        return;
    }
    let Ok(v) = std::env::var("MOSAIC_TEST_PROJECT_PAUSE") else {
        return;
    };
    let Some((at, dir)) = v.split_once(':') else {
        return;
    };
    if at != step {
        return;
    }
    let dir = Path::new(dir);
    let _ = std::fs::write(dir.join("started"), "");
    while !dir.join("release").exists() && !budget.passed() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_git_prints_them() {
        assert_eq!(
            iso_strict(1_700_000_000, 0).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(
            iso_strict(1_700_000_000, -5400).as_deref(),
            Some("2023-11-14T20:43:20-01:30")
        );
        assert_eq!(
            iso_strict(1_700_000_000, 3600).as_deref(),
            Some("2023-11-14T23:13:20+01:00")
        );
        assert_eq!(iso_strict(0, 0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(iso_strict(-1, 0).as_deref(), Some("1969-12-31T23:59:59Z"));
        assert_eq!(
            iso_strict(951_782_400, 0).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        assert_eq!(iso_strict(i64::MAX, 0), None);
        assert_eq!(iso_strict(253_402_300_800, 0), None);
    }

    #[test]
    fn subjects_print_as_git_prints_them() {
        assert_eq!(subject(b"one\n").as_deref(), Some("one"));
        assert_eq!(
            subject(b"\n\n  sub line one  \nsecond   \n\nbody\n").as_deref(),
            Some("  sub line one second")
        );
        assert_eq!(subject(b"").as_deref(), Some(""));
        assert_eq!(subject(b"a\r\nb\r\n").as_deref(), Some("a b"));
        assert_eq!(subject(&[0xff, b'\n']), None);
    }
}
