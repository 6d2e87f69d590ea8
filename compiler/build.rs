#[path = "build/stdlib.rs"]
mod stdlib;

fn main() {
    // The stdlib generator's rerun-if-changed lines switch off cargo's
    // "any file changed" rule, so the grammar needs its own.
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        .process()
        .unwrap();
    stdlib::generate();
}
