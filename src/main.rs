//! The `simbatch` command; everything lives in [`simbatch::cli`].

fn main() {
    if let Err(e) = simbatch::cli::main_with(std::env::args_os()) {
        eprintln!("simbatch: {e}");
        std::process::exit(1);
    }
}
