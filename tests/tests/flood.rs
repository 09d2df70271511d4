//! Issue 17: floods of local connections against `bus.sock`, through a real
//! `mosaic-bus` child. With 1,000 idle connections and 200 slow writers
//! open, a good client is answered within 2 s every time; idle connections
//! are closed at the 5 s frame deadline (`request-timeout`); with few
//! descriptors the oldest idle connection is shed (`request-timeout` at
//! once) rather than the good client starved.

use mosaic_tests::flood::{flood, open_files_limit, own_nofile_for_floods, Seen};
use mosaic_tests::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A good client's reads for `span`, one every 100 ms: each answered, and
/// within 2 s; returns the slowest.
fn good_client_for(b: &Broker, cap: &str, span: Duration) -> Duration {
    let end = Instant::now() + span;
    let mut slowest = Duration::ZERO;
    let mut n = 0;
    while Instant::now() < end {
        let t0 = Instant::now();
        let reply = b.call(cap, "agents", Value::Null);
        let took = t0.elapsed();
        assert_eq!(reply["ok"], json!(true), "request {n}: {reply}");
        assert!(took < Duration::from_secs(2), "request {n} took {took:?}");
        slowest = slowest.max(took);
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(n >= 20, "only {n} good requests");
    slowest
}

fn refusal(s: &Seen) -> String {
    let v: Value = serde_json::from_str(s.reply.trim_end())
        .unwrap_or_else(|_| panic!("not one reply line: {:?}", s.reply));
    assert_eq!(v["ok"], json!(false), "{v}");
    v["error"].as_str().unwrap().to_string()
}

#[test]
fn a_flood_of_idle_and_slow_connections_never_starves_a_good_client() {
    own_nofile_for_floods();
    let root = data_root();
    let b = Broker::start(root.path());
    let (soft, hard) = open_files_limit(b.child.id());
    assert_eq!(
        soft, hard,
        "the broker raised its soft limit to the hard one"
    );
    let reader = b.reader_cap();
    // Past the 5 s deadline of every flood connection.
    let (seen, slowest) = flood(&b.socket, || {
        good_client_for(&b, &reader, Duration::from_millis(6500))
    });
    eprintln!("slowest good request: {slowest:?}");
    for (i, s) in seen.iter().enumerate() {
        let after = s
            .after
            .unwrap_or_else(|| panic!("connection {i} never answered"));
        assert!(
            after >= Duration::from_millis(4900) && after < Duration::from_millis(6400),
            "connection {i} answered after {after:?}"
        );
        assert_eq!(refusal(s), "request-timeout", "connection {i}");
    }
    b.close();
}

#[test]
fn past_the_cap_the_oldest_idle_connection_is_shed_not_the_good_client() {
    own_nofile_for_floods();
    let root = data_root();
    // 512 descriptors: a cap of 85 connections (256 kept in reserve, 3 each).
    let (b, reply) = Broker::spawn_limited(
        root.path(),
        &json!({"op": "boot", "config": config(root.path())}).to_string(),
        &[],
        Some(512),
    );
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let reader = b.reader_cap();
    let (seen, _) = flood(&b.socket, || {
        good_client_for(&b, &reader, Duration::from_millis(3000))
    });
    let early = seen
        .iter()
        .filter(|s| s.after.is_some_and(|a| a < Duration::from_millis(4500)))
        .count();
    // At most the cap (85) wait for their deadline; the rest were shed,
    // each with a reply.
    assert!(early >= 1200 - 85 - 16, "only {early} shed");
    for (i, s) in seen.iter().enumerate() {
        if s.after.is_some() {
            assert_eq!(refusal(s), "request-timeout", "connection {i}");
        }
    }
    b.close();
}
