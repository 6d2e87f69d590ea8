//! Splitting `.args`/`.opts` lines into words: the golden-test harness's,
//! in `utap_runtime::harness`.

pub use utap_runtime::harness::shell_words;
