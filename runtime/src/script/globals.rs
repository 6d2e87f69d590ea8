//! Storage of the script's globals: long scalars in a flat slot vector that
//! native code indexes directly, everything else (strings, statistics,
//! arrays) here, built on the value library's types.

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
    /// The tracer thread (shard) running the current handler: `<<<` on
    /// any other than the first goes to that shard's copy.
    pub shard: usize,
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
#[derive(Default)]
pub struct ShardCopies {
    /// `[shard - 1][global]`, made on first use.
    copies: Vec<Vec<Option<StatCopy>>>,
    /// Per global: some copy holds values not folded in yet.
    pending: Vec<bool>,
    /// Values added to copies, and folds (for `-v`).
    pub added: u64,
    pub folds: u64,
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
            shard: 0,
            copies: ShardCopies::default(),
        };
        for spec in specs {
            g.vars.push(Self::storage(spec, limits));
            g.key_types.push(spec.keys.clone().unwrap_or_default());
        }
        g.reset_scalars(specs, limits);
        g.copies.pending = vec![false; specs.len()];
        g
    }

    /// `<<< v` from a tracer thread other than the first: into its own
    /// copy of statistic `gid` (with `keys`, of that element).
    pub fn shard_add(
        &mut self,
        gid: usize,
        keys: Option<&[Key<'_>]>,
        v: i64,
    ) -> Result<(), MapOverflow> {
        let shard = self.shard;
        let copies = &mut self.copies;
        if copies.copies.len() < shard {
            copies.copies.resize_with(shard, Vec::new);
        }
        let row = &mut copies.copies[shard - 1];
        if row.len() <= gid {
            row.resize_with(gid + 1, || None);
        }
        let copy = match (&mut row[gid], &self.vars[gid]) {
            (Some(c), _) => c,
            (slot @ None, Global::Stat(s)) => slot.insert(StatCopy::Scalar(Stat::new(s.spec()))),
            (slot @ None, Global::StatArray(m, _)) => {
                slot.insert(StatCopy::Array(StatMap::new(m.limit())))
            }
            (None, _) => return Ok(()),
        };
        copies.pending[gid] = true;
        copies.added += 1;
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
            Some(true) => self.fold(gid),
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
        self.copies.pending[gid] = false;
        self.copies.folds += 1;
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
