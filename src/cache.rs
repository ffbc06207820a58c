//! A bounded, thread-safe count cache keyed by a 128-bit hash of the content.
//!
//! Only the hash and the count are stored, never the text, so a cached 1 MB tool output costs
//! the same few dozen bytes as a cached "ok". xxh3-128 makes accidental collisions
//! negligible (~2^-64 at billions of entries) and hashes at memory speed.

use std::sync::atomic::{AtomicU64, Ordering};

use std::hash::{BuildHasher, Hasher};

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::UnitWeighter;

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

    /// The cached count for `key`, counting the hit or miss.
    #[inline]
    pub fn get(&self, key: u128) -> Option<usize> {
        let found = self.map.as_ref().and_then(|m| m.get(&key));
        let stat = if found.is_some() { &self.hits } else { &self.misses };
        stat.fetch_add(1, Ordering::Relaxed);
        found.map(|n| n as usize)
    }

    /// Store a count computed after a `get` miss.
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
        CacheInfo {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            size: self.map.as_ref().map_or(0, |m| m.len()),
            capacity: self.capacity,
        }
    }

    pub fn clear(&self) {
        if let Some(map) = &self.map {
            map.clear();
        }
        if let Some(floors) = &self.floors {
            floors.clear();
        }
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
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
