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

use mosaic_bus::error::Code;

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

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root (this crate is `broker/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A Rust source split into its code (comments and literals blanked) and
/// its string literals' contents (each with the line it starts on).
struct Lexed {
    code: String,
    strings: Vec<(usize, String)>,
}

fn lex(src: &str) -> Lexed {
    let b: Vec<char> = src.chars().collect();
    let mut code = String::with_capacity(src.len());
    let mut strings = Vec::new();
    let mut line = 1usize;
    let mut i = 0;
    let n = b.len();
    while i < n {
        let c = b[i];
        if c == '\n' {
            line += 1;
            code.push('\n');
            i += 1;
        } else if c == '/' && i + 1 < n && b[i + 1] == '/' {
            while i < n && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && i + 1 < n && b[i + 1] == '*' {
            let mut depth = 0;
            while i < n {
                if b[i] == '/' && i + 1 < n && b[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && i + 1 < n && b[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && i + 1 < n
            && (b[i + 1] == '"' || b[i + 1] == '#')
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < n && b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if j < n && b[j] == '"' {
                let start = line;
                let mut s = String::new();
                j += 1;
                loop {
                    if j >= n {
                        break;
                    }
                    if b[j] == '"' && (0..hashes).all(|k| j + 1 + k < n && b[j + 1 + k] == '#') {
                        j += 1 + hashes;
                        break;
                    }
                    if b[j] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    s.push(b[j]);
                    j += 1;
                }
                strings.push((start, s));
                code.push_str("\"\"");
                i = j;
            } else {
                code.push(c);
                i += 1;
            }
        } else if c == '"' {
            let start = line;
            let mut s = String::new();
            i += 1;
            while i < n && b[i] != '"' {
                if b[i] == '\\' && i + 1 < n {
                    s.push(b[i + 1]);
                    if b[i + 1] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    i += 2;
                    continue;
                }
                if b[i] == '\n' {
                    line += 1;
                    code.push('\n');
                }
                s.push(b[i]);
                i += 1;
            }
            i += 1;
            strings.push((start, s));
            code.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            if i + 2 < n && b[i + 1] == '\\' {
                let mut j = i + 2;
                while j < n && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                code.push_str("' '");
            } else if i + 2 < n && b[i + 2] == '\'' {
                i += 3;
                code.push_str("' '");
            } else {
                code.push(c);
                i += 1;
            }
        } else {
            code.push(c);
            i += 1;
        }
    }
    Lexed { code, strings }
}

/// True when a string literal reads as SQL: a statement keyword in
/// capitals, as this codebase writes its SQL.
fn looks_like_sql(s: &str) -> bool {
    let words: Vec<&str> = s
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let pair = |a: &str, bs: &[&str]| {
        words
            .windows(2)
            .any(|p| p[0] == a && bs.iter().any(|b| p[1] == *b))
    };
    const OBJECTS: &[&str] = &["TABLE", "INDEX", "TRIGGER", "VIEW", "UNIQUE", "TEMP"];
    (has("SELECT") && has("FROM"))
        || pair("INSERT", &["INTO", "OR"])
        || pair("DELETE", &["FROM"])
        || (has("UPDATE") && has("SET"))
        || pair("CREATE", OBJECTS)
        || pair("DROP", OBJECTS)
        || pair("ALTER", &["TABLE"])
        || has("PRAGMA")
        || has("SAVEPOINT")
        || pair(
            "BEGIN",
            &["IMMEDIATE", "DEFERRED", "EXCLUSIVE", "TRANSACTION"],
        )
        || s.trim() == "BEGIN"
        || s.trim() == "COMMIT"
        || s.trim() == "ROLLBACK"
}

/// rusqlite's statement calls: none outside the store.
const SQL_CALLS: &[&str] = &[
    ".prepare(",
    ".prepare_cached(",
    ".execute(",
    ".execute_batch(",
    ".query_row(",
    ".query_map(",
    ".pragma_update(",
    ".pragma_query(",
];

/// Files exempt from the SQL rule, and why.
const SQL_EXEMPT: &[(&str, &str)] = &[
    (
        "broker/bench/src/bin/mosaic-bench.rs",
        "the benchmark's floors run raw SQLite on scratch databases of their own, never the store",
    ),
    (
        "broker/bench/src/instructions.rs",
        "the spec minimum `--instructions` counts runs raw SQLite on a scratch database of its own",
    ),
];

/// The workspace members, as the root `Cargo.toml` lists them.
fn members() -> Vec<String> {
    let manifest = fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members: Vec<String> = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .expect("workspace members")
        .trim_end_matches(']')
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(members.iter().any(|m| m == "broker"), "{members:?}");
    members
}

/// Members whose sources may hold SQL: the offline migrator, and the
/// cross-process test harness (it reads stores to check what was written).
const SQL_MEMBERS: &[&str] = &["migrator", "tests"];

fn sql_findings() -> Vec<String> {
    let root = root();
    let mut found = Vec::new();
    let dirs: Vec<String> = members()
        .into_iter()
        .filter(|m| !SQL_MEMBERS.contains(&m.as_str()))
        .map(|m| format!("{m}/src"))
        .collect();
    assert!(dirs.len() >= 4, "{dirs:?}");
    for dir in &dirs {
        for file in rust_files(&root.join(dir)) {
            let rel = file
                .strip_prefix(&root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            if rel.starts_with("broker/src/store/") || SQL_EXEMPT.iter().any(|(p, _)| *p == rel) {
                continue;
            }
            let src = fs::read_to_string(&file).expect("read source");
            let lexed = lex(&src);
            for (line, s) in &lexed.strings {
                if looks_like_sql(s) {
                    found.push(format!("{rel}:{line}: SQL text {:?}", truncate(s)));
                }
            }
            for (no, l) in lexed.code.lines().enumerate() {
                for call in SQL_CALLS {
                    if l.contains(call) {
                        found.push(format!("{rel}:{}: statement call {call}", no + 1));
                    }
                }
            }
        }
    }
    found
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

#[test]
fn sql_lives_only_in_the_store() {
    let found = sql_findings();
    assert!(
        found.is_empty(),
        "SQL outside broker/src/store/ (move it into a store function):\n{}",
        found.join("\n")
    );
}

/// The scanner itself: it must see SQL where it is, and only there.
#[test]
fn the_sql_scanner_finds_what_it_should() {
    let sample = r####"
        // SELECT x FROM y (a comment is not code)
        fn f(c: &Connection) {
            let a = "SELECT seq FROM events WHERE id = ?1";
            let b = r#"INSERT INTO t(a) VALUES (1)"#;
            let q = 'x';
            let life: &'static str = "plain text, Select from the menu";
            c.query_row("x", [], |r| r.get(0));
            /* c.prepare("y") */
        }
    "####;
    let lexed = lex(sample);
    let sql: Vec<usize> = lexed
        .strings
        .iter()
        .filter(|(_, s)| looks_like_sql(s))
        .map(|(l, _)| *l)
        .collect();
    assert_eq!(sql, vec![4, 5]);
    let calls: Vec<usize> = lexed
        .code
        .lines()
        .enumerate()
        .filter(|(_, l)| SQL_CALLS.iter().any(|c| l.contains(c)))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(calls, vec![8]);
    for s in [
        "PRAGMA quick_check",
        "UPDATE meta SET v = 1",
        "CREATE TABLE t(a)",
        "BEGIN IMMEDIATE",
        "COMMIT",
        "DELETE FROM t",
    ] {
        assert!(looks_like_sql(s), "{s}");
    }
    for s in ["role.claim", "Commit message", "begin", "not-implemented"] {
        assert!(!looks_like_sql(s), "{s}");
    }
}

/// The lines of `file` (under `broker/src`) that name `needle` in code.
fn code_mentions(file: &Path, needle: &str) -> Vec<String> {
    let src = fs::read_to_string(file).expect("read source");
    lex(&src)
        .code
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, l)| format!("{}:{}: {}", file.display(), i + 1, l.trim()))
        .collect()
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

/// The identifiers of a piece of code.
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

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

/// The codes a markdown file's code table lists: the first cell of every
/// table row under the `## heading` section (up to the next `## `), when it
/// is one backticked word.
fn table_codes(file: &str, heading: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join(file)).expect("read doc");
    let mut lines = text.lines().skip_while(|l| l.trim() != heading);
    assert!(lines.next().is_some(), "{file} has no {heading:?} section");
    lines
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let first = l.strip_prefix("| `")?;
            let (code, rest) = first.split_once('`')?;
            rest.trim_start().starts_with('|').then(|| code.to_string())
        })
        .collect()
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

/// The text of `doc`'s section whose `### ` heading starts with `heading`,
/// up to the next heading of that level or above.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(&format!("\n{heading}"))
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    let body = &doc[start + 1..];
    let end = body[1..]
        .find("\n### ")
        .into_iter()
        .chain(body[1..].find("\n## "))
        .min()
        .map_or(body.len(), |e| e + 1);
    &body[..end]
}

/// True when `section` names `rel` (a path under the crate's `src`): as
/// `` `rel` ``, `` `src/rel` `` or `` `crate/src/rel` ``, or as `` `file` `` in a table row that begins with its
/// directory (`` `dir/` ``).
fn names(section: &str, src: &str, rel: &str) -> bool {
    if [
        format!("`{rel}`"),
        format!("`src/{rel}`"),
        format!("`{src}/{rel}`"),
    ]
    .iter()
    .any(|n| section.contains(n.as_str()))
    {
        return true;
    }
    let Some((dir, file)) = rel.rsplit_once('/') else {
        return false;
    };
    section
        .lines()
        .any(|l| l.starts_with(&format!("| `{dir}/`")) && l.contains(&format!("`{file}`")))
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

/// Each package of `Cargo.lock` with the names of its dependencies.
fn lock_graph() -> std::collections::HashMap<String, Vec<String>> {
    let lock = fs::read_to_string(root().join("Cargo.lock")).expect("Cargo.lock");
    let mut graph = std::collections::HashMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let mut name = None;
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines().map(str::trim) {
            if let Some(n) = line.strip_prefix("name = ") {
                name = Some(n.trim_matches('"').to_string());
            } else if line == "dependencies = [" {
                in_deps = true;
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // `"name"` or `"name 1.2.3"` or `"name 1.2.3 (registry+…)"`.
                let d = line.trim_end_matches(',').trim_matches('"');
                deps.push(d.split(' ').next().unwrap_or(d).to_string());
            }
        }
        if let Some(n) = name {
            graph.entry(n).or_insert_with(Vec::new).extend(deps);
        }
    }
    graph
}

/// Every package `name` pulls in, itself excluded.
fn closure(graph: &std::collections::HashMap<String, Vec<String>>, name: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut todo = graph.get(name).cloned().unwrap_or_default();
    while let Some(d) = todo.pop() {
        if !seen.contains(&d) {
            todo.extend(graph.get(&d).cloned().unwrap_or_default());
            seen.push(d);
        }
    }
    seen.sort();
    seen
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

/// Every `unsafe { … }` block in `src` (a whole file's text), by line, and
/// whether a `// SAFETY:` comment stands on its line or in the comment
/// lines (and attributes) right above it.
fn unsafe_blocks(src: &str) -> Vec<(usize, bool)> {
    let code = lex(src).code;
    let raw: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (no, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("unsafe") {
            let before = rest[..i].chars().last();
            let after = &rest[i + "unsafe".len()..];
            let word = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            // A block: `unsafe {` (the brace may be on the next line).
            let next = after.trim_start();
            let block = next.starts_with('{')
                || (next.is_empty()
                    && code
                        .lines()
                        .nth(no + 1)
                        .is_some_and(|l| l.trim_start().starts_with('{')));
            if word && block {
                let own = raw.get(no).is_some_and(|l| l.contains("// SAFETY:"));
                let above = raw[..no.min(raw.len())]
                    .iter()
                    .rev()
                    .map(|l| l.trim_start())
                    .take_while(|l| l.starts_with("//") || l.starts_with("#["))
                    .any(|l| l.starts_with("// SAFETY:"));
                out.push((no + 1, own || above));
            }
            rest = after;
        }
    }
    out
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

/// The unsafe scanner itself: blocks with and without a reason, and what
/// is not a block.
#[test]
fn the_unsafe_scanner_finds_what_it_should() {
    let sample = r####"
        fn f() {
            // SAFETY: a reason.
            let a = unsafe { g() };
            let b = unsafe { g() };
            let s = "unsafe { in a string }";
            // unsafe { in a comment }
            // SAFETY: reason, then an attribute.
            #[allow(unused)]
            unsafe {
                g();
            }
            let c = unsafe_thing();
            let d = unsafe { g() }; // SAFETY: on the line.
            unsafe
            {
                g();
            }
        }
        unsafe fn g() {}
    "####;
    assert_eq!(
        unsafe_blocks(sample),
        vec![(4, true), (5, false), (10, true), (14, true), (15, false)]
    );
}

/// The tokens of lexed code: identifiers (and `::`, braces, commas) as the
/// module-graph rule needs them; everything else as single characters.
fn tokens(code: &str) -> Vec<String> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && i + 1 < b.len() && b[i + 1] == ':' {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// Reads one path tree at `t[*i]` (segments joined by `::`, groups in
/// braces, `as` renames, `*`) and pushes every full path it names, each
/// prefixed by `prefix`.
fn path_tree(t: &[String], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match t.get(*i).map(String::as_str) {
            Some("{") => {
                *i += 1;
                loop {
                    match t.get(*i).map(String::as_str) {
                        None => return,
                        Some("}") => {
                            *i += 1;
                            return;
                        }
                        Some(",") => *i += 1,
                        _ => {
                            let before = *i;
                            path_tree(t, i, path.clone(), out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            Some(s) if s.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                if s != "self" || path.is_empty() {
                    path.push(s.to_string());
                }
                *i += 1;
                if t.get(*i).map(String::as_str) == Some("::") {
                    *i += 1;
                    continue;
                }
                if t.get(*i).map(String::as_str) == Some("as") {
                    *i += 2;
                }
                out.push(path);
                return;
            }
            _ => {
                out.push(path);
                return;
            }
        }
    }
}

/// The module of each source file of a library crate (`src/lib.rs` and the
/// files it reaches through `mod name;`), as path segments.
fn lib_modules(src: &Path) -> Vec<(Vec<String>, PathBuf)> {
    crate_modules(&src.join("lib.rs"))
}

/// The module of each source file of the crate whose root is `root_file`.
fn crate_modules(root_file: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![(Vec::<String>::new(), root_file.to_path_buf())];
    while let Some((module, file)) = stack.pop() {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let t = tokens(&lex(&text).code);
        // A child file sits beside `lib.rs`/`mod.rs`, else in a folder named
        // after its parent's file.
        let dir = if module.is_empty() || file.ends_with("mod.rs") {
            file.parent().expect("dir").to_path_buf()
        } else {
            file.with_extension("")
        };
        for w in t.windows(3) {
            if w[0] == "mod" && w[2] == ";" {
                let mut child = module.clone();
                child.push(w[1].clone());
                let flat = dir.join(format!("{}.rs", w[1]));
                let nested = dir.join(&w[1]).join("mod.rs");
                stack.push((child, if flat.exists() { flat } else { nested }));
            }
        }
        out.push((module, file));
    }
    out.sort();
    out
}

/// The module graph of one library crate at file granularity: for each
/// file's module, the other files' modules its code names through a path
/// that starts at `crate`, `super` or `self` (in a `use` or anywhere else;
/// comments and strings do not count). A path resolves to the longest
/// module that is a file. `mod name;` declares, it is no arrow.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = lib_modules(src);
    let known: BTreeSet<Vec<String>> = modules.iter().map(|(m, _)| m.clone()).collect();
    let name = |m: &[String]| {
        if m.is_empty() {
            "crate".to_string()
        } else {
            m.join("::")
        }
    };
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = fs::read_to_string(file).expect("read source");
        let t = tokens(&lex(&text).code);
        let mut edges = BTreeSet::new();
        // Inline modules (`mod tests { … }`) shift what `self`/`super` mean.
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < t.len() {
            match t[i].as_str() {
                "{" => {
                    depth += 1;
                    if i >= 2 && t[i - 2] == "mod" {
                        inline.push((t[i - 1].clone(), depth));
                    }
                }
                "}" => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                s @ ("crate" | "super" | "self")
                    if t.get(i + 1).map(String::as_str) == Some("::")
                        && (i == 0 || t[i - 1] != "::") =>
                {
                    let mut base: Vec<String> = module.clone();
                    base.extend(inline.iter().map(|(n, _)| n.clone()));
                    let mut j = i;
                    let start = match s {
                        "crate" => {
                            j += 2;
                            Vec::new()
                        }
                        "self" => {
                            j += 2;
                            base
                        }
                        _ => {
                            while t.get(j).map(String::as_str) == Some("super")
                                && t.get(j + 1).map(String::as_str) == Some("::")
                            {
                                base.pop();
                                j += 2;
                            }
                            base
                        }
                    };
                    let mut paths = Vec::new();
                    path_tree(&t, &mut j, start, &mut paths);
                    for p in paths {
                        let target = (0..=p.len())
                            .rev()
                            .map(|k| &p[..k])
                            .find(|m| known.contains(*m))
                            .unwrap_or(&[]);
                        if target != module.as_slice() {
                            edges.insert(name(target));
                        }
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        graph.insert(name(module), edges);
    }
    graph
}

/// Every import circle of `graph`: its strongly connected components of
/// more than one module (Tarjan), each as a sorted list.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
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

#[test]
fn the_module_graph_reads_what_it_should() {
    let t = tokens(
        &lex("use crate::a::{b::{self, C}, d as e};\nlet x = super::f::g(1); // crate::z::q\n")
            .code,
    );
    let mut paths = Vec::new();
    let mut i = 3;
    path_tree(&t, &mut i, Vec::new(), &mut paths);
    assert_eq!(
        paths,
        [vec!["a", "b"], vec!["a", "b", "C"], vec!["a", "d"]]
            .map(|p| p.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
    // The broker's graph is read: the store is below the verbs.
    let broker = module_graph(&root().join("broker/src"));
    assert!(broker["handlers::verbs::messages"].contains("store::messages"));
    assert!(broker.contains_key("store::evidence"));
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
