//! Two pieces of start-up work at once: the checker scans and parses the
//! largest tapset texts on a second thread while this one does the rest.

/// The second thread's stack: the main thread's size (parsing recurses).
const STACK: usize = 8 << 20;

/// Runs `there` on a second thread (named `name`) while `here` runs on
/// this one, and returns both results. When no thread can be started,
/// `there` runs here after `here`: the results are the same.
pub(crate) fn beside<A, B: Send>(
    name: &str,
    here: impl FnOnce() -> A,
    there: impl FnOnce() -> B + Send,
) -> (A, B) {
    let mut there = Some(there);
    let mut done = None;
    let a = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .stack_size(STACK)
            .spawn_scoped(s, || there.take().map(|f| f()));
        let a = here();
        if let Ok(handle) = spawned {
            done = handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        a
    });
    let b = match done {
        Some(b) => b,
        None => (there.take().expect("ran on neither thread"))(),
    };
    (a, b)
}
