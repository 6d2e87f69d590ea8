//! The script's side of the data plane (`crate::dataplane`): its
//! in-process globals filled into the region after the begin probes,
//! folded back once the handlers are stopped for good, and an in-process
//! error reported as a handler's would be.

use super::ScriptRuntime;
use super::globals::Global;
use super::image::KeyType;
use crate::dataplane::InProcImage;
use crate::dataplane::fold::{insert, literal, slot_order, slot_ptr};
use crate::dataplane::layout::tag;
use crate::script::OutputSink;
use crate::values::map::{Key, KeyPart};

impl ScriptRuntime {
    /// Copies the in-process globals' values into the region (after the
    /// begin probes). An error if a key cannot be written there (a string
    /// that is none of the script's literals): the data plane is then not
    /// used.
    pub fn dataplane_fill(&self, image: &InProcImage) -> Result<(), String> {
        let g = &self.state.globals;
        let longs = (image.region.data_base() + image.region.data.longs) as *mut i64;
        for &(_, slot) in &image.long_globals {
            let v = g.longs.get(slot as usize).copied().unwrap_or(0);
            // SAFETY: the slot is inside the long slots of our mapping.
            unsafe { *longs.add(slot as usize) = v };
        }
        for t in &image.region.data.tables {
            let Some(Global::LongArray(map)) = g.vars.get(t.global as usize) else {
                continue;
            };
            for (keys, &value) in map.iter() {
                let mut raw = Vec::with_capacity(keys.len());
                for k in keys {
                    raw.push(match k {
                        KeyPart::Long(v) => *v,
                        KeyPart::Str(s) => *image.literal_handles.get(&s[..]).ok_or_else(|| {
                            format!(
                                "array '{}' has a string key the handlers cannot name",
                                self.state.image.globals[t.global as usize].name
                            )
                        })?,
                    });
                }
                insert(image, t, &raw, value)?;
            }
        }
        Ok(())
    }

    /// Copies the in-process globals back from the region (the handlers
    /// are stopped). Returns how many slots were not valid.
    pub fn dataplane_fold(&mut self, image: &InProcImage) -> u64 {
        let longs = (image.region.data_base() + image.region.data.longs) as *const i64;
        let g = &mut self.state.globals;
        for &(_, slot) in &image.long_globals {
            // SAFETY: inside our mapping; any value is a valid long.
            let v = unsafe { std::ptr::read_volatile(longs.add(slot as usize)) };
            if let Some(l) = g.longs.get_mut(slot as usize) {
                *l = v;
            }
        }
        let mut bad = 0;
        for t in &image.region.data.tables {
            let types = g
                .key_types
                .get(t.global as usize)
                .cloned()
                .unwrap_or_default();
            let Some(Global::LongArray(map)) = g.vars.get_mut(t.global as usize) else {
                continue;
            };
            map.clear();
            // In the order of their insertions, as the tracer's map
            // would hold them.
            let mut slots: Vec<u64> = (0..t.capacity).collect();
            slots.sort_by_key(|&i| slot_order(image, t, i));
            for i in slots {
                let s = slot_ptr(image, t, i);
                // SAFETY: the slot lies inside our mapping (layout); its
                // words may hold anything.
                let words: Vec<i64> = (0..t.arity + 2)
                    .map(|w| unsafe { std::ptr::read_volatile(s.add(w as usize)) } as i64)
                    .collect();
                if words[0] as u64 != tag::LIVE {
                    continue;
                }
                let mut keys: Vec<Key<'_>> = Vec::with_capacity(t.arity as usize);
                let ok = types.len() == t.arity as usize
                    && types.iter().zip(&words[1..]).all(|(ty, &w)| {
                        let k = match ty {
                            KeyType::Long => Some(Key::Long(w)),
                            KeyType::Str => literal(&image.literals, w).map(Key::Str),
                        };
                        k.map(|k| keys.push(k)).is_some()
                    });
                if !ok || map.set(&keys, words[t.arity as usize + 1]).is_err() {
                    bad += 1;
                }
            }
        }
        bad
    }

    /// An in-process handler failed with `message`: reported and counted
    /// as a handler's error; true if the script must stop.
    pub fn dataplane_error(&mut self, message: &str, sink: &mut dyn OutputSink) -> bool {
        let errors = self
            .tally
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if !self.suppress_errors {
            sink.warn(&format!("ERROR: {message}"));
        }
        if errors as i64 > self.state.limits.max_errors {
            self.tally.set(super::Phase::Error);
        }
        true
    }
}
