//! The per-thread ids of pieces that are more than one token, asked by `encode` before any
//! merge.
//!
//! Counting keeps counts per piece ([`super::pieces`]); `encode` needs the ids themselves,
//! and without this cache merged every such piece again on every pass (English dialog 55,
//! source code 64 MB/s in steady state, o200k, where gigatoken's `encode` gave a NumPy array
//! of them at 405; benches/RESULTS.md, 2026-11-27).
//!
//! The ids of all pieces kept lie end to end in one vector; each piece maps to its span.
//! Short pieces are keyed packed ([`super::vocab::pack`]), longer ones by their bytes. In
//! front of both the vocabulary and the spans, a direct-mapped hot table of [`HOT_SLOTS`]
//! short pieces (2 MiB) answers a piece met recently, of one token or more, with one probe
//! (up to three ids held in its slot): the vocabulary's table is megabytes, and a probe of
//! it missed the core's caches for most pieces of code. Pieces of one token are kept in the
//! hot table only. Once the cache holds its bound of pieces, or a piece more would take it
//! past [`BYTES`], it is emptied, all but the hot slots that hold their ids themselves: the
//! benchmark corpora hold at most 21,322 pieces of more than one token each (multilingual
//! dialog, cl100k), under the default bound of [`ENTRIES`]. The bytes all such caches hold
//! are counted ([`usage`], `cache_info()["id_cache_bytes"]`): bounded by pieces alone, a
//! thread's cache of 256-byte pieces could reach some 30 MB that nothing reported.

use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashMap;
use rustc_hash::FxBuildHasher;

use super::long_pieces::{growth, ByBytes};
use crate::memory::Reported;

/// Pieces kept per thread and vocabulary by default: 2^16, some 4.5 MiB at the bound (the
/// maps' slots and about four ids a piece).
pub const ENTRIES: usize = 1 << 16;

/// Bytes a cache holds at most: its hot table, maps, long keys and ids.
pub const BYTES: usize = 8 << 20;

/// Bytes all caches hold now, over all threads and vocabularies, give or take
/// [`Reported::STEP`] a cache.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Bytes all caches of ids hold now, within [`Reported::STEP`] a cache.
pub fn usage() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Slots of the hot table: 2^16 of 32 bytes (2 MiB). Source code's and the agent runs'
/// pieces met one another in the slots of a table of 2^14 (512 KiB, within a core's
/// second-level cache), each miss then asked of the vocabulary and the spans: with 2^16 their
/// steady `encode` is 1.15x and 1.09x as fast (o200k); first passes are the same, English
/// dialog's within 4% (benches/RESULTS.md, 2026-12-07). Grown from 2^14 once 2^14 pieces had
/// missed, source code's first pass waited on the new pages (0.96x).
pub const HOT_SLOTS: usize = 1 << 16;

/// Where a piece's ids lie in [`IdCache::ids`].
#[derive(Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}

/// Ids a hot slot holds beside its key; a piece of more tokens keeps its span there.
const INLINE: usize = 3;

/// A hot table's slot: a packed short piece and its ids, up to [`INLINE`] of them in the
/// slot itself (nearly every piece: one load answers it, where a span into the ids was a
/// second load, and a copy call for each piece of two tokens), more as the start of their
/// span. An empty slot's key is 0, which no piece packs to (the length is packed with the
/// bytes).
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Hot {
    key: u128,
    ids: [u32; INLINE],
    len: u32,
}

impl Hot {
    /// The slot of `key` whose ids are `ids`, kept at `span` in the cache's ids.
    fn of(key: u128, span: Span, ids: &[u32]) -> Self {
        let mut inline = [span.start, 0, 0];
        if ids.len() <= INLINE {
            inline[..ids.len()].copy_from_slice(ids);
        }
        Hot { key, ids: inline, len: ids.len() as u32 }
    }
}

/// One thread's ids of pieces for one vocabulary.
pub struct IdCache {
    hot: Vec<Hot>,
    short: HashMap<u128, Span, FxBuildHasher>,
    long: ByBytes<Span>,
    ids: Vec<u32>,
    /// This cache's bytes in [`HELD`].
    reported: Reported,
}

impl Default for IdCache {
    fn default() -> Self {
        IdCache {
            hot: Vec::new(),
            short: HashMap::default(),
            long: ByBytes::default(),
            ids: Vec::new(),
            reported: Reported::to(&HELD),
        }
    }
}

/// A piece as the cache keys it: packed, or by its bytes.
#[derive(Clone, Copy)]
enum Key<'p> {
    Short(u128),
    Long(&'p [u8]),
}

/// The hot slot of a packed piece: a multiplicative hash of both halves, top bits.
#[inline(always)]
fn hot_of(key: u128) -> usize {
    let x = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HOT_SLOTS.trailing_zeros())) as usize
}

impl IdCache {
    /// Appends to `out` the ids of the short piece packed as `key` if the hot table holds
    /// them; false if it does not.
    #[inline(always)]
    pub fn extend_hot(&self, key: u128, out: &mut Vec<u32>) -> bool {
        let Some(slot) = self.hot.get(hot_of(key)) else { return false };
        if slot.key != key {
            return false;
        }
        let n = slot.len as usize;
        if n <= INLINE {
            out.reserve(INLINE);
            // SAFETY: room for INLINE more ids was reserved; the first `n` written are the
            // piece's ids, and only they are taken into the length.
            unsafe {
                out.as_mut_ptr().add(out.len()).cast::<[u32; INLINE]>().write_unaligned(slot.ids);
                out.set_len(out.len() + n);
            }
        } else {
            out.extend_from_slice(self.ids_of(Span { start: slot.ids[0], len: slot.len }));
        }
        true
    }

    /// Keeps in the hot table that the short piece packed as `key` is the one token `id`
    /// (when `bound` allows any cache).
    #[inline(always)]
    pub fn keep_token(&mut self, key: u128, id: u32, bound: usize) {
        if bound > 0 {
            self.keep_hot(Hot { key, ids: [id, 0, 0], len: 1 });
        }
    }

    /// `slot` in the hot table, allocated on first use: a thread that never encodes holds
    /// none.
    fn keep_hot(&mut self, slot: Hot) {
        if self.hot.is_empty() {
            self.hot = crate::memory::populated(HOT_SLOTS, Hot::default);
            self.reported.update(self.bytes());
        }
        self.hot[hot_of(slot.key)] = slot;
    }

    /// Appends to `out` the ids of the short piece packed as `key`: those kept, else those
    /// `merge` appends, then kept (when `bound` allows any).
    #[inline]
    pub fn extend_short(&mut self, key: u128, bound: usize, out: &mut Vec<u32>, merge: impl FnOnce(&mut Vec<u32>)) {
        let span = match self.short.get(&key) {
            Some(&span) => {
                out.extend_from_slice(self.ids_of(span));
                span
            }
            None => match self.merged(Key::Short(key), bound, out, merge) {
                Some(span) => span,
                None => return,
            },
        };
        let slot = Hot::of(key, span, self.ids_of(span));
        self.keep_hot(slot);
    }

    /// As [`Self::extend_short`], for a piece longer than a packed key.
    pub fn extend_long(&mut self, piece: &[u8], bound: usize, out: &mut Vec<u32>, merge: impl FnOnce(&mut Vec<u32>)) {
        match self.long.get(piece) {
            Some(&span) => out.extend_from_slice(self.ids_of(span)),
            None => _ = self.merged(Key::Long(piece), bound, out, merge),
        }
    }

    /// The span of the ids `merge` appends to `out`, kept for `key` ([`Self::keep`]).
    fn merged(
        &mut self,
        key: Key,
        bound: usize,
        out: &mut Vec<u32>,
        merge: impl FnOnce(&mut Vec<u32>),
    ) -> Option<Span> {
        let from = out.len();
        merge(out);
        self.keep(key, bound, &out[from..])
    }

    /// Pieces kept.
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn ids_of(&self, span: Span) -> &[u32] {
        &self.ids[span.start as usize..(span.start + span.len) as usize]
    }

    /// Bytes this cache holds: its hot table, its maps (the long keys with them) and its ids.
    fn bytes(&self) -> usize {
        self.hot.capacity() * std::mem::size_of::<Hot>()
            + self.short.allocation_size()
            + self.long.bytes()
            + self.ids.capacity() * std::mem::size_of::<u32>()
    }

    /// Bytes this cache would hold with `ids` more kept for `key`: its key, and what grows to
    /// hold them (a full map or vector reallocates at twice its size).
    fn bytes_with(&self, key: Key, ids: usize) -> usize {
        let key_cost = match key {
            Key::Short(_) => growth(&self.short),
            Key::Long(piece) => self.long.added(piece.len()),
        };
        let ids_growth = if self.ids.len() + ids > self.ids.capacity() {
            (self.ids.capacity().max(ids) * std::mem::size_of::<u32>()).max(64)
        } else {
            0
        };
        self.bytes() + key_cost + ids_growth
    }

    /// `ids` kept for `key`, the cache emptied first when it holds `bound` pieces or they
    /// would take it past [`BYTES`]; `None` when the bound is 0.
    fn keep(&mut self, key: Key, bound: usize, ids: &[u32]) -> Option<Span> {
        if bound == 0 {
            return None;
        }
        if self.len() >= bound || self.bytes_with(key, ids.len()) > BYTES {
            self.short.clear();
            self.long.clear();
            self.ids.clear();
            // the hot table's spans point into the ids just dropped (its slots that hold
            // their ids stay)
            self.hot.iter_mut().filter(|slot| slot.len as usize > INLINE).for_each(|slot| *slot = Hot::default());
            self.reported.publish(self.bytes());
        }
        let span = Span { start: self.ids.len() as u32, len: ids.len() as u32 };
        self.ids.extend_from_slice(ids);
        match key {
            Key::Short(k) => _ = self.short.insert(k, span),
            Key::Long(piece) => self.long.insert(piece, span),
        }
        self.reported.update(self.bytes());
        Some(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_a_piece_once_and_answers_from_its_span() {
        let mut cache = IdCache::default();
        let mut merges = 0;
        let mut out = vec![7];
        for _ in 0..3 {
            cache.extend_short(1, 10, &mut out, |o| {
                merges += 1;
                o.extend([1, 2, 3]);
            });
            cache.extend_long(b"a long piece of text", 10, &mut out, |o| {
                merges += 1;
                o.extend([4, 5]);
            });
        }
        assert_eq!(merges, 2);
        assert_eq!(out, [7, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5]);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_hot_table_answers_tokens_and_spans_it_was_given() {
        let mut cache = IdCache::default();
        let mut out = Vec::new();
        assert!(!cache.extend_hot(5, &mut out));
        cache.keep_token(5, 99, 10);
        cache.extend_short(6, 10, &mut out, |o| o.extend([1, 2]));
        assert!(cache.extend_hot(5, &mut out) && cache.extend_hot(6, &mut out));
        assert!(!cache.extend_hot(7, &mut out));
        assert_eq!(out, [1, 2, 99, 1, 2]);
        // A piece of more ids than a slot holds is answered from its span.
        cache.extend_short(8, 10, &mut out, |o| o.extend([7, 6, 5, 4]));
        out.clear();
        assert!(cache.extend_hot(8, &mut out) && cache.extend_hot(6, &mut out));
        assert_eq!(out, [7, 6, 5, 4, 1, 2]);
        // Emptied at its bound: the hot spans go with the ids; the slots holding their ids stay.
        for key in 100..111u128 {
            cache.extend_short(key, 10, &mut out, |o| o.push(0));
        }
        assert!(!cache.extend_hot(8, &mut out));
        out.clear();
        assert!(cache.extend_hot(6, &mut out) && cache.extend_hot(5, &mut out));
        assert_eq!(out, [1, 2, 99]);
        // Nothing kept with the caches off.
        let mut off = IdCache::default();
        off.keep_token(5, 99, 0);
        off.extend_short(6, 0, &mut out, |o| o.push(1));
        assert!(!off.extend_hot(5, &mut out) && !off.extend_hot(6, &mut out));
        assert!(off.hot.is_empty());
    }

    #[test]
    fn empties_at_its_bound_and_keeps_nothing_at_zero() {
        let mut cache = IdCache::default();
        let mut out = Vec::new();
        for key in 0..5u128 {
            cache.extend_short(key, 3, &mut out, |o| o.extend([key as u32, key as u32]));
        }
        // 3 kept, then emptied for the fourth: two left, with their own ids
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.ids, [3, 3, 4, 4]);
        let mut again = Vec::new();
        cache.extend_short(4, 3, &mut again, |_| panic!("kept"));
        assert_eq!(again, [4, 4]);

        let mut off = IdCache::default();
        let mut merges = 0;
        for _ in 0..2 {
            off.extend_short(9, 0, &mut out, |o| {
                merges += 1;
                o.push(1)
            });
        }
        assert_eq!((merges, off.len()), (2, 0));
    }

    #[test]
    fn long_pieces_are_bounded_in_bytes_and_reported() {
        // 2^16 pieces of 256 bytes and 64 ids each would be some 30 MB under the bound in
        // pieces alone.
        let mut cache = IdCache::default();
        let (mut most, mut emptied, mut last_len) = (0, 0, 0);
        for i in 0..60_000u32 {
            let mut piece = format!("{i} ").into_bytes();
            piece.resize(256, b'y');
            let mut out = Vec::new();
            cache.extend_long(&piece, ENTRIES, &mut out, |o| o.extend(i..i + 64));
            assert_eq!(out, (i..i + 64).collect::<Vec<_>>());
            assert!(cache.bytes() <= BYTES, "{} bytes at {i}", cache.bytes());
            emptied += usize::from(cache.len() < last_len);
            last_len = cache.len();
            most = most.max(cache.bytes());
        }
        // emptied only when full: some 15,000 such pieces a filling, what a clear leaves
        // allocated (the maps' slots, the ids' vector) refilled before it grows again
        assert!((2..=8).contains(&emptied) && most > BYTES / 2, "{emptied} {most}");
        // the last piece is kept with its own ids
        let mut piece = b"59999 ".to_vec();
        piece.resize(256, b'y');
        let mut out = Vec::new();
        cache.extend_long(&piece, ENTRIES, &mut out, |_| panic!("kept"));
        assert_eq!(out, (59_999..60_063).collect::<Vec<_>>());
        // counted in the process's total within a step, given back when dropped
        let published = cache.reported.published();
        assert!(published.abs_diff(cache.bytes()) < Reported::STEP && usage() >= published);
    }

    #[test]
    fn short_pieces_and_the_hot_table_are_counted() {
        let mut cache = IdCache::default();
        let mut out = Vec::new();
        for key in 1..20_000u128 {
            cache.extend_short(key, ENTRIES, &mut out, |o| o.extend([1, 2, 3]));
        }
        let bytes = cache.bytes();
        assert!(bytes >= HOT_SLOTS * 32 + 19_999 * (16 + 8 + 12), "{bytes}");
        assert!(bytes <= BYTES);
    }
}
