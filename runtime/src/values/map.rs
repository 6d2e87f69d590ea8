//! Associative arrays: 1 to 9 key columns of mixed long/string, values
//! long, string or statistics, with SystemTap's semantics.
//!
//! - Iteration is in insertion order; assigning to an existing key keeps
//!   its place, `delete` then re-insert moves it to the end.
//! - Reading a missing key does not create it (`get` returns `None`; the
//!   caller reads 0 or "").
//! - A map holds at most its declared size, else MAXMAPENTRIES; one more
//!   new key is an "Array overflow" error, or for a `%` (wrap) array it
//!   replaces the oldest entry.
//! - Sorted iteration is stable: ties keep insertion order.
//!
//! Lookups borrow their keys ([`Key`]) and never allocate; only inserting
//! a new key allocates (its string columns). Entries live in a vector in
//! insertion order with tombstones for deleted ones, indexed by a hash
//! table of positions; the vector is compacted when tombstones dominate.

use std::cmp::Ordering;
use std::fmt;

use hashbrown::HashTable;

use super::stats::{Stat, StatOp};

/// Default for `-DMAXMAPENTRIES`.
pub const DEFAULT_MAXMAPENTRIES: usize = 2048;
/// The most key columns an array may have.
pub const MAX_KEY_COLUMNS: usize = 9;

/// One key column of a lookup, borrowed from the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    Long(i64),
    Str(&'a [u8]),
}

/// One key column as stored in the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPart {
    Long(i64),
    Str(Box<[u8]>),
}

impl KeyPart {
    pub fn as_key(&self) -> Key<'_> {
        match self {
            KeyPart::Long(v) => Key::Long(*v),
            KeyPart::Str(s) => Key::Str(s),
        }
    }

    fn from_key(k: Key<'_>) -> KeyPart {
        match k {
            Key::Long(v) => KeyPart::Long(v),
            Key::Str(s) => KeyPart::Str(s.into()),
        }
    }

    fn matches(&self, k: &Key<'_>) -> bool {
        match (self, k) {
            (KeyPart::Long(a), Key::Long(b)) => a == b,
            (KeyPart::Str(a), Key::Str(b)) => **a == **b,
            _ => false,
        }
    }

    fn cmp_column(&self, other: &KeyPart) -> Ordering {
        match (self, other) {
            (KeyPart::Long(a), KeyPart::Long(b)) => a.cmp(b),
            (KeyPart::Str(a), KeyPart::Str(b)) => a.cmp(b),
            (KeyPart::Long(_), KeyPart::Str(_)) => Ordering::Less,
            (KeyPart::Str(_), KeyPart::Long(_)) => Ordering::Greater,
        }
    }
}

/// Whether stored keys are in a slice (`a[*, "x"]`: `None` columns match
/// anything).
fn slice_matches(parts: &[KeyPart], filter: &[Option<Key<'_>>]) -> bool {
    filter
        .iter()
        .zip(parts)
        .all(|(want, have)| want.as_ref().is_none_or(|k| have.matches(k)))
}

/// Stored keys: single-column keys (the common case) stay inline.
#[derive(Clone, Debug)]
enum KeyBuf {
    One(KeyPart),
    Many(Box<[KeyPart]>),
}

impl KeyBuf {
    fn new(keys: &[Key<'_>]) -> KeyBuf {
        match keys {
            [k] => KeyBuf::One(KeyPart::from_key(*k)),
            _ => KeyBuf::Many(keys.iter().map(|k| KeyPart::from_key(*k)).collect()),
        }
    }

    #[inline]
    fn parts(&self) -> &[KeyPart] {
        match self {
            KeyBuf::One(p) => std::slice::from_ref(p),
            KeyBuf::Many(ps) => ps,
        }
    }

    #[inline]
    fn matches(&self, keys: &[Key<'_>]) -> bool {
        let parts = self.parts();
        parts.len() == keys.len() && parts.iter().zip(keys).all(|(p, k)| p.matches(k))
    }
}

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
fn fold(h: u64, v: u64) -> u64 {
    let m = u128::from(h ^ v) * u128::from(MUL);
    (m as u64) ^ ((m >> 64) as u64)
}

/// Folds a byte string into `h`, 8 bytes at a time; the last word is read
/// overlapping (or from two overlapping halves) so short strings cost no
/// copy.
#[inline]
fn hash_bytes(mut h: u64, s: &[u8]) -> u64 {
    let n = s.len();
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let half = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let last = if n >= 8 {
        let mut rest = s;
        while rest.len() > 8 {
            h = fold(h, word(&rest[..8]));
            rest = &rest[8..];
        }
        word(&s[n - 8..])
    } else if n >= 4 {
        (half(&s[n - 4..]) << 32) | half(&s[..4])
    } else if n > 0 {
        (u64::from(s[0]) << 16) | (u64::from(s[n / 2]) << 8) | u64::from(s[n - 1])
    } else {
        0
    };
    fold(h ^ n as u64, last)
}

/// Hash of a key tuple (the same for borrowed and stored keys).
#[inline]
fn hash_keys<'k>(keys: impl Iterator<Item = Key<'k>>) -> u64 {
    let mut h = SEED;
    for k in keys {
        match k {
            Key::Long(v) => h = fold(h, v as u64),
            Key::Str(s) => h = hash_bytes(h, s),
        }
    }
    h
}

/// A map's size limit and overflow behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapLimit {
    /// The most entries.
    pub max_entries: usize,
    /// The size came from the declaration (`global a[100]`): it names the
    /// limit in the overflow message.
    pub declared: bool,
    /// `global a%`: a new key replaces the oldest entry when full.
    pub wrap: bool,
}

impl MapLimit {
    /// The limit of a global declared with `size` (if any) and `wrap`,
    /// under `maxmapentries`.
    pub fn new(size: Option<i64>, wrap: bool, maxmapentries: usize) -> MapLimit {
        match size {
            Some(n) if n > 0 => MapLimit {
                max_entries: n as usize,
                declared: true,
                wrap,
            },
            _ => MapLimit {
                max_entries: maxmapentries,
                declared: false,
                wrap,
            },
        }
    }
}

impl Default for MapLimit {
    fn default() -> Self {
        MapLimit::new(None, false, DEFAULT_MAXMAPENTRIES)
    }
}

/// Inserting a new key into a full map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapOverflow {
    /// The declared size, if the limit came from the declaration.
    pub declared: Option<usize>,
}

impl fmt::Display for MapOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.declared {
            Some(n) => write!(f, "Array overflow, check size limit ({n})"),
            None => f.write_str("Array overflow, check MAXMAPENTRIES"),
        }
    }
}

impl std::error::Error for MapOverflow {}

/// A position in a map, valid until the next insertion or removal that
/// reorganises the map (a stale id reads as missing, never as another
/// entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryId {
    slot: u32,
    epoch: u32,
}

struct Entry<V> {
    hash: u64,
    key: KeyBuf,
    value: V,
}

/// What `foreach` sorts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Zero-based key column.
    Key(usize),
    /// The value; statistics sort by the given aggregate.
    Value(StatOp),
}

/// A `foreach` ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub by: SortBy,
    pub descending: bool,
}

/// Values a map can sort by.
pub trait SortValue {
    fn cmp_value(&self, other: &Self, agg: StatOp) -> Ordering;
}

impl SortValue for i64 {
    fn cmp_value(&self, other: &Self, _: StatOp) -> Ordering {
        self.cmp(other)
    }
}

impl SortValue for Vec<u8> {
    fn cmp_value(&self, other: &Self, _: StatOp) -> Ordering {
        self.cmp(other)
    }
}

impl SortValue for Stat {
    fn cmp_value(&self, other: &Self, agg: StatOp) -> Ordering {
        let a = self.get(agg).unwrap_or(0);
        let b = other.get(agg).unwrap_or(0);
        a.cmp(&b)
    }
}

/// Values an array holds. Inserting tells a statistic it is an array
/// element, whose `@variance` SystemTap computes without the scalar's
/// aggregation step.
pub trait MapValue {
    fn mark_element(&mut self) {}
}

impl MapValue for i64 {}

impl MapValue for Vec<u8> {}

impl MapValue for Stat {
    fn mark_element(&mut self) {
        Stat::mark_element(self);
    }
}

/// An associative array with values of type `V` (`i64`, `Vec<u8>` or
/// [`Stat`]).
pub struct Map<V> {
    slots: Vec<Option<Entry<V>>>,
    table: HashTable<u32>,
    live: usize,
    /// Slots before this index are all tombstones.
    head: usize,
    epoch: u32,
    limit: MapLimit,
}

/// A map of longs.
pub type LongMap = Map<i64>;
/// A map of strings.
pub type StrMap = Map<Vec<u8>>;
/// A map of statistics.
pub type StatMap = Map<Stat>;

impl<V> Map<V> {
    pub fn new(limit: MapLimit) -> Map<V> {
        Map {
            slots: Vec::new(),
            table: HashTable::new(),
            live: 0,
            head: 0,
            epoch: 0,
            limit,
        }
    }

    pub fn limit(&self) -> MapLimit {
        self.limit
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    #[inline]
    fn find(&self, hash: u64, keys: &[Key<'_>]) -> Option<usize> {
        let slots = &self.slots;
        self.table
            .find(hash, |&i| {
                slots[i as usize]
                    .as_ref()
                    .is_some_and(|e| e.key.matches(keys))
            })
            .map(|&i| i as usize)
    }

    /// The value at `keys`, without creating it.
    #[inline]
    pub fn get(&self, keys: &[Key<'_>]) -> Option<&V> {
        let i = self.find(hash_keys(keys.iter().copied()), keys)?;
        self.slots[i].as_ref().map(|e| &e.value)
    }

    /// The value at `keys` for changing in place, without creating it.
    #[inline]
    pub fn get_mut(&mut self, keys: &[Key<'_>]) -> Option<&mut V> {
        let i = self.find(hash_keys(keys.iter().copied()), keys)?;
        self.slots[i].as_mut().map(|e| &mut e.value)
    }

    /// `[keys] in map`.
    #[inline]
    pub fn contains(&self, keys: &[Key<'_>]) -> bool {
        self.get(keys).is_some()
    }

    /// The value at `keys`, inserted with `init()` at the end of the order
    /// if missing (assignment, `++`, `<<<`). Fails when the map is full and
    /// does not wrap.
    #[inline]
    pub fn get_or_insert_with(
        &mut self,
        keys: &[Key<'_>],
        init: impl FnOnce() -> V,
    ) -> Result<&mut V, MapOverflow>
    where
        V: MapValue,
    {
        let hash = hash_keys(keys.iter().copied());
        let i = match self.find(hash, keys) {
            Some(i) => i,
            None => {
                let mut value = init();
                value.mark_element();
                self.insert_new(hash, keys, value)?
            }
        };
        Ok(&mut self.slots[i].as_mut().expect("live entry").value)
    }

    /// `map[keys] = value`.
    pub fn set(&mut self, keys: &[Key<'_>], value: V) -> Result<(), MapOverflow>
    where
        V: MapValue,
    {
        let mut value = Some(value);
        let slot = self.get_or_insert_with(keys, || value.take().expect("value"))?;
        if let Some(v) = value {
            *slot = v;
        }
        Ok(())
    }

    #[cold]
    fn insert_new(&mut self, hash: u64, keys: &[Key<'_>], value: V) -> Result<usize, MapOverflow> {
        debug_assert!((1..=MAX_KEY_COLUMNS).contains(&keys.len()));
        if self.live >= self.limit.max_entries {
            if !self.limit.wrap || self.live == 0 {
                return Err(MapOverflow {
                    declared: self.limit.declared.then_some(self.limit.max_entries),
                });
            }
            let oldest = self.oldest_slot().expect("non-empty map");
            self.remove_slot(oldest);
        }
        if self.slots.len() >= u32::MAX as usize {
            self.compact();
        }
        if self.slots.len() > 32 && self.slots.len() >= 2 * self.live.max(1) {
            self.compact();
        }
        let i = self.slots.len();
        self.slots.push(Some(Entry {
            hash,
            key: KeyBuf::new(keys),
            value,
        }));
        let slots = &self.slots;
        self.table.insert_unique(hash, i as u32, |&j| {
            slots[j as usize].as_ref().map_or(0, |e| e.hash)
        });
        self.live += 1;
        Ok(i)
    }

    fn oldest_slot(&mut self) -> Option<usize> {
        while self.head < self.slots.len() && self.slots[self.head].is_none() {
            self.head += 1;
        }
        (self.head < self.slots.len()).then_some(self.head)
    }

    fn remove_slot(&mut self, i: usize) -> Option<V> {
        let entry = self.slots[i].take()?;
        if let Ok(found) = self.table.find_entry(entry.hash, |&j| j as usize == i) {
            found.remove();
        }
        self.live -= 1;
        if self.live == 0 {
            self.slots.clear();
            self.head = 0;
            self.epoch = self.epoch.wrapping_add(1);
        }
        Some(entry.value)
    }

    /// Rebuilds the hash index over `slots` (which hold no tombstones) after
    /// they were compacted or reordered; open iterations see a new epoch.
    fn reindex(&mut self) {
        self.table.clear();
        let slots = &self.slots;
        for (i, e) in slots.iter().enumerate() {
            let hash = e.as_ref().expect("live").hash;
            self.table.insert_unique(hash, i as u32, |&j| {
                slots[j as usize].as_ref().map_or(0, |e| e.hash)
            });
        }
        self.head = 0;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Drops tombstones, keeping the order.
    fn compact(&mut self) {
        self.slots.retain(Option::is_some);
        self.reindex();
    }

    /// `delete map[keys]`: returns the removed value.
    pub fn remove(&mut self, keys: &[Key<'_>]) -> Option<V> {
        let i = self.find(hash_keys(keys.iter().copied()), keys)?;
        self.remove_slot(i)
    }

    /// `[k, *] in map`: whether an entry matches `filter` (a `None`
    /// column matches any key).
    pub fn any_matching(&self, filter: &[Option<Key<'_>>]) -> bool {
        self.slots
            .iter()
            .skip(self.head)
            .flatten()
            .any(|e| slice_matches(e.key.parts(), filter))
    }

    /// `delete map[k, *]`: removes every entry matching `filter`.
    pub fn remove_matching(&mut self, filter: &[Option<Key<'_>>]) {
        for i in self.head..self.slots.len() {
            if self.slots[i]
                .as_ref()
                .is_some_and(|e| slice_matches(e.key.parts(), filter))
            {
                self.remove_slot(i);
                if self.live == 0 {
                    // remove_slot emptied the slots.
                    break;
                }
            }
        }
    }

    /// `delete map`.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.table.clear();
        self.live = 0;
        self.head = 0;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&[KeyPart], &V)> {
        self.slots
            .iter()
            .skip(self.head)
            .flatten()
            .map(|e| (e.key.parts(), &e.value))
    }

    /// The keys of an entry from [`Map::select`].
    pub fn key(&self, id: EntryId) -> Option<&[KeyPart]> {
        self.entry(id).map(|e| e.key.parts())
    }

    /// The value of an entry from [`Map::select`].
    pub fn value(&self, id: EntryId) -> Option<&V> {
        self.entry(id).map(|e| &e.value)
    }

    fn entry(&self, id: EntryId) -> Option<&Entry<V>> {
        if id.epoch != self.epoch {
            return None;
        }
        self.slots.get(id.slot as usize)?.as_ref()
    }

    /// The entries a `foreach` visits, into `out` (cleared first), in
    /// SystemTap's order: insertion order, or sorted as SystemTap sorts
    /// (stable; with a limit of 1 to 30 its partial sort, whose first
    /// `limit` entries are the same); then the first `limit` entries (a
    /// limit of 0 or less visits nothing); then, of those, the ones
    /// matching `filter` (`a[*, "x"]`: `None` columns match anything).
    /// SystemTap counts the limit before the slice test, so fewer than
    /// `limit` matching entries may be visited.
    ///
    /// This leaves the map as it is. SystemTap sorts long and string
    /// arrays in place, which later unsorted loops and `%` arrays see; for
    /// those call [`Map::sort_in_place`] first and select without a sort.
    pub fn select(
        &self,
        filter: Option<&[Option<Key<'_>>]>,
        sort: Option<Sort>,
        limit: Option<i64>,
        out: &mut Vec<EntryId>,
    ) where
        V: SortValue,
    {
        out.clear();
        let epoch = self.epoch;
        out.extend(
            self.slots
                .iter()
                .enumerate()
                .skip(self.head)
                .filter(|(_, e)| e.is_some())
                .map(|(i, _)| EntryId {
                    slot: i as u32,
                    epoch,
                }),
        );
        if let Some(sort) = sort {
            let after = |a: &EntryId, b: &EntryId| self.goes_after(a.slot, b.slot, sort);
            systemtap_sort(out, limit, after);
        }
        if let Some(limit) = limit {
            out.truncate(limit.clamp(0, i64::MAX) as usize);
        }
        if let Some(f) = filter {
            out.retain(|id| {
                let parts = self.slots[id.slot as usize]
                    .as_ref()
                    .expect("live")
                    .key
                    .parts();
                slice_matches(parts, f)
            });
        }
    }

    /// Reorders the map as SystemTap's `foreach` sorting does for long and
    /// string arrays (`_stp_map_sort`/`_stp_map_sortn` work on the map's
    /// own list): later unsorted loops visit this order, and a `%` array
    /// then replaces entries from its front. Ids from before go stale.
    pub fn sort_in_place(&mut self, sort: Sort, limit: Option<i64>)
    where
        V: SortValue,
    {
        let mut order: Vec<u32> = (self.head..self.slots.len())
            .filter(|&i| self.slots[i].is_some())
            .map(|i| i as u32)
            .collect();
        systemtap_sort(&mut order, limit, |&a, &b| self.goes_after(a, b, sort));
        let mut old = std::mem::take(&mut self.slots);
        self.slots = order.iter().map(|&i| old[i as usize].take()).collect();
        self.reindex();
    }

    /// SystemTap's `_stp_cmp`: whether entry `a` belongs after entry `b`.
    fn goes_after(&self, a: u32, b: u32, sort: Sort) -> bool
    where
        V: SortValue,
    {
        let ea = self.slots[a as usize].as_ref().expect("live");
        let eb = self.slots[b as usize].as_ref().expect("live");
        let ord = match sort.by {
            SortBy::Key(col) => match (ea.key.parts().get(col), eb.key.parts().get(col)) {
                (Some(x), Some(y)) => x.cmp_column(y),
                _ => Ordering::Equal,
            },
            SortBy::Value(agg) => ea.value.cmp_value(&eb.value, agg),
        };
        if sort.descending {
            ord == Ordering::Less
        } else {
            ord == Ordering::Greater
        }
    }
}

/// Orders `items` as SystemTap's runtime does: a stable merge sort, or for
/// a limit `n` of 1 to 30 (`_stp_map_sortn`) a bubble sort of the first
/// `n` followed by inserting every later item that beats the `n`-th into
/// the sorted front (displaced items keep their relative order behind).
/// `after(a, b)`: `a` belongs strictly after `b`.
fn systemtap_sort<T: Copy>(items: &mut Vec<T>, limit: Option<i64>, after: impl Fn(&T, &T) -> bool) {
    let n = match limit {
        Some(n) if n != 0 && n <= 30 => n,
        _ => {
            items.sort_by(|a, b| {
                if after(a, b) {
                    Ordering::Greater
                } else if after(b, a) {
                    Ordering::Less
                } else {
                    Ordering::Equal
                }
            });
            return;
        }
    };
    let len = items.len();
    if len == 0 {
        return;
    }
    // Bubble passes over the first n (pairs 0-1 .. n-2 - n-1).
    let pairs = (n - 1).clamp(0, len as i64 - 1) as usize;
    loop {
        let mut swaps = 0;
        for a in 0..pairs {
            if after(&items[a], &items[a + 1]) {
                items.swap(a, a + 1);
                swaps += 1;
            }
        }
        if swaps == 0 {
            break;
        }
    }
    // Insertion of the rest into the front [0..=last].
    let last = pairs;
    for i in last + 1..len {
        let item = items[i];
        let mut c = last as isize;
        while c >= 0 && after(&items[c as usize], &item) {
            c -= 1;
        }
        if c != last as isize {
            items.remove(i);
            items.insert((c + 1) as usize, item);
        }
    }
}

impl Map<i64> {
    /// `map[keys]` of a long array: 0 when missing.
    #[inline]
    pub fn get_long(&self, keys: &[Key<'_>]) -> i64 {
        self.get(keys).copied().unwrap_or(0)
    }

    /// `map[keys] += delta` (and `++`, `--`): creates a missing entry,
    /// wraps on overflow, returns the new value.
    #[inline]
    pub fn add(&mut self, keys: &[Key<'_>], delta: i64) -> Result<i64, MapOverflow> {
        let v = self.get_or_insert_with(keys, || 0)?;
        *v = v.wrapping_add(delta);
        Ok(*v)
    }
}

impl Map<Vec<u8>> {
    /// `map[keys]` of a string array: "" when missing.
    #[inline]
    pub fn get_str(&self, keys: &[Key<'_>]) -> &[u8] {
        self.get(keys).map_or(&[], Vec::as_slice)
    }

    /// `map[keys] = value`, reusing the entry's buffer; `value` is a
    /// script string, cut at MAXSTRINGLEN - 1.
    #[inline]
    pub fn set_str(
        &mut self,
        keys: &[Key<'_>],
        value: &[u8],
        maxstringlen: usize,
    ) -> Result<(), MapOverflow> {
        let v = self.get_or_insert_with(keys, Vec::new)?;
        super::strings::assign(v, value, maxstringlen);
        Ok(())
    }
}

impl Map<Stat> {
    /// `map[keys] <<< value`; a new entry gets a statistic made from `spec`.
    #[inline]
    pub fn stat_add(
        &mut self,
        keys: &[Key<'_>],
        spec: super::stats::StatSpec,
        value: i64,
    ) -> Result<(), MapOverflow> {
        self.get_or_insert_with(keys, || Stat::new(spec))?
            .add(value);
        Ok(())
    }
}

impl<V> Default for Map<V> {
    fn default() -> Self {
        Map::new(MapLimit::default())
    }
}

impl<V: fmt::Debug> fmt::Debug for Map<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::stats::StatSpec;

    fn l(v: i64) -> [Key<'static>; 1] {
        [Key::Long(v)]
    }

    fn longs(m: &LongMap) -> Vec<(i64, i64)> {
        m.iter()
            .map(|(k, v)| match k {
                [KeyPart::Long(k)] => (*k, *v),
                _ => panic!("bad key"),
            })
            .collect()
    }

    #[test]
    fn insertion_order_and_reinsert() {
        let mut m = LongMap::default();
        for k in [9, 1, 8, 2] {
            m.set(&l(k), k * 2).unwrap();
        }
        m.set(&l(1), 100).unwrap();
        assert_eq!(longs(&m), [(9, 18), (1, 100), (8, 16), (2, 4)]);
        assert_eq!(m.remove(&l(9)), Some(18));
        m.set(&l(9), 0).unwrap();
        assert_eq!(longs(&m), [(1, 100), (8, 16), (2, 4), (9, 0)]);
        assert_eq!(m.get(&l(7)), None);
        assert_eq!(m.len(), 4);
        assert!(m.contains(&l(9)));
        assert_eq!(m.remove(&l(7)), None);
    }

    #[test]
    fn mixed_keys() {
        let mut m = StrMap::default();
        let k1 = [Key::Str(b"one"), Key::Long(1)];
        let k2 = [Key::Str(b"one"), Key::Long(2)];
        m.set(&k1, b"a".to_vec()).unwrap();
        m.set(&k2, b"b".to_vec()).unwrap();
        assert_eq!(m.get(&k1).unwrap(), b"a");
        assert_eq!(m.get(&[Key::Str(b"one"), Key::Long(3)]), None);
        assert_eq!(m.get(&[Key::Str(b"on"), Key::Long(1)]), None);
        let nine: Vec<Key> = (0..9).map(Key::Long).collect();
        m.set(&nine, b"9".to_vec()).unwrap();
        assert_eq!(m.get(&nine).unwrap(), b"9");
    }

    #[test]
    fn string_keys_of_every_length() {
        let mut m = LongMap::default();
        let text = b"abcdefghijklmnopqrstuvwxyz0123456789";
        for n in 0..text.len() {
            m.set(&[Key::Str(&text[..n])], n as i64).unwrap();
        }
        // Same bytes at other offsets are other keys.
        for n in 1..text.len() {
            assert_eq!(m.get(&[Key::Str(&text[1..=n])]), None);
        }
        for n in 0..text.len() {
            assert_eq!(m.get(&[Key::Str(&text[..n])]), Some(&(n as i64)));
        }
        assert_eq!(m.len(), text.len());
    }

    #[test]
    fn typed_helpers() {
        let mut m = LongMap::default();
        assert_eq!(m.get_long(&l(1)), 0);
        assert!(m.is_empty());
        assert_eq!(m.add(&l(1), 1), Ok(1));
        assert_eq!(m.add(&l(1), i64::MAX), Ok(i64::MIN));
        let mut s = StrMap::default();
        assert_eq!(s.get_str(&l(1)), b"");
        s.set_str(&l(1), b"abcdef", 4).unwrap();
        assert_eq!(s.get_str(&l(1)), b"abc");
        let mut st = StatMap::default();
        st.stat_add(&l(2), StatSpec::PLAIN, 5).unwrap();
        st.stat_add(&l(2), StatSpec::PLAIN, 7).unwrap();
        assert_eq!(st.get(&l(2)).unwrap().sum(), 12);
        let mut full = LongMap::new(MapLimit::new(Some(1), false, 10));
        full.add(&l(1), 1).unwrap();
        assert!(full.add(&l(2), 1).is_err());
        assert_eq!(full.get_long(&l(2)), 0);
    }

    #[test]
    fn overflow_messages() {
        let mut m = LongMap::new(MapLimit::new(None, false, 2));
        m.set(&l(1), 1).unwrap();
        m.set(&l(2), 1).unwrap();
        m.set(&l(2), 5).unwrap();
        let e = m.set(&l(3), 1).unwrap_err();
        assert_eq!(e.to_string(), "Array overflow, check MAXMAPENTRIES");
        let mut d = LongMap::new(MapLimit::new(Some(1), false, 2048));
        d.set(&l(1), 1).unwrap();
        assert_eq!(
            d.set(&l(2), 1).unwrap_err().to_string(),
            "Array overflow, check size limit (1)"
        );
    }

    #[test]
    fn wrap_replaces_oldest() {
        // conformance run/map_wrap1: foo%[5], foo[i] = i for i < 10.
        let mut m = LongMap::new(MapLimit::new(Some(5), true, 2048));
        for i in 0..10 {
            m.set(&l(i), i).unwrap();
        }
        assert_eq!(longs(&m), [(5, 5), (6, 6), (7, 7), (8, 8), (9, 9)]);
    }

    #[test]
    fn sorted_selection_is_stable() {
        let mut m = LongMap::default();
        for (k, v) in [(9, 18), (1, 40), (8, 16), (2, 4), (7, 18), (3, 4)] {
            m.set(&l(k), v).unwrap();
        }
        let mut ids = Vec::new();
        let keys = |m: &LongMap, ids: &[EntryId]| -> Vec<i64> {
            ids.iter()
                .map(|id| match m.key(*id).unwrap() {
                    [KeyPart::Long(k)] => *k,
                    _ => panic!(),
                })
                .collect()
        };
        let by_value = |descending| Sort {
            by: SortBy::Value(StatOp::Count),
            descending,
        };
        m.select(None, Some(by_value(false)), None, &mut ids);
        assert_eq!(keys(&m, &ids), [2, 3, 8, 9, 7, 1]);
        m.select(None, Some(by_value(true)), None, &mut ids);
        assert_eq!(keys(&m, &ids), [1, 9, 7, 8, 2, 3]);
        m.select(None, Some(by_value(true)), Some(2), &mut ids);
        assert_eq!(keys(&m, &ids), [1, 9]);
        m.select(None, None, Some(0), &mut ids);
        assert!(ids.is_empty());
        let by_key = Sort {
            by: SortBy::Key(0),
            descending: false,
        };
        m.select(None, Some(by_key), Some(3), &mut ids);
        assert_eq!(keys(&m, &ids), [1, 2, 3]);
        m.select(None, None, None, &mut ids);
        assert_eq!(keys(&m, &ids), [9, 1, 8, 2, 7, 3]);
        // Ids go stale, never wrong, once the map is reorganised.
        let first = ids[0];
        m.clear();
        assert_eq!(m.key(first), None);
    }

    #[test]
    fn partial_sort_front_matches_stable_sort() {
        // SystemTap's sortn for limits 1..=30 must visit exactly what a
        // stable sort would in its first n places, ties included.
        let mut seed: u64 = 0x1234_5678;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64 % 7
        };
        for len in 0..50 {
            let items: Vec<(i64, usize)> = (0..len).map(|i| (next(), i)).collect();
            for n in 1..=30i64 {
                for descending in [false, true] {
                    let after = |a: &(i64, usize), b: &(i64, usize)| {
                        if descending { a.0 < b.0 } else { a.0 > b.0 }
                    };
                    let mut ours = items.clone();
                    systemtap_sort(&mut ours, Some(n), after);
                    let mut stable = items.clone();
                    stable.sort_by_key(|&(v, _)| if descending { -v } else { v });
                    let k = (n as usize).min(len);
                    assert_eq!(ours[..k], stable[..k], "len {len} n {n} desc {descending}");
                    let mut all = ours.clone();
                    all.sort_by_key(|&(_, i)| i);
                    assert_eq!(all, items);
                }
            }
        }
    }

    #[test]
    fn sort_in_place_keeps_systemtaps_order() {
        // _stp_map_sortn with n = 2 on values 5 3 9 1 8: bubble the first
        // two (3 5), then 1 is inserted in front; 9 and 8 stay behind.
        let mut m = LongMap::default();
        for (k, v) in [(1, 5), (2, 3), (3, 9), (4, 1), (5, 8)] {
            m.set(&l(k), v).unwrap();
        }
        let asc = Sort {
            by: SortBy::Value(StatOp::Count),
            descending: false,
        };
        m.sort_in_place(asc, Some(2));
        let values: Vec<i64> = m.iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [1, 3, 5, 9, 8]);
        m.sort_in_place(asc, None);
        let values: Vec<i64> = m.iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [1, 3, 5, 8, 9]);
        for (k, v) in [(1, 5), (4, 1), (5, 8)] {
            assert_eq!(m.get(&l(k)), Some(&v));
        }
        // A wrap array replaces from the front of the sorted order.
        let mut w = LongMap::new(MapLimit::new(Some(3), true, 2048));
        for (k, v) in [(1, 30), (2, 10), (3, 20)] {
            w.set(&l(k), v).unwrap();
        }
        w.sort_in_place(asc, None);
        w.set(&l(4), 40).unwrap();
        assert_eq!(longs(&w), [(3, 20), (1, 30), (4, 40)]);
    }

    #[test]
    fn limit_counts_before_the_slice_test() {
        let mut m = LongMap::default();
        for (s, n) in [("a", 1), ("b", 1), ("a", 2)] {
            m.set(&[Key::Str(s.as_bytes()), Key::Long(n)], n).unwrap();
        }
        let mut ids = Vec::new();
        m.select(Some(&[Some(Key::Str(b"a")), None]), None, Some(1), &mut ids);
        assert_eq!(ids.len(), 1);
        m.select(Some(&[None, Some(Key::Long(2))]), None, Some(2), &mut ids);
        assert!(ids.is_empty());
        m.select(Some(&[None, Some(Key::Long(2))]), None, Some(3), &mut ids);
        assert_eq!(ids.len(), 1);
    }

    #[test]
    fn slices_filter_columns() {
        let mut m = LongMap::default();
        for (s, n) in [("a", 1), ("b", 1), ("a", 2)] {
            m.set(&[Key::Str(s.as_bytes()), Key::Long(n)], n).unwrap();
        }
        let mut ids = Vec::new();
        m.select(Some(&[Some(Key::Str(b"a")), None]), None, None, &mut ids);
        assert_eq!(ids.len(), 2);
        m.select(Some(&[None, Some(Key::Long(1))]), None, None, &mut ids);
        let got: Vec<_> = ids
            .iter()
            .map(|id| m.key(*id).unwrap()[0].clone())
            .collect();
        assert_eq!(
            got,
            [KeyPart::Str((*b"a").into()), KeyPart::Str((*b"b").into())]
        );
    }

    #[test]
    fn stats_sort_by_aggregate() {
        let mut m = StatMap::default();
        let spec = StatSpec::PLAIN;
        for (k, vals) in [(1, &[5, 5][..]), (2, &[100][..]), (3, &[1, 1, 1][..])] {
            for &v in vals {
                m.get_or_insert_with(&l(k), || Stat::new(spec))
                    .unwrap()
                    .add(v);
            }
        }
        let mut ids = Vec::new();
        let sort = |agg| Sort {
            by: SortBy::Value(agg),
            descending: true,
        };
        m.select(None, Some(sort(StatOp::Count)), None, &mut ids);
        let first = m.key(ids[0]).unwrap()[0].clone();
        assert_eq!(first, KeyPart::Long(3));
        m.select(None, Some(sort(StatOp::Sum)), None, &mut ids);
        assert_eq!(m.key(ids[0]).unwrap()[0], KeyPart::Long(2));
    }

    #[test]
    fn many_deletes_compact_and_keep_order() {
        let mut m = LongMap::default();
        for i in 0..1000 {
            m.set(&l(i), i).unwrap();
            if i % 3 != 0 {
                m.remove(&l(i));
            }
        }
        let got = longs(&m);
        assert_eq!(got.len(), 334);
        assert!(got.iter().all(|&(k, v)| k == v && k % 3 == 0));
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
        for i in (0..1000).step_by(3) {
            assert_eq!(m.get(&l(i)), Some(&i));
        }
    }
}
