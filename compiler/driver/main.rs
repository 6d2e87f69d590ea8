//! `utap`: the command-line driver (stap-style options).
fn main() {
    eprintln!("utap: not built yet");
    std::process::exit(1);
}
