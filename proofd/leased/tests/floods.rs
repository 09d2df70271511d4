//! `mosaic-leased` under a connection flood (issue 17): idle and slow connections never starve a good client, and past the cap the oldest idle one is shed.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
#[path = "support/leased_env.rs"]
mod leased_env;
use leased_env::{auth, code, daemon_command, parse_reply, req, Daemon, TempDir};

#[path = "../../../tests/src/flood.rs"]
mod flood;
use flood::{first_answer, flood, open_files_limit, own_nofile_for_floods, Held};

/// How many good requests a flood test makes at most while it waits for
/// the flood (one every 50 ms): a daemon that never answers the flood fails
/// the test here instead of hanging it.
const GUARD: usize = 1200;

/// A good client's requests, one every 50 ms, until every flood connection
/// has been answered: each answered (`unknown-session`, the request's own
/// refusal), never `busy`. Returns the instant each reply arrived, to order
/// it against the flood's.
fn good_client_until_answered(sock: &Path, held: &Held) -> Vec<Instant> {
    let mut replies = Vec::new();
    for n in 0..GUARD {
        if n > 0 && held.all_answered() {
            return replies;
        }
        let reply = req(sock, &auth("no-such-session", 0));
        assert_eq!(code(&reply), "unknown-session", "request {n}");
        replies.push(Instant::now());
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "after {GUARD} good requests only {} flood connections were answered",
        held.answered()
    );
}

/// Issue 17: with 1,000 idle connections and 200 slow writers open, a good
/// client is answered every time, from while the whole flood is held, and
/// never `busy` (the daemon raised its descriptor limit and has room); every
/// flood connection is closed at the one-second deadline with
/// `deadline-exceeded`.
#[test]
fn a_flood_of_idle_and_slow_connections_never_starves_a_good_client() {
    own_nofile_for_floods();
    let dir = TempDir::new();
    let d = Daemon::start(&dir);
    let pid = d.child.as_ref().unwrap().id();
    let (soft, hard) = open_files_limit(pid);
    assert_eq!(
        soft, hard,
        "the daemon raised its soft limit to the hard one"
    );
    let (seen, good) = flood(&d.sock, |held| good_client_until_answered(&d.sock, held));
    let first_flood = first_answer(&seen).expect("the flood was answered");
    assert!(
        good[0] < first_flood,
        "the good client was answered while every flood connection was held"
    );
    for (i, s) in seen.iter().enumerate() {
        assert!(s.at.is_some(), "connection {i} never closed");
        assert_eq!(
            code(&parse_reply(&s.reply)),
            "deadline-exceeded",
            "connection {i}"
        );
    }
    assert_eq!(d.stop().code(), Some(0));
}

/// With few descriptors (hard limit 256, so a cap of 64 connections), the
/// same flood is shed oldest first: all but the cap's worth of connections
/// are answered `busy`, the rest `deadline-exceeded`, and a good client is
/// answered every time, never `busy`.
#[test]
fn past_the_cap_the_oldest_idle_connection_is_shed_not_the_good_client() {
    own_nofile_for_floods();
    let dir = TempDir::new();
    let sock = dir.path("leased.sock");
    let mut cmd = daemon_command(&sock, &dir.path("state.json"), &[]);
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let d = Daemon {
        child: Some(child),
        sock: sock.clone(),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < until, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (seen, _) = flood(&sock, |held| good_client_until_answered(&sock, held));
    let busy = seen
        .iter()
        .filter(|s| s.reply.contains(r#""code":"busy""#))
        .count();
    // At most the cap (64) can wait for their deadline; the rest were shed.
    assert!(busy >= 1200 - 64 - 16, "only {busy} shed");
    for (i, s) in seen.iter().enumerate() {
        let c = code(&parse_reply(&s.reply));
        assert!(
            c == "busy" || c == "deadline-exceeded",
            "connection {i}: {c}"
        );
    }
    assert_eq!(d.stop().code(), Some(0));
}
