//! `mosaic-human-cli <socket>`: see the crate docs.

fn main() -> std::process::ExitCode {
    mosaic_shims::run(mosaic_shims::Kind::Human)
}
