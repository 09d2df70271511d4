//! House rules checked as tests: each scans the workspace's own sources
//! (or docs) and fails when a boundary `docs/architecture.md` states is
//! crossed.
//!
//! - The README lists every refusal code; the code tables of `README.md`
//!   ("Refusal codes") and `docs/operations.md` ("Codes") list exactly the
//!   codes of `broker/src/error.rs`, each once.
//! - `.ci/run` runs exactly the README's test command, and that command runs
//!   every test (ignored ones too) under nextest's per-test timeout.
//! - `docs/architecture.md` names every source file of every crate, in
//!   that crate's section.
//! - Every source file starts with a `//!` doc line.
//! - Only `broker/src/store/` (and, offline, the migrator crate) holds SQL:
//!   no SQL statement text and no rusqlite statement call in any other
//!   workspace member's `src/` (the test harness's aside).
//! - The writer thread takes no lock and reads no `/proc`: the modules that
//!   run on it (`core.rs`, `writer.rs`, `authorize.rs`, `handlers/`,
//!   `store/`, `policy/`, `tokens.rs`, `credentials.rs`) name no mutex,
//!   read-write lock or condition variable and no `/proc` reader; launch
//!   sets leave by message (`proof::ProofGate::launch_sink`), start times are
//!   read by the runtime before a `bindLaunch` reaches the writer.
//! - No import circle between the modules of any library crate of the
//!   workspace (file granularity, paths from `crate`, `super`, `self`).
//! - Every crate with `unsafe` code denies `unsafe_op_in_unsafe_fn` at its
//!   root, so each unsafe operation sits in a block the SAFETY rule sees.
//! - `rusqlite` is named only under `broker/src/store/` (and the offline
//!   members), save a list of files that may only shrink.
//! - Host ops have one home: `runtime.rs` and the writer-side
//!   `handlers/ops/` never name `host/` (which parses ops and calls the
//!   runtime), and `handlers/ops/` never names the runtime.
//! - One request model: one table row per verb and host op, one writer of
//!   refusal evidence, one argument reader, reads on a shared `Core`, and
//!   the slow parts of staged verbs below the store and the writer.

#[path = "support/source_scan.rs"]
mod source_scan;

use mosaic_bus::error::Code;
use source_scan::*;

/// The README lists every refusal code.
#[test]
fn readme_lists_every_code() {
    let readme = include_str!("../../README.md");
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !readme.contains(&format!("| `{c}` |")))
        .collect();
    assert!(missing.is_empty(), "README.md lacks codes: {missing:?}");
}

/// Every source file starts with a `//!` doc line.
#[test]
fn every_module_says_what_it_is() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let lacking: Vec<String> = files
        .iter()
        .filter(|p| {
            !std::fs::read_to_string(p)
                .unwrap_or_default()
                .trim_start()
                .starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(lacking.is_empty(), "files without a //! line: {lacking:?}");
}

use std::collections::BTreeSet;
use std::fs;

#[test]
fn sql_lives_only_in_the_store() {
    let found = sql_findings();
    assert!(
        found.is_empty(),
        "SQL outside broker/src/store/ (move it into a store function):\n{}",
        found.join("\n")
    );
}

/// One reading of an instance's definition (issue 30):
/// `policy::routing::definition_of` answers which definition an instance
/// is (its key when it declares none); no other module of the broker reads
/// a business role's `definition` field itself, so no rule can read it
/// another way. `config/` builds the field and checks it.
#[test]
fn one_function_reads_an_instances_definition() {
    let src = root().join("broker/src");
    let mut found = Vec::new();
    for f in rust_files(&src) {
        if f.starts_with(src.join("config")) || f == src.join("policy/routing.rs") {
            continue;
        }
        found.extend(code_mentions(&f, "definition.as_deref()"));
    }
    let routing = code_mentions(&src.join("policy/routing.rs"), "definition.as_deref()");
    assert_eq!(routing.len(), 1, "{routing:#?}");
    assert!(routing[0].contains("unwrap_or(key)"), "{routing:#?}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One path for every message (issue 30, 3i row 121): outside the store,
/// only `verbs::messages::post` calls the message writer and files a
/// message in a thread, so no writer (a verb, a review, a decision close, a
/// notice, a landing result) can store a message to or from a thread
/// instance outside its thread.
#[test]
fn every_message_is_written_through_one_path() {
    let src = root().join("broker/src");
    let mut found = Vec::new();
    for f in rust_files(&src) {
        if f.starts_with(src.join("store")) {
            continue;
        }
        for needle in ["insert_message(", "file_message("] {
            found.extend(code_mentions(&f, needle));
        }
    }
    let post = src.join("handlers/verbs/messages.rs").display().to_string();
    let (ours, others): (Vec<String>, Vec<String>) =
        found.into_iter().partition(|l| l.starts_with(&post));
    assert!(others.is_empty(), "{}", others.join("\n"));
    assert_eq!(ours.len(), 2, "post's two calls: {ours:#?}");
}

/// Claim rows have one writer, `store::evidence::insert_claim`, which tells
/// the holders kept in memory (`evidence::Holders`) of every row it writes:
/// a second `INSERT INTO role_claims` would leave them behind the store.
#[test]
fn claim_rows_have_one_writer() {
    let src = root().join("broker/src");
    let mut writers = Vec::new();
    for f in rust_files(&src) {
        let text = fs::read_to_string(&f).expect("read");
        for (line, s) in &lex(&text).strings {
            let squeezed: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
            if squeezed.contains("INSERT INTO role_claims") {
                writers.push(format!("{}:{line}", f.display()));
            }
        }
    }
    assert_eq!(writers.len(), 1, "{writers:#?}");
    assert!(
        writers[0].contains("store/evidence.rs"),
        "the one writer is store/evidence.rs: {writers:#?}"
    );
    let evidence = fs::read_to_string(src.join("store/evidence.rs")).expect("evidence");
    assert!(
        lex(&evidence).code.contains("t.claims.push(HolderOp"),
        "insert_claim tells the holders of its row"
    );
}

/// The docs name only source files that exist (issue 30: docs/decisions.md
/// named `host/pushes.rs` long after it moved to `ops/pushes.rs`). Every
/// backticked `path.rs` in the README and `docs/` is a file of the
/// workspace (its path, or the end of one), and a `path.rs::item` names an
/// item that file mentions. The one entry about `error.rs`'s move names the
/// old file on purpose.
#[test]
fn docs_name_only_source_files_that_exist() {
    let root = root();
    let mut sources: Vec<String> = Vec::new();
    for member in ["broker", "proofd", "migrator", "shims", "tests"] {
        for f in rust_files(&root.join(member)) {
            if let Ok(rel) = f.strip_prefix(&root) {
                sources.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let moved = ["broker/src/error.rs", "error.rs"];
    let mut docs = vec![root.join("README.md")];
    for e in fs::read_dir(root.join("docs")).expect("docs").flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            docs.push(e.path());
        }
    }
    let mut wrong = Vec::new();
    for doc in &docs {
        let text = fs::read_to_string(doc).expect("read doc");
        for token in text.split('`').skip(1).step_by(2) {
            let (path, item) = match token.split_once("::") {
                Some((p, i)) => (p, Some(i.rsplit("::").next().unwrap_or(i))),
                None => (token, None),
            };
            let shaped = path.len() > 3
                && !path.starts_with('.')
                && path.ends_with(".rs")
                && path
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_./-".contains(&b));
            if !shaped || moved.contains(&path) {
                continue;
            }
            let found: Vec<&String> = sources
                .iter()
                .filter(|s| *s == path || s.ends_with(&format!("/{path}")))
                .collect();
            if found.is_empty() {
                wrong.push(format!("{}: `{token}`: no such file", doc.display()));
                continue;
            }
            if let Some(item) = item {
                let named = found.iter().any(|f| {
                    fs::read_to_string(root.join(f)).is_ok_and(|src| {
                        src.match_indices(item).any(|(i, _)| {
                            let before = src[..i].chars().next_back();
                            let after = src[i + item.len()..].chars().next();
                            let ident = |c: Option<char>| {
                                c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                            };
                            !ident(before) && !ident(after)
                        })
                    })
                });
                if !named {
                    wrong.push(format!("{}: `{token}`: no such item", doc.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn host_and_the_runtime_do_not_import_each_other() {
    let src = root().join("broker/src");
    let mut found = code_mentions(&src.join("runtime.rs"), "crate::host");
    for f in rust_files(&src.join("handlers/ops")) {
        found.extend(code_mentions(&f, "crate::host"));
        found.extend(code_mentions(&f, "crate::runtime"));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Identifiers the writer-side modules may not use: locks and the `/proc`
/// and proof layers.
const WRITER_FORBIDS: &[&str] = &[
    "Mutex",
    "RwLock",
    "Condvar",
    "Barrier",
    "procfs",
    "PidFd",
    "ProofGate",
];

#[test]
fn the_writer_side_takes_no_lock_and_reads_no_proc() {
    let src = root().join("broker/src");
    let mut files = Vec::new();
    for f in [
        "core.rs",
        "writer.rs",
        "authorize.rs",
        "tokens.rs",
        "credentials.rs",
    ] {
        files.push(src.join(f));
    }
    for d in ["handlers", "store", "policy"] {
        files.extend(rust_files(&src.join(d)));
    }
    let mut found = Vec::new();
    for f in &files {
        let code = lex(&fs::read_to_string(f).expect("read source"));
        for (i, l) in code.code.lines().enumerate() {
            for id in identifiers(l).filter(|id| WRITER_FORBIDS.contains(id)) {
                found.push(format!("{}:{}: {id}", f.display(), i + 1));
            }
        }
        // A path under /proc is a literal.
        for (line, s) in &code.strings {
            if s.contains("/proc") {
                found.push(format!("{}:{line}: a /proc path", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "writer-side code that can wait on the I/O side or read /proc:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_code_tables_list_exactly_the_codes_of_error_rs() {
    let all: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    let mut wrong = Vec::new();
    for (file, heading) in [
        ("README.md", "## Refusal codes"),
        ("docs/operations.md", "## Codes"),
    ] {
        let listed = table_codes(file, heading);
        for c in &all {
            match listed.iter().filter(|l| l == c).count() {
                1 => {}
                0 => wrong.push(format!("{file}: `{c}` is missing")),
                n => wrong.push(format!("{file}: `{c}` is listed {n} times")),
            }
        }
        for l in &listed {
            if !all.contains(&l.as_str()) {
                wrong.push(format!("{file}: `{l}` is no code of error.rs"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = fs::read_to_string(root().join("README.md")).expect("README");
    let mut lines = readme.lines().skip_while(|l| l.trim() != "## Test");
    let command = lines
        .by_ref()
        .skip_while(|l| !l.starts_with("```"))
        .nth(1)
        .expect("a command block under ## Test")
        .trim()
        .to_string();
    let ci = fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let last = ci
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .expect("a command in .ci/run");
    assert_eq!(last, command, ".ci/run's command is the README's");
    for step in [
        "cargo fmt --all --check",
        "cargo clippy --all-targets",
        "-D warnings",
        "cargo nextest run --workspace --run-ignored all",
        "cargo test --workspace --doc",
    ] {
        assert!(command.contains(step), "the test command runs {step}");
    }
    // nextest runs under a per-test timeout: a test that spins fails.
    let nextest = fs::read_to_string(root().join(".config/nextest.toml")).expect("nextest.toml");
    assert!(
        nextest
            .lines()
            .any(|l| l.starts_with("slow-timeout") && l.contains("terminate-after")),
        ".config/nextest.toml gives the default profile a slow-timeout with terminate-after"
    );
}

#[test]
fn architecture_names_every_source_file() {
    let root = root();
    let doc = fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    // Every workspace member has its section, headed by its folder.
    let members = members();
    let mut missing = Vec::new();
    for member in &members {
        let src = format!("{member}/src");
        let src = src.as_str();
        let text = section(&doc, &format!("### `{member}/`"));
        for file in rust_files(&root.join(src)) {
            let rel = file
                .strip_prefix(root.join(src))
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if !names(text, src, &rel) {
                missing.push(format!("{src}/{rel}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name:\n{}",
        missing.join("\n")
    );
}

/// The crates' link boundaries (`docs/architecture.md`, "Crates"): the wire
/// vocabulary is std only; the client and the shims link neither SQLite nor
/// tokio; the proof helper links no store and no runtime; the OS layer
/// links none of the bus's crates.
#[test]
fn crates_link_only_what_their_users_may() {
    let graph = lock_graph();
    for pkg in [
        "mosaic-wire",
        "mosaic-client",
        "mosaic-shims",
        "mosaic-bus",
        "mosaic-leased",
        "mosaic-proofd",
        "mosaic-os",
    ] {
        assert!(graph.contains_key(pkg), "Cargo.lock has no {pkg}");
    }
    assert_eq!(
        closure(&graph, "mosaic-wire"),
        Vec::<String>::new(),
        "mosaic-wire depends on nothing"
    );
    for pkg in ["mosaic-client", "mosaic-shims"] {
        let pulled = closure(&graph, pkg);
        for banned in ["rusqlite", "libsqlite3-sys", "tokio", "mosaic-bus"] {
            assert!(
                !pulled.iter().any(|p| p == banned),
                "{pkg} pulls in {banned}: {pulled:?}"
            );
        }
    }
    // The lease broker is apart from the proof helper and the broker.
    let leased = closure(&graph, "mosaic-leased");
    for banned in ["mosaic-proofd", "mosaic-bus", "rusqlite", "tokio"] {
        assert!(
            !leased.iter().any(|p| p == banned),
            "mosaic-leased pulls in {banned}"
        );
    }
    // The proof helper reads /proc and answers on a pipe: no store, no
    // async runtime, no broker.
    let proofd = closure(&graph, "mosaic-proofd");
    for banned in ["mosaic-bus", "rusqlite", "libsqlite3-sys", "tokio"] {
        assert!(
            !proofd.iter().any(|p| p == banned),
            "mosaic-proofd pulls in {banned}: {proofd:?}"
        );
    }
    // The operating-system layer knows nothing of the bus: not its wire,
    // its store, its runtime or any of its crates.
    let os = closure(&graph, "mosaic-os");
    assert!(!os.is_empty(), "mosaic-os has dependencies to check");
    for p in &os {
        assert!(
            !p.starts_with("mosaic-")
                && !["rusqlite", "libsqlite3-sys", "tokio", "serde_json"].contains(&p.as_str()),
            "mosaic-os pulls in {p}: {os:?}"
        );
    }
    // The check can fail: the broker does pull both in.
    let bus = closure(&graph, "mosaic-bus");
    assert!(bus.iter().any(|p| p == "rusqlite") && bus.iter().any(|p| p == "tokio"));
}

/// Every `unsafe` block in the workspace's Rust sources (shipped code,
/// tests, benchmarks) says why it is sound in a `// SAFETY:` comment.
#[test]
fn every_unsafe_block_has_a_safety_comment() {
    let root = root();
    let mut lacking = Vec::new();
    let mut count = 0;
    for dir in ["broker", "proofd", "migrator", "shims", "tests"] {
        for file in rust_files(&root.join(dir)) {
            let rel = file
                .strip_prefix(&root)
                .expect("under root")
                .display()
                .to_string();
            let src = fs::read_to_string(&file).expect("read source");
            for (line, ok) in unsafe_blocks(&src) {
                count += 1;
                if !ok {
                    lacking.push(format!("{rel}:{line}"));
                }
            }
        }
    }
    assert!(count > 0, "the scan found no unsafe block at all");
    assert!(
        lacking.is_empty(),
        "unsafe blocks without a `// SAFETY:` comment:\n{}",
        lacking.join("\n")
    );
}

#[test]
fn no_import_circle_between_modules() {
    let mut found = Vec::new();
    for member in members() {
        let src = root().join(&member).join("src");
        if !src.join("lib.rs").exists() {
            continue;
        }
        let graph = module_graph(&src);
        for c in circles(&graph) {
            let arrows: Vec<String> = c
                .iter()
                .flat_map(|m| {
                    graph[m]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(move |t| format!("{m} → {t}"))
                })
                .collect();
            found.push(format!("{member}: {}", arrows.join(", ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// Files outside `broker/src/store/` that name `rusqlite`: none of the
/// broker's own (every module reads through `store::Db`, whose connection
/// only the store reaches), only the benchmark, which opens the store
/// read-only to measure reads and to prepare stores and is no part of the
/// shipped broker. A ratchet: a file may leave this list, none may join it.
const RUSQLITE_OUTSIDE_STORE: &[&str] = &[
    "broker/bench/src/bin/mosaic-bench.rs",
    "broker/bench/src/instructions.rs",
];

/// `rusqlite` is named only under `broker/src/store/` (the migrator and the
/// test harness, `SQL_MEMBERS`, are offline or read stores to check them),
/// plus the shrinking list above.
#[test]
fn rusqlite_is_named_only_in_the_store() {
    let root = root();
    let mut naming = Vec::new();
    for member in members() {
        if SQL_MEMBERS.contains(&member.as_str()) {
            continue;
        }
        for f in rust_files(&root.join(&member).join("src")) {
            let rel = f
                .strip_prefix(&root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            if rel.starts_with("broker/src/store/") {
                continue;
            }
            let src = fs::read_to_string(&f).expect("read source");
            if identifiers(&lex(&src).code).any(|w| w == "rusqlite") {
                naming.push(rel);
            }
        }
    }
    let new: Vec<&String> = naming
        .iter()
        .filter(|f| !RUSQLITE_OUTSIDE_STORE.contains(&f.as_str()))
        .collect();
    let gone: Vec<&&str> = RUSQLITE_OUTSIDE_STORE
        .iter()
        .filter(|f| !naming.iter().any(|n| n == *f))
        .collect();
    assert!(new.is_empty(), "rusqlite named outside the store: {new:#?}");
    assert!(
        gone.is_empty(),
        "no longer name rusqlite, strike them from RUSQLITE_OUTSIDE_STORE: {gone:#?}"
    );
}

/// The store's connection stays in the store. `Db` keeps it in a private
/// field; the one door, `Db::sql`, exists only with the feature `raw-sql`
/// (for the migrator, the tests and the benchmark), and no module of the
/// broker outside `store/` calls it; no `pub` item of the store hands out a
/// `Connection` (the store's functions may take one, as the migrator's
/// schema digest does, but never give one), and `Tx`'s transaction field is
/// private.
#[test]
fn the_store_s_connection_stays_in_the_store() {
    let root = root();
    let store_mod = fs::read_to_string(root.join("broker/src/store/mod.rs")).expect("store");
    let code = lex(&store_mod).code;
    assert!(
        code.contains("pub struct Db(Connection);"),
        "Db's field must stay private"
    );
    assert!(
        code.contains("    tx: Sp<'a>,"),
        "Tx's transaction field must stay private"
    );
    let mut doors = Vec::new();
    for f in rust_files(&root.join("broker/src/store")) {
        let raw = fs::read_to_string(&f).expect("read");
        let raw_lines: Vec<&str> = raw.lines().collect();
        let text = lex(&raw).code;
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let hands_out = t.starts_with("pub ")
                && t.contains("->")
                && t.split("->")
                    .nth(1)
                    .is_some_and(|r| r.contains("Connection"));
            let field = t.starts_with("pub ") && !t.contains('(') && t.contains("Connection");
            if hands_out || field {
                let gated = i > 0
                    && raw_lines
                        .get(i - 1)
                        .is_some_and(|a| a.contains("feature = \"raw-sql\""));
                if !gated {
                    doors.push(format!("{}:{}: {t}", f.display(), i + 1));
                }
            }
        }
    }
    assert!(
        doors.is_empty(),
        "the store hands out its connection: {doors:#?}"
    );
    let mut callers = Vec::new();
    for f in rust_files(&root.join("broker/src")) {
        if f.starts_with(root.join("broker/src/store")) {
            continue;
        }
        let text = lex(&fs::read_to_string(&f).expect("read")).code;
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if squeezed.contains(".sql()") {
            callers.push(f.display().to_string());
        }
    }
    assert!(
        callers.is_empty(),
        "the broker reaches the store's connection: {callers:#?}"
    );
}

/// The store returns plain rows (`store::rows`, its own structs); what a
/// session sees of them is built in `handlers/views.rs`. So no file of the
/// store builds JSON with `json!` (it still decodes the JSON columns it
/// stores, such as a decision's options, and the export writes its own
/// column-by-column lines).
#[test]
fn the_store_builds_no_wire_json() {
    let root = root();
    let mut building = Vec::new();
    for f in rust_files(&root.join("broker/src/store")) {
        let text = lex(&fs::read_to_string(&f).expect("read")).code;
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if squeezed.contains("json!(") || squeezed.contains("json!{") || squeezed.contains("json![")
        {
            building.push(f.display().to_string());
        }
    }
    assert!(
        building.is_empty(),
        "the store builds wire JSON: {building:#?}"
    );
    let views = fs::read_to_string(root.join("broker/src/handlers/views.rs")).expect("views");
    assert!(views.contains("json!("), "the views build the rows' JSON");
}

/// Every crate root of the workspace's members (`src/lib.rs`, `src/main.rs`,
/// `src/bin/*.rs`) whose crate holds `unsafe` code says
/// `#![deny(unsafe_op_in_unsafe_fn)]`: an `unsafe fn`'s body is then no
/// unsafe block of its own, so every unsafe operation stands in an
/// `unsafe {}` block that `every_unsafe_block_has_a_safety_comment` checks.
#[test]
fn every_crate_with_unsafe_code_denies_unsafe_ops_in_unsafe_fns() {
    let root = root();
    let mut lacking = Vec::new();
    let mut checked = 0;
    for member in members() {
        let src = root.join(&member).join("src");
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        if let Ok(bins) = fs::read_dir(src.join("bin")) {
            roots.extend(
                bins.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "rs")),
            );
        }
        for crate_root in roots.into_iter().filter(|p| p.exists()) {
            let has_unsafe = crate_modules(&crate_root).iter().any(|(_, f)| {
                let text = fs::read_to_string(f).unwrap_or_default();
                identifiers(&lex(&text).code).any(|w| w == "unsafe")
            });
            if !has_unsafe {
                continue;
            }
            checked += 1;
            let code: String = lex(&fs::read_to_string(&crate_root).expect("read root"))
                .code
                .split_whitespace()
                .collect();
            if !code.contains("#![deny(unsafe_op_in_unsafe_fn)]") {
                lacking.push(crate_root.display().to_string());
            }
        }
    }
    assert!(checked >= 8, "found only {checked} crates with unsafe code");
    assert!(lacking.is_empty(), "without the deny: {lacking:#?}");
}

/// One request model (issue 32): every verb and every host op has exactly
/// one row in `handlers/table.rs`, and every handler type the handlers
/// define (`impl Verb for`, `impl StagedVerb for`, `impl Op for`,
/// `host_op!`) is named by a row, so a handler can't be reached another
/// way or be left out.
#[test]
fn every_verb_and_host_op_has_exactly_one_table_row() {
    use mosaic_bus::handlers::{HOST_OPS, VERBS};
    let mut seen = BTreeSet::new();
    for v in VERBS {
        assert!(seen.insert(v.name), "verb {} has two rows", v.name);
    }
    let mut seen = BTreeSet::new();
    for o in HOST_OPS {
        assert!(seen.insert(o.name), "host op {} has two rows", o.name);
    }
    let src = root().join("broker/src/handlers");
    let table = lex(&fs::read_to_string(src.join("table.rs")).expect("table.rs")).code;
    let table = tokens(&table);
    let named = |module: &str, ty: &str| {
        table
            .windows(3)
            .any(|w| w[0] == module && w[1] == "::" && w[2] == ty)
    };
    let mut missing = Vec::new();
    let mut ops = 0;
    for dir in ["verbs", "ops"] {
        for f in rust_files(&src.join(dir)) {
            let module = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let module = if dir == "ops" && module == "threads" {
                "thread_ops"
            } else {
                module
            };
            let t = tokens(&lex(&fs::read_to_string(&f).expect("read")).code);
            for (i, w) in t.windows(4).enumerate() {
                let ty = match (w[0].as_str(), w[1].as_str(), w[2].as_str()) {
                    ("impl", "Verb" | "StagedVerb" | "Op", "for") => &w[3],
                    ("host_op", "!", "(") => &w[3],
                    _ => continue,
                };
                // A macro's template (`impl Verb for $name`) is no type.
                if ty.starts_with('$') {
                    continue;
                }
                if w[1] == "Op" || w[0] == "host_op" {
                    ops += 1;
                }
                if !named(module, ty) {
                    missing.push(format!("{}: {ty} (token {i})", f.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "handlers no row names:\n{}",
        missing.join("\n")
    );
    assert_eq!(
        ops,
        HOST_OPS.len(),
        "every Op in ops/ is one row of HOST_OPS"
    );
}

/// Refusal evidence has one writer (issue 32): the event kind
/// `action.refused` is written only by `handlers/refusal.rs`; no other
/// source file of the broker spells it outside a comment.
#[test]
fn refusal_evidence_has_one_writer() {
    let src = root().join("broker/src");
    let mut found = Vec::new();
    for f in rust_files(&src) {
        if f == src.join("handlers/refusal.rs") {
            continue;
        }
        let l = lex(&fs::read_to_string(&f).expect("read source"));
        for (line, s) in &l.strings {
            if s.contains("action.refused") {
                found.push(format!("{}:{line}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "action.refused written outside handlers/refusal.rs:\n{}",
        found.join("\n")
    );
}

/// One argument reader (issue 32): a request's arguments, a verb's or a
/// host op's, are taken through `handlers::fields::Fields` only. No other
/// type under `handlers/` refuses leftover keys with its own
/// `finish(self) -> Result<(), Code>` or is named `Args`/`Fields`.
#[test]
fn requests_have_one_argument_reader() {
    let src = root().join("broker/src/handlers");
    let mut found = Vec::new();
    for f in rust_files(&src) {
        if f == src.join("fields.rs") {
            continue;
        }
        let code: String = lex(&fs::read_to_string(&f).expect("read source"))
            .code
            .split_whitespace()
            .collect();
        for needle in [
            "fnfinish(self)->Result<(),Code>",
            "structArgs",
            "structFields",
        ] {
            if code.contains(needle) {
                found.push(format!("{}: {needle}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a second argument reader:\n{}",
        found.join("\n")
    );
}

/// Read verbs write nothing, by their type (issue 32): every verb the spec
/// counts as a read is a `Run::Read` row, whose handler gets a shared
/// `&Core` (`handlers::handler::ReadVerb`) and so cannot reach the store's
/// writer. (`tests/tests/reads.rs::reads_write_nothing` checks the rows a
/// read leaves; this holds it for every read at compile time.)
#[test]
fn read_verbs_get_a_shared_core() {
    use mosaic_bus::handlers::{Run, VERBS};
    const READS: &[&str] = &[
        "trail",
        "inbox",
        "tasks",
        "agents",
        "requirements",
        "state",
        "replies",
        "messages",
        "decisions",
        "credentials",
        "names",
        "usage",
        "seal",
        "limits",
        "instances",
        "routes",
        "project.list",
        "thread.list",
        "thread.messages",
    ];
    for name in READS {
        let row = VERBS.iter().find(|v| v.name == *name);
        assert!(
            matches!(row.map(|r| r.run), Some(Run::Read(_))),
            "{name} is not a read row"
        );
    }
}

/// What a staged verb's slow part runs knows nothing of the store or the
/// writer (issue 32): `git/` (the records' Git) and `transcripts/` import
/// only `budget` and `error` (and their own folder); the organization file
/// (`orgfile.rs`) also its shape in `config`; `budget.rs` only
/// `error`. So a slow part can't take the store's connection or a `Core`
/// off the writer.
#[test]
fn the_slow_parts_know_nothing_of_the_store_or_the_writer() {
    let graph = module_graph(&root().join("broker/src"));
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_string();
    let may: &[(&str, &[&str])] = &[
        ("git", &["budget", "error"]),
        ("transcripts", &["budget", "error"]),
        ("orgfile", &["budget", "error", "config"]),
        ("budget", &["error"]),
    ];
    let mut found = Vec::new();
    for (from, tos) in &graph {
        let Some((_, allowed)) = may.iter().find(|(m, _)| top(from) == *m) else {
            continue;
        };
        for to in tos {
            if top(to) != top(from) && !allowed.contains(&top(to).as_str()) {
                found.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a slow part imports above itself:\n{}",
        found.join("\n")
    );
}

/// The edge knows no request by name (issue 32): `server/`, `host/` and
/// `runtime.rs` spell no verb's and no host op's name, so how a request
/// runs (inline, read, staged and how its requests are ordered) is its
/// table row's alone, and adding a verb never touches the edge.
#[test]
fn the_edge_names_no_verb_and_no_host_op() {
    use mosaic_bus::handlers::{HOST_OPS, VERBS};
    let names: BTreeSet<&str> = VERBS
        .iter()
        .map(|v| v.name)
        .chain(HOST_OPS.iter().map(|o| o.name))
        .collect();
    let src = root().join("broker/src");
    let mut files = vec![src.join("runtime.rs")];
    files.extend(rust_files(&src.join("server")));
    files.extend(rust_files(&src.join("host")));
    let mut found = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("read source");
        // A file's unit tests may speak the wire.
        let tests_from = text
            .lines()
            .position(|l| l.trim() == "#[cfg(test)]")
            .map_or(usize::MAX, |i| i + 1);
        let l = lex(&text);
        for (line, s) in &l.strings {
            if *line < tests_from && names.contains(s.as_str()) {
                found.push(format!("{}:{line}: {s:?}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the edge names a request:\n{}",
        found.join("\n")
    );
}

/// The broker's import ladder (`docs/architecture.md`, "Import
/// direction"), top to bottom. A module imports only modules on its own
/// rung or below; a new top-level module must be given a rung here.
const LADDER: &[&[&str]] = &[
    &["runtime", "server", "host", "proof", "tools", "sealer"],
    &["handlers"],
    &["writer", "core", "authorize"],
    &[
        "store",
        "policy",
        "git",
        "transcripts",
        "orgfile",
        "budget",
        "credentials",
        "tokens",
        "environ",
    ],
    &["config", "ids", "time", "error"],
];

/// Imports run downward (issue 32): no module of the broker's library
/// names a module on a rung above its own.
#[test]
fn imports_run_down_the_ladder() {
    let rung = |m: &str| {
        let top = m.split("::").next().unwrap_or(m);
        LADDER.iter().position(|r| r.contains(&top))
    };
    let graph = module_graph(&root().join("broker/src"));
    let mut found = Vec::new();
    for (from, tos) in &graph {
        if from == "crate" {
            continue;
        }
        let Some(rf) = rung(from) else {
            found.push(format!("{from}: on no rung of LADDER"));
            continue;
        };
        for to in tos.iter().filter(|t| *t != "crate") {
            match rung(to) {
                Some(rt) if rt >= rf => {}
                _ => found.push(format!("{from} → {to}")),
            }
        }
    }
    assert!(
        found.is_empty(),
        "imports up the ladder:\n{}",
        found.join("\n")
    );
}
