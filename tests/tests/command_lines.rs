//! Every binary's command line (issue 33 item 5; DESIGN.md: every binary
//! answers `--help` and `--version` on stdout with exit 0, the shims
//! without touching a socket), run as the real binaries: `--help`, `-h`,
//! `--version`, `-V`, and an unknown option, one line on stderr naming it
//! and `--help`, exit 2. None of them reads its stdin, opens its socket or
//! creates a file for any of these.

use mosaic_tests::*;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Every binary the workspace builds.
const BINARIES: &[&str] = &[
    "mosaic-bus",
    "mosaic-proofd",
    "mosaic-leased",
    "mosaic-migrate",
    "mosaic-human-cli",
    "mosaic-tester-cli",
    "mosaic-bench",
    "leased-bench",
];

/// Runs `name` with `args`, its stdin a pipe held open (a binary that read
/// it would wait), in `dir`; its output once it exits (10 s at most).
fn run(name: &str, args: &[&str], dir: &Path) -> Output {
    let mut child = Command::new(bin(name))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdin = child.stdin.take();
    let status = wait_exit(&mut child, Duration::from_secs(10));
    if status.is_none() {
        let _ = child.kill();
    }
    drop(stdin);
    let out = child.wait_with_output().expect("output");
    assert!(status.is_some(), "{name} {args:?} still running: {out:?}");
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("utf-8")
}

/// A directory with nothing in it, to see that nothing was created there.
fn empty_dir() -> tempfile::TempDir {
    data_root()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_binary_answers_help_and_version_on_stdout_with_exit_0() {
    let version = env!("CARGO_PKG_VERSION");
    for name in BINARIES {
        let dir = empty_dir();
        for flag in ["--help", "-h"] {
            let out = run(name, &[flag], dir.path());
            assert_eq!(out.status.code(), Some(0), "{name} {flag}: {out:?}");
            let help = text(&out.stdout);
            assert!(help.starts_with(name), "{name} {flag}: {help}");
            assert!(
                help.contains("--help") && help.contains("--version"),
                "{name}: {help}"
            );
            assert!(out.stderr.is_empty(), "{name} {flag}: {out:?}");
        }
        for flag in ["--version", "-V"] {
            let out = run(name, &[flag], dir.path());
            assert_eq!(out.status.code(), Some(0), "{name} {flag}: {out:?}");
            assert_eq!(text(&out.stdout), format!("{name} {version}\n"), "{name}");
            assert!(out.stderr.is_empty(), "{name} {flag}: {out:?}");
        }
        // Anywhere on the line, and before anything else: help wins over
        // an unknown option and over version.
        let out = run(
            name,
            &["--no-such-option", "--version", "--help"],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        assert!(text(&out.stdout).starts_with(name));
        assert!(entries(dir.path()).is_empty(), "{name} created files");
    }
}

#[test]
fn an_unknown_option_is_one_line_naming_it_and_help_with_exit_2() {
    for name in BINARIES {
        let dir = empty_dir();
        for opt in ["--no-such-option", "-x"] {
            let out = run(name, &[opt], dir.path());
            assert_eq!(out.status.code(), Some(2), "{name} {opt}: {out:?}");
            assert!(out.stdout.is_empty(), "{name} {opt}: {out:?}");
            assert_eq!(
                text(&out.stderr),
                format!("{name}: unknown option \"{opt}\"; see {name} --help\n"),
                "{name}"
            );
        }
        assert!(entries(dir.path()).is_empty(), "{name} created files");
    }
    // After options a binary knows, too; a daemon opens nothing.
    let dir = empty_dir();
    let sock = dir.path().join("s.sock");
    let state = dir.path().join("state.json");
    let (s, st) = (
        sock.to_str().expect("utf-8"),
        state.to_str().expect("utf-8"),
    );
    for (name, args) in [
        ("mosaic-bus", vec!["--control", s, "--frob"]),
        ("mosaic-bus", vec!["--demo", "--frob"]),
        ("mosaic-leased", vec!["--socket", s, "--frob", st]),
        (
            "mosaic-leased",
            vec!["--socket", s, "--state", st, "--frob"],
        ),
        ("mosaic-migrate", vec!["/nonexistent", "--frob"]),
        ("mosaic-bench", vec!["--threads", "--frob"]),
        ("leased-bench", vec!["--iterations", "1", "--frob"]),
    ] {
        let out = run(name, &args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {out:?}");
        assert_eq!(
            text(&out.stderr),
            format!("{name}: unknown option \"--frob\"; see {name} --help\n"),
            "{name} {args:?}"
        );
    }
    assert!(
        entries(dir.path()).is_empty(),
        "a refused command line made files"
    );
    // An option that is not UTF-8 is named too, on one line, not a panic.
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"--fr\xffob\nx");
    for name in BINARIES {
        let out = Command::new(bin(name))
            .arg(odd)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with(&format!("{name}: unknown option \"--fr")),
            "{err}"
        );
    }
}

/// `mosaic-bench --guards` prices the guards only beside `--instructions`;
/// alone it is a usage error: exit 2, one line on stderr, nothing made.
#[test]
fn mosaic_bench_guards_goes_with_instructions() {
    let dir = empty_dir();
    let out = run("mosaic-bench", &["--guards"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "{\"error\":\"usage: --guards goes with --instructions\"}\n"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(entries(dir.path()).is_empty(), "it made files");
}

/// The shims answer `--help` and `--version` without connecting: with no
/// socket argument, with one that names nothing, and with one a listener
/// waits on, which sees no connection; an unknown option connects neither.
#[test]
fn the_shims_answer_help_without_touching_a_socket() {
    let dir = empty_dir();
    let sock = dir.path().join("bus.sock");
    let listener = UnixListener::bind(&sock).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let nowhere = dir.path().join("nowhere.sock");
    let (s, n) = (
        sock.to_str().expect("utf-8"),
        nowhere.to_str().expect("utf-8"),
    );
    for name in ["mosaic-human-cli", "mosaic-tester-cli"] {
        for args in [
            vec!["--help"],
            vec![n, "--help"],
            vec![s, "--help"],
            vec!["--help", s],
            vec![s, "--version"],
        ] {
            let out = run(name, &args, dir.path());
            assert_eq!(out.status.code(), Some(0), "{name} {args:?}: {out:?}");
            assert!(text(&out.stdout).starts_with(name), "{name} {args:?}");
        }
        let out = run(name, &[s, "--frob"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        assert!(out.stdout.is_empty(), "{name}: no reply line: {out:?}");
    }
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a shim connected"
    );
    assert!(!nowhere.exists());
}
