//! The per-thread table of short pieces and their counts, asked before the vocabulary and
//! before any merge.
//!
//! A long-running process meets the same few hundred thousand distinct pieces again and
//! again (identifiers, keywords, indentation, words with their leading space); once a piece
//! is in this table its count costs one probe of one 64-byte line, whatever its length and
//! however many tokens it merges into. Pieces of up to 15 bytes are stored inline, packed
//! into one `u128` with their length ([`super::vocab::pack`]), with the count in the top four
//! bits: no allocation, no pointer, no lock.
//!
//! The table is set-associative, four entries to a set and a set to a cache line. A new
//! entry goes to the front of its set and pushes the oldest out, so a set holds the four
//! pieces that reached it last: bounded memory, no global sweep, no reset that would lose
//! the whole working vocabulary at once.
//!
//! Its size is bounded by the process-wide [`set_entries`] (from
//! `WINDOWFIT_PIECE_CACHE_ENTRIES` or a `Counter`'s `piece_cache_entries`), read when a
//! thread's table is allocated: the table of a thread follows a new bound at its next count,
//! emptied. A table starts at [`FIRST_ENTRIES`] (2 MiB on huge pages, where the system has
//! them) and grows to the bound, its pieces kept, once
//! it has taken in a quarter as many new pieces as it holds: a thread that counts dialog or
//! one project's code keeps a small table, one that meets more grows to the bound. Allocated
//! whole at once, the bound's 8 MiB cost a fresh thread its first pages on nearly every new
//! piece (dialog's first pass 19 against 54 MB/s with a 1 MiB table, and on 16 threads a
//! batch of short texts slowed as threads were added). A table of 2 MiB or more (the bound,
//! once grown to) is laid on huge pages where the system has them ([`HUGE_PAGE`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

use super::vocab::mix;

/// Entries of a set: four `u128`, one 64-byte line.
pub const WAYS: usize = 4;

/// Default entries of each thread's table per vocabulary: 2^19 (8 MiB, allocated on the
/// first count). The source code and dialog corpora of the benchmarks hold some 10^5
/// distinct short pieces per encoding; at a quarter of the default a set evicts a piece
/// still in use only rarely, where the former 2^16-slot table lost most of them on code.
pub const DEFAULT_ENTRIES: usize = 1 << 19;

/// Entries a thread's table starts with (1 MiB), at most the bound; where the system gives
/// huge pages, [`FIRST_ENTRIES_HUGE`] instead.
pub const FIRST_ENTRIES: usize = 1 << 16;
/// Entries a thread's table starts with on huge pages: 2 MiB, one page. A first pass over a
/// few thousand new pieces touches every page of a table of small pages, each twice (a
/// probe's read maps the zero page, the store after the miss copies it): 508 faults for the
/// 1 MiB table in the first pass of the English dialog corpus, one for this one.
const FIRST_ENTRIES_HUGE: usize = HUGE_PAGE / 16;

/// The entries a thread's table starts with (before the bound).
fn first_entries() -> usize {
    if huge_pages() {
        FIRST_ENTRIES_HUGE
    } else {
        FIRST_ENTRIES
    }
}

/// Whether transparent huge pages are on for memory that asks for them (read once).
#[cfg(target_os = "linux")]
fn huge_pages() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
    })
}

#[cfg(not(target_os = "linux"))]
fn huge_pages() -> bool {
    false
}
/// A table grows (to its bound, at once) once it has taken in this share of what it holds
/// (a quarter: its four-way sets still evict next to nothing): a working vocabulary it
/// cannot keep. The corpora of the benchmarks (source code, dialog: at most some 20,000
/// short pieces each) stay under it. Growing at an eighth, source code's table grew in its
/// first pass, and the fresh pages and the copy made that pass 1.2x slower.
const GROW_AFTER: usize = 4;

/// The largest bound accepted: 2^28 entries, 4 GiB per thread and vocabulary.
pub const MAX_ENTRIES: usize = 1 << 28;

/// A count is stored in the top four bits of an entry, which packing leaves zero (the
/// length byte is at most 15, and so is the count of a piece of at most 15 bytes).
const COUNT_SHIFT: u32 = 124;
const KEY_MASK: u128 = !(0xF << COUNT_SHIFT);

static ENTRIES: AtomicUsize = AtomicUsize::new(DEFAULT_ENTRIES);

/// Bytes of piece tables allocated now, over all threads and vocabularies.
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// Tables allocated now (one per thread that counted, per vocabulary).
static TABLES: AtomicUsize = AtomicUsize::new(0);

/// Set the entries of each thread's table from now on (rounded up to whole sets and a power
/// of two; 0 turns the table off). Callers validate: at most [`MAX_ENTRIES`].
pub fn set_entries(entries: usize) {
    ENTRIES.store(entries.min(MAX_ENTRIES), Ordering::Relaxed);
}

/// The bound each thread's table follows.
pub fn entries() -> usize {
    ENTRIES.load(Ordering::Relaxed)
}

/// `(tables, bytes)` of all piece tables allocated now.
pub fn usage() -> (usize, usize) {
    (TABLES.load(Ordering::Relaxed), ALLOCATED.load(Ordering::Relaxed))
}

/// Slots of the hot table, a direct-mapped one in front of the sets of a table of at least
/// [`HOT_MIN_ENTRIES`], once the table has stored [`HOT_GROW_AFTER`] pieces: 512 KiB, within
/// a core's second-level cache. Source code's 10^4-10^5 distinct short pieces spread over
/// megabytes of sets, one cache line each, which the core's caches cannot keep; its 32,768
/// commonest pieces, operators and spaces among them, are nearly all its probes. Sized by
/// measurement (steady source code, cl100k): with 2^11 slots 0.86x of 2^14, with 2^13 0.93x;
/// 2^15 1.06x of 2^14 in front of a table of 2 MiB, where in front of a table grown to 8 MiB
/// 2^14 to 2^16 counted within 5% of each other (benches/RESULTS.md, 2026-11-27).
pub const HOT_ENTRIES: usize = 1 << 15;
/// Slots of a table's first hot table (32 KiB): a thread that counts dialog keeps a small
/// working vocabulary, and a larger hot table's fresh pages cost its first pass more than
/// they save (English dialog 139 against 150 MB/s with 2^15 slots from the start).
pub const HOT_FIRST_ENTRIES: usize = 1 << 11;
/// A small hot table is traded for the large one once its table has stored this many
/// pieces: a working vocabulary the small one cannot keep (source code's is some 20,000
/// short pieces; English dialog's 4,000).
const HOT_GROW_AFTER: usize = 4 * HOT_FIRST_ENTRIES;
const HOT_MIN_ENTRIES: usize = 1 << 15;
/// Slots of the largest hot table (2 MiB), which takes the large one's place, with its
/// pieces, once that has missed [`HOT_LARGE_AFTER`] pieces. Direct-mapped, the large table
/// loses a piece whenever another one takes its slot: steady source code (some 20,000
/// distinct short pieces) missed it on one piece in 23, each then asked of the sets. In the
/// largest such conflicts are rare: steady source code 1.10x-1.15x as fast (cl100k and o200k,
/// benches/RESULTS.md, 2026-11-28). Its 512 fresh pages cost about 0.75 ms in a virtual
/// machine, so a thread of its own makes it while the counting goes on (made in the counting
/// thread, the wait fell on the second pass over source code, 0.78x of the pass before the
/// change). Two ways in the 512 KiB were tried first: which way holds a piece is a branch no
/// predictor learns, and made branch-free, the second load waits on the first; both were
/// slower than one way.
const HOT_LARGE_ENTRIES: usize = 1 << 17;
/// Misses of the large hot table that order the largest: a first pass over 2 MB of source
/// code misses the hot tables some 43,000 times; English dialog never has a large one.
const HOT_LARGE_AFTER: usize = 1 << 14;

/// Bytes of a set: one cache line.
const SET_BYTES: usize = WAYS * 16;

/// Tables of at least a huge page (those grown to their bound) ask for huge pages (Linux;
/// `madvise`, as transparent huge pages are most often configured). A probe lands anywhere in
/// the table: on 4 KiB pages the 8 MiB table spans 2,048 of them, more than a core's first-level
/// TLB holds many times over, and a growing thread faulted each of its pages twice (the probe's
/// read maps the zero page, the store after the miss copies it): 4,096 faults in the first pass
/// over the source code corpus. On 2 MiB pages it is four faults and four TLB entries.
const HUGE_PAGE: usize = 2 << 20;

/// Ask for huge pages for `len` bytes from `at` (both multiples of [`HUGE_PAGE`]), before
/// anything is written there. Advice only: refused (transparent huge pages off, an older
/// kernel), the table keeps its small pages.
///
/// # Safety
/// `at..at + len` lies inside one live allocation of the caller's.
#[cfg(target_os = "linux")]
unsafe fn advise_huge(at: *mut u8, len: usize) {
    // SAFETY: whole pages of the caller's allocation; MADV_HUGEPAGE changes no contents.
    unsafe { libc::madvise(at.cast(), len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
unsafe fn advise_huge(_at: *mut u8, _len: usize) {}

/// Where the thread that makes a largest hot table leaves it.
type LargestSlot = Arc<Mutex<Option<Vec<u128>>>>;

/// One thread's table for one vocabulary.
#[derive(Default)]
pub struct PieceTable {
    /// The entries, set after set from `start` (the first 64-byte boundary, or huge-page
    /// boundary, see [`HUGE_PAGE`]). Allocated zeroed as plain integers, then mapped writable
    /// at once (see `allocate`): the table starts small ([`first_entries`]), so a thread that
    /// counts a little text maps 1-2 MiB, and on huge pages its first probe mapped that much
    /// anyway.
    slots: Vec<u128>,
    start: usize,
    /// Sets - 1, or 0 with no sets (then every lookup misses and nothing is stored).
    mask: usize,
    /// log2 of the sets: the hash bits [`Self::set_of`] takes.
    bits: u32,
    /// The bound the table was allocated for.
    bound: usize,
    /// Pieces stored since the table was (re)allocated at its current size.
    stored: usize,
    /// The most recent piece of each of its slots ([`HOT_FIRST_ENTRIES`], [`HOT_ENTRIES`]
    /// or [`HOT_LARGE_ENTRIES`]), asked before the sets.
    hot: Vec<u128>,
    /// Pieces the hot table missed since it was made (counted until it is at its largest).
    hot_misses: usize,
    /// The largest hot table, while a thread of its own makes it.
    largest: Option<LargestSlot>,
}

impl Drop for PieceTable {
    fn drop(&mut self) {
        self.release();
    }
}

/// An empty hot table of `slots` slots, its pages mapped writable at once: probed before it
/// is written, its pages would each fault twice, the second time with an interrupt to every
/// core the process's other threads run on (see [`crate::memory::populated`]). A first pass
/// over source code on two fresh threads counted 221 MB/s with the hot table of 2^15 slots
/// mapped page by page, 395 with it mapped at once, 430 with the sets too
/// (`benches/RESULTS.md`, 2026-11-27).
fn hot_table(slots: usize) -> Vec<u128> {
    crate::memory::populated(slots, || 0)
}

/// The slot of `key` in a hot table of `slots` slots: the hash's top bits, as many as the
/// largest hot table takes (a smaller one keeps the lowest of them); with no hot table,
/// past its end.
#[inline(always)]
fn hot_slot(key: u128, slots: usize) -> usize {
    (mix(key) >> (64 - HOT_LARGE_ENTRIES.trailing_zeros())) as usize & slots.wrapping_sub(1)
}

impl PieceTable {
    /// Make the table follow the current bound: allocated (zeroed, so every entry is empty:
    /// no piece packs to 0) on the first count, reallocated empty after a change.
    #[inline(always)]
    pub fn ready(&mut self) {
        let bound = entries();
        if bound != self.bound {
            self.resize(bound);
        }
    }

    #[cold]
    fn resize(&mut self, bound: usize) {
        self.release();
        self.bound = bound;
        self.allocate(bound.min(first_entries()));
    }

    /// Sets of a table of `entries` entries: whole sets, a power of two (0 for 0).
    fn sets_for(entries: usize) -> usize {
        if entries == 0 {
            0
        } else {
            entries.div_ceil(WAYS).next_power_of_two()
        }
    }

    /// The table at its bound, holding the pieces of this one (each set's newest first);
    /// left as it is should the allocation fail. One step: each growth costs a fresh
    /// thread's pages and a copy, and in a batch all workers grow at about the same time.
    #[cold]
    fn grow(&mut self) {
        let sets = Self::sets_for(self.bound);
        if sets <= self.mask + 1 || self.slots.is_empty() {
            self.stored = 0; // at the bound: it only evicts from now on
            return;
        }
        let old = std::mem::take(self);
        let bound = old.bound;
        self.bound = bound;
        self.allocate(sets * WAYS);
        if self.slots.is_empty() {
            *self = old; // no memory for the larger table: keep this one
            self.stored = 0;
            return;
        }
        let live = &old.slots[old.start..old.start + (old.mask + 1) * WAYS];
        for set in live.chunks_exact(WAYS) {
            // oldest first, so each new set keeps the newest of the pieces it receives
            for &e in set.iter().rev().filter(|&&e| e != 0) {
                self.insert(e & KEY_MASK, (e >> COUNT_SHIFT) as usize);
            }
        }
        self.stored = 0;
    }

    /// The large hot table in place of the small one, empty.
    #[cold]
    fn grow_hot(&mut self) {
        self.hot = hot_table(HOT_ENTRIES);
        self.hot_misses = 0;
        ALLOCATED.fetch_add((HOT_ENTRIES - HOT_FIRST_ENTRIES) * 16, Ordering::Relaxed);
    }

    /// Have the largest hot table made on a thread of its own: its fresh pages cost about a
    /// millisecond in a virtual machine, which the counting thread would wait for. Where no
    /// thread can be started, made here.
    #[cold]
    fn order_largest_hot(&mut self) {
        let slot: LargestSlot = Arc::default();
        let filled = Arc::clone(&slot);
        let made = std::thread::Builder::new().name("windowfit-hot-table".into()).spawn(move || {
            let table = hot_table(HOT_LARGE_ENTRIES);
            if let Ok(mut held) = filled.lock() {
                *held = Some(table);
            }
        });
        match made {
            Ok(_) => self.largest = Some(slot),
            Err(_) => self.take_largest_hot(hot_table(HOT_LARGE_ENTRIES)),
        }
    }

    /// The largest hot table, once made, in place of the large one. Only ever `try_lock`ed
    /// here: in a child forked while the maker held the lock, the table never comes and the
    /// large one stays, where waiting for the lock would hang.
    #[cold]
    fn poll_largest_hot(&mut self) {
        let Some(slot) = self.largest.clone() else { return };
        match slot.try_lock() {
            Ok(mut held) => {
                if let Some(table) = held.take() {
                    self.take_largest_hot(table);
                }
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Poisoned(_)) => self.largest = None, // the maker failed: keep this one
        };
    }

    /// `table` (empty, [`HOT_LARGE_ENTRIES`] slots) in place of the large hot table, holding
    /// its pieces (a piece keeps its slot's low bits, so no two of them meet in one slot).
    fn take_largest_hot(&mut self, mut table: Vec<u128>) {
        self.largest = None;
        let old = std::mem::take(&mut self.hot);
        for e in old.into_iter().filter(|&e| e != 0) {
            let at = hot_slot(e & KEY_MASK, HOT_LARGE_ENTRIES);
            table[at] = e;
        }
        self.hot = table;
        ALLOCATED.fetch_add((HOT_LARGE_ENTRIES - HOT_ENTRIES) * 16, Ordering::Relaxed);
    }

    /// Allocate an empty table of `entries` entries (rounded to whole sets, a power of two).
    fn allocate(&mut self, entries: usize) {
        let n_sets = Self::sets_for(entries);
        if n_sets == 0 {
            return;
        }
        // A failed allocation leaves the table off rather than aborting the process; `vec!`
        // of zeros asks for zeroed memory, which a larger allocation gets as untouched pages.
        // A table of huge pages gets a huge page of slack to start on one (untouched: it
        // costs address space, not memory).
        let bytes = n_sets * SET_BYTES;
        let align = if huge_pages() && bytes >= HUGE_PAGE { HUGE_PAGE } else { SET_BYTES };
        let len = n_sets * WAYS + align / 16 - 1;
        let Ok(layout) = std::alloc::Layout::array::<u128>(len) else { return };
        // SAFETY: a non-zero size (n_sets >= 1); checked for null before use.
        let probe = unsafe { std::alloc::alloc_zeroed(layout) };
        if probe.is_null() {
            return;
        }
        // SAFETY: allocated above with the layout of `len` u128s, all zero (valid u128s).
        let slots = unsafe { Vec::from_raw_parts(probe.cast::<u128>(), len, len) };
        // `alloc_zeroed` aligns to 16 bytes, so the offset to `align` is whole entries.
        self.start = (align - slots.as_ptr() as usize % align) % align / 16;
        if align == HUGE_PAGE {
            // SAFETY: the sets, inside the allocation, start on a huge page and span whole ones.
            unsafe { advise_huge(probe.add(self.start * 16), bytes) };
        }
        // Probed before they are written, the sets' pages would fault twice, as the hot
        // table's (see `hot_table`); on huge pages, the read maps the shared huge zero page.
        // SAFETY (of the pointer arithmetic): the sets lie inside the allocation.
        crate::memory::populate(unsafe { probe.add(self.start * 16) }, bytes);
        self.slots = slots;
        if n_sets * WAYS >= HOT_MIN_ENTRIES && self.hot.is_empty() {
            let grown = n_sets * WAYS > first_entries();
            self.hot = hot_table(if grown { HOT_ENTRIES } else { HOT_FIRST_ENTRIES });
            self.hot_misses = 0;
        }
        self.mask = n_sets - 1;
        self.bits = n_sets.trailing_zeros();
        ALLOCATED.fetch_add(self.bytes(), Ordering::Relaxed);
        TABLES.fetch_add(1, Ordering::Relaxed);
    }

    fn release(&mut self) {
        if !self.slots.is_empty() {
            ALLOCATED.fetch_sub(self.bytes(), Ordering::Relaxed);
            TABLES.fetch_sub(1, Ordering::Relaxed);
            self.slots = Vec::new();
            self.hot = Vec::new();
            self.hot_misses = 0;
            self.largest = None;
            self.start = 0;
            self.mask = 0;
            self.bits = 0;
            self.stored = 0;
        }
    }

    /// Bytes this table holds: its sets and its hot table (the alignment slack is not
    /// counted).
    pub fn bytes(&self) -> usize {
        self.set_bytes() + self.hot.len() * 16
    }

    /// Bytes of its sets.
    fn set_bytes(&self) -> usize {
        if self.slots.is_empty() {
            0
        } else {
            (self.mask + 1) * SET_BYTES
        }
    }

    /// Where the set of `key` starts in `slots`: the hash's top bits pick one of `mask + 1`
    /// sets (a power of two). The top bits of a product depend on every bit of the key; bits
    /// 32 and up, taken before, ignored the key's bits 48-63 (a short piece's seventh and
    /// eighth bytes), so pieces that differed only there shared a set.
    #[inline(always)]
    fn set_of(&self, key: u128) -> usize {
        self.start + ((mix(key).rotate_left(self.bits) as usize & self.mask) * WAYS)
    }

    /// Ask memory for the set of `key` ahead of its [`Self::get`]: a probe of a table this
    /// size misses the core's caches more often than not, and misses asked for together
    /// overlap where misses met one after another would each be waited for.
    #[inline(always)]
    pub fn prefetch(&self, key: u128) {
        if let Some(entry) = self.slots.get(self.set_of(key)) {
            crate::memory::prefetch(entry);
        }
    }

    /// The slot of `key` in the hot table.
    #[inline(always)]
    fn hot_of(&self, key: u128) -> usize {
        hot_slot(key, self.hot.len())
    }

    /// The count of `key` if the hot table holds it.
    #[inline(always)]
    pub fn get_hot(&self, key: u128) -> Option<usize> {
        let e = *self.hot.get(self.hot_of(key))?;
        (e & KEY_MASK == key).then_some((e >> COUNT_SHIFT) as usize)
    }

    /// Keep `key`'s count in the hot table.
    #[inline(always)]
    pub fn keep_hot(&mut self, key: u128, count: usize) {
        if self.hot.len() == HOT_ENTRIES {
            self.hot_misses += 1;
            if self.hot_misses == HOT_LARGE_AFTER {
                self.order_largest_hot();
            } else if self.largest.is_some() {
                self.poll_largest_hot();
            }
        }
        let at = self.hot_of(key);
        if let Some(e) = self.hot.get_mut(at) {
            *e = key | ((count as u128) << COUNT_SHIFT);
        }
    }

    /// The count stored for the packed piece `key`.
    #[inline(always)]
    pub fn get(&self, key: u128) -> Option<usize> {
        let at = self.set_of(key);
        let set = self.slots.get(at..at + WAYS)?;
        set.iter().find(|&&e| e & KEY_MASK == key).map(|&e| (e >> COUNT_SHIFT) as usize)
    }

    /// Store `count` (at most 15) for `key`, at the front of its set; the set's oldest entry
    /// is dropped.
    #[inline(always)]
    pub fn insert(&mut self, key: u128, count: usize) {
        debug_assert!(count <= 15 && key >> COUNT_SHIFT == 0 && key != 0);
        if self.stored >= (self.mask + 1) * WAYS / GROW_AFTER && !self.slots.is_empty() {
            self.grow(); // before the store, so growing evicts nothing
        }
        if self.stored == HOT_GROW_AFTER && self.hot.len() == HOT_FIRST_ENTRIES {
            self.grow_hot();
        }
        let at = self.set_of(key);
        if let Some(set) = self.slots.get_mut(at..at + WAYS) {
            set.copy_within(0..WAYS - 1, 1);
            set[0] = key | ((count as u128) << COUNT_SHIFT);
            self.stored += 1;
        }
    }

    /// Entries in use (a scan of the table: for tests and statistics only).
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|&&e| e != 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::vocab::pack;
    use super::*;

    /// The bound is process-wide: tests that change it hold this lock.
    pub(crate) static BOUND: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn stores_and_finds_counts_within_its_bound() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(64);
        let mut t = PieceTable::default();
        t.ready();
        assert_eq!(t.bytes(), 64 * 16);
        assert_eq!(t.slots[t.start..].as_ptr() as usize % SET_BYTES, 0, "sets on cache lines");
        let keys: Vec<u128> = (0..1000u32).map(|i| pack(format!("p{i}").as_bytes())).collect();
        for (i, &k) in keys.iter().enumerate() {
            t.insert(k, i % 16);
            assert_eq!(t.get(k), Some(i % 16), "just stored");
        }
        // Bounded: at most the bound is kept, and whatever is found is what was stored.
        assert!(t.len() <= 64);
        let found = keys.iter().enumerate().filter(|(i, &k)| t.get(k).inspect(|&n| assert_eq!(n, i % 16)).is_some());
        assert_eq!(found.count(), t.len());
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn zero_keeps_nothing_and_a_new_bound_reallocates_empty() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(0);
        let mut t = PieceTable::default();
        t.ready();
        let k = pack(b"hello");
        t.insert(k, 2);
        assert_eq!((t.get(k), t.bytes()), (None, 0));
        set_entries(5); // rounded up to whole sets, a power of two
        t.ready();
        assert_eq!(t.bytes(), 2 * 64);
        t.insert(k, 2);
        assert_eq!(t.get(k), Some(2));
        set_entries(16);
        t.ready();
        assert_eq!((t.get(k), t.bytes()), (None, 256));
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn a_large_table_keeps_a_hot_table_in_front_a_small_one_none() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(HOT_MIN_ENTRIES / 2);
        let mut t = PieceTable::default();
        t.ready();
        let k = pack(b"hello");
        t.keep_hot(k, 2);
        assert_eq!((t.get_hot(k), t.bytes()), (None, HOT_MIN_ENTRIES / 2 * 16), "none in front of a small table");
        set_entries(HOT_MIN_ENTRIES);
        t.ready();
        assert_eq!(t.bytes(), HOT_MIN_ENTRIES * 16 + HOT_FIRST_ENTRIES * 16, "its memory is counted");
        assert!(usage().1 >= t.bytes());
        // Each slot keeps the last piece given it, and only that piece is found there.
        let keys: Vec<u128> = (0..HOT_FIRST_ENTRIES as u32 * 4).map(|i| pack(format!("h{i}").as_bytes())).collect();
        for (i, &k) in keys.iter().enumerate() {
            t.keep_hot(k, i % 16);
            assert_eq!(t.get_hot(k), Some(i % 16), "just kept");
        }
        let found: Vec<usize> =
            keys.iter().enumerate().filter(|(_, &k)| t.get_hot(k).is_some()).map(|(i, _)| i).collect();
        assert!(found.len() <= HOT_FIRST_ENTRIES && found.len() > HOT_FIRST_ENTRIES / 2, "{}", found.len());
        assert!(found.iter().all(|&i| t.get_hot(keys[i]) == Some(i % 16)));
        // Off with the table.
        set_entries(0);
        t.ready();
        assert_eq!((t.get_hot(keys[found[0]]), t.bytes()), (None, 0));
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn a_small_hot_table_gives_way_to_the_large_one_once_many_pieces_are_stored() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(DEFAULT_ENTRIES);
        let mut t = PieceTable::default();
        t.ready();
        let k = pack(b"kept");
        t.keep_hot(k, 3);
        assert_eq!((t.hot.len(), t.get_hot(k)), (HOT_FIRST_ENTRIES, Some(3)));
        for i in 0..HOT_GROW_AFTER as u32 {
            t.insert(pack(format!("g{i}").as_bytes()), 1);
        }
        assert_eq!(t.hot.len(), HOT_FIRST_ENTRIES, "not before");
        t.insert(pack(b"one more"), 2);
        assert_eq!(t.hot.len(), HOT_ENTRIES);
        assert_eq!(t.bytes(), t.set_bytes() + HOT_ENTRIES * 16, "its memory is counted");
        assert_eq!(t.get_hot(k), None, "it starts empty");
        t.keep_hot(k, 3);
        assert_eq!(t.get_hot(k), Some(3));
        assert_eq!(t.get(pack(b"one more")), Some(2), "the sets keep their pieces");
        set_entries(DEFAULT_ENTRIES);
    }

    /// A table whose large hot table exists, and keys for it.
    fn with_large_hot_table() -> PieceTable {
        let mut t = PieceTable::default();
        t.ready();
        for i in 0..=HOT_GROW_AFTER as u32 {
            t.insert(pack(format!("g{i}").as_bytes()), 1);
        }
        assert_eq!(t.hot.len(), HOT_ENTRIES);
        t
    }

    /// Poll `t` until its largest hot table is in place (made on a thread of its own).
    fn await_largest(t: &mut PieceTable) {
        let started = std::time::Instant::now();
        while t.hot.len() != HOT_LARGE_ENTRIES {
            assert!(started.elapsed().as_secs() < 30, "the largest hot table never came");
            std::thread::sleep(std::time::Duration::from_millis(1));
            t.poll_largest_hot();
        }
    }

    #[test]
    fn the_large_hot_table_gives_way_to_the_largest_once_it_misses_often_keeping_its_pieces() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(DEFAULT_ENTRIES);
        let mut t = with_large_hot_table();
        // misses of the large hot table, each piece then kept there (as `count_packed` does)
        let keys: Vec<u128> = (0..HOT_LARGE_AFTER as u32).map(|i| pack(format!("h{i}").as_bytes())).collect();
        let before = t.bytes();
        for (i, &k) in keys[..HOT_LARGE_AFTER - 1].iter().enumerate() {
            t.keep_hot(k, i % 15 + 1);
        }
        assert!(t.largest.is_none() && t.hot.len() == HOT_ENTRIES, "not before");
        let held: Vec<usize> = (0..HOT_LARGE_AFTER - 1).filter(|&i| t.get_hot(keys[i]).is_some()).collect();
        assert!(held.len() > HOT_LARGE_AFTER / 2, "{} held", held.len());
        let last = keys[HOT_LARGE_AFTER - 1];
        t.keep_hot(last, 4);
        await_largest(&mut t);
        assert!(t.largest.is_none());
        assert_eq!(t.bytes() - before, (HOT_LARGE_ENTRIES - HOT_ENTRIES) * 16, "its memory is counted");
        assert!(usage().1 >= t.bytes());
        assert!(held.iter().all(|&i| t.get_hot(keys[i]) == Some(i % 15 + 1)), "every piece it held is kept");
        assert_eq!(t.get_hot(last), Some(4));
        // the largest it stays: more misses change nothing but the slots they take
        for (i, &k) in keys.iter().enumerate() {
            t.keep_hot(k, i % 15 + 1);
        }
        assert!(t.largest.is_none() && t.hot.len() == HOT_LARGE_ENTRIES);
        let found = keys.iter().enumerate().filter(|(i, &k)| t.get_hot(k) == Some(i % 15 + 1)).count();
        assert!(found * 10 > keys.len() * 8, "{found} of {} in 2^17 slots", keys.len());
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn a_table_reallocated_while_its_largest_hot_table_is_made_starts_anew() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(DEFAULT_ENTRIES);
        let mut t = with_large_hot_table();
        for i in 0..HOT_LARGE_AFTER as u32 {
            t.keep_hot(pack(format!("h{i}").as_bytes()), 1);
        }
        set_entries(DEFAULT_ENTRIES / 2);
        t.ready(); // the bound changed: emptied, the table being made dropped
        assert!(t.largest.is_none() && t.hot.len() == HOT_FIRST_ENTRIES && t.hot_misses == 0);
        std::thread::sleep(std::time::Duration::from_millis(20)); // the maker finds no one waiting
        t.poll_largest_hot();
        assert_eq!(t.hot.len(), HOT_FIRST_ENTRIES);
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn a_table_starts_small_and_grows_to_its_bound_keeping_its_pieces() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(FIRST_ENTRIES * 8);
        let mut t = PieceTable::default();
        t.ready();
        let first = first_entries();
        assert_eq!(t.set_bytes(), first * 16, "starts at its first size");
        assert_eq!(t.bytes() - t.set_bytes(), HOT_FIRST_ENTRIES * 16, "with a small hot table");
        // a few pieces looked up again and again: the table stays small
        let few: Vec<u128> = (0..1000u32).map(|i| pack(format!("w{i}").as_bytes())).collect();
        for _ in 0..100 {
            for &k in &few {
                if t.get(k).is_none() {
                    t.insert(k, 3);
                }
            }
        }
        assert_eq!(t.set_bytes(), first * 16);
        // new pieces past an eighth of what it holds: it grows to the bound, keeping them all
        let many: Vec<u128> = (0..FIRST_ENTRIES as u32 * 20).map(|i| pack(format!("m{i}").as_bytes())).collect();
        let mut grown = false;
        for (n, &k) in many.iter().enumerate() {
            let held: Vec<u128> = if t.stored == first / GROW_AFTER && !grown {
                many[..n].iter().chain(&few).copied().filter(|&k| t.get(k).is_some()).collect()
            } else {
                Vec::new()
            };
            t.insert(k, n % 15 + 1);
            if !held.is_empty() {
                grown = true;
                assert_eq!(t.set_bytes(), FIRST_ENTRIES * 8 * 16, "at the bound at once");
                let sets_at = t.slots[t.start..].as_ptr() as usize;
                let align = if huge_pages() { HUGE_PAGE } else { SET_BYTES };
                assert_eq!(sets_at % align, 0, "8 MiB of sets start on a huge page");
                assert!(t.start + t.set_bytes() / 16 <= t.slots.len());
                assert!(held.iter().all(|&k| t.get(k).is_some()), "every piece it held is kept");
                assert_eq!(t.get(k), Some(n % 15 + 1));
            }
        }
        assert!(grown);
        assert_eq!(t.set_bytes(), FIRST_ENTRIES * 8 * 16, "never past the bound");
        assert_eq!(t.bytes() - t.set_bytes(), HOT_ENTRIES * 16, "and its large hot table");
        // whatever it finds is what was stored last
        for (n, &k) in many.iter().enumerate().skip(many.len() - 1000) {
            assert!(t.get(k).is_none_or(|c| c == n % 15 + 1));
        }
        set_entries(DEFAULT_ENTRIES);
    }

    #[test]
    fn a_set_keeps_the_last_four_pieces_that_reached_it() {
        let _guard = BOUND.lock().unwrap_or_else(|p| p.into_inner());
        set_entries(WAYS); // one set: every piece shares it
        let mut t = PieceTable::default();
        t.ready();
        let keys: Vec<u128> = ["a", "bb", "ccc", "dddd", "eeeee"].iter().map(|s| pack(s.as_bytes())).collect();
        for (i, &k) in keys.iter().enumerate() {
            t.insert(k, i + 1);
        }
        assert_eq!(t.get(keys[0]), None);
        for (i, &k) in keys.iter().enumerate().skip(1) {
            assert_eq!(t.get(k), Some(i + 1));
        }
        set_entries(DEFAULT_ENTRIES);
    }
}
