//! The `git` child: one command in one repository, with a scrubbed
//! environment, hooks and outside configuration off, bounded output and a
//! deadline: its own [`DEADLINE`], cut to what is left of its job's budget
//! ([`Git::within`], `crate::budget`). Never called on the writer thread or
//! inside a store transaction (the server runs it on a blocking worker,
//! `server::staged`).

use crate::budget::Budget;
use crate::error::Code;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `git` command may take before it is killed (less when its
/// job's budget has less left).
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The most a `git` command may print; past it the command is killed and
/// the repository is treated as unusable.
pub const OUTPUT_MAX: usize = 4 * 1024 * 1024;

/// Settings given on every command line. They override anything the
/// repository's own config says (a command-line `-c` wins), so a hostile
/// `.git/config` or hook runs nothing: no hooks, no fsmonitor, no pager, no
/// signature program, no external diff or text conversion.
const SAFE_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "core.untrackedCache=false",
    "diff.external=",
    "log.showSignature=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "protocol.allow=never",
    "credential.helper=",
    "uploadpack.packObjectsHook=",
    "i18n.logOutputEncoding=UTF-8",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// The `git` executable the broker runs (boot key `git`), and the budget
/// of the job it runs for, if any.
#[derive(Debug, Clone)]
pub struct Git {
    exe: PathBuf,
    budget: Option<Budget>,
}

/// What [`Git::run_with`] adds to a command.
#[derive(Debug, Default, Clone, Copy)]
pub struct Extra<'a> {
    /// Author name and email of a commit the command makes.
    pub author: Option<(&'a str, &'a str)>,
    /// Bytes written to the command's stdin (else stdin is closed).
    pub input: Option<&'a [u8]>,
    /// The index file the command uses instead of the work tree's.
    pub index: Option<&'a Path>,
}

/// What a finished command left: its exit status and what it printed.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// What the command printed, as UTF-8, when it exited 0; anything else
    /// is `project-unavailable`.
    pub fn text(self) -> Result<String, Code> {
        if !self.ok() {
            return Err(Code::ProjectUnavailable);
        }
        String::from_utf8(self.stdout).map_err(|_| Code::ProjectUnavailable)
    }
}

impl Git {
    /// `exe` is the boot key's absolute path, or `None` for `git` on the
    /// broker's `PATH`.
    pub fn new(exe: Option<&Path>) -> Git {
        Git {
            exe: exe.map_or_else(|| PathBuf::from("git"), Path::to_path_buf),
            budget: None,
        }
    }

    /// This `git` for a job with `budget`: each command gets what is left
    /// of it, never more than [`DEADLINE`], and none is started once it
    /// has passed (`project-unavailable`).
    pub fn within(self, budget: Budget) -> Git {
        Git {
            budget: Some(budget),
            ..self
        }
    }

    /// What is left of the job's budget (`None`: no budget, each command
    /// has its own [`DEADLINE`] only).
    pub fn left(&self) -> Option<Duration> {
        self.budget.as_ref().map(Budget::left)
    }

    /// Runs `git ARGS` in `repo` (its work tree; the repository is
    /// `repo/.git`, never one found above it). `author` sets the author and
    /// committer of a commit the command makes. Fails closed: a spawn
    /// failure, the deadline, the job's budget (passed before the command,
    /// or during it) or too much output is `project-unavailable`.
    pub fn run(
        &self,
        repo: &Path,
        args: &[&str],
        author: Option<(&str, &str)>,
    ) -> Result<Output, Code> {
        self.run_with(
            repo,
            args,
            &Extra {
                author,
                ..Extra::default()
            },
        )
    }

    /// [`Git::run`] with what a write needs besides: bytes for its stdin
    /// and a private index file (`GIT_INDEX_FILE`), so nothing reads or
    /// writes the work tree's own index.
    pub fn run_with(&self, repo: &Path, args: &[&str], extra: &Extra<'_>) -> Result<Output, Code> {
        let deadline = match self.budget {
            None => DEADLINE,
            Some(b) => b.for_step(DEADLINE).ok_or_else(|| {
                tracing::warn!(code = "project-unavailable", "staged job passed its budget");
                Code::ProjectUnavailable
            })?,
        };
        let author = extra.author;
        let mut cmd = Command::new(&self.exe);
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/nonexistent")
            .env("LC_ALL", "C")
            .env("GIT_DIR", repo.join(".git"))
            .env("GIT_WORK_TREE", repo)
            .env("GIT_CEILING_DIRECTORIES", repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .current_dir(repo)
            .stdin(if extra.input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some((name, email)) = author {
            cmd.env("GIT_AUTHOR_NAME", name)
                .env("GIT_AUTHOR_EMAIL", email)
                .env("GIT_COMMITTER_NAME", "mosaic-bus")
                .env("GIT_COMMITTER_EMAIL", "mosaic-bus@localhost");
        }
        if let Some(index) = extra.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        cmd.arg("--no-pager");
        for c in SAFE_CONFIG {
            cmd.arg("-c").arg(c);
        }
        cmd.args(args);
        // Its own process group, so whatever it starts ends with it.
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            tracing::warn!(code = "project-unavailable", kind = ?e.kind(), "cannot run git");
            Code::ProjectUnavailable
        })?;
        let Some(mut out) = child.stdout.take() else {
            kill(&mut child);
            return Err(Code::ProjectUnavailable);
        };
        // Stdin is fed from its own thread, so a child that prints before
        // it has read everything cannot stall on a full pipe; a child that
        // stops reading ends the feeder with a broken pipe.
        let feeder = match (extra.input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || {
                    use std::io::Write;
                    let _ = stdin.write_all(&bytes);
                }))
            }
            _ => None,
        };
        // The reader stops at the cap and drops the pipe, so a child still
        // printing dies of it; the deadline ends anything else.
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let r = (&mut out).take(OUTPUT_MAX as u64 + 1).read_to_end(&mut buf);
            drop(out);
            (r.is_ok() && buf.len() <= OUTPUT_MAX).then_some(buf)
        });
        let start = Instant::now();
        let code = loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    kill_group(&child);
                    break status.code();
                }
                Ok(None) if start.elapsed() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => {
                    tracing::warn!(code = "project-unavailable", "git passed its deadline");
                    kill(&mut child);
                    let _ = reader.join();
                    return Err(Code::ProjectUnavailable);
                }
            }
        };
        if let Some(f) = feeder {
            let _ = f.join();
        }
        match reader.join() {
            Ok(Some(stdout)) => Ok(Output { code, stdout }),
            _ => {
                tracing::warn!(code = "project-unavailable", "git output too large");
                Err(Code::ProjectUnavailable)
            }
        }
    }
}

fn kill(child: &mut Child) {
    kill_group(child);
    let _ = child.kill();
    let _ = child.wait();
}

/// Ends anything left in the child's process group (it holds no pipe of
/// ours past this).
fn kill_group(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
