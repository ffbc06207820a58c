//! The per-thread map of pieces longer than a packed key, by their bytes, and their counts:
//! a sentence of Chinese, a run of indentation, a long identifier.
//!
//! Bounded in pieces (at most [`ENTRIES`], and a sixteenth of the short-piece bound) and in
//! bytes ([`BYTES`]: its slots, and its keys with their allocations' headers), and emptied
//! whole when either bound is reached. The bytes all such maps hold are counted
//! ([`usage`], `cache_info()["long_piece_cache_bytes"]`): bounded by pieces alone, a thread's
//! map of 256-byte pieces could reach some 10 MB that nothing reported. Both the engine's
//! maps and the `tokenizer.json` merges' (`merges.rs`) are these.

use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashMap;
use rustc_hash::FxBuildHasher;

use crate::memory::Reported;

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
fn key_bytes(len: usize) -> usize {
    len.next_multiple_of(16) + 16
}

/// Bytes a map would allocate anew to take one entry more: its slots again (a full map
/// reallocates at twice its size), else none.
pub fn growth<K: Eq + Hash, V>(map: &HashMap<K, V, FxBuildHasher>) -> usize {
    if map.len() < map.capacity() {
        return 0;
    }
    map.allocation_size().max(1024)
}

/// A map of pieces by their bytes that knows what it holds: its slots, and its keys with
/// their allocations' headers. The long pieces' counts ([`LongPieces`]) and their ids
/// (`ids.rs`) are kept in these.
pub struct ByBytes<V> {
    map: HashMap<Box<[u8]>, V, FxBuildHasher>,
    /// Bytes of the keys held ([`key_bytes`] each).
    keys: usize,
}

impl<V> Default for ByBytes<V> {
    fn default() -> Self {
        ByBytes { map: HashMap::default(), keys: 0 }
    }
}

impl<V> ByBytes<V> {
    #[inline]
    pub fn get(&self, piece: &[u8]) -> Option<&V> {
        self.map.get(piece)
    }

    pub fn insert(&mut self, piece: &[u8], value: V) {
        self.map.insert(piece.into(), value);
        self.keys += key_bytes(piece.len());
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Empty the map, its slots kept for what comes next.
    pub fn clear(&mut self) {
        self.map.clear();
        self.keys = 0;
    }

    /// Empty the map and give its slots back.
    pub fn release(&mut self) {
        self.clear();
        self.map.shrink_to(0);
    }

    /// Bytes the map holds.
    pub fn bytes(&self) -> usize {
        self.keys + self.map.allocation_size()
    }

    /// Bytes a piece of `len` bytes more would add: its key, and the map's growth.
    pub fn added(&self, len: usize) -> usize {
        key_bytes(len) + growth(&self.map)
    }
}

/// One thread's map for one vocabulary.
pub struct LongPieces {
    pieces: ByBytes<u32>,
    /// This map's bytes in [`HELD`].
    reported: Reported,
}

impl Default for LongPieces {
    fn default() -> Self {
        LongPieces { pieces: ByBytes::default(), reported: Reported::to(&HELD) }
    }
}

impl LongPieces {
    /// The count kept for `piece`.
    #[inline]
    pub fn get(&self, piece: &[u8]) -> Option<usize> {
        self.pieces.get(piece).map(|&n| n as usize)
    }

    /// Keep `count` for `piece` (at most [`MAX_LEN`] bytes), the map emptied first when it
    /// holds `bound` pieces (at most [`ENTRIES`]; 0: nothing is kept, and its slots are given
    /// back) or a piece more would take it past [`BYTES`].
    pub fn insert(&mut self, piece: &[u8], count: usize, bound: usize) {
        debug_assert!(piece.len() <= MAX_LEN && bound <= ENTRIES);
        if bound == 0 {
            self.pieces.release();
            return self.reported.publish(0);
        }
        if self.pieces.len() >= bound || self.pieces.bytes() + self.pieces.added(piece.len()) > BYTES {
            self.pieces.clear();
            self.reported.publish(self.pieces.bytes());
        }
        self.pieces.insert(piece, count as u32);
        self.reported.update(self.pieces.bytes());
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
        assert_eq!(m.pieces.len(), 100);
    }

    #[test]
    fn the_map_is_emptied_at_its_bound_in_pieces_or_bytes() {
        let mut m = LongPieces::default();
        for i in 0..10 {
            m.insert(&piece(i, 30), 3, 8);
        }
        // emptied at the ninth: the ninth and the tenth kept
        assert_eq!(m.pieces.len(), 2);
        assert_eq!(m.get(&piece(9, 30)), Some(3));
        assert_eq!(m.get(&piece(0, 30)), None);

        let mut m = LongPieces::default();
        let mut most = 0;
        for i in 0..40_000 {
            m.insert(&piece(i, MAX_LEN), 1, ENTRIES);
            most = most.max(m.pieces.bytes());
            assert!(m.pieces.bytes() <= BYTES, "{} bytes at {i}", m.pieces.bytes());
        }
        assert!(most > BYTES * 3 / 4, "{most}");
        assert!(m.pieces.len() < ENTRIES);
    }

    #[test]
    fn its_bytes_are_counted_and_given_back() {
        // other tests' tables come and go on other threads: compare the map's own figure
        let mut m = LongPieces::default();
        for i in 0..1000 {
            m.insert(&piece(i, 40), 2, ENTRIES);
        }
        let held = m.pieces.bytes();
        assert!(held >= 1000 * key_bytes(40) + m.pieces.map.capacity() * 24, "{held}");
        let published = m.reported.published();
        assert!(published.abs_diff(held) < Reported::STEP && published > 0);
        assert!(usage() >= published);
        // a bound of 0 keeps nothing and gives the slots back
        m.insert(&piece(0, 40), 2, 0);
        assert_eq!((m.pieces.len(), m.pieces.bytes(), m.reported.published()), (0, 0, 0));
    }
}
