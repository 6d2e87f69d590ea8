//! Storage of the script's globals: long scalars in a flat slot vector that
//! native code indexes directly, everything else (strings, statistics,
//! arrays) here, built on the value library's types.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::values::map::{Key, KeyPart, LongMap, MapLimit, MapOverflow, StatMap, StrMap};
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
    /// Per-shard copies of the statistics.
    pub copies: ShardCopies,
}

/// SystemTap keeps a copy of every statistic per CPU: `<<<` adds to the
/// CPU's own copy, and reading the statistic aggregates them. utap does
/// the same per tracer thread (shard): tracer threads other than the first
/// add to their own copy, and any other use of the statistic (an `@op`, a
/// histogram, `foreach`, `in`, `delete`, the printing at exit) first folds
/// the copies into the first one ([`Globals::settle`]). Folding is exact
/// for count, sum, min, max and buckets (see `Stat::merge`).
///
/// Handlers of different tracer threads may `<<<` into the same statistic
/// at once (they hold its lock shared, see `global_locks`): each writes
/// only its own shard's slot, the rows are made before the tracer threads
/// start ([`Globals::reserve_shards`]), and the flags and counters are
/// atomics. Folding holds the statistic's lock exclusive.
#[derive(Default)]
pub struct ShardCopies {
    /// `[shard - 1][global]`, each copy made on first use.
    copies: Vec<Vec<Option<StatCopy>>>,
    /// Per global: some copy holds values not folded in yet.
    pending: Vec<AtomicBool>,
    /// Values added to copies, and folds (for `-v`).
    pub added: AtomicU64,
    pub folds: AtomicU64,
}

/// One shard's copy of a statistic or statistics array.
enum StatCopy {
    Scalar(Stat),
    Array(StatMap),
}

impl Globals {
    pub fn new(specs: &[GlobalSpec], long_slots: usize, limits: &Limits) -> Globals {
        let mut g = Globals {
            longs: vec![0; long_slots],
            vars: Vec::with_capacity(specs.len()),
            key_types: Vec::with_capacity(specs.len()),
            copies: ShardCopies::default(),
        };
        for spec in specs {
            g.vars.push(Self::storage(spec, limits));
            g.key_types.push(spec.keys.clone().unwrap_or_default());
        }
        g.reset_scalars(specs, limits);
        g.copies.pending = specs.iter().map(|_| AtomicBool::new(false)).collect();
        g
    }

    /// Makes the rows of copies for shards `1..shards`, before handlers
    /// of several tracer threads may add to them at once.
    pub fn reserve_shards(&mut self, shards: usize) {
        let n = self.vars.len();
        let rows = &mut self.copies.copies;
        if rows.len() + 1 < shards {
            rows.resize_with(shards - 1, || (0..n).map(|_| None).collect());
        }
    }

    /// `<<< v` from a tracer thread (`shard`) other than the first: into
    /// its own copy of statistic `gid` (with `keys`, of that element).
    pub fn shard_add(
        &mut self,
        shard: usize,
        gid: usize,
        keys: Option<&[Key<'_>]>,
        v: i64,
    ) -> Result<(), MapOverflow> {
        // Reserved at the session's start; this only grows with the whole
        // script held (a single tracer thread).
        self.reserve_shards(shard + 1);
        let copies = &mut self.copies;
        let row = &mut copies.copies[shard - 1];
        let copy = match (&mut row[gid], &self.vars[gid]) {
            (Some(c), _) => c,
            (slot @ None, Global::Stat(s)) => slot.insert(StatCopy::Scalar(Stat::new(s.spec()))),
            (slot @ None, Global::StatArray(m, _)) => {
                slot.insert(StatCopy::Array(StatMap::new(m.limit())))
            }
            (None, _) => return Ok(()),
        };
        copies.pending[gid].store(true, Ordering::Relaxed);
        copies.added.fetch_add(1, Ordering::Relaxed);
        match (copy, keys, &self.vars[gid]) {
            (StatCopy::Scalar(s), None, _) => s.add(v),
            (StatCopy::Array(m), Some(k), Global::StatArray(_, spec)) => m.stat_add(k, *spec, v)?,
            _ => {}
        }
        Ok(())
    }

    /// Folds the other shards' copies of global `gid` into it, before it
    /// is read, iterated or deleted. An element that does not fit in a full
    /// array is dropped, and the overflow reported.
    #[inline]
    pub fn settle(&mut self, gid: usize) -> Result<(), MapOverflow> {
        match self.copies.pending.get(gid) {
            Some(p) if p.load(Ordering::Relaxed) => self.fold(gid),
            _ => Ok(()),
        }
    }

    /// [`Globals::settle`] for every global (the printing at exit,
    /// `--metrics`).
    pub fn settle_all(&mut self) -> Result<(), MapOverflow> {
        let mut result = Ok(());
        for gid in 0..self.vars.len() {
            result = result.and(self.settle(gid));
        }
        result
    }

    #[cold]
    fn fold(&mut self, gid: usize) -> Result<(), MapOverflow> {
        self.copies.pending[gid].store(false, Ordering::Relaxed);
        self.copies.folds.fetch_add(1, Ordering::Relaxed);
        let mut result = Ok(());
        for row in &mut self.copies.copies {
            match (row.get_mut(gid), &mut self.vars[gid]) {
                (Some(Some(StatCopy::Scalar(c))), Global::Stat(s)) => {
                    s.merge(c);
                    c.clear();
                }
                (Some(Some(StatCopy::Array(c))), Global::StatArray(m, spec)) => {
                    for (key, stat) in c.iter() {
                        let mut keys = [Key::Long(0); super::context::MAX_KEYS];
                        let n = key.len().min(keys.len());
                        for (k, part) in keys.iter_mut().zip(key) {
                            *k = KeyPart::as_key(part);
                        }
                        let spec = *spec;
                        match m.get_or_insert_with(&keys[..n], || Stat::new(spec)) {
                            Ok(s) => s.merge(stat),
                            Err(e) => result = Err(e),
                        }
                    }
                    c.clear();
                }
                _ => {}
            }
        }
        result
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
