//! The `usage` read (3i rows 124, 126; issue 24) through the real broker:
//! who may read it, its shape, and that it is scoped to the caller's
//! business and writes nothing.

use mosaic_bus::client::Client;
use mosaic_bus::views::views;
use mosaic_tests::*;
use serde_json::{json, Value};

fn zero() -> Value {
    json!({"input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0, "unknownTurns": 0})
}

fn empty() -> Value {
    json!({
        "total": zero(),
        "byRun": [], "byInstance": [], "byProvider": [], "byModel": [], "byAccount": [],
    })
}

/// The human, a reader and a held role read it; a role whose run doesn't
/// hold its role gets `not-holder`, the tester `tester-refused`, and
/// arguments `invalid-request`. A store with no readings answers zero
/// totals and empty groups, and the read writes nothing.
#[test]
fn the_human_readers_and_a_held_role_read_usage_and_nobody_else() {
    let dir = data_root();
    let root = dir.path();
    let mut b = Broker::start(root);
    let procs: Vec<Sleeper> = (0..2).map(|_| sleeper()).collect();
    let pm = b.bind("pm", "pm-1", procs[0].id());
    res(&b.call(&pm, "role.claim", Value::Null));
    let cto = b.bind("cto", "cto-1", procs[1].id());
    let human = ShimSession::human(&b);
    let tester = ShimSession::tester(&b);
    let reader = b.reader_cap();

    let before = row_counts(root);
    assert_eq!(res(&b.call(&pm, "usage", Value::Null)), &empty());
    assert_eq!(res(&b.call(&reader, "usage", Value::Null)), &empty());
    assert_eq!(res(&human.call("usage", Value::Null)), &empty());
    let client = Client::new(&b.socket, reader.clone());
    assert_eq!(views(&client).usage().expect("the view"), empty());
    assert_eq!(row_counts(root), before, "a read writes nothing");

    // A bound run that has not claimed its role holds nothing.
    assert_eq!(err(&b.call(&cto, "usage", Value::Null)), "not-holder");
    assert_eq!(err(&tester.call("usage", Value::Null)), "tester-refused");
    assert_eq!(
        err(&b.call(&reader, "usage", json!({"run": "pm-1"}))),
        "invalid-request"
    );
    assert_eq!(
        views(&Client::new(&b.socket, cto))
            .usage()
            .unwrap_err()
            .code,
        "not-holder"
    );
    b.close();
}
