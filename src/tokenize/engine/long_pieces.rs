//! The per-thread map of pieces longer than a packed key, by their bytes, and their counts:
//! a sentence of Chinese, a run of indentation, a long identifier.
//!
//! Bounded in pieces (at most [`ENTRIES`], and a sixteenth of the short-piece bound) and in
//! bytes ([`BYTES`]: its slots, and its keys with their allocations' headers), and emptied
//! whole when either bound is reached. The bytes all such maps hold are counted
//! ([`usage`], `cache_info()["long_piece_cache_bytes"]`): bounded by pieces alone, a thread's
//! map of 256-byte pieces could reach some 10 MB that nothing reported. Both the engine's
//! maps and the `tokenizer.json` merges' (`merges.rs`) are these.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::memory::Reported;

use rustc_hash::FxBuildHasher;

/// The longest piece kept: past it a piece is rare enough, and its merge long enough, not to
/// bother.
pub const MAX_LEN: usize = 256;

/// Pieces a map holds at most (also at most a sixteenth of [`super::pieces::entries`]; none
/// when that is 0).
pub const ENTRIES: usize = 1 << 15;

/// Bytes a map holds at most. A multilingual dialog's first pass keeps some 5,000 pieces of
/// about 27 bytes, 0.4 MB.
pub const BYTES: usize = 4 << 20;

/// Bytes all maps hold now, over all threads and vocabularies, give or take
/// [`Reported::STEP`] a map.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Bytes all maps of long pieces hold now (their keys and slots), within [`Reported::STEP`] a map.
pub fn usage() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Bytes a key of `len` bytes costs: its allocation rounded to 16 bytes, and a header.
pub fn key_bytes(len: usize) -> usize {
    len.next_multiple_of(16) + 16
}

/// One thread's map for one vocabulary.
pub struct LongPieces {
    map: hashbrown::HashMap<Box<[u8]>, u32, FxBuildHasher>,
    /// Bytes of the keys held ([`key_bytes`] each).
    keys: usize,
    /// This map's bytes in [`HELD`].
    reported: Reported,
}

impl Default for LongPieces {
    fn default() -> Self {
        LongPieces { map: Default::default(), keys: 0, reported: Reported::to(&HELD) }
    }
}

impl LongPieces {
    /// The count kept for `piece`.
    #[inline]
    pub fn get(&self, piece: &[u8]) -> Option<usize> {
        self.map.get(piece).map(|&n| n as usize)
    }

    /// Keep `count` for `piece` (at most [`MAX_LEN`] bytes), the map emptied first when it
    /// holds `bound` pieces (at most [`ENTRIES`]; 0: nothing is kept) or a piece more would
    /// pass [`BYTES`].
    pub fn insert(&mut self, piece: &[u8], count: usize, bound: usize) {
        debug_assert!(piece.len() <= MAX_LEN && bound <= ENTRIES);
        let full = self.map.len() >= bound || self.bytes() + key_bytes(piece.len()) > BYTES;
        if full {
            self.map.clear();
            self.keys = 0;
            if bound == 0 {
                self.map.shrink_to(0);
            }
            self.reported.publish(self.bytes());
            if bound == 0 {
                return;
            }
        }
        self.map.insert(piece.into(), count as u32);
        self.keys += key_bytes(piece.len());
        self.reported.update(self.bytes());
    }

    /// Bytes this map holds: its keys and its slots.
    fn bytes(&self) -> usize {
        self.keys + self.map.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(i: usize, len: usize) -> Vec<u8> {
        let mut p = format!("piece {i} ").into_bytes();
        p.resize(len, b'x');
        p
    }

    #[test]
    fn kept_pieces_are_found_and_others_are_not() {
        let mut m = LongPieces::default();
        for i in 0..100 {
            m.insert(&piece(i, 20 + i), i % 7, 1000);
        }
        for i in 0..100 {
            assert_eq!(m.get(&piece(i, 20 + i)), Some(i % 7));
            assert_eq!(m.get(&piece(i, 21 + i)), None);
        }
        assert_eq!(m.map.len(), 100);
    }

    #[test]
    fn the_map_is_emptied_at_its_bound_in_pieces_or_bytes() {
        let mut m = LongPieces::default();
        for i in 0..10 {
            m.insert(&piece(i, 30), 3, 8);
        }
        // emptied at the ninth: the ninth and the tenth kept
        assert_eq!(m.map.len(), 2);
        assert_eq!(m.get(&piece(9, 30)), Some(3));
        assert_eq!(m.get(&piece(0, 30)), None);

        let mut m = LongPieces::default();
        let mut most = 0;
        for i in 0..40_000 {
            m.insert(&piece(i, MAX_LEN), 1, ENTRIES);
            most = most.max(m.bytes());
            assert!(m.bytes() <= BYTES, "{} bytes at {i}", m.bytes());
        }
        assert!(most > BYTES * 3 / 4, "{most}");
        assert!(m.map.len() < ENTRIES);
    }

    #[test]
    fn its_bytes_are_counted_and_given_back() {
        // other tests' tables come and go on other threads: compare the map's own figure
        let mut m = LongPieces::default();
        for i in 0..1000 {
            m.insert(&piece(i, 40), 2, ENTRIES);
        }
        let held = m.bytes();
        assert!(held >= 1000 * key_bytes(40) + m.map.capacity() * 24, "{held}");
        let published = m.reported.published();
        assert!(published.abs_diff(held) < Reported::STEP && published > 0);
        assert!(usage() >= published);
        // a bound of 0 keeps nothing and gives the slots back
        m.insert(&piece(0, 40), 2, 0);
        assert_eq!((m.map.len(), m.bytes(), m.reported.published()), (0, 0, 0));
    }
}
