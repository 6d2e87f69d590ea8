//! The session's side of the data plane (`crate::dataplane`): which hooks
//! run their in-process handler (in the tracer, at a stop the data plane
//! could not serve), the first in-process error ending the script as a
//! handler's error would, the records of `printf` and `print` in the
//! program formatted and written with the rest of the output, and the
//! region folded back before `end`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::{LockedSink, Shared, SharedRef};
use crate::dataplane::InProcImage;
use crate::dataplane::fold::first_error;
use crate::dataplane::image::StopSite;
use crate::dataplane::rings::{Print, Record};
use crate::dataplane::strings;
use crate::format::PRINT_BUFFER_SIZE;
use crate::script::abi::{PRINT_DELIM, PRINT_NEWLINE};
use crate::script::output::RunOutput;
use crate::script::printing::{each_by_format, each_by_mask};
use crate::script::{ProbeValues, ScriptRuntime};
use crate::utrace::{Control, EndReason};
use std::sync::atomic::Ordering;

/// How often the tracer looks for an in-process error and output while
/// no stop brings it there; while the program prints, output is read
/// every `BUSY_POLL` (a thread printing a string read in the program at
/// every call fills its 256 KiB string ring in about 7 ms).
const ERROR_POLL: Duration = Duration::from_millis(10);
const BUSY_POLL: Duration = Duration::from_micros(250);

/// `values` as the data plane's marker entry passes them to in-process
/// handlers: an argument the marker keeps in memory as its address (the
/// handler loads it, `utap_codegen`'s `inproc::marks`).
fn marker_addresses(run: &ScriptRuntime, values: &ProbeValues) -> ProbeValues {
    let mut v = *values;
    if let (Some(mark), Some(regs)) = (run.marker(), run.hit_regs()) {
        for (i, a) in mark.args.iter().enumerate().take(6) {
            if let Some(addr) = super::marks::arg_address(a, &regs) {
                v.args[i] = addr as i64;
            }
        }
    }
    v
}

impl Shared {
    /// Runs `probe`'s in-process handler here if it has one (true), on
    /// the same state the program's threads update.
    /// `execname()` there is the thread's name from `run`'s process facts;
    /// target variables read the registers of `run`'s function hit.
    pub(crate) fn fire_in_process(
        &self,
        run: &mut ScriptRuntime,
        probe: usize,
        point: usize,
        values: &ProbeValues,
    ) -> bool {
        let Some(img) = &self.inproc else {
            return false;
        };
        // What the function entry would have stored, only for an image
        // whose handlers read it (this runs at every such hit's stop).
        let site = match img.entry_regs || img.entry_site {
            true => run.user_function_regs().map(|regs| StopSite {
                regs,
                bias: run.user_function_bias(),
                func: match img.entry_site {
                    true => run
                        .user_function_name()
                        .map_or_else(Vec::new, |n| n.as_bytes().to_vec()),
                    false => Vec::new(),
                },
            }),
            false => None,
        };
        let values = &marker_addresses(run, values);
        let comm = match img.names {
            Some(_) => run.execname_of(values.tid as i32),
            None => "",
        };
        img.run_here(0, probe, point, values, site.as_ref(), comm.as_bytes())
    }

    /// The first in-process error, if one happened and is not reported
    /// yet: reported on `run` as a handler's error; true when the script
    /// must end.
    pub(crate) fn inproc_failed(&self, run: &mut ScriptRuntime) -> bool {
        let Some(img) = &self.inproc else {
            return false;
        };
        if self.inproc_error_told.load(Ordering::Relaxed) {
            return false;
        }
        let globals = &run.image().globals;
        let Some(msg) = first_error(img, |g| globals.get(g as usize).and_then(|s| s.size)) else {
            return false;
        };
        self.inproc_error_told.store(true, Ordering::Relaxed);
        run.dataplane_error(&msg, &mut LockedSink(&self.sink))
    }

    /// Before a hit of a probe that runs held (a timer sharing state or
    /// output with the program's handlers): the program's threads held
    /// out of any handler, what they printed written, the region folded
    /// into the script's state. False when there is nothing to hold (no
    /// region, or it is taken out already): the hit runs as any other.
    pub(crate) fn hold_region(&mut self, ctl: &mut Control) -> bool {
        let Some(img) = self.inproc.clone() else {
            return false;
        };
        if !ctl.dataplane_hold_still() {
            return false;
        }
        self.drain_prints();
        let (run, _) = self.script_and_sink();
        self.held_bad += crate::dataplane::globals::fold(run, &img);
        true
    }

    /// After that hit: the region filled again from the script's state;
    /// the threads go on after the current report. True when the script
    /// must end (the region could not hold the state: an error).
    pub(crate) fn release_region(&mut self) -> bool {
        let Some(img) = self.inproc.clone() else {
            return false;
        };
        let (run, sink) = self.script_and_sink();
        match crate::dataplane::globals::refill(run, &img) {
            Ok(()) => false,
            Err(e) => run.dataplane_error(&e, sink),
        }
    }

    /// Before `end`: stops the in-process handlers for good, takes the
    /// data plane out of the programs and folds the region back.
    pub(crate) fn settle_dataplane(&mut self, ctl: &mut Control) {
        let Some(img) = self.inproc.clone() else {
            return;
        };
        ctl.dataplane_quiesce();
        self.drain_prints();
        let bad = {
            let mut run = self.first();
            self.inproc_failed(&mut run);
            crate::dataplane::globals::fold(&mut run, &img) + self.held_bad
        };
        if self.verbose {
            say_counts(ctl, bad);
            crate::say!(
                "utap: data plane: {} global(s) counted per thread",
                img.counted.len()
            );
            let r = self.rings.lock().unwrap_or_else(|e| e.into_inner());
            if r.printed + r.dropped + r.bad > 0 {
                crate::say!(
                    "utap: data plane: {} record(s) printed from the program, {} dropped (ring full), {} lost (a string they print overwritten), {} ring(s) with bad records",
                    r.printed - r.strings_lost,
                    r.dropped,
                    r.strings_lost,
                    r.bad
                );
            }
        }
    }

    /// Writes what `printf` and `print` left in the output rings, in
    /// their order; drops count as the transport's. True when there was
    /// something.
    pub(crate) fn drain_prints(&self) -> bool {
        let Some(img) = &self.inproc else {
            return false;
        };
        let drained = self
            .rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(img);
        if drained.records.is_empty() && drained.dropped == 0 {
            return false;
        }
        let deferred = self.first().output_deferred();
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = RunOutput::new(deferred);
        let mut lost = drained.dropped;
        for r in &drained.records {
            out.clear();
            if render(img, r, &mut out) {
                sink.push(out.as_bytes());
            } else {
                lost += 1;
            }
        }
        if lost > drained.dropped {
            let mut r = self.rings.lock().unwrap_or_else(|e| e.into_inner());
            r.strings_lost += lost - drained.dropped;
        }
        sink.add_lost(lost);
        true
    }
}

/// One record as text, as the tracer's `printf`/`print` makes it; false
/// (nothing written: a lost record) when a string it read in the program
/// was overwritten before it could be read here.
fn render(img: &InProcImage, r: &Record, out: &mut RunOutput) -> bool {
    let texts = img.texts();
    // The strings the handler read from the program, looked up first: the
    // arguments the format or mask says are strings.
    let asked = std::cell::RefCell::new(Vec::new());
    each_string(img, r, &|h| {
        asked.borrow_mut().push(h);
        &b""[..]
    });
    let mut read: Vec<(i64, Vec<u8>)> = Vec::new();
    for h in asked
        .into_inner()
        .into_iter()
        .filter(|&h| strings::is_read(h))
    {
        match strings::resolve(img, r.ring, h, img.max_string_len) {
            Some(v) => read.push((h, v)),
            None => return false,
        }
    }
    let text = |h: i64| match strings::is_read(h) {
        true => read
            .iter()
            .find(|(k, _)| *k == h)
            .map_or(&b""[..], |(_, v)| &v[..]),
        false => texts.get(h).unwrap_or(b""),
    };
    match r.print {
        Print::Printf { fmt } => {
            let pieces = &img.formats[fmt];
            let mut args = Vec::with_capacity(r.args.len());
            each_by_format(pieces, &r.args, text, |a| args.push(a));
            out.text(|b| {
                let _ = crate::format::format_into_mem(b, pieces, &args, PRINT_BUFFER_SIZE, None);
            });
        }
        Print::Print { flags, mask, delim } => {
            let mut args = Vec::with_capacity(r.args.len());
            each_by_mask(&r.args, mask, text, |a| args.push(a));
            let delim = (flags & PRINT_DELIM != 0).then(|| text(delim));
            let newline = flags & PRINT_NEWLINE != 0;
            out.text(|b| crate::format::print_args(b, &args, delim, newline));
        }
    }
    true
}

/// Calls `text` on every argument of `r` printed as a string.
fn each_string<'a>(img: &InProcImage, r: &Record, text: &dyn Fn(i64) -> &'a [u8]) {
    match r.print {
        Print::Printf { fmt } => each_by_format(&img.formats[fmt], &r.args, text, |_| {}),
        Print::Print { mask, .. } => each_by_mask(&r.args, mask, text, |_| {}),
    }
}

fn say_counts(ctl: &Control, bad: u64) {
    let Some(p) = ctl.dataplane() else {
        return;
    };
    let c = p.counts;
    let t = p.block_totals();
    let (hits, skipped, missed) = (t.hits, t.skipped, t.missed);
    crate::say!(
        "utap: data plane: {} process(es) with the region ({} failed), {} syscall site(s) and {} function entries patched ({} refused), {} thread(s) moved out at the end",
        c.processes,
        c.inject_failed,
        c.sites,
        c.function_sites,
        c.sites_refused,
        c.threads_moved
    );
    crate::say!(
        "utap: data plane: {hits} hit(s) served by in-process code (tracer stops included), {skipped} skipped (re-entry), {bad} invalid slot(s)"
    );
    if c.sud_threads + c.sud_refused > 0 {
        crate::say!(
            "utap: data plane: syscall user dispatch armed in {} thread(s) ({} left on PTRACE_SYSCALL), {} trapped call(s) let through to the tracer",
            c.sud_threads,
            c.sud_refused,
            c.sud_let_through
        );
    }
    if c.held_runs > 0 {
        crate::say!(
            "utap: data plane: {} timer hit(s) ran with the program held (the region folded before, filled after), {} thread(s) found in a handler that did not leave it",
            c.held_runs,
            c.held_inside
        );
    }
    if c.mark_sites > 0 {
        crate::say!(
            "utap: data plane: {} of the patched function entries are USDT markers",
            c.mark_sites
        );
    }
    if missed > 0 {
        crate::say!(
            "utap: data plane: {missed} return(s) not probed (calls nested deeper than the shadow stack's {} frames)",
            crate::dataplane::layout::SHADOW_FRAMES
        );
    }
}

/// Looks for an in-process error every few milliseconds: a handler in the
/// program that fails ends the script as one in the tracer would; writes
/// what the program's handlers printed meanwhile.
pub(crate) fn watch_errors(ctl: &mut Control, shared: &SharedRef) {
    let shared = shared.clone();
    ctl.add_timer(Instant::now() + ERROR_POLL, move |ctl| {
        let (failed, busy) = {
            let s = shared.borrow();
            if let Some(img) = &s.inproc {
                img.tick_clock();
            }
            let busy = s.drain_prints();
            let mut run = s.first();
            (s.finished.is_none() && s.inproc_failed(&mut run), busy)
        };
        if failed {
            shared.borrow_mut().end(ctl, EndReason::Requested);
            return None;
        }
        shared
            .borrow()
            .finished
            .is_none()
            .then(|| Instant::now() + if busy { BUSY_POLL } else { ERROR_POLL })
    });
}

/// The image the session serves in process, if the script has one. Its
/// syscall sites are patched only under a seccomp filter (a `-c`
/// command), whose stops find them; elsewhere their hits run the same
/// code here at each stop. Function entries are patched under `-c` and
/// `-x` alike.
pub(crate) fn usable(img: Option<&Arc<InProcImage>>) -> Option<Arc<InProcImage>> {
    img.cloned()
}
