//! Reading a run's transcript: the files under its `transcript` path, what
//! they held before a turn (the baseline) and what the turn appended.
//!
//! The path is either one file or a directory whose regular `*.jsonl`
//! files directly inside it are the transcript (symbolic links and other
//! subdirectories are skipped); each such session file `S.jsonl` brings
//! the regular `*.jsonl` files directly in `S/subagents/`, where Claude
//! Code writes its subagents' replies. A baseline records, per file, a digest of
//! its name, its length and the SHA-256 of those bytes: no text and no path
//! is kept. Everything here blocks on the file system: it runs off the
//! writer thread (see `verbs::usage`), within its request's budget
//! (`crate::budget`): each file and each 64 KiB read checks it, and a read
//! that outlives it is `usage-source-failed`.

use crate::budget::Budget;
use crate::error::Code;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// At most this many files in a transcript directory.
pub const FILES_MAX: usize = 256;
/// At most this many bytes over all of a transcript's files.
pub const TRANSCRIPT_MAX: u64 = 512 << 20;
/// At most this many bytes appended by one turn, over all files (a bound on
/// the time a turn's end takes: the bytes stream through, one line held at
/// a time).
pub const APPENDED_MAX: u64 = 64 << 20;
/// The longest line read, without its newline: the most a line can cost in
/// memory, whatever it holds. A turn's line past it settles the turn
/// `usage-transcript-too-large`; a history line past it is skipped (it is
/// no reply a turn could have copied: that copy would be past it too).
pub const LINE_MAX: usize = 16 << 20;

/// One file as a baseline saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// SHA-256 (hex) of the file's name, so the file is found again
    /// without the name being kept.
    pub name: String,
    /// Its length then.
    pub bytes: u64,
    /// SHA-256 (hex) of those bytes.
    pub sha256: String,
}

/// What a transcript held before a turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Baseline {
    pub files: Vec<Mark>,
}

impl Baseline {
    /// The JSON object stored as the record's `baseline`.
    pub fn to_json(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|m| json!({"name": m.name, "bytes": m.bytes, "sha256": m.sha256}))
            .collect();
        json!({ "files": files })
    }

    /// Reads a stored baseline back; `None` for anything this reader did
    /// not write.
    pub fn from_json(v: &Value) -> Option<Baseline> {
        let files = v.as_object()?.get("files")?.as_array()?;
        if files.len() > FILES_MAX {
            return None;
        }
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            let name = f.get("name")?.as_str().filter(|s| is_hex64(s))?;
            let sha = f.get("sha256")?.as_str().filter(|s| is_hex64(s))?;
            let bytes = f.get("bytes")?.as_u64()?;
            out.push(Mark {
                name: name.to_string(),
                bytes,
                sha256: sha.to_string(),
            });
        }
        Some(Baseline { files: out })
    }
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest a file is known by.
fn name_digest(name: &[u8]) -> String {
    hex(&Sha256::digest(name))
}

/// An I/O failure as the outcome code; the error's text stays here.
fn io_code(e: &std::io::Error) -> Code {
    tracing::debug!(kind = ?e.kind(), "usage transcript read failed");
    Code::UsageSourceFailed
}

/// One file of a transcript as listed now.
struct Listed {
    /// The digest it is known by (of its name, or for a subagent's file of
    /// `<session>/subagents/<name>`).
    name: String,
    path: PathBuf,
    len: u64,
    /// A subagent's file (Claude Code writes a subagent's replies to
    /// `<session>/subagents/agent-*.jsonl` beside the session file
    /// `<session>.jsonl`): its spend is the run's, but it does not say
    /// whether the turn ended.
    subagent: bool,
}

/// The regular `*.jsonl` files directly inside `dir` (symbolic links and
/// subdirectories skipped), by name; a `dir` that is not there, or is not
/// a directory, has none.
fn jsonl_files(dir: &Path, room: usize) -> Result<Vec<std::ffi::OsString>, Code> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Ok(Vec::new()),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_code(&e)),
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_code(&e))? {
        let entry = entry.map_err(|e| io_code(&e))?;
        let name = entry.file_name();
        let is_file = entry.file_type().map_err(|e| io_code(&e))?.is_file();
        if is_file && name.as_bytes().ends_with(b".jsonl") {
            names.push(name);
            if names.len() > room {
                return Err(Code::UsageTranscriptTooLarge);
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The length of `p` if it is (still) a regular file.
fn regular_len(p: &Path) -> Result<Option<u64>, Code> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_file() => Ok(Some(m.len())),
        // Gone or replaced since the listing: not a transcript file.
        Ok(_) => Ok(None),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_code(&e)),
    }
}

/// Adds the subagent files of the session file `dir/name` (`name` ends
/// with `.jsonl`): `dir/<stem>/subagents/*.jsonl`.
fn subagent_files(dir: &Path, name: &[u8], out: &mut Vec<Listed>) -> Result<(), Code> {
    let stem = &name[..name.len().saturating_sub(b".jsonl".len())];
    if stem.is_empty() {
        return Ok(());
    }
    let sub = dir
        .join(std::ffi::OsStr::from_bytes(stem))
        .join("subagents");
    let room = FILES_MAX.saturating_sub(out.len());
    for n in jsonl_files(&sub, room)? {
        let p = sub.join(&n);
        if let Some(len) = regular_len(&p)? {
            let mut key = stem.to_vec();
            key.extend_from_slice(b"/subagents/");
            key.extend_from_slice(n.as_bytes());
            out.push(Listed {
                name: name_digest(&key),
                path: p,
                len,
                subagent: true,
            });
        }
    }
    Ok(())
}

/// The transcript's files now, each session file followed by its
/// subagents' files, in name order. A path that does not exist yet is an
/// empty transcript (a harness may create its session file only when the
/// first entry is written).
fn listing(path: &Path) -> Result<Vec<Listed>, Code> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_code(&e)),
    };
    let mut out = Vec::new();
    if meta.is_file() {
        let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        out.push(Listed {
            name: name_digest(name),
            path: path.to_path_buf(),
            len: meta.len(),
            subagent: false,
        });
        if let (Some(dir), true) = (path.parent(), name.ends_with(b".jsonl")) {
            subagent_files(dir, name, &mut out)?;
        }
    } else if meta.is_dir() {
        for name in jsonl_files(path, FILES_MAX)? {
            let p = path.join(&name);
            let Some(len) = regular_len(&p)? else {
                continue;
            };
            out.push(Listed {
                name: name_digest(name.as_bytes()),
                path: p,
                len,
                subagent: false,
            });
            subagent_files(path, name.as_bytes(), &mut out)?;
            if out.len() > FILES_MAX {
                return Err(Code::UsageTranscriptTooLarge);
            }
        }
    } else {
        return Err(Code::UsageSourceFailed);
    }
    if out.len() > FILES_MAX {
        return Err(Code::UsageTranscriptTooLarge);
    }
    let total = out.iter().try_fold(0u64, |a, f| a.checked_add(f.len));
    if total.is_none_or(|t| t > TRANSCRIPT_MAX) {
        return Err(Code::UsageTranscriptTooLarge);
    }
    Ok(out)
}

/// `usage-source-failed` once the budget has passed: the reading is given
/// up, and the turn is settled unknown with the source's failure code.
fn in_time(budget: &Budget) -> Result<(), Code> {
    if budget.passed() {
        tracing::debug!("usage transcript read passed its budget");
        return Err(Code::UsageSourceFailed);
    }
    Ok(())
}

/// Opens a file for reading without following a symbolic link swapped in
/// since the listing, and without blocking on a FIFO.
fn open(path: &Path) -> Result<File, Code> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_code(&e))?;
    let m = f.metadata().map_err(|e| io_code(&e))?;
    if !m.is_file() {
        return Err(Code::UsageSourceFailed);
    }
    Ok(f)
}

/// Hashes up to `limit` bytes of `r`; returns the digest and how many bytes
/// there were. Each chunk read is also handed to `seen`.
fn hash_prefix(
    r: &mut impl Read,
    limit: u64,
    budget: &Budget,
    seen: &mut dyn FnMut(&[u8]),
) -> Result<(String, u64), Code> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    let mut take = r.take(limit);
    loop {
        in_time(budget)?;
        let k = match take.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_code(&e)),
        };
        h.update(&buf[..k]);
        seen(&buf[..k]);
        n += k as u64;
    }
    Ok((hex(&h.finalize()), n))
}

/// The baseline of the transcript at `path` now.
pub fn baseline(path: &Path, budget: &Budget) -> Result<Baseline, Code> {
    let mut files = Vec::new();
    let mut total = 0u64;
    for Listed { name, path: p, .. } in listing(path)? {
        in_time(budget)?;
        let mut f = open(&p)?;
        let (sha256, bytes) = hash_prefix(&mut f, TRANSCRIPT_MAX + 1 - total, budget, &mut |_| {})?;
        total += bytes;
        if total > TRANSCRIPT_MAX {
            return Err(Code::UsageTranscriptTooLarge);
        }
        files.push(Mark {
            name,
            bytes,
            sha256,
        });
    }
    Ok(Baseline { files })
}

/// What a turn appended to one file, held in memory: the form the sources'
/// unit tests build a turn in (`transcripts::outcome_of`); a turn's end streams
/// the same lines instead ([`Tailed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The appended bytes, whole lines.
    pub bytes: Vec<u8>,
    /// A subagent's file (see [`Listed`]).
    pub subagent: bool,
    /// The file was not there at the baseline (read from its start).
    pub fresh: bool,
}

/// What reading a turn's appended bytes hands on, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tailed<'a> {
    /// The next file's appended lines follow (a file that gained nothing
    /// gets none).
    Part { subagent: bool, fresh: bool },
    /// One whole line of it, without its newline.
    Line(&'a [u8]),
    /// A whole line past [`LINE_MAX`], never held.
    Long,
}

/// What the turn appended to each file since `base`, collected in memory
/// (tests only: a turn's end streams it, see [`open_turn`]). A baselined
/// file that is gone, shorter or changed within its baselined bytes is
/// `usage-transcript-rewritten`; a part that does not end with a newline is
/// `usage-turn-incomplete`.
#[cfg(test)]
pub fn appended(path: &Path, base: &Baseline, budget: &Budget) -> Result<Vec<Part>, Code> {
    let mut parts: Vec<Part> = Vec::new();
    let files = open_turn(path, base, budget, &mut |t| match t {
        Tailed::Part { subagent, fresh } => parts.push(Part {
            bytes: Vec::new(),
            subagent,
            fresh,
        }),
        Tailed::Line(l) => {
            if let Some(p) = parts.last_mut() {
                p.bytes.extend_from_slice(l);
                p.bytes.push(b'\n');
            }
        }
        Tailed::Long => {}
    })?;
    files.check(budget, None)?;
    Ok(parts)
}

/// Hands each whole line of the transcript's history (every baselined
/// file's baselined bytes) to `f`, one at a time, while checking the turn
/// as [`appended`] does (what `f` saw stands only if this is `Ok`); a line
/// longer than [`LINE_MAX`] is skipped.
pub fn history(
    path: &Path,
    base: &Baseline,
    budget: &Budget,
    f: &mut dyn FnMut(&[u8]),
) -> Result<(), Code> {
    open_turn(path, base, budget, &mut |_| {})?.check(budget, Some(f))
}

/// What is handed each whole line of the history.
pub type LineScan<'a> = dyn FnMut(&[u8]) + 'a;

/// What the turn appended to one file, as far as checking it goes: the
/// lines themselves went to the reader as they streamed by.
struct Tail {
    len: u64,
    /// Its last byte is a newline.
    whole: bool,
}

/// One file of a transcript opened for a turn's end.
struct Opened {
    /// Its baselined length and digest; `None`: it appeared during the turn.
    mark: Option<Mark>,
    /// The file, or the code opening it failed with.
    file: Result<File, Code>,
    /// What the turn appended to it, or the code reading that failed with;
    /// `Ok(None)` once the turn's appended bytes passed [`APPENDED_MAX`].
    tail: Result<Option<Tail>, Code>,
}

/// A transcript at a turn's end: what each file gained has streamed to the
/// reader before any file is checked, so the turn's reply ids are known
/// while the history is hashed; [`TurnFiles::check`] then checks the files
/// in order and hands the history's lines to a scan in the same read. A
/// failure while opening ends the listing there and is answered by `check`
/// at that file, after the files before it were checked, as one pass over
/// the files would.
pub struct TurnFiles {
    files: Vec<Opened>,
}

/// Opens the transcript at `path` for the turn since `base` and streams
/// what each file gained to `sink`, a line at a time (memory: one line, at
/// most [`LINE_MAX`], and a 64 KiB read). What the sink saw stands only
/// once [`TurnFiles::check`] passes.
pub fn open_turn(
    path: &Path,
    base: &Baseline,
    budget: &Budget,
    sink: &mut dyn FnMut(Tailed<'_>),
) -> Result<TurnFiles, Code> {
    use std::io::{Seek, SeekFrom};
    let now = listing(path)?;
    for m in &base.files {
        if !now.iter().any(|f| f.name == m.name) {
            return Err(Code::UsageTranscriptRewritten);
        }
    }
    let mut files = Vec::new();
    let mut read = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    for Listed {
        name,
        path: p,
        subagent,
        ..
    } in now
    {
        let mark = base.files.iter().find(|m| m.name == name).cloned();
        let file = in_time(budget).and_then(|()| open(&p));
        let mut f = match file {
            Ok(f) => f,
            Err(c) => {
                files.push(Opened {
                    mark,
                    file: Err(c),
                    tail: Ok(None),
                });
                break;
            }
        };
        let from = mark.as_ref().map_or(0, |m| m.bytes);
        let fresh = mark.is_none();
        let mut tail = Tail {
            len: 0,
            whole: false,
        };
        let mut lines = Lines::new(LINE_MAX);
        let streamed = f
            .seek(SeekFrom::Start(from))
            .map_err(|e| io_code(&e))
            .and_then(|_| {
                let mut take = (&mut f).take(APPENDED_MAX - read + 1);
                loop {
                    in_time(budget)?;
                    let k = match take.read(&mut buf) {
                        Ok(0) => return Ok(()),
                        Ok(k) => k,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(io_code(&e)),
                    };
                    let chunk = buf.get(..k).unwrap_or_default();
                    if tail.len == 0 {
                        sink(Tailed::Part { subagent, fresh });
                    }
                    tail.len += k as u64;
                    tail.whole = chunk.last() == Some(&b'\n');
                    lines.feed(chunk, &mut |piece| match piece {
                        Piece::Line(l) => sink(Tailed::Line(l)),
                        Piece::Long => sink(Tailed::Long),
                    });
                }
            });
        read += tail.len;
        let over = read > APPENDED_MAX;
        let failed = streamed.is_err() || over;
        files.push(Opened {
            mark,
            file: Ok(f),
            tail: streamed.map(|()| (!over).then_some(tail)),
        });
        if failed {
            break;
        }
    }
    Ok(TurnFiles { files })
}

impl TurnFiles {
    /// Checks each file in listing order: the baselined bytes still there
    /// and unchanged, then what it gained (within [`APPENDED_MAX`] over all
    /// files, ending with a newline: else `usage-transcript-too-large` or
    /// `usage-turn-incomplete`). While a baselined file is hashed, each
    /// whole line of its baselined bytes goes to `scan`, before the file's
    /// digest is known: what the scan saw stands only when this returns
    /// `Ok`.
    pub fn check(self, budget: &Budget, mut scan: Option<&mut LineScan>) -> Result<(), Code> {
        use std::io::{Seek, SeekFrom};
        for Opened { mark, file, tail } in self.files {
            let mut f = file?;
            if let Some(m) = mark {
                f.seek(SeekFrom::Start(0)).map_err(|e| io_code(&e))?;
                let mut lines = Lines::new(LINE_MAX);
                let (sha, n) = match scan.as_mut() {
                    Some(scan) => hash_prefix(&mut f, m.bytes, budget, &mut |b| {
                        lines.feed(b, &mut |piece| {
                            if let Piece::Line(l) = piece {
                                scan(l)
                            }
                        })
                    })?,
                    None => hash_prefix(&mut f, m.bytes, budget, &mut |_| {})?,
                };
                if n != m.bytes || sha != m.sha256 {
                    return Err(Code::UsageTranscriptRewritten);
                }
            }
            let tail = tail?.ok_or(Code::UsageTranscriptTooLarge)?;
            if tail.len > 0 && !tail.whole {
                return Err(Code::UsageTurnIncomplete);
            }
        }
        Ok(())
    }
}

/// What [`Lines`] hands on.
enum Piece<'a> {
    /// A whole line, without its newline.
    Line(&'a [u8]),
    /// A whole line longer than the cap: skipped, never held.
    Long,
}

/// Splits a stream of bytes into whole lines (without their newline) and
/// hands each on, in place where it can: a line is copied only when it
/// spans two reads, and the copy never grows past the cap. A line longer
/// than `cap` is skipped (and said to be, at its newline); bytes after the
/// last newline are no line.
struct Lines {
    cap: usize,
    /// The start of a line the last read cut.
    carry: Vec<u8>,
    /// The line being read is past the cap: drop it up to its newline.
    skipping: bool,
}

/// A copy that held a longer line is given back after it, not kept.
const CARRY_KEPT: usize = 1 << 20;

impl Lines {
    fn new(cap: usize) -> Lines {
        Lines {
            cap,
            carry: Vec::new(),
            skipping: false,
        }
    }

    /// Adds `bytes` to the copy of the line; false (and the copy dropped)
    /// when that would pass the cap.
    fn keep(&mut self, bytes: &[u8]) -> bool {
        let need = self.carry.len() + bytes.len();
        if need > self.cap {
            self.carry = Vec::new();
            return false;
        }
        if need > self.carry.capacity() {
            // Doubling, but never past the cap.
            let want = need.max(self.carry.capacity() * 2).min(self.cap);
            self.carry.reserve_exact(want - self.carry.len());
        }
        self.carry.extend_from_slice(bytes);
        true
    }

    fn line_done(&mut self) {
        if self.carry.capacity() > CARRY_KEPT {
            self.carry = Vec::new();
        } else {
            self.carry.clear();
        }
        self.skipping = false;
    }

    fn feed(&mut self, mut bytes: &[u8], f: &mut dyn FnMut(Piece<'_>)) {
        while let Some(i) = memchr::memchr(b'\n', bytes) {
            let head = &bytes[..i];
            if self.skipping {
                f(Piece::Long);
            } else if self.carry.is_empty() {
                if head.len() <= self.cap {
                    f(Piece::Line(head));
                } else {
                    f(Piece::Long);
                }
            } else if self.keep(head) {
                f(Piece::Line(&self.carry));
            } else {
                f(Piece::Long);
            }
            self.line_done();
            bytes = &bytes[i + 1..];
        }
        if !self.skipping && !bytes.is_empty() && !self.keep(bytes) {
            self.skipping = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fresh() -> Budget {
        Budget::start()
    }

    fn append(p: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    fn bytes(parts: Vec<Part>) -> Vec<Vec<u8>> {
        parts.into_iter().map(|p| p.bytes).collect()
    }

    #[test]
    fn a_file_baselines_and_gives_what_was_appended() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("session.jsonl");
        let empty = baseline(&p, &fresh()).unwrap();
        assert!(
            empty.files.is_empty(),
            "a missing file is an empty transcript"
        );
        append(&p, "{\"a\":1}\n");
        assert_eq!(
            bytes(appended(&p, &empty, &fresh()).unwrap()),
            vec![b"{\"a\":1}\n".to_vec()]
        );
        let b = baseline(&p, &fresh()).unwrap();
        assert_eq!(b.files.len(), 1);
        assert_eq!(b.files[0].bytes, 8);
        assert_eq!(b.files[0].name, name_digest(b"session.jsonl"));
        assert_eq!(Baseline::from_json(&b.to_json()), Some(b.clone()));
        let text = b.to_json().to_string();
        assert!(
            !text.contains("session") && !text.contains("\"a\""),
            "{text}"
        );
        assert!(appended(&p, &b, &fresh()).unwrap().is_empty());
        append(&p, "{\"b\":2}\n");
        assert_eq!(
            bytes(appended(&p, &b, &fresh()).unwrap()),
            vec![b"{\"b\":2}\n".to_vec()]
        );
        append(&p, "{\"c\":");
        assert_eq!(appended(&p, &b, &fresh()), Err(Code::UsageTurnIncomplete));
    }

    #[test]
    fn a_rewrite_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        append(&p, "{\"a\":1}\n{\"b\":2}\n");
        let b = baseline(&p, &fresh()).unwrap();
        // Same length, one byte changed.
        std::fs::write(&p, "{\"a\":3}\n{\"b\":2}\n{\"c\":1}\n").unwrap();
        assert_eq!(
            appended(&p, &b, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
        // Shorter.
        std::fs::write(&p, "{\"a\":1}\n").unwrap();
        assert_eq!(
            appended(&p, &b, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
        // Gone.
        std::fs::remove_file(&p).unwrap();
        assert_eq!(
            appended(&p, &b, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
    }

    #[test]
    fn a_directory_reads_its_jsonl_files_only() {
        let d = tempfile::tempdir().unwrap();
        append(&d.path().join("a.jsonl"), "1\n");
        append(&d.path().join("notes.txt"), "ignored\n");
        std::fs::create_dir(d.path().join("sub.jsonl")).unwrap();
        std::os::unix::fs::symlink(d.path().join("a.jsonl"), d.path().join("l.jsonl")).unwrap();
        let b = baseline(d.path(), &fresh()).unwrap();
        assert_eq!(b.files.len(), 1);
        append(&d.path().join("a.jsonl"), "2\n");
        append(&d.path().join("b.jsonl"), "3\n");
        append(&d.path().join("notes.txt"), "more\n");
        assert_eq!(
            bytes(appended(d.path(), &b, &fresh()).unwrap()),
            vec![b"2\n".to_vec(), b"3\n".to_vec()]
        );
        std::fs::remove_file(d.path().join("a.jsonl")).unwrap();
        assert_eq!(
            appended(d.path(), &b, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
    }

    #[test]
    fn other_kinds_of_path_fail_and_caps_hold() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(baseline(&fifo, &fresh()), Err(Code::UsageSourceFailed));
        for i in 0..=FILES_MAX {
            append(&d.path().join(format!("{i}.jsonl")), "");
        }
        assert_eq!(
            baseline(d.path(), &fresh()),
            Err(Code::UsageTranscriptTooLarge)
        );
        assert_eq!(
            Baseline::from_json(&json!({"files": [{"name": "x", "bytes": 1, "sha256": "y"}]})),
            None
        );
    }

    #[test]
    fn a_session_s_subagent_files_are_part_of_it() {
        let d = tempfile::tempdir().unwrap();
        let main = d.path().join("s1.jsonl");
        append(&main, "m0\n");
        let sub = d.path().join("s1").join("subagents");
        std::fs::create_dir_all(&sub).unwrap();
        append(&sub.join("agent-a.jsonl"), "a0\n");
        append(&sub.join("agent-a.meta.json"), "{}");
        // Another session's subagents are not this file's.
        let other = d.path().join("s2").join("subagents");
        std::fs::create_dir_all(&other).unwrap();
        append(&other.join("agent-b.jsonl"), "b0\n");
        let b = baseline(&main, &fresh()).unwrap();
        assert_eq!(b.files.len(), 2);
        assert_eq!(b.files[1].name, name_digest(b"s1/subagents/agent-a.jsonl"));
        append(&main, "m1\n");
        append(&sub.join("agent-a.jsonl"), "a1\n");
        append(&sub.join("agent-c.jsonl"), "c0\n");
        append(&other.join("agent-b.jsonl"), "b1\n");
        let got = appended(&main, &b, &fresh()).unwrap();
        let want = [
            (&b"m1\n"[..], false, false),
            (&b"a1\n"[..], true, false),
            (&b"c0\n"[..], true, true),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (p, (bytes, subagent, fresh)) in got.iter().zip(want) {
            assert_eq!(
                (&p.bytes[..], p.subagent, p.fresh),
                (bytes, subagent, fresh)
            );
        }
        // The directory form: each session file with its subagents.
        let b = baseline(d.path(), &fresh()).unwrap();
        assert_eq!(b.files.len(), 3, "s2 has no session file here");
        // A subagent file rewritten is a rewrite.
        std::fs::write(sub.join("agent-a.jsonl"), "zz\n").unwrap();
        assert_eq!(
            appended(d.path(), &b, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
    }

    #[test]
    fn files_are_judged_in_order_though_every_tail_is_read_first() {
        // The first file's failure is the answer, whichever it is.
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.jsonl"), d.path().join("b.jsonl"));
        append(&a, "1\n");
        append(&b, "2\n");
        let base = baseline(d.path(), &fresh()).unwrap();
        append(&a, "3");
        std::fs::write(&b, "9\n4\n").unwrap();
        assert_eq!(
            appended(d.path(), &base, &fresh()),
            Err(Code::UsageTurnIncomplete)
        );
        std::fs::write(&a, "0\n3").unwrap();
        assert_eq!(
            appended(d.path(), &base, &fresh()),
            Err(Code::UsageTranscriptRewritten)
        );
        // A scan sees the lines as they are hashed, so b's changed line
        // too: what it saw stands only when the check passes.
        std::fs::write(&a, "1\n3\n").unwrap();
        let mut seen = Vec::new();
        assert_eq!(
            history(d.path(), &base, &fresh(), &mut |l| seen.push(l.to_vec())),
            Err(Code::UsageTranscriptRewritten)
        );
        assert_eq!(seen, vec![b"1".to_vec(), b"9".to_vec()]);
    }

    #[test]
    fn lines_are_whole_across_reads_and_long_ones_are_skipped() {
        let text = b"ab\ncdefgh\n\nijklmnopq\nrs\nabcdefg\ntu";
        let want: Vec<Option<&[u8]>> = vec![
            Some(b"ab"),
            Some(b"cdefgh"),
            Some(b""),
            None,
            Some(b"rs"),
            None,
        ];
        // Every way of cutting the text into reads of one size.
        for size in 1..=text.len() {
            let mut got = Vec::new();
            let mut lines = Lines::new(6);
            for chunk in text.chunks(size) {
                lines.feed(chunk, &mut |p| {
                    got.push(match p {
                        Piece::Line(l) => Some(l.to_vec()),
                        Piece::Long => None,
                    })
                });
                // The copy of a cut line never grows past the cap.
                assert!(lines.carry.capacity() <= 6, "reads of {size}");
            }
            let want: Vec<Option<Vec<u8>>> = want.iter().map(|w| w.map(<[u8]>::to_vec)).collect();
            assert_eq!(got, want, "reads of {size}");
        }
    }

    #[test]
    fn history_gives_the_baselined_lines_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.jsonl");
        append(&p, "one\ntwo\nthr");
        let b = baseline(d.path(), &fresh()).unwrap();
        append(&p, "ee\nfour\n");
        append(&d.path().join("b.jsonl"), "new\n");
        let mut lines = Vec::new();
        history(d.path(), &b, &fresh(), &mut |l| lines.push(l.to_vec())).unwrap();
        assert_eq!(lines, vec![b"one".to_vec(), b"two".to_vec()]);
    }

    #[test]
    fn a_read_past_its_budget_is_the_sources_failure() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.jsonl");
        append(&p, "{\"a\":1}\n");
        let b = baseline(&p, &fresh()).unwrap();
        append(&p, "{\"b\":2}\n");
        let gone = Budget::ending(std::time::Instant::now());
        assert_eq!(baseline(&p, &gone), Err(Code::UsageSourceFailed));
        assert_eq!(appended(&p, &b, &gone), Err(Code::UsageSourceFailed));
        let mut seen = 0;
        assert_eq!(
            history(&p, &b, &gone, &mut |_| seen += 1),
            Err(Code::UsageSourceFailed)
        );
        assert_eq!(seen, 0);
        // The same reads within a budget.
        assert_eq!(appended(&p, &b, &fresh()).unwrap().len(), 1);
    }
}
