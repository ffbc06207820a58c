//! Counts of texts the caller keeps alive, found by the text object's identity.
//!
//! A warm count of a text an agent sends every turn is mostly waiting on memory: the text's
//! bytes and the front table's copy of them are compared on every call. When the caller can
//! hold the very text object (a Python `str` is immutable, and a held one can be neither
//! freed nor have its address reused), its address names its content, and a hit reads one
//! line of this table and nothing of the text. The holder type `H` is the caller's (a strong
//! Python reference in the bindings): dropping it releases the text, which happens whenever
//! an entry is replaced or the table starts over.

use super::{choose_way, first_sets, populated, table_budget};

/// Ways of a set: four 32-byte slots, two adjacent cache lines (the second is prefetched
/// with the first); fewer ways let a few sets evict each other on every pass.
const HELD_WAYS: usize = 4;

struct HeldSlot<H> {
    /// The held object's address; meaningful only while `holder` is `Some`.
    addr: usize,
    /// The owning cache's stamp when the count was stored (see `CountCache::stamp`).
    stamp: u64,
    count: u32,
    /// Bytes of text the holder keeps alive, charged against the table's budget.
    len: u32,
    holder: Option<H>,
}

impl<H> HeldSlot<H> {
    const EMPTY: Self = Self { addr: 0, stamp: 0, count: 0, len: 0, holder: None };
}

/// The held texts' budget, as a multiple of the front table's: the front table copies its
/// texts, while a held text is most often one the caller keeps anyway (its history), so
/// holding it costs memory only once the caller has let go of it.
pub const HELD_BUDGET_FACTOR: usize = 4;

#[repr(C, align(64))]
struct HeldSet<H>([HeldSlot<H>; HELD_WAYS]);

/// A set-associative table of (object address, cache stamp) -> count, holding each object
/// it names. Its memory is its slots plus the texts it keeps alive, at most `max_bytes`:
/// an insert that would pass that empties the table first.
pub struct HeldTable<H> {
    sets: Vec<HeldSet<H>>,
    /// Sets once grown (see [`super::FIRST_SHARE`]).
    n_sets: usize,
    /// Entries stored since the sets were allocated at their current size.
    stored: usize,
    bytes: usize,
    max_bytes: usize,
    victim: usize,
}

impl<H> HeldTable<H> {
    /// A table of `slots` slots (rounded up to whole sets, a power of two of them) keeping at
    /// most `max_bytes` of text alive; `usize::MAX` follows `set_front_bytes` (times
    /// [`HELD_BUDGET_FACTOR`]). Nothing is allocated before the first insert.
    pub const fn new(slots: usize, max_bytes: usize) -> Self {
        let n_sets = (slots / HELD_WAYS).next_power_of_two();
        Self { sets: Vec::new(), n_sets, stored: 0, bytes: 0, max_bytes, victim: 0 }
    }

    #[inline]
    fn set(&self, addr: usize) -> usize {
        // Objects are 16-byte aligned and allocated in runs: mix the address so neighbours
        // spread over the sets (Fibonacci hashing, the high bits are the best mixed).
        let mixed = (addr as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> 32) as usize & (self.sets.len() - 1)
    }

    /// The count stored for the object at `addr` under `stamp`.
    #[inline]
    pub fn get(&self, addr: usize, stamp: u64) -> Option<u32> {
        if self.sets.is_empty() {
            return None;
        }
        self.sets[self.set(addr)]
            .0
            .iter()
            .find(|s| s.addr == addr && s.stamp == stamp && s.holder.is_some())
            .map(|s| s.count)
    }

    /// Remember `count` for the object at `addr`, `len` bytes of text, kept alive by
    /// `holder` (made only when the entry is stored). Not stored: texts over the budget, and
    /// stamp 0 (no cache).
    pub fn insert(&mut self, addr: usize, stamp: u64, len: usize, count: u32, holder: impl FnOnce() -> H) {
        let max_bytes = table_budget(self.max_bytes, HELD_BUDGET_FACTOR);
        if len == 0 || len > max_bytes || len > u32::MAX as usize || stamp == 0 {
            return;
        }
        if self.sets.is_empty() {
            self.sets = Self::empty_sets(first_sets(self.n_sets));
        } else if self.sets.len() < self.n_sets && self.stored >= self.sets.len() * HELD_WAYS {
            self.grow();
        }
        let set = self.set(addr);
        // The same object again (under a new stamp), else an empty way, else one of another
        // cache, else each in turn.
        let way = choose_way(
            &self.sets[set].0,
            &[
                &|s: &HeldSlot<H>| s.addr == addr && s.holder.is_some(),
                &|s: &HeldSlot<H>| s.holder.is_none(),
                &|s: &HeldSlot<H>| s.stamp != stamp,
            ],
            &mut self.victim,
        );
        let old = std::mem::replace(&mut self.sets[set].0[way], HeldSlot::EMPTY);
        if old.holder.is_some() {
            self.bytes -= old.len as usize;
        }
        drop(old);
        if self.bytes + len > max_bytes {
            self.clear();
        }
        self.sets[set].0[way] = HeldSlot { addr, stamp, count, len: len as u32, holder: Some(holder()) };
        self.bytes += len;
        self.stored += 1;
    }

    fn empty_sets(n: usize) -> Vec<HeldSet<H>> {
        populated(n, || HeldSet([const { HeldSlot::EMPTY }; HELD_WAYS]))
    }

    /// Every set allocated: the entries move to their sets in the larger table, each still
    /// holding its object (one finding its set full is released).
    fn grow(&mut self) {
        let old = std::mem::replace(&mut self.sets, Self::empty_sets(self.n_sets));
        self.stored = 0;
        for slot in old.into_iter().flat_map(|set| set.0) {
            if slot.holder.is_none() {
                continue;
            }
            let set = self.set(slot.addr);
            match self.sets[set].0.iter().position(|s| s.holder.is_none()) {
                Some(way) => {
                    self.sets[set].0[way] = slot;
                    self.stored += 1;
                }
                None => self.bytes -= slot.len as usize,
            }
        }
    }

    /// Drop every entry and release what they hold.
    pub fn clear(&mut self) {
        for set in &mut self.sets {
            for slot in &mut set.0 {
                *slot = HeldSlot::EMPTY;
            }
        }
        self.bytes = 0;
        self.stored = 0;
    }

    /// Entries stored (any stamp).
    pub fn len(&self) -> usize {
        self.sets.iter().flat_map(|s| s.0.iter()).filter(|s| s.holder.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of text the table keeps alive.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn grows_once_full_keeping_every_entry_and_its_object() {
        // 1,024 slots: 16 sets of 4 at first; each larger set draws from one smaller one
        // (the same low bits), so every entry finds a way in the grown table
        let mut t: HeldTable<Rc<()>> = HeldTable::new(1024, 1 << 20);
        let objects: Vec<Rc<()>> = (0..64).map(|_| Rc::new(())).collect();
        for (i, o) in objects.iter().enumerate() {
            t.insert(0x1000 + 16 * i, 1, 1, i as u32, || Rc::clone(o));
        }
        assert_eq!(t.sets.len(), 16);
        let held: Vec<usize> = (0..64).filter(|&i| Rc::strong_count(&objects[i]) == 2).collect();
        let before = t.len();
        t.insert(0x9000, 1, 1, 99, || Rc::new(()));
        assert_eq!((t.sets.len(), t.len(), t.bytes()), (256, before + 1, before + 1));
        for &i in &held {
            assert_eq!((t.get(0x1000 + 16 * i, 1), Rc::strong_count(&objects[i])), (Some(i as u32), 2));
        }
        assert!(objects.iter().all(|o| Rc::strong_count(o) <= 2));
    }

    #[test]
    fn finds_by_address_and_stamp_only() {
        let mut t: HeldTable<()> = HeldTable::new(64, 1 << 10);
        t.insert(0x1000, 1, 5, 3, || ());
        assert_eq!(t.get(0x1000, 1), Some(3));
        assert_eq!(t.get(0x1000, 2), None, "another cache (or this one after a clear)");
        assert_eq!(t.get(0x1010, 1), None, "another object");
        t.insert(0x1000, 2, 5, 4, || ());
        assert_eq!((t.get(0x1000, 2), t.len(), t.bytes()), (Some(4), 1, 5), "re-stored in place");
    }

    #[test]
    fn holds_what_it_names_and_releases_what_it_replaces() {
        // Rc counts stand in for Python references: every holder the table lets go of is
        // dropped, and a live entry's holder is never dropped.
        let objects: Vec<Rc<()>> = (0..200).map(|_| Rc::new(())).collect();
        let mut t = HeldTable::new(8, 1 << 20);
        for (i, o) in objects.iter().enumerate() {
            t.insert(0x1000 + 16 * i, 1, 10, i as u32, || Rc::clone(o));
        }
        let held = objects.iter().filter(|o| Rc::strong_count(o) == 2).count();
        assert_eq!(held, t.len());
        assert!(t.len() <= 8 && t.bytes() == 10 * t.len());
        for (i, o) in objects.iter().enumerate() {
            let found = t.get(0x1000 + 16 * i, 1);
            assert_eq!(found.is_some(), Rc::strong_count(o) == 2, "entry {i} and its holder");
            assert!(found.is_none_or(|n| n == i as u32));
        }
        t.clear();
        assert!(objects.iter().all(|o| Rc::strong_count(o) == 1) && t.is_empty() && t.bytes() == 0);
    }

    #[test]
    fn keeps_at_most_its_budget_alive() {
        let objects: Vec<Rc<()>> = (0..1000).map(|_| Rc::new(())).collect();
        let mut t = HeldTable::new(1 << 12, 100);
        for (i, o) in objects.iter().enumerate() {
            t.insert(0x10_0000 + 32 * i, 7, 1 + i % 30, 1, || Rc::clone(o));
            assert!(t.bytes() <= 100, "{} bytes after insert {i}", t.bytes());
            let alive: usize =
                objects.iter().enumerate().filter(|(_, o)| Rc::strong_count(o) == 2).map(|(j, _)| 1 + j % 30).sum();
            assert_eq!(alive, t.bytes());
        }
        t.insert(0x99, 7, 101, 1, || Rc::clone(&objects[0]));
        assert_eq!(t.get(0x99, 7), None, "a text over the whole budget is not held");
        let mut off: HeldTable<()> = HeldTable::new(16, 0);
        off.insert(0x10, 1, 1, 1, || ());
        assert!(off.is_empty(), "a budget of 0 holds nothing");
    }
}
