//! Frames past the ordinary 64 KiB cap (issue 29, item 3): only the human's
//! editor sends one (`project.file.save`), and a process with no capability
//! can't take the few slots such frames share. A real broker, a real
//! records repository made with the real `git`, the real human shim.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// `git` in `repo` with no outside configuration.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// The start of a save frame past the ordinary cap, never finished: what
/// a flooding connection sends and then holds.
fn held_head() -> Vec<u8> {
    let mut head = br#"{"cap":"none","verb":"project.file.save","args":{"content":""#.to_vec();
    head.resize(64 * 1024 + 8 * 1024, b'p');
    head
}

/// One flooding connection: its socket, and whether it was answered.
struct Holder {
    s: UnixStream,
    reply: Vec<u8>,
}

impl Holder {
    fn open(socket: &Path) -> Holder {
        let mut s = UnixStream::connect(socket).expect("connect");
        // A broker that refuses the frame at the cap may close before the
        // last bytes are in: its answer is still there to read.
        let _ = s.write_all(&held_head());
        s.set_nonblocking(true).expect("nonblocking");
        Holder {
            s,
            reply: Vec::new(),
        }
    }

    /// True once the broker answered (and closed) this connection.
    fn answered(&mut self) -> bool {
        let mut buf = [0u8; 256];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => self.reply.extend_from_slice(&buf[..n]),
                Err(_) => return false,
            }
        }
    }
}

/// Issue 29 item 3: nine connections from this test process (no shim, no
/// capability) each send 72 KiB of a save frame and hold it, renewed as
/// soon as one is answered, while the human shim saves a 100 KiB file.
/// Before, eight of them took every large-frame slot and the save was
/// refused `request-too-large` for as long as the flood went on. Now a
/// frame grows past 64 KiB only for a peer the proof helper finds to be the
/// human shim: the flood is refused at the cap and the save commits.
#[test]
fn a_flood_of_held_large_frames_does_not_keep_the_human_from_saving() {
    let repo = tempfile::Builder::new()
        .prefix("mosaic-records-")
        .tempdir()
        .expect("tempdir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.path().join("docs")).expect("mkdir");
    std::fs::write(repo.path().join("docs/big.md"), "# Big\n").expect("write");
    git(repo.path(), &["add", "--", "docs/big.md"]);
    git(repo.path(), &["commit", "-q", "-m", "big"]);
    let base = git(repo.path(), &["rev-parse", "HEAD"]);

    let root = data_root();
    let mut cfg = config(root.path());
    cfg["businesses"]["acme"]["projects"] =
        json!({"site": {"repo": repo.path().to_str().expect("utf-8")}});
    let (b, reply) = Broker::spawn(root.path(), cfg);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let socket: PathBuf = b.socket.clone();

    // The flood: nine held heads, each replaced once it is answered.
    let stop = AtomicBool::new(false);
    let refused = AtomicUsize::new(0);
    let content = format!("# Big\n{}", "b".repeat(100 * 1024));
    let saved = std::thread::scope(|s| {
        let flood = s.spawn(|| {
            let mut held: Vec<Holder> = (0..9).map(|_| Holder::open(&socket)).collect();
            while !stop.load(Ordering::SeqCst) {
                for h in held.iter_mut() {
                    if h.answered() {
                        let r: Value = serde_json::from_slice(h.reply.trim_ascii_end())
                            .expect("reply is JSON");
                        assert_eq!(r, json!({"ok": false, "error": "request-too-large"}));
                        refused.fetch_add(1, Ordering::SeqCst);
                        *h = Holder::open(&socket);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        // The flood has reached the cap once one of its frames is refused:
        // every slot it could take is taken.
        let hang = Instant::now() + Duration::from_secs(60);
        while refused.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < hang, "no flooding frame was ever answered");
            std::thread::sleep(Duration::from_millis(10));
        }
        let human = ShimSession::human(&b);
        let saved = human.call(
            "project.file.save",
            json!({"project": "site", "path": "docs/big.md", "base": base, "content": content}),
        );
        let read = human.call(
            "project.file",
            json!({"project": "site", "path": "docs/big.md"}),
        );
        stop.store(true, Ordering::SeqCst);
        flood.join().expect("flood");
        (saved, read)
    });
    let (saved, read) = saved;
    let commit = res(&saved)["commit"].clone();
    assert!(commit.is_string(), "{saved}");
    assert_eq!(
        git(repo.path(), &["rev-parse", "HEAD"]),
        commit.as_str().unwrap()
    );
    assert_eq!(res(&read)["content"], json!(content));
    b.close();
}
