#[path = "build/stdlib.rs"]
mod stdlib;

fn main() {
    lalrpop::process_src().unwrap();
    stdlib::generate();
}
