//! The connection flood both daemons' flood tests hold open (`bus.sock` in
//! `tests/tests/flood.rs`, the lease socket in
//! `proofd/leased/tests/floods.rs`, which takes this file in with
//! `#[path]` so that `mosaic-leased` links nothing of the bus's): std, libc
//! and `mosaic-os` only.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Raises this test process's own soft descriptor limit to its hard one:
/// a flood needs more than the usual 1,024. Fails (does not skip) when the
/// hard limit can't hold two floods at once.
pub fn own_nofile_for_floods() {
    let after = mosaic_os::limits::raise_nofile();
    assert!(
        after >= 3000,
        "the flood tests need RLIMIT_NOFILE >= 3000 (hard limit: {after})"
    );
}

/// The `Max open files` soft and hard limits of `pid`.
pub fn open_files_limit(pid: u32) -> (String, String) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut f = line["Max open files".len()..].split_whitespace();
    (f.next().unwrap().into(), f.next().unwrap().into())
}

/// What a flood connection saw: its reply (empty when it saw none) and when
/// the reply or EOF arrived (`None`: nothing while the flood was held). The
/// instant is for ordering events (before or after a good client's reply),
/// never for measuring a duration.
pub struct Seen {
    pub reply: String,
    pub at: Option<Instant>,
}

/// The flood while it is held: how many of its connections have seen a
/// reply or EOF so far.
pub struct Held {
    answered: Arc<AtomicUsize>,
    total: usize,
}

impl Held {
    /// The connections that have seen a reply or EOF.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// True once every connection has seen a reply or EOF.
    pub fn all_answered(&self) -> bool {
        self.answered() == self.total
    }
}

/// 1,000 idle connections and 200 slow writers (a space every 100 ms, never
/// a newline), held open while `during` runs; then what each one saw. Every
/// connection is watched with `poll`, so its reply or close is noted when
/// it happens (to about 10 ms), and counted in [`Held`].
pub fn flood<T>(sock: &Path, during: impl FnOnce(&Held) -> T) -> (Vec<Seen>, T) {
    let conns: Vec<UnixStream> = (0..1200)
        .map(|_| UnixStream::connect(sock).unwrap())
        .collect();
    // Raw descriptors, not clones: the flood holds 1,200 of them, not 1,400.
    // The connections outlive the writer (joined before they are dropped).
    let slow: Vec<i32> = conns[1000..].iter().map(|c| c.as_raw_fd()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let held = Held {
        answered: Arc::new(AtomicUsize::new(0)),
        total: conns.len(),
    };
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for fd in &slow {
                    // SAFETY: an open socket owned by `conns`, which outlives
                    // this thread; a one-byte static buffer.
                    unsafe {
                        libc::send(
                            *fd,
                            b" ".as_ptr().cast(),
                            1,
                            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                        )
                    };
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let watcher = {
        let fds: Vec<i32> = conns.iter().map(|c| c.as_raw_fd()).collect();
        let stop = stop.clone();
        let count = held.answered.clone();
        std::thread::spawn(move || {
            let mut answered: Vec<Option<Instant>> = vec![None; fds.len()];
            while !stop.load(Ordering::SeqCst) {
                let mut pfds: Vec<libc::pollfd> = fds
                    .iter()
                    .zip(&answered)
                    .filter(|(_, a)| a.is_none())
                    .map(|(fd, _)| libc::pollfd {
                        fd: *fd,
                        events: libc::POLLIN | libc::POLLRDHUP,
                        revents: 0,
                    })
                    .collect();
                if pfds.is_empty() {
                    break;
                }
                // SAFETY: a valid array of pollfds on open descriptors.
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 10) };
                let now = Instant::now();
                for p in pfds.iter().filter(|p| p.revents != 0) {
                    let i = fds.iter().position(|fd| *fd == p.fd).unwrap();
                    answered[i] = Some(now);
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
            answered
        })
    };
    let out = during(&held);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let answered = watcher.join().unwrap();
    let seen = conns
        .into_iter()
        .zip(answered)
        .map(|(mut c, at)| {
            let _ = c.set_nonblocking(true);
            let mut reply = Vec::new();
            let _ = c.read_to_end(&mut reply);
            Seen {
                reply: String::from_utf8_lossy(&reply).into_owned(),
                at,
            }
        })
        .collect();
    (seen, out)
}

/// The first instant any flood connection saw a reply or EOF.
pub fn first_answer(seen: &[Seen]) -> Option<Instant> {
    seen.iter().filter_map(|s| s.at).min()
}
