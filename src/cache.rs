//! A bounded, thread-safe count cache keyed by a 128-bit hash of the content.
//!
//! Only the hash and the count are stored, never the text, so a cached 1 MB tool output costs
//! the same few dozen bytes as a cached "ok". xxh3-128 makes accidental collisions
//! negligible (~2^-64 at billions of entries) and hashes at memory speed.
//!
//! In front of it, each thread keeps a small table of the short texts it counted last
//! ([`FrontTable`]), found by a hash the caller already has (Python caches every `str`'s hash
//! in the object) and confirmed by comparing the stored bytes. A warm count of a tiny text
//! then costs neither the xxh3 pass nor the shared map's lock, and exactness never depends
//! on a hash.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use std::hash::{BuildHasher, Hasher};

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::UnitWeighter;

pub(crate) use crate::memory::populated;

mod admit;
mod held;
pub use admit::{Admission, Pending};
pub use held::HeldTable;

/// A thread's held and front tables start at this share of their sets and take the rest once
/// they have stored as many entries as they have slots: a process that counts a few thousand
/// texts maps a sixteenth of them, where mapping all of them was a quarter of its first pass.
pub(crate) const FIRST_SHARE: usize = 16;

/// Sets a table holds at first, of its `n_sets`.
pub(crate) fn first_sets(n_sets: usize) -> usize {
    (n_sets / FIRST_SHARE).max(1)
}

/// Keys are already uniform 128-bit hashes: hashing them again only costs time, so the
/// map uses their low 64 bits as they are.
#[derive(Clone, Copy, Default)]
pub struct KeyIsHash;

#[derive(Default)]
pub struct KeyIsHashHasher(u64);

impl Hasher for KeyIsHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for non-u128 keys, which this cache never has; fold them anyway.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(b);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 ^= v as u64;
    }
}

impl BuildHasher for KeyIsHash {
    type Hasher = KeyIsHashHasher;
    fn build_hasher(&self) -> KeyIsHashHasher {
        KeyIsHashHasher(0)
    }
}

type Map = Cache<u128, u32, UnitWeighter, KeyIsHash, DefaultLifecycle<u128, u32>>;

/// Bytes one entry costs: measured as RSS growth over 1M entries (~78 bytes: the 16-byte key
/// and 4-byte count plus the map's slots and eviction metadata; see benches/RESULTS.md).
/// Used to turn a byte budget into an entry capacity.
pub const BYTES_PER_ENTRY: usize = 80;

/// Default capacity: one million entries, about 80 MB at most.
pub const DEFAULT_ENTRIES: usize = 1_000_000;

/// Lower bounds kept at most: they are recorded only for texts of a megabyte or more.
const FLOOR_ENTRIES: usize = 4096;

pub struct CountCache {
    map: Option<Map>,
    /// Lower bounds: "this content has more than n tokens", for long texts a fit read only up
    /// to its budget. A later fit with a budget no larger needs not read them again.
    floors: Option<Map>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Names this cache's current contents in the per-thread front tables: unique among
    /// caches, and renewed by `clear`, so an entry made before a clear (or for another
    /// cache) never matches again.
    stamp: AtomicU64,
    /// Hits answered by the front tables, a counter per thread (the first [`HIT_SHARDS`]
    /// threads that count; later ones add to `hits`): a thread bumps its own with a plain
    /// load and store, no locked instruction, no cache line another core writes. Never
    /// reset, since their owners may be counting; `clear` records a baseline instead.
    front_hits: Box<[HitShard]>,
    front_base: Mutex<Vec<u64>>,
}

/// Threads with a hit counter of their own in each cache.
pub const HIT_SHARDS: usize = 32;

#[repr(align(64))]
#[derive(Default)]
struct HitShard(AtomicU64);

/// Per-thread hit counters handed out so far (see `CountCache::front_hits`).
static SHARDS_GIVEN: AtomicUsize = AtomicUsize::new(0);

/// Stamps handed out so far (0 is never one: it marks an empty front slot).
static STAMPS: AtomicU64 = AtomicU64::new(1);

fn new_stamp() -> u64 {
    STAMPS.fetch_add(1, Ordering::Relaxed)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheInfo {
    pub hits: u64,
    pub misses: u64,
    pub size: usize,
    pub capacity: usize,
}

impl CountCache {
    /// A cache holding at most `entries` counts; 0 disables caching.
    pub fn new(entries: usize) -> Self {
        Self {
            map: (entries > 0)
                .then(|| Cache::with(entries, entries as u64, UnitWeighter, KeyIsHash, DefaultLifecycle::default())),
            floors: (entries > 0).then(|| {
                let n = entries.min(FLOOR_ENTRIES);
                Cache::with(n, n as u64, UnitWeighter, KeyIsHash, DefaultLifecycle::default())
            }),
            capacity: entries,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stamp: AtomicU64::new(new_stamp()),
            front_hits: (0..HIT_SHARDS).map(|_| HitShard::default()).collect(),
            front_base: Mutex::new(vec![0; HIT_SHARDS]),
        }
    }

    /// A cache sized to stay within about `bytes` of memory.
    pub fn with_max_bytes(bytes: usize) -> Self {
        Self::new(bytes / BYTES_PER_ENTRY)
    }

    /// The cached count for `key`, or compute, store and return it.
    #[inline]
    pub fn get_or_insert_with(&self, key: u128, compute: impl FnOnce() -> usize) -> usize {
        let Some(map) = &self.map else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return compute();
        };
        if let Some(n) = map.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n as usize;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let n = compute();
        // Counts above u32::MAX (a >16 GB text) are not cached rather than truncated.
        if let Ok(v) = u32::try_from(n) {
            map.insert(key, v);
        }
        n
    }

    /// The cached count of `text` by its content key ([`text_key`]), or compute, store and
    /// return it. With caching off the text is not hashed at all: the key would only be thrown
    /// away, and hashing reads every byte of a text the count reads anyway.
    #[inline]
    pub fn get_or_insert_text(&self, text: &str, compute: impl FnOnce() -> usize) -> usize {
        if self.map.is_none() {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return compute();
        }
        self.get_or_insert_with(text_key(text), compute)
    }

    /// Store a count computed after a `peek` miss.
    #[inline]
    pub fn insert(&self, key: u128, count: usize) {
        if let (Some(map), Ok(v)) = (&self.map, u32::try_from(count)) {
            map.insert(key, v);
        }
    }

    /// A count known to be exceeded by `key`'s content, if one was recorded.
    #[inline]
    pub fn floor(&self, key: u128) -> Option<usize> {
        self.floors.as_ref().and_then(|m| m.get(&key)).map(|n| n as usize)
    }

    /// Record that `key`'s content has more than `tokens` tokens (keeping the highest bound).
    pub fn set_floor(&self, key: u128, tokens: usize) {
        if let Some(floors) = &self.floors {
            let known = floors.get(&key).unwrap_or(0) as usize;
            floors.insert(key, u32::try_from(tokens.max(known)).unwrap_or(u32::MAX));
        }
    }

    /// Whether counts are kept at all (a capacity above 0).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.map.is_some()
    }

    /// Count `n` misses at once: a batch counted without lookups (the cache off) records
    /// them in one update instead of contending on the counter per text.
    #[inline]
    pub fn add_misses(&self, n: u64) {
        self.misses.fetch_add(n, Ordering::Relaxed);
    }

    /// Count `n` hits at once (a batch's lookups through [`Self::peek`]).
    #[inline]
    pub fn add_hits(&self, n: u64) {
        self.hits.fetch_add(n, Ordering::Relaxed);
    }

    /// The cached count for `key`, leaving the statistics to the caller: a batch on all
    /// cores records its hits and misses once, not per text from every core.
    #[inline]
    pub fn peek(&self, key: u128) -> Option<usize> {
        self.map.as_ref().and_then(|m| m.get(&key)).map(|n| n as usize)
    }

    pub fn info(&self) -> CacheInfo {
        let base = self.front_base.lock().unwrap_or_else(|p| p.into_inner());
        let front: u64 = self.front_hits.iter().zip(base.iter()).map(|(h, b)| h.0.load(Ordering::Relaxed) - b).sum();
        CacheInfo {
            hits: self.hits.load(Ordering::Relaxed) + front,
            misses: self.misses.load(Ordering::Relaxed),
            size: self.map.as_ref().map_or(0, |m| m.len()),
            capacity: self.capacity,
        }
    }

    pub fn clear(&self) {
        // First, so a count racing with the clear can only store under the old stamp.
        self.stamp.store(new_stamp(), Ordering::Release);
        if let Some(map) = &self.map {
            map.clear();
        }
        if let Some(floors) = &self.floors {
            floors.clear();
        }
        let mut base = self.front_base.lock().unwrap_or_else(|p| p.into_inner());
        for (b, h) in base.iter_mut().zip(self.front_hits.iter()) {
            *b = h.0.load(Ordering::Relaxed);
        }
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }

    /// The cached count of `text`, whose caller-side hash is `hash`: this thread's front
    /// table first (short texts only), then the shared map. A shared hit, or the count that
    /// `compute` gives on a miss, is remembered in the front table. Hits and misses are
    /// counted once, whichever level answered.
    #[inline]
    pub fn get_or_insert_hashed(
        &self,
        text: &str,
        hash: impl FnOnce() -> u64,
        compute: impl FnOnce() -> usize,
    ) -> usize {
        if self.map.is_none() || text.len() > FRONT_MAX_LEN {
            return self.get_or_insert_text(text, compute);
        }
        let hash = hash();
        let stamp = self.stamp.load(Ordering::Acquire);
        if let Some(n) = FRONT.with(|f| f.borrow().get(hash, stamp, text)) {
            self.record_front_hit();
            return n as usize;
        }
        let n = self.get_or_insert_text(text, compute);
        if let Ok(v) = u32::try_from(n) {
            FRONT.with(|f| f.borrow_mut().insert(hash, stamp, text, v));
        }
        n
    }

    /// The stamp that names this cache's current contents in per-thread tables (the front
    /// table here, a [`HeldTable`] in the bindings); `None` when caching is off.
    #[inline]
    pub fn stamp(&self) -> Option<u64> {
        self.map.as_ref().map(|_| self.stamp.load(Ordering::Acquire))
    }

    /// Whether `text` goes through this cache now (see [`admit::admission`]): always when
    /// caching is off (the cached paths then only count), else a text this cache has probably
    /// seen before, on any thread.
    #[inline]
    pub fn admission(&self, text: &str) -> Admission<'_> {
        self.stamp().map_or(Admission::Through, |stamp| admit::admission(text, stamp))
    }

    /// Count a hit answered by a per-thread table, on this thread's own counter.
    #[inline]
    pub fn record_front_hit(&self) {
        match self.front_hits.get(thread_shard()) {
            // only this thread writes its shard: no read-modify-write needed
            Some(own) => own.0.store(own.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed),
            None => {
                self.hits.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The calling thread's hit counter index, unique to it for the life of the process.
#[inline]
fn thread_shard() -> usize {
    SHARD.with(|s| {
        if s.get() == usize::MAX {
            s.set(SHARDS_GIVEN.fetch_add(1, Ordering::Relaxed).min(usize::MAX - 1));
        }
        s.get()
    })
}

/// Texts longer than this skip the front table: hashing them is no longer small beside the
/// call, and each would take a large share of the table's bytes.
pub const FRONT_MAX_LEN: usize = 1024;
/// Slots of a thread's front table (4 per set): room for the tens of thousands of short
/// texts an agent re-counts, at 16 bytes a slot (512 KiB, touched only as it fills).
pub const FRONT_SLOTS: usize = 1 << 15;
/// Bytes of text a thread's front table holds at most by default; when full it starts over
/// empty. [`set_front_bytes`] changes it (0 turns the front tables off).
pub const FRONT_BYTES: usize = 2 << 20;

static FRONT_BUDGET: AtomicUsize = AtomicUsize::new(FRONT_BYTES);

/// The text bytes each thread's front table may hold from now on (0: none, texts go
/// straight to the shared cache). A table already fuller starts over at its next insert.
pub fn set_front_bytes(bytes: usize) {
    FRONT_BUDGET.store(bytes, Ordering::Relaxed);
}

/// Sentinel `max_bytes` of the per-thread tables: follow [`set_front_bytes`].
pub const FOLLOW_BUDGET: usize = usize::MAX;
const FRONT_WAYS: usize = 4;

thread_local! {
    static FRONT: RefCell<FrontTable> = const { RefCell::new(FrontTable::new(FRONT_SLOTS, FOLLOW_BUDGET)) };
    /// This thread's hit counter index in every cache (`usize::MAX` until first asked).
    static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// A per-thread table's byte budget: its own `max_bytes`, or for [`FOLLOW_BUDGET`] `factor`
/// times the one [`set_front_bytes`] sets now.
#[inline]
fn table_budget(max_bytes: usize, factor: usize) -> usize {
    if max_bytes == FOLLOW_BUDGET {
        FRONT_BUDGET.load(Ordering::Relaxed).saturating_mul(factor)
    } else {
        max_bytes
    }
}

/// The way of a set to store into, for the per-thread tables: the first way that meets the
/// earliest rule of `prefer` (each table's own order), else each way in turn (`victim`).
#[inline]
fn choose_way<S>(ways: &[S], prefer: &[&dyn Fn(&S) -> bool], victim: &mut usize) -> usize {
    prefer.iter().find_map(|rule| ways.iter().position(rule)).unwrap_or_else(|| {
        *victim = (*victim + 1) % ways.len();
        *victim
    })
}

/// Entries and text bytes in the calling thread's front table.
pub fn front_stats() -> (usize, usize) {
    FRONT.with(|f| {
        let f = f.borrow();
        (f.len(), f.bytes())
    })
}

/// One way of a set: 16 bytes, so a set of four is one cache line. The owning cache's stamp
/// is kept in the arena, just before the text, where the byte comparison reads anyway: a
/// stamp small enough to fit here could wrap and match a stale entry.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Slot {
    /// The caller's hash, high half (the low bits chose the set): most misses end here.
    tag: u32,
    /// Where the entry starts in the arena: 8 bytes of stamp, then `len` bytes of text.
    start: u32,
    count: u32,
    /// Text bytes, at most [`FRONT_MAX_LEN`]; 0 marks an empty slot.
    len: u16,
}

/// A set of [`FRONT_WAYS`] slots on one 64-byte line: a lookup touches one line of the table.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Set([Slot; FRONT_WAYS]);

const _: () = assert!(std::mem::size_of::<Set>() == 64 && FRONT_MAX_LEN <= u16::MAX as usize);

/// Arena bytes an entry takes besides its text: the stamp.
const STAMP_BYTES: usize = 8;

/// A set-associative table of (hash, cache stamp, text) -> count, with the stamps and texts
/// in one arena. Replaced entries leave their bytes behind until the arena is full; then the
/// whole table starts over, so its memory never passes `slots * 16 + bytes`.
pub struct FrontTable {
    sets: Vec<Set>,
    arena: Vec<u8>,
    /// Stamp bytes in the arena (reported apart from the text bytes).
    stamp_bytes: usize,
    /// Sets once grown (see [`FIRST_SHARE`]).
    n_sets: usize,
    /// Entries stored since the sets were allocated at their current size.
    stored: usize,
    max_bytes: usize,
    /// Rotates the way replaced in a full set.
    victim: usize,
}

impl FrontTable {
    /// A table of `slots` slots (rounded up to a power of two, at least one set) and at most
    /// `max_bytes` bytes of stamps and text; nothing is allocated before the first insert.
    pub const fn new(slots: usize, max_bytes: usize) -> Self {
        let n_sets = (slots / FRONT_WAYS).next_power_of_two();
        Self { sets: Vec::new(), arena: Vec::new(), stamp_bytes: 0, n_sets, stored: 0, max_bytes, victim: 0 }
    }

    #[inline]
    fn set(&self, hash: u64) -> usize {
        hash as usize & (self.sets.len() - 1)
    }

    #[inline]
    fn tag(hash: u64) -> u32 {
        (hash >> 32) as u32
    }

    /// The stamp an entry was stored under, in `arena`.
    #[inline]
    fn stamp_of(arena: &[u8], s: &Slot) -> u64 {
        let at = s.start as usize;
        let mut b = [0u8; STAMP_BYTES];
        b.copy_from_slice(&arena[at..at + STAMP_BYTES]);
        u64::from_ne_bytes(b)
    }

    /// The count stored for `text` under `hash` and `stamp`: all three must match, the stamp
    /// and the text byte for byte (the hash only picks the set and skips most ways early).
    #[inline]
    pub fn get(&self, hash: u64, stamp: u64, text: &str) -> Option<u32> {
        if self.sets.is_empty() || text.is_empty() || text.len() > FRONT_MAX_LEN {
            return None;
        }
        let tag = Self::tag(hash);
        let want = stamp.to_ne_bytes();
        self.sets[self.set(hash)]
            .0
            .iter()
            .find(|s| {
                if s.tag != tag || s.len as usize != text.len() {
                    return false;
                }
                let at = s.start as usize;
                let entry = &self.arena[at..at + STAMP_BYTES + text.len()];
                entry[..STAMP_BYTES] == want && &entry[STAMP_BYTES..] == text.as_bytes()
            })
            .map(|s| s.count)
    }

    /// Remember `count` for `text`. Texts that could never fit are not stored.
    pub fn insert(&mut self, hash: u64, stamp: u64, text: &str, count: u32) {
        let len = text.len();
        let max_bytes = table_budget(self.max_bytes, 1);
        // offsets are u32: an arena never grows past 4 GiB, whatever the budget says
        let max_bytes = max_bytes.min(u32::MAX as usize);
        if len == 0 || len > FRONT_MAX_LEN || STAMP_BYTES + len > max_bytes || stamp == 0 {
            return;
        }
        if self.sets.is_empty() {
            self.sets = populated(first_sets(self.n_sets), Set::default);
        } else if self.sets.len() < self.n_sets && self.stored >= self.sets.len() * FRONT_WAYS {
            // Grown by starting over: a slot keeps only its hash's high bits, not its set's.
            self.sets = populated(self.n_sets, Set::default);
            self.restart();
        }
        if self.arena.len() + STAMP_BYTES + len > max_bytes {
            self.sets.fill(Set::default());
            self.restart();
        }
        let set = self.set(hash);
        // An empty way, else one of another cache (or of this one before a clear), else each
        // in turn (a text is inserted only after `get` missed it).
        let arena = &self.arena;
        let way = choose_way(
            &self.sets[set].0,
            &[&|s: &Slot| s.len == 0, &|s: &Slot| Self::stamp_of(arena, s) != stamp],
            &mut self.victim,
        );
        let start = self.arena.len();
        self.arena.extend_from_slice(&stamp.to_ne_bytes());
        self.arena.extend_from_slice(text.as_bytes());
        self.stamp_bytes += STAMP_BYTES;
        self.sets[set].0[way] = Slot { tag: Self::tag(hash), start: start as u32, count, len: len as u16 };
        self.stored += 1;
    }

    /// The arena emptied, every slot already empty.
    fn restart(&mut self) {
        self.arena.clear();
        self.stamp_bytes = 0;
        self.stored = 0;
    }

    /// Entries stored (any stamp).
    pub fn len(&self) -> usize {
        self.sets.iter().flat_map(|s| s.0.iter()).filter(|s| s.len != 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of text held in the arena (its stamps not included).
    pub fn bytes(&self) -> usize {
        self.arena.len() - self.stamp_bytes
    }
}

/// The key of a text: its xxh3-128 under a domain tag, so a text and a message whose
/// serialization happens to match never share a key.
#[inline]
pub fn text_key(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128_with_seed(text.as_bytes(), 0x7465_7874)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn caches_and_counts_hits() {
        let cache = CountCache::new(100);
        let mut calls = 0;
        assert_eq!(
            cache.get_or_insert_with(text_key("a"), || {
                calls += 1;
                7
            }),
            7
        );
        assert_eq!(
            cache.get_or_insert_with(text_key("a"), || {
                calls += 1;
                99
            }),
            7
        );
        assert_eq!(calls, 1);
        let info = cache.info();
        assert_eq!((info.hits, info.misses, info.size), (1, 1, 1));
        cache.clear();
        assert_eq!(cache.info().size, 0);
    }

    #[test]
    fn bounded() {
        let cache = CountCache::new(1000);
        for i in 0..100_000u32 {
            cache.get_or_insert_with(i as u128, || i as usize);
        }
        assert!(cache.info().size <= 1100, "size {}", cache.info().size);
    }

    #[test]
    fn disabled_cache_still_counts() {
        let cache = CountCache::new(0);
        assert_eq!(cache.get_or_insert_with(1, || 5), 5);
        assert_eq!(cache.info().size, 0);
    }

    #[test]
    fn front_table_confirms_bytes_not_just_the_hash() {
        let mut f = FrontTable::new(64, 1 << 10);
        f.insert(7, 1, "alpha", 3);
        assert_eq!(f.get(7, 1, "alpha"), Some(3));
        // same hash, same length, other bytes: a colliding text is not taken for another
        assert_eq!(f.get(7, 1, "alpho"), None);
        assert_eq!(f.get(7, 1, "alph"), None);
        f.insert(7, 1, "alpho", 9);
        assert_eq!((f.get(7, 1, "alpha"), f.get(7, 1, "alpho")), (Some(3), Some(9)));
        // another cache (or the same one after a clear) has another stamp
        assert_eq!(f.get(7, 2, "alpha"), None);
    }

    #[test]
    fn front_table_stamps_match_in_full_not_in_part() {
        // stamps equal in their low 16 or 32 bits are still other caches: no wrap-around
        let mut f = FrontTable::new(64, 1 << 10);
        f.insert(9, 1, "same text", 4);
        for other in [1 + (1 << 16), 1 + (1 << 32), 1 | (1 << 63), u64::MAX] {
            assert_eq!(f.get(9, other, "same text"), None, "stamp {other:#x}");
        }
        assert_eq!(f.get(9, 1, "same text"), Some(4));
        // same low half of the hash (same set), other high half: another entry
        assert_eq!(f.get(9 | (1 << 40), 1, "same text"), None);
    }

    #[test]
    fn front_sets_are_cache_lines_and_long_texts_stay_out() {
        let mut f = FrontTable::new(64, 1 << 16);
        f.insert(3, 1, "a", 1);
        assert_eq!((std::mem::size_of::<Set>(), f.sets.as_ptr() as usize % 64), (64, 0));
        let long = "é".repeat(FRONT_MAX_LEN / 2 + 1); // over the limit in bytes, not in chars
        f.insert(3, 1, &long, 7);
        assert_eq!((f.get(3, 1, &long), f.len()), (None, 1));
        let edge = "x".repeat(FRONT_MAX_LEN);
        f.insert(4, 1, &edge, 8);
        assert_eq!(f.get(4, 1, &edge), Some(8));
        // the arena holds each stamp besides the text; `bytes` reports the text alone
        assert_eq!((f.bytes(), f.arena.len()), (1 + FRONT_MAX_LEN, 2 * (STAMP_BYTES) + 1 + FRONT_MAX_LEN));
    }

    #[test]
    fn front_table_is_bounded_by_slots_and_bytes() {
        let mut f = FrontTable::new(16, 100);
        for i in 0..10_000u64 {
            let t = format!("text {i}");
            f.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1, &t, i as u32);
            assert!(f.bytes() <= 100 && f.len() <= 16, "{} bytes, {} entries", f.bytes(), f.len());
        }
        // what it still holds is right
        for i in 0..10_000u64 {
            let t = format!("text {i}");
            if let Some(n) = f.get(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1, &t) {
                assert_eq!(n, i as u32);
            }
        }
        f.insert(1, 1, &"x".repeat(101), 5); // larger than the whole arena: not stored
        assert_eq!(f.get(1, 1, &"x".repeat(101)), None);
    }

    #[test]
    fn front_table_starts_small_and_grows_by_starting_over() {
        // 1,024 slots: 16 sets of 4 at first, all 256 once 64 entries were stored
        let mut f = FrontTable::new(1024, 1 << 20);
        let key = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for i in 0..64u64 {
            f.insert(key(i), 1, &format!("text {i}"), i as u32);
        }
        assert_eq!(f.sets.len(), 16);
        f.insert(key(64), 1, "text 64", 64);
        assert_eq!((f.sets.len(), f.len(), f.get(key(64), 1, "text 64")), (256, 1, Some(64)));
        assert_eq!(f.bytes(), "text 64".len(), "the arena starts over with the sets");
        for i in 65..1000u64 {
            f.insert(key(i), 1, &format!("text {i}"), i as u32);
        }
        assert_eq!(f.sets.len(), 256, "grown once");
        let kept = (65..1000u64).filter(|&i| f.get(key(i), 1, &format!("text {i}")) == Some(i as u32)).count();
        assert!(kept > 512, "{kept} of 935 kept in 1,024 slots");
    }

    #[test]
    fn front_budget_zero_keeps_nothing() {
        // the thread-local table follows the process-wide budget; run on a fresh thread
        std::thread::spawn(|| {
            let mut f = FrontTable::new(16, FOLLOW_BUDGET);
            set_front_bytes(0);
            f.insert(1, 1, "abc", 3);
            set_front_bytes(FRONT_BYTES);
            assert_eq!((f.get(1, 1, "abc"), f.len(), f.bytes()), (None, 0, 0));
            f.insert(1, 1, "abc", 3);
            assert_eq!(f.get(1, 1, "abc"), Some(3));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn front_table_replaces_other_caches_entries_first() {
        let mut f = FrontTable::new(4, 1 << 16);
        f.insert(5, 1, "old", 1); // a stale stamp (a cleared cache)
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            f.insert(5, 2, t, i as u32);
        }
        f.insert(5, 2, "d", 3); // the set is full: the stale entry goes, not a live one
        assert_eq!(["a", "b", "c", "d"].map(|t| f.get(5, 2, t)), [Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(f.get(5, 1, "old"), None);
    }

    #[test]
    fn front_table_evicts_within_a_full_set() {
        // every text in one set of 4 ways: the fifth replaces one, none is ever wrong
        let mut f = FrontTable::new(4, 1 << 16);
        let texts: Vec<String> = (0..50).map(|i| format!("t{i}")).collect();
        for (i, t) in texts.iter().enumerate() {
            f.insert(42, 1, t, i as u32);
            assert_eq!(f.get(42, 1, t), Some(i as u32));
        }
        assert_eq!(f.len(), 4);
        let found = texts.iter().enumerate().filter(|(i, t)| f.get(42, 1, t) == Some(*i as u32)).count();
        assert_eq!(found, 4);
    }

    #[test]
    fn hashed_lookups_agree_with_the_shared_cache_and_count_stats() {
        let cache = CountCache::new(100);
        let mut calls = 0;
        for _ in 0..3 {
            let n = cache.get_or_insert_hashed(
                "hello",
                || 11,
                || {
                    calls += 1;
                    5
                },
            );
            assert_eq!(n, 5);
        }
        assert_eq!(calls, 1);
        let info = cache.info();
        assert_eq!((info.hits, info.misses, info.size), (2, 1, 1));
        // a colliding caller hash for another text: counted, never confused
        assert_eq!(cache.get_or_insert_hashed("world", || 11, || 8), 8);
        assert_eq!(cache.get_or_insert_hashed("hello", || 11, || 99), 5);
        // after a clear the front entry is stale: the text is counted again
        cache.clear();
        assert_eq!(cache.get_or_insert_hashed("hello", || 11, || 6), 6);
        assert_eq!((cache.info().hits, cache.info().misses), (0, 1));
        // disabled: no front entry either
        let off = CountCache::new(0);
        assert_eq!(off.get_or_insert_hashed("hello", || 11, || 4), 4);
        assert_eq!(off.get_or_insert_hashed("hello", || 11, || 4), 4);
        assert_eq!((off.info().hits, off.info().misses), (0, 2));
        // the caller's hash is asked only for a text the front table keeps
        let long = "x".repeat(FRONT_MAX_LEN + 1);
        let unasked = || -> u64 { panic!("a long text's hash was computed") };
        assert_eq!(cache.get_or_insert_hashed(&long, unasked, || 3), 3);
        assert_eq!(off.get_or_insert_hashed("hello", unasked, || 4), 4, "nor with caching off");
    }

    #[test]
    fn front_hits_from_many_threads_add_up_and_clear() {
        // more threads than hit shards: the later ones count through the shared counter
        let cache = Arc::new(CountCache::new(1000));
        let run = |cache: &Arc<CountCache>, threads: usize| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let cache = Arc::clone(cache);
                    std::thread::spawn(move || {
                        for i in 0..100u64 {
                            let text = format!("text {}", i % 10);
                            assert_eq!(
                                cache.get_or_insert_hashed(&text, || i % 10, || (i % 10) as usize),
                                (i % 10) as usize,
                                "thread {t}"
                            );
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        };
        run(&cache, HIT_SHARDS + 8);
        let info = cache.info();
        assert_eq!(info.hits + info.misses, (HIT_SHARDS as u64 + 8) * 100);
        assert!(info.misses >= 10 && info.hits >= (HIT_SHARDS as u64 + 8) * 90 - 10, "{info:?}");
        cache.clear();
        assert_eq!((cache.info().hits, cache.info().misses), (0, 0));
        run(&cache, 3);
        let info = cache.info();
        assert_eq!(info.hits + info.misses, 300);
    }

    #[test]
    fn shared_across_threads() {
        let cache = Arc::new(CountCache::new(10_000));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cache = Arc::clone(&cache);
                std::thread::spawn(move || {
                    for i in 0..5000u128 {
                        assert_eq!(cache.get_or_insert_with(i, || (i * 3) as usize), (i * 3) as usize, "thread {t}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
