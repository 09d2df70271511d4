//! Links the shim binaries statically against glibc's `libc.a`, without
//! changing how any other crate links and without `.cargo/config.toml`.
//!
//! rustc (no `crt-static`) ends the link line with
//! `-Wl,-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`. We put a
//! directory first on the search path whose `lib*.so` files are GNU ld
//! scripts naming the static archives (`libc.a`, `libgcc_eh.a`, ...), so
//! the dynamic search finds archives, and pass `-static -no-pie` to the
//! compiler driver so it picks the static start files and emits no
//! interpreter. Only `[[bin]]` targets get these args (`rustc-link-arg-bins`).

use std::path::PathBuf;
use std::process::Command;

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// Absolute path of a library file as the C compiler driver finds it.
fn find(name: &str) -> String {
    let out = Command::new(cc())
        .arg(format!("-print-file-name={name}"))
        .output()
        .expect("run the C compiler driver to locate static libraries");
    let path = String::from_utf8(out.stdout)
        .expect("utf-8 path")
        .trim()
        .to_string();
    assert!(
        path.starts_with('/'),
        "static library {name} not found (install the libc6-dev static archives)"
    );
    path
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.contains("linux-gnu") {
        return;
    }
    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("static-libs");
    std::fs::create_dir_all(&dir).expect("create static-libs dir");
    let (libc, eh, gcc) = (find("libc.a"), find("libgcc_eh.a"), find("libgcc.a"));
    let write = |name: &str, body: String| {
        std::fs::write(dir.join(name), body).expect("write linker script");
    };
    write("libc.so", format!("GROUP ( {libc} {eh} {gcc} )\n"));
    write("libgcc_s.so", format!("GROUP ( {eh} {gcc} )\n"));
    for lib in ["m", "dl", "rt", "pthread", "util"] {
        let archive = find(&format!("lib{lib}.a"));
        write(&format!("lib{lib}.so"), format!("INPUT ( {archive} )\n"));
    }
    println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
    println!("cargo:rustc-link-arg-bins=-static");
    println!("cargo:rustc-link-arg-bins=-no-pie");
}
