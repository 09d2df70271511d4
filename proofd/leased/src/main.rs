//! `mosaic-leased --socket PATH --state FILE`: the lease broker.
//! Exit 0 after SIGTERM/SIGINT; exit 2 with one line `{"error":CODE}` on
//! stderr when startup is refused.

fn main() {
    let result =
        mosaic_leased::parse_args(std::env::args_os().skip(1)).and_then(mosaic_leased::run);
    if let Err(e) = result {
        eprintln!("{{\"error\":\"{}\"}}", e.as_str());
        std::process::exit(2);
    }
}
