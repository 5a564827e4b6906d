//! The `simbatch` command; everything lives in [`simbatch::cli`].

fn main() {
    // Rust starts programs with SIGPIPE ignored, so printing into a closed pipe
    // (`simbatch bench | head`) is an error, and `println!` panics on it. A command-line tool
    // ends quietly there instead, as Unix tools do: the signal's default disposition.
    #[cfg(unix)]
    // SAFETY: `signal` with a valid signal number and `SIG_DFL`, before any other thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    if let Err(e) = simbatch::cli::main_with(std::env::args_os()) {
        eprintln!("simbatch: {e}");
        std::process::exit(1);
    }
}
