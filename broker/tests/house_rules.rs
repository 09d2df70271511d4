//! House rules checked as tests.

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
