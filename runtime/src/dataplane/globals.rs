//! The script's globals and the region: the values `begin` left filled
//! into the region before the program runs, and the region folded back
//! into the script's globals once the handlers are stopped for good (or,
//! for a `--metrics` scrape, as they stand). A probe that runs held (a
//! timer: the program's threads stopped out of any handler) gets the
//! region folded before it and filled again after it.

use super::InProcImage;
use super::fold::{insert, slot_order, slot_ptr, stat_of, stat_words};
use super::layout::{stat_copies, tag};
use super::names::Texts;
use crate::script::ScriptRuntime;
use crate::script::globals::Global;
use crate::script::image::KeyType;
use crate::values::map::{Key, KeyPart};

/// Copies the in-process globals' values into the region (after the
/// begin probes). An error if a key cannot be written there (a string
/// that is none of the script's literals): the data plane is then not
/// used.
pub fn fill(run: &mut ScriptRuntime, image: &InProcImage) -> Result<(), String> {
    let (g, script) = run.globals_and_image();
    let longs = (image.region.data_base() + image.region.data.longs) as *mut i64;
    for &(_, slot) in &image.long_globals {
        let v = g.longs.get(slot as usize).copied().unwrap_or(0);
        // SAFETY: the slot is inside the long slots of our mapping.
        unsafe { *longs.add(slot as usize) = v };
    }
    for t in &image.region.data.tables {
        // Values other tracer threads added in begin count too.
        g.settle(t.global as usize).map_err(|e| e.to_string())?;
        let name = &script.globals[t.global as usize].name;
        match g.vars.get(t.global as usize) {
            Some(Global::LongArray(map)) => {
                for (keys, &value) in map.iter() {
                    insert(image, t, &raw_keys(image, name, keys)?, &[value])?;
                }
            }
            Some(Global::Stat(s)) if !s.is_empty() => insert(image, t, &[], &stat_words(s))?,
            Some(Global::StatArray(map, _)) => {
                for (keys, s) in map.iter() {
                    insert(image, t, &raw_keys(image, name, keys)?, &stat_words(s))?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Fills the region again from the script's state, after a probe that
/// runs held changed it: every table emptied and every thread's copies
/// cleared first (the fold before the probe took their totals). The
/// threads must be held out of any handler.
pub fn refill(run: &mut ScriptRuntime, image: &InProcImage) -> Result<(), String> {
    let data = image.region.data_base();
    for t in &image.region.data.tables {
        // SAFETY: the table's counters, slots and insertion numbers lie
        // inside our mapping (layout); no thread runs a handler.
        unsafe {
            std::ptr::write_bytes((data + t.count_offset) as *mut u64, 0, 2);
            let words = t.capacity * t.slot_len() / 8;
            std::ptr::write_bytes((data + t.offset) as *mut u64, 0, words as usize);
            std::ptr::write_bytes((data + t.order_offset) as *mut u64, 0, t.capacity as usize);
        }
    }
    image.clear_copies();
    fill(run, image)
}

/// Copies the in-process globals back from the region (the handlers
/// are stopped). Returns how many slots were not valid.
pub fn fold(run: &mut ScriptRuntime, image: &InProcImage) -> u64 {
    let longs = (image.region.data_base() + image.region.data.longs) as *const i64;
    let (g, _) = run.globals_and_image();
    for &(_, slot) in &image.long_globals {
        // SAFETY: inside our mapping; any value is a valid long.
        let v = unsafe { std::ptr::read_volatile(longs.add(slot as usize)) };
        if let Some(l) = g.longs.get_mut(slot as usize) {
            *l = v;
        }
    }
    // The per-thread copies of the globals handlers only add to.
    for &(slot, k) in &image.counted {
        if let Some(l) = g.longs.get_mut(slot as usize) {
            *l = l.wrapping_add(image.counted_total(k));
        }
    }
    let mut bad = 0;
    let texts = image.texts();
    for t in &image.region.data.tables {
        let types = g
            .key_types
            .get(t.global as usize)
            .cloned()
            .unwrap_or_default();
        let Some(var) = g.vars.get_mut(t.global as usize) else {
            continue;
        };
        match var {
            Global::LongArray(map) => map.clear(),
            Global::Stat(s) => s.clear(),
            Global::StatArray(map, _) => map.clear(),
            _ => continue,
        }
        // In the order of their insertions, as the tracer's map
        // would hold them.
        let mut slots: Vec<u64> = (0..t.capacity).collect();
        slots.sort_by_key(|&i| slot_order(image, t, i));
        for i in slots {
            let s = slot_ptr(image, t, i);
            // SAFETY: the slot lies inside our mapping (layout); its
            // words may hold anything.
            let words: Vec<i64> = (0..t.slot_len() / 8)
                .map(|w| unsafe { std::ptr::read_volatile(s.add(w as usize)) } as i64)
                .collect();
            if words[0] as u64 != tag::LIVE {
                continue;
            }
            let (keys, values) = words[1..].split_at(t.arity as usize);
            if !fold_slot(&texts, var, &types, keys, values) {
                bad += 1;
            }
        }
    }
    // The per-thread copies of the scalar statistics.
    for (global, word, words) in stat_copies(&image.region.data.tables) {
        let Some(Global::Stat(s)) = g.vars.get_mut(global as usize) else {
            continue;
        };
        for copy in image.stat_copies(word, words) {
            match stat_of(s.spec(), &copy) {
                Some(c) => s.merge(&c),
                None => bad += 1,
            }
        }
    }
    bad
}

/// A key's words in the region: longs as they are, strings as the
/// handle of the literal they equal.
fn raw_keys(image: &InProcImage, name: &str, keys: &[KeyPart]) -> Result<Vec<i64>, String> {
    keys.iter()
        .map(|k| match k {
            KeyPart::Long(v) => Ok(*v),
            KeyPart::Str(s) if image.names.is_some() => Ok(image.name_handle(s)),
            KeyPart::Str(s) => {
                image.literal_handles.get(&s[..]).copied().ok_or_else(|| {
                    format!("array '{name}' has a string key the handlers cannot name")
                })
            }
        })
        .collect()
}

/// Puts one live slot (its key and value words) back into `var`; false if
/// the words are not valid (a key no literal has, a statistic that is
/// none, an array past its limit).
fn fold_slot(
    texts: &Texts<'_>,
    var: &mut Global,
    types: &[KeyType],
    raw: &[i64],
    values: &[i64],
) -> bool {
    let mut keys: Vec<Key<'_>> = Vec::with_capacity(raw.len());
    let ok = types.len() == raw.len()
        && types.iter().zip(raw).all(|(ty, &w)| {
            let k = match ty {
                KeyType::Long => Some(Key::Long(w)),
                KeyType::Str => texts.get(w).map(Key::Str),
            };
            k.map(|k| keys.push(k)).is_some()
        });
    if !ok {
        return false;
    }
    match var {
        Global::LongArray(map) => values.first().is_some_and(|&v| map.set(&keys, v).is_ok()),
        Global::Stat(s) => match stat_of(s.spec(), values) {
            Some(v) => {
                *s = v;
                true
            }
            None => false,
        },
        Global::StatArray(map, spec) => {
            stat_of(*spec, values).is_some_and(|v| v.is_empty() || map.set(&keys, v).is_ok())
        }
        _ => false,
    }
}
