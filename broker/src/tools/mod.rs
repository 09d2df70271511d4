//! The operator's tools, `mosaic-bus verify | backup | export`: offline
//! commands on a data root, run beside a live broker or on a copy. None of
//! them writes the store or its seals; each prints JSON lines on stdout
//! and, when it refuses, one `{"error":CODE}` line on stderr with exit 2.

pub mod backup;
pub mod export;
pub mod verify;

use crate::error::Code;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the tool `args[0]` names (`None` when it names none, for the
/// broker's own argument parsing).
pub fn run(args: &[OsString]) -> Option<ExitCode> {
    let (tool, rest) = args.split_first()?;
    Some(match tool.to_str()? {
        "verify" => verify_main(rest),
        "backup" => backup_main(rest),
        "export" => export_main(rest),
        _ => return None,
    })
}

/// One refusal line on stderr, exit 2.
pub fn refuse(code: Code) -> ExitCode {
    eprintln!("{}", json!({"error": code.as_str()}));
    ExitCode::from(2)
}

/// Writes one JSON line on stdout; false when stdout is gone.
fn print(out: &mut impl Write, v: &Value) -> bool {
    serde_json::to_writer(&mut *out, v).is_ok() && out.write_all(b"\n").is_ok()
}

/// The options every tool reads, and its other arguments in order.
struct Parsed {
    data_root: PathBuf,
    anchors: Vec<String>,
    after: Option<String>,
    follow: bool,
    positional: Vec<OsString>,
}

/// Parses `--data-root DIR` (once, required) and the flags `allowed`
/// names; anything else is `usage`.
fn parse(args: &[OsString], allowed: &[&str]) -> Result<Parsed, Code> {
    let mut data_root = None;
    let mut anchors = Vec::new();
    let mut after = None;
    let mut follow = false;
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.to_str().unwrap_or_default();
        let known = allowed.contains(&flag) || flag == "--data-root";
        if !flag.starts_with('-') || flag == "-" {
            positional.push(a.clone());
            continue;
        }
        if !known {
            return Err(Code::Usage);
        }
        let mut value = || -> Result<String, Code> {
            it.next()
                .and_then(|v| v.to_str())
                .map(str::to_string)
                .ok_or(Code::Usage)
        };
        match flag {
            "--data-root" if data_root.is_none() => {
                let v = it.next().ok_or(Code::Usage)?;
                data_root = Some(PathBuf::from(v));
            }
            "--anchor" => anchors.push(value()?),
            "--after" if after.is_none() => after = Some(value()?),
            "--follow" if !follow => follow = true,
            _ => return Err(Code::Usage),
        }
    }
    Ok(Parsed {
        data_root: data_root.ok_or(Code::Usage)?,
        anchors,
        after,
        follow,
        positional,
    })
}

fn verify_main(args: &[OsString]) -> ExitCode {
    let p = match parse(args, &["--anchor"]) {
        Ok(p) if p.positional.is_empty() => p,
        _ => return refuse(Code::Usage),
    };
    let mut anchors = Vec::new();
    for a in &p.anchors {
        match verify::Anchor::parse(a) {
            Some(a) => anchors.push(a),
            None => return refuse(Code::Usage),
        }
    }
    let report = match verify::verify(&p.data_root, &anchors) {
        Ok(r) => r,
        Err(code) => return refuse(code),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in &report.lines {
        print(&mut out, line);
    }
    print(&mut out, &report.summary(anchors.len()));
    let _ = out.flush();
    if report.findings == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn backup_main(args: &[OsString]) -> ExitCode {
    let (p, dest) = match parse(args, &[]) {
        Ok(mut p) if p.positional.len() == 1 => {
            let dest = PathBuf::from(p.positional.remove(0));
            (p, dest)
        }
        _ => return refuse(Code::Usage),
    };
    let dest = if dest.is_absolute() {
        dest
    } else {
        match std::env::current_dir() {
            Ok(d) => d.join(dest),
            Err(_) => return refuse(Code::BackupDestination),
        }
    };
    match backup::backup(&p.data_root, &dest) {
        Ok(line) => {
            let mut out = std::io::stdout().lock();
            print(&mut out, &line);
            let _ = out.flush();
            ExitCode::SUCCESS
        }
        Err(code) => refuse(code),
    }
}

fn export_main(args: &[OsString]) -> ExitCode {
    let p = match parse(args, &["--after", "--follow"]) {
        Ok(p) if p.positional.is_empty() => p,
        _ => return refuse(Code::Usage),
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match export::run(&p.data_root, p.after.as_deref(), p.follow, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => {
            let _ = out.flush();
            refuse(code)
        }
    }
}
