//! Proof logic on synthetic process tables.

use super::table::{FakeProc, FakeTable};
use super::*;

const SHIM: &str = "/opt/mosaic/bin/mosaic-human-cli";
const NONCE: &str = "0123456789abcdef0123456789abcdef";

/// init(1) ← sshd(100, root) ← bash(200) ← shim(300).
fn clean_tree(kind: Kind) -> FakeTable {
    let mut t = FakeTable::new();
    let mut init = FakeProc::new(0, 1, "/sbin/init", &[]);
    init.uid = 0;
    init.exe = Err(ReadErr::Denied);
    init.environ = Err(ReadErr::Denied);
    let mut sshd = FakeProc::new(1, 50, "/usr/sbin/sshd", &[("PATH", "/usr/bin")]);
    sshd.uid = 0;
    t.insert(1, init)
        .insert(100, sshd)
        .insert(
            200,
            FakeProc::new(
                100,
                80,
                "/usr/bin/bash",
                &[("HOME", "/home/ada"), ("TERM", "xterm")],
            ),
        )
        .insert(
            300,
            FakeProc::new(
                200,
                90,
                SHIM,
                &[("HOME", "/home/ada"), (kind.nonce_var(), NONCE)],
            ),
        );
    t
}

fn req(kind: Kind) -> VerifyRequest {
    VerifyRequest {
        kind,
        pid: 300,
        start_time: 90,
        nonce: NONCE.into(),
        expected_exe: SHIM.into(),
        expected_uid: 1000,
    }
}

fn check(t: &FakeTable, launches: &LaunchSet, r: &VerifyRequest) -> Result<(), &'static str> {
    verify(t, launches, r).map_err(|c| c.as_str())
}

fn env_push(t: &mut FakeTable, pid: i32, k: &str, v: &str) {
    t.procs
        .get_mut(&pid)
        .unwrap()
        .environ
        .as_mut()
        .unwrap()
        .push((k.as_bytes().to_vec(), v.as_bytes().to_vec()));
}

#[test]
fn clean_tree_passes_for_both_kinds_and_walks_to_init() {
    for kind in [Kind::Human, Kind::Tester] {
        let t = clean_tree(kind);
        assert_eq!(check(&t, &LaunchSet::new(), &req(kind)), Ok(()));
        // shim, bash, sshd, init were each pinned.
        assert_eq!(t.pins.get(), 4);
    }
}

#[test]
fn a_peer_check_is_the_proof_without_the_nonce() {
    let peer = |t: &FakeTable, launches: &LaunchSet, r: &VerifyRequest| {
        verify_peer(t, launches, r).map_err(|c| c.as_str())
    };
    // No nonce at all, in the request or the environment: a clean shim
    // passes.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&300).unwrap().environ = Ok(vec![]);
    let mut r = req(Kind::Human);
    r.nonce = String::new();
    assert_eq!(peer(&t, &LaunchSet::new(), &r), Ok(()));
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("invalid-request"));
    // Every other check still holds: another program, a marker in an
    // ancestor, a launch ancestor, a start time that is not the pinned one.
    let mut other = r.clone();
    other.expected_exe = "/usr/bin/python3".into();
    assert_eq!(peer(&t, &LaunchSet::new(), &other), Err("proof-exe"));
    let mut marked = clean_tree(Kind::Human);
    env_push(&mut marked, 200, "CLAUDECODE", "1");
    assert_eq!(
        peer(&marked, &LaunchSet::new(), &r),
        Err("proof-run-marker")
    );
    let launches: LaunchSet = [(200, 80)].into_iter().collect();
    assert_eq!(peer(&t, &launches, &r), Err("proof-launch-ancestor"));
    let mut late = r.clone();
    late.start_time = 91;
    assert_eq!(peer(&t, &LaunchSet::new(), &late), Err("proof-start-time"));
}

#[test]
fn wrong_exe_uid_start_time_refuse() {
    let t = clean_tree(Kind::Human);
    let mut r = req(Kind::Human);
    r.expected_exe = "/opt/mosaic/bin/other".into();
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-exe"));
    let mut r = req(Kind::Human);
    r.expected_uid = 1001;
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-uid"));
    let mut r = req(Kind::Human);
    r.start_time = 91;
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-start-time"));
}

#[test]
fn nonce_missing_wrong_repeated_or_under_other_variable_refuses() {
    let r = req(Kind::Human);
    // Missing.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&300).unwrap().environ = Ok(vec![]);
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-nonce"));
    // Wrong value.
    let mut r2 = r.clone();
    r2.nonce = "ffffffffffffffffffffffffffffffff".into();
    assert_eq!(
        check(&clean_tree(Kind::Human), &LaunchSet::new(), &r2),
        Err("proof-nonce")
    );
    // The tester's nonce does not prove a human, nor the reverse.
    assert_eq!(
        check(&clean_tree(Kind::Tester), &LaunchSet::new(), &r),
        Err("proof-nonce")
    );
    assert_eq!(
        check(
            &clean_tree(Kind::Human),
            &LaunchSet::new(),
            &req(Kind::Tester)
        ),
        Err("proof-nonce")
    );
    // Twice under the right variable.
    let mut t = clean_tree(Kind::Human);
    env_push(&mut t, 300, HUMAN_NONCE_VAR, NONCE);
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-nonce"));
}

#[test]
fn malformed_request_is_invalid_request() {
    let t = clean_tree(Kind::Human);
    let mut r = req(Kind::Human);
    r.nonce = "short".into();
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("invalid-request"));
    let mut r = req(Kind::Human);
    r.expected_exe = "relative/shim".into();
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("invalid-request"));
    let mut r = req(Kind::Human);
    r.pid = 0;
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("invalid-request"));
}

#[test]
fn unreadable_shim_refuses_even_on_eacces() {
    for err in [ReadErr::Denied, ReadErr::Other, ReadErr::Gone] {
        let mut t = clean_tree(Kind::Human);
        t.procs.get_mut(&300).unwrap().environ = Err(err);
        assert_eq!(
            check(&t, &LaunchSet::new(), &req(Kind::Human)),
            Err("proof-unreadable")
        );
    }
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&300).unwrap().exe = Err(ReadErr::Denied);
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-unreadable")
    );
    // The claimed pid does not exist.
    let mut r = req(Kind::Human);
    r.pid = 999;
    assert_eq!(check(&t, &LaunchSet::new(), &r), Err("proof-unreadable"));
    // The shim exits while being read.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&300).unwrap().exits_during_read = true;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-unreadable")
    );
}

#[test]
fn every_human_marker_refuses_in_self_and_in_each_ancestor() {
    let all: Vec<&str> = MANAGED_RUN_MARKERS
        .iter()
        .chain(AGENT_RUN_MARKERS)
        .copied()
        .collect();
    assert!(all.contains(&"CLAUDECODE") && all.contains(&"CODEX_SANDBOX_NETWORK_DISABLED"));
    for marker in all {
        for pid in [300, 200, 100] {
            let mut t = clean_tree(Kind::Human);
            env_push(&mut t, pid, marker, "1");
            assert_eq!(
                check(&t, &LaunchSet::new(), &req(Kind::Human)),
                Err("proof-run-marker"),
                "{marker} in {pid}"
            );
        }
    }
}

#[test]
fn marker_with_empty_value_still_refuses() {
    let mut t = clean_tree(Kind::Human);
    env_push(&mut t, 200, "CLAUDECODE", "");
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-run-marker")
    );
}

#[test]
fn agent_executable_ancestor_refuses_human_only() {
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().exe = Ok("/home/ada/.local/bin/claude".into());
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-run-marker")
    );
    let mut t = clean_tree(Kind::Tester);
    t.procs.get_mut(&200).unwrap().exe = Ok("/usr/local/bin/codex".into());
    assert_eq!(check(&t, &LaunchSet::new(), &req(Kind::Tester)), Ok(()));
}

#[test]
fn eacces_ancestor_environ_skips_only_the_marker_check() {
    // The marker is in an environ we may not read: skipped, passes.
    let mut t = clean_tree(Kind::Human);
    env_push(&mut t, 100, "CLAUDECODE", "1");
    t.procs.get_mut(&100).unwrap().environ = Err(ReadErr::Denied);
    assert_eq!(check(&t, &LaunchSet::new(), &req(Kind::Human)), Ok(()));
    // ... but the launch registry still applies to that ancestor ...
    let launches: LaunchSet = [(100, 50)].into_iter().collect();
    assert_eq!(
        check(&t, &launches, &req(Kind::Human)),
        Err("proof-launch-ancestor")
    );
    // ... and so does the executable check.
    t.procs.get_mut(&100).unwrap().exe = Ok("/usr/bin/claude".into());
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-run-marker")
    );
}

#[test]
fn other_ancestor_read_failures_refuse() {
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().environ = Err(ReadErr::Other);
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-unreadable")
    );
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().exe = Err(ReadErr::Other);
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-unreadable")
    );
}

#[test]
fn ancestry_loop_refuses() {
    // bash(200) claims the shim (300) as its parent.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().ppid = 300;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-loop")
    );
    // sshd(100) ↔ bash(200).
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&100).unwrap().ppid = 200;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-loop")
    );
    // Tester walks refuse loops too.
    let mut t = clean_tree(Kind::Tester);
    t.procs.get_mut(&200).unwrap().ppid = 200;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Tester)),
        Err("proof-ancestry-loop")
    );
}

#[test]
fn vanished_parent_refuses() {
    // The parent is gone from the table.
    let mut t = clean_tree(Kind::Human);
    t.procs.remove(&200);
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-vanished")
    );
    // The grandparent exits while it is read.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&100).unwrap().exits_during_read = true;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-vanished")
    );
    // The parent's pid was reused by a younger process.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().start_time = 95;
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-vanished")
    );
    // Reading a parent's environ reports it gone.
    let mut t = clean_tree(Kind::Human);
    t.procs.get_mut(&200).unwrap().environ = Err(ReadErr::Gone);
    assert_eq!(
        check(&t, &LaunchSet::new(), &req(Kind::Human)),
        Err("proof-ancestry-vanished")
    );
}

#[test]
fn known_launch_ancestor_or_self_refuses() {
    let t = clean_tree(Kind::Human);
    for (pid, st) in [(200, 80), (100, 50), (1, 1), (300, 90)] {
        let launches: LaunchSet = [(pid, st)].into_iter().collect();
        assert_eq!(
            check(&t, &launches, &req(Kind::Human)),
            Err("proof-launch-ancestor"),
            "{pid}"
        );
    }
    // Same pid, other start time: a different process, passes.
    let launches: LaunchSet = [(200, 81)].into_iter().collect();
    assert_eq!(check(&t, &launches, &req(Kind::Human)), Ok(()));
}

#[test]
fn tester_passes_agent_markers_but_not_managed_runs() {
    for marker in AGENT_RUN_MARKERS {
        for pid in [300, 200] {
            let mut t = clean_tree(Kind::Tester);
            env_push(&mut t, pid, marker, "1");
            assert_eq!(
                check(&t, &LaunchSet::new(), &req(Kind::Tester)),
                Ok(()),
                "{marker}"
            );
        }
    }
    for marker in MANAGED_RUN_MARKERS {
        for pid in [300, 200, 100] {
            let mut t = clean_tree(Kind::Tester);
            env_push(&mut t, pid, marker, "r1");
            assert_eq!(
                check(&t, &LaunchSet::new(), &req(Kind::Tester)),
                Err("tester-required"),
                "{marker} in {pid}"
            );
        }
    }
    let t = clean_tree(Kind::Tester);
    let launches: LaunchSet = [(200, 80)].into_iter().collect();
    assert_eq!(
        check(&t, &launches, &req(Kind::Tester)),
        Err("tester-required")
    );
}

#[test]
fn codes_are_distinct_and_round_trip() {
    let mut seen = HashSet::new();
    for c in ProofCode::ALL {
        assert!(seen.insert(c.as_str()));
        assert_eq!(ProofCode::parse(c.as_str()), Some(*c));
    }
    assert_eq!(seen.len(), 11);
}

mod wire {
    use super::super::protocol::{parse_request, read_line_bounded, Line, Server};
    use super::*;

    fn reply(s: &mut Server<FakeTable>, line: &str) -> serde_json::Value {
        serde_json::from_str(&s.handle_line(line.as_bytes())).unwrap()
    }

    fn verify_line(id: i64) -> String {
        format!(
            r#"{{"op":"verify","id":{id},"kind":"human","pid":300,"startTime":90,"nonce":"{NONCE}","exe":"{SHIM}","uid":1000}}"#
        )
    }

    #[test]
    fn hello_launches_verify() {
        let mut s = Server::new(clean_tree(Kind::Human));
        assert_eq!(
            reply(&mut s, r#"{"op":"hello","version":1}"#),
            serde_json::json!({"ok":true,"version":1})
        );
        assert_eq!(
            reply(&mut s, &verify_line(7)),
            serde_json::json!({"id":7,"ok":true})
        );
        assert_eq!(
            reply(
                &mut s,
                r#"{"op":"launches","id":8,"set":[{"pid":200,"startTime":80}]}"#
            ),
            serde_json::json!({"id":8,"ok":true})
        );
        assert_eq!(
            reply(&mut s, &verify_line(9)),
            serde_json::json!({"id":9,"ok":false,"error":"proof-launch-ancestor"})
        );
        // Replaced, not merged.
        assert_eq!(
            reply(&mut s, r#"{"op":"launches","id":10,"set":[]}"#),
            serde_json::json!({"id":10,"ok":true})
        );
        assert_eq!(
            reply(&mut s, &verify_line(11)),
            serde_json::json!({"id":11,"ok":true})
        );
    }

    #[test]
    fn a_peer_line_is_answered_without_a_nonce() {
        let mut t = clean_tree(Kind::Human);
        t.procs.get_mut(&300).unwrap().environ = Ok(vec![]);
        let mut s = Server::new(t);
        let line = |exe: &str| {
            format!(
                r#"{{"op":"peer","id":4,"kind":"human","pid":300,"startTime":90,"exe":"{exe}","uid":1000}}"#
            )
        };
        assert_eq!(
            reply(&mut s, &line(SHIM)),
            serde_json::json!({"id":4,"ok":true})
        );
        assert_eq!(
            reply(&mut s, &line("/usr/bin/python3")),
            serde_json::json!({"id":4,"ok":false,"error":"proof-exe"})
        );
        // The same process has no nonce: as a proof, it is refused.
        assert_eq!(
            reply(&mut s, &verify_line(5)),
            serde_json::json!({"id":5,"ok":false,"error":"proof-nonce"})
        );
    }

    #[test]
    fn bad_requests_are_invalid_request_with_id_when_parseable() {
        let mut s = Server::new(clean_tree(Kind::Human));
        let bad = serde_json::json!({"ok":false,"error":"invalid-request"});
        for line in [
            "not json",
            "[]",
            r#"{"op":"nope"}"#,
            r#"{"op":"hello","version":2}"#,
            r#"{"op":"hello","version":1,"extra":1}"#,
            r#"{"op":"verify","id":"x"}"#,
            r#"{"op":"verify","id":9007199254740992}"#,
        ] {
            assert_eq!(reply(&mut s, line), bad, "{line}");
        }
        let with_id = serde_json::json!({"id":5,"ok":false,"error":"invalid-request"});
        for line in [
            r#"{"op":"verify","id":5}"#,
            r#"{"op":"verify","id":5,"kind":"robot","pid":300,"startTime":90,"nonce":"0123456789abcdef0123456789abcdef","exe":"/x","uid":1}"#,
            r#"{"op":"verify","id":5,"kind":"human","pid":300,"startTime":90,"nonce":"0123456789abcdef0123456789abcdef","exe":"/x","uid":1,"more":true}"#,
            r#"{"op":"verify","id":5,"kind":"human","pid":-3,"startTime":90,"nonce":"0123456789abcdef0123456789abcdef","exe":"/x","uid":1}"#,
            r#"{"op":"launches","id":5,"set":[{"pid":1}]}"#,
            r#"{"op":"launches","id":5,"set":{}}"#,
            // `peer` takes no nonce, and everything else `verify` does.
            r#"{"op":"peer","id":5,"kind":"human","pid":300,"startTime":90,"nonce":"0123456789abcdef0123456789abcdef","exe":"/x","uid":1}"#,
            r#"{"op":"peer","id":5,"kind":"human","pid":300,"startTime":90,"uid":1}"#,
            r#"{"op":"peer","id":5,"kind":"human","pid":300,"startTime":90,"exe":"x","uid":1}"#,
        ] {
            assert_eq!(reply(&mut s, line), with_id, "{line}");
        }
        assert!(parse_request(b"\xff\xfe").is_err());
    }

    #[test]
    fn serve_answers_each_line_and_skips_oversized_ones() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"op\":\"hello\",\"version\":1}\n");
        input.extend(std::iter::repeat_n(b'x', 70 * 1024));
        input.push(b'\n');
        input.extend_from_slice(verify_line(3).as_bytes());
        input.push(b'\n');
        let mut out = Vec::new();
        Server::new(clean_tree(Kind::Human))
            .serve(&input[..], &mut out)
            .unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"ok":true,"version":1}"#,
                r#"{"error":"invalid-request","ok":false}"#,
                r#"{"id":3,"ok":true}"#
            ]
        );
    }

    #[test]
    fn bounded_line_reader() {
        let mut r = &b"abc\ndef"[..];
        assert_eq!(
            read_line_bounded(&mut r, 8).unwrap(),
            Line::Data(b"abc".to_vec())
        );
        assert_eq!(
            read_line_bounded(&mut r, 8).unwrap(),
            Line::Data(b"def".to_vec())
        );
        assert_eq!(read_line_bounded(&mut r, 8).unwrap(), Line::Eof);
        let mut r = &b"abcdefgh\nz\n"[..];
        assert_eq!(read_line_bounded(&mut r, 8).unwrap(), Line::TooLong);
        assert_eq!(
            read_line_bounded(&mut r, 8).unwrap(),
            Line::Data(b"z".to_vec())
        );
    }
}

#[test]
fn docs_list_every_code_and_marker() {
    let doc = include_str!("../../../docs/proof.md");
    for c in ProofCode::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", c.as_str())),
            "{c} missing from docs/proof.md"
        );
    }
    for m in MANAGED_RUN_MARKERS
        .iter()
        .chain(AGENT_RUN_MARKERS)
        .chain(AGENT_EXE_NAMES)
    {
        assert!(
            doc.contains(&format!("`{m}`")),
            "{m} missing from docs/proof.md"
        );
    }
}

/// The process codes table of docs/proof.md is exactly the set of codes the
/// `mosaic-proofd` binary prints (`fail("…")` and `Err("…")` in its source).
#[test]
fn docs_list_every_proofd_process_code() {
    let src = include_str!("../bin/mosaic-proofd.rs");
    let mut in_src = std::collections::BTreeSet::new();
    for opener in ["fail(\"", "Err(\""] {
        for (at, _) in src.match_indices(opener) {
            let rest = &src[at + opener.len()..];
            let end = rest.find('"').expect("closing quote");
            in_src.insert(&rest[..end]);
        }
    }
    let doc = include_str!("../../../docs/proof.md");
    let start = doc
        .find("### `mosaic-proofd` process codes")
        .expect("process codes section");
    let section = &doc[start..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let in_doc: std::collections::BTreeSet<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(c, _)| c))
        .collect();
    assert_eq!(in_doc, in_src);
    for c in [
        "usage",
        "bad-fd",
        "pdeathsig",
        "no-new-privs",
        "capset",
        "io",
        "fork",
        "no-notify-socket",
        "notify",
    ] {
        assert!(in_src.contains(c), "{c} not found in the source");
    }
}
