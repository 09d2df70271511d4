//! How the house rules read the workspace: its files, Rust source with
//! strings and comments told apart from code, the modules of a crate and
//! the imports between them, the crates' link graph from `Cargo.lock`, the
//! `unsafe` blocks, SQL text; and the tests that these readers find what
//! they should (so a rule can't pass by reading nothing). The rules
//! themselves are `broker/tests/house_rules.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root (this crate is `broker/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
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
pub struct Lexed {
    pub code: String,
    pub strings: Vec<(usize, String)>,
}

pub fn lex(src: &str) -> Lexed {
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
pub fn looks_like_sql(s: &str) -> bool {
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
pub const SQL_CALLS: &[&str] = &[
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
pub const SQL_EXEMPT: &[(&str, &str)] = &[
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
pub fn members() -> Vec<String> {
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
pub const SQL_MEMBERS: &[&str] = &["migrator", "tests"];

pub fn sql_findings() -> Vec<String> {
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

pub fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

/// The scanner itself: it must see SQL where it is, and only there.
#[test]
pub fn the_sql_scanner_finds_what_it_should() {
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
pub fn code_mentions(file: &Path, needle: &str) -> Vec<String> {
    let src = fs::read_to_string(file).expect("read source");
    lex(&src)
        .code
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, l)| format!("{}:{}: {}", file.display(), i + 1, l.trim()))
        .collect()
}

/// The identifiers of a piece of code.
pub fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The codes a markdown file's code table lists: the first cell of every
/// table row under the `## heading` section (up to the next `## `), when it
/// is one backticked word.
pub fn table_codes(file: &str, heading: &str) -> Vec<String> {
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

/// The text of `doc`'s section whose `### ` heading starts with `heading`,
/// up to the next heading of that level or above.
pub fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
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
pub fn names(section: &str, src: &str, rel: &str) -> bool {
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

/// Each package of `Cargo.lock` with the names of its dependencies.
pub fn lock_graph() -> std::collections::HashMap<String, Vec<String>> {
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
pub fn closure(graph: &std::collections::HashMap<String, Vec<String>>, name: &str) -> Vec<String> {
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

/// Every `unsafe { … }` block in `src` (a whole file's text), by line, and
/// whether a `// SAFETY:` comment stands on its line or in the comment
/// lines (and attributes) right above it.
pub fn unsafe_blocks(src: &str) -> Vec<(usize, bool)> {
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

/// The unsafe scanner itself: blocks with and without a reason, and what
/// is not a block.
#[test]
pub fn the_unsafe_scanner_finds_what_it_should() {
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
pub fn tokens(code: &str) -> Vec<String> {
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
pub fn path_tree(t: &[String], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
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
pub fn lib_modules(src: &Path) -> Vec<(Vec<String>, PathBuf)> {
    crate_modules(&src.join("lib.rs"))
}

/// The module of each source file of the crate whose root is `root_file`.
pub fn crate_modules(root_file: &Path) -> Vec<(Vec<String>, PathBuf)> {
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
pub fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
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
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
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
pub fn the_module_graph_reads_what_it_should() {
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
