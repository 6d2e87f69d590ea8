//! Storage of the script's globals: long scalars in a flat slot vector that
//! native code indexes directly, everything else (strings, statistics,
//! arrays) here, built on the value library's types.

use crate::values::map::{Key, LongMap, MapLimit, StatMap, StrMap};
use crate::values::stats::{Stat, StatSpec};

use super::image::{GlobalSpec, InitValue, KeyType, ValueType};
use super::limits::Limits;

/// One global's storage (long scalars live in the slot vector).
pub enum Global {
    /// A long scalar: the value is `long_globals[slot]`.
    Long(u32),
    Str(Vec<u8>),
    Stat(Stat),
    LongArray(LongMap),
    StrArray(StrMap),
    StatArray(StatMap, StatSpec),
}

/// All globals of a running script.
pub struct Globals {
    pub longs: Vec<i64>,
    pub vars: Vec<Global>,
    /// Key types per global (empty for scalars).
    pub key_types: Vec<Vec<KeyType>>,
}

impl Globals {
    pub fn new(specs: &[GlobalSpec], long_slots: usize, limits: &Limits) -> Globals {
        let mut g = Globals {
            longs: vec![0; long_slots],
            vars: Vec::with_capacity(specs.len()),
            key_types: Vec::with_capacity(specs.len()),
        };
        for spec in specs {
            g.vars.push(Self::storage(spec, limits));
            g.key_types.push(spec.keys.clone().unwrap_or_default());
        }
        g.reset_scalars(specs, limits);
        g
    }

    fn storage(spec: &GlobalSpec, limits: &Limits) -> Global {
        let limit = MapLimit::new(spec.size, spec.wrap, limits.max_map_entries);
        match (&spec.keys, spec.value) {
            (None, ValueType::Long) => Global::Long(spec.long_slot.unwrap_or(0)),
            (None, ValueType::Str) => Global::Str(Vec::new()),
            (None, ValueType::Stat(s)) => Global::Stat(Stat::new(s)),
            (Some(_), ValueType::Long) => Global::LongArray(LongMap::new(limit)),
            (Some(_), ValueType::Str) => Global::StrArray(StrMap::new(limit)),
            (Some(_), ValueType::Stat(s)) => Global::StatArray(StatMap::new(limit), s),
        }
    }

    /// Gives scalars their initial values (`global x = 5`).
    fn reset_scalars(&mut self, specs: &[GlobalSpec], limits: &Limits) {
        for (var, spec) in self.vars.iter_mut().zip(specs) {
            match (var, &spec.init) {
                (Global::Long(slot), Some(InitValue::Long(v))) => self.longs[*slot as usize] = *v,
                (Global::Str(s), Some(InitValue::Str(v))) => {
                    crate::values::strings::assign(s, v, limits.max_string_len)
                }
                _ => {}
            }
        }
    }
}

/// Builds the borrowed key tuple of an array operation from the raw key
/// slots native code filled in (longs, or string handles resolved by
/// `resolve`).
#[inline]
pub fn key_tuple<'a>(
    types: &[KeyType],
    raw: &[i64],
    resolve: impl Fn(i64) -> &'a [u8],
    out: &mut [Key<'a>; super::context::MAX_KEYS],
) -> usize {
    for (i, (t, &v)) in types.iter().zip(raw).enumerate() {
        out[i] = match t {
            KeyType::Long => Key::Long(v),
            KeyType::Str => Key::Str(resolve(v)),
        };
    }
    types.len()
}
