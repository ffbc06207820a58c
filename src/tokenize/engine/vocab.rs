//! The embedded vocabularies: token bytes by rank, and the rank of given bytes.
//!
//! Each is stored deflated (see `data/pack.py`: a length byte and the raw bytes per token,
//! in rank order) and expanded on first use. Tokens of up to 15 bytes, nearly all of them,
//! are looked up by their bytes packed into one `u128` with the length, so a lookup is one
//! integer hash and compare, no pointer chase.

use std::sync::OnceLock;

use bpe::byte_pair_encoding::BytePairEncoding;
use rustc_hash::FxHashMap;

use super::chars::{Joins, Loose};

/// Bytes a packed key holds.
pub const SHORT: usize = 15;

/// `bytes` (at most `SHORT`) and their length in one integer. Padding is zero, and the
/// length byte tells "a" from "a\0".
#[inline(always)]
pub fn pack(bytes: &[u8]) -> u128 {
    debug_assert!(bytes.len() <= SHORT);
    // Two overlapping fixed-size loads instead of a variable-length copy (a `memcpy` call
    // per piece): the second load's bytes that the first already holds are shifted out.
    let n = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let half = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()));
    let (lo, hi) = if n >= 8 {
        (word(0), if n == 8 { 0 } else { word(n - 8) >> (8 * (16 - n)) })
    } else if n >= 4 {
        (half(0) | ((half(n - 4) >> (8 * (8 - n))) << 32), 0)
    } else if n > 0 {
        let at = |k: usize| u64::from(bytes[k]) << (8 * k);
        (at(0) | at(n / 2) | at(n - 1), 0)
    } else {
        (0, 0)
    };
    u128::from(lo) | (u128::from(hi | ((n as u64) << 56)) << 64)
}

/// Masks of the bytes of a piece of `n` bytes (the index) in the two words of a 16-byte load.
const PACK_MASKS: [[u64; 2]; 16] = {
    let mut m = [[0u64; 2]; 16];
    let mut n = 0;
    while n < 16 {
        let lo = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
        let hi = if n <= 8 { 0 } else { (1u64 << (8 * (n - 8))) - 1 };
        m[n] = [lo, hi];
        n += 1;
    }
    m
};

/// [`pack`] of the first `n` bytes of `rest` (`n` at most `SHORT`). With 16 bytes to read,
/// one load and two masks, no branch on the length: the length classes of [`pack`] were a
/// mispredicted branch for every other piece of source code. Near the end of the text,
/// [`pack`] itself.
#[inline(always)]
pub fn pack_at(rest: &[u8], n: usize) -> u128 {
    debug_assert!(n <= SHORT && n <= rest.len());
    match rest.get(..16) {
        Some(w) => {
            let lo = u64::from_le_bytes(w[..8].try_into().unwrap());
            let hi = u64::from_le_bytes(w[8..].try_into().unwrap());
            let [ml, mh] = PACK_MASKS[n & 15];
            u128::from(lo & ml) | (u128::from((hi & mh) | ((n as u64) << 56)) << 64)
        }
        None => pack(&rest[..n]),
    }
}

/// A packed key ([`pack`]) mixed into 64 bits: a multiplicative hash of both halves, whose
/// high bits mix every input bit. The vocabulary's table and the per-thread piece table
/// ([`super::pieces`]) both hash by it.
#[inline(always)]
pub(super) fn mix(key: u128) -> u64 {
    let x = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Tokens of up to [`SHORT`] bytes by their packed bytes ([`pack`]). A token of up to
/// [`EMBED_MAX`] bytes (nearly all) is one `u128` in the table, its rank in the three zero
/// bytes after it: 16 bytes a token, where a map of `u128` to `u32` took 32. A first pass
/// over new text looks up tokens all over the table, and in a fresh process each lookup
/// that finds one loads its entry from beyond the core's caches; half the table holds twice
/// as many entries in each line loaded.
struct ShortTokens {
    table: hashbrown::HashTable<u128>,
    /// Tokens of more than [`EMBED_MAX`] bytes: no room beside them.
    wide: FxHashMap<u128, u32>,
}

/// Bytes of the longest token kept with its rank in one `u128`.
const EMBED_MAX: usize = 12;
/// Where the rank sits in a table entry: bytes 12 to 14 (the length byte is 15).
const RANK_SHIFT: u32 = 96;
const RANK_MASK: u128 = 0xFF_FFFF << RANK_SHIFT;

impl ShortTokens {
    #[inline(always)]
    fn hash(key: u128) -> u64 {
        // rotated, the well-mixed high bits become the low bits the table picks its group by
        // (its control byte takes the top seven)
        mix(key).rotate_left(26)
    }

    fn with_capacity(n: usize) -> Self {
        Self { table: hashbrown::HashTable::with_capacity(n), wide: FxHashMap::default() }
    }

    fn insert(&mut self, key: u128, rank: u32) {
        if (key >> 120) as usize > EMBED_MAX {
            self.wide.insert(key, rank);
        } else {
            assert!(rank < 1 << 24, "a rank of three bytes");
            self.table.insert_unique(Self::hash(key), key | (u128::from(rank) << RANK_SHIFT), |&e| {
                Self::hash(e & !RANK_MASK)
            });
        }
    }

    #[inline(always)]
    fn get(&self, key: u128) -> Option<u32> {
        if (key >> 120) as usize > EMBED_MAX {
            return self.wide.get(&key).copied();
        }
        self.table.find(Self::hash(key), |&e| e & !RANK_MASK == key).map(|&e| (e >> RANK_SHIFT) as u32 & 0xFF_FFFF)
    }
}

pub struct Vocab {
    /// Token bytes by rank, slices of one leaked buffer.
    tokens: Vec<&'static [u8]>,
    short: ShortTokens,
    long: FxHashMap<&'static [u8], u32>,
    /// The rank of every two-byte token, indexed by its bytes (`NO_RANK` where none): a merge
    /// starts with one such lookup per byte of its piece, and this dense table (256 KB, within
    /// a core's L2) answers them without hashing into the multi-MB maps.
    pairs: Box<[u32]>,
    /// Backtracking encoder for giant pieces (see [`super::bpe::GIANT_PIECE`]), built on the
    /// first one.
    giant: OnceLock<BytePairEncoding>,
    /// Bytes of the longest token: a piece of `n` bytes is at least `n / longest` tokens.
    longest: usize,
    /// Whether each of the 256 bytes is a token (every byte-level vocabulary): a piece of one
    /// byte is then one token, and one of two bytes one or two.
    every_byte: bool,
    /// Where a token may take part of a character with a neighbour ([`super::chars`]).
    loose: Loose,
    /// Which whole characters some token holds side by side ([`super::chars::Joins`]).
    joins: Joins,
    /// Whether each character of three bytes is one token, a bit per code point: a merge from
    /// whole characters asks it once per character of Chinese ([`Vocab::char3`]), where the
    /// merge from bytes made two merges and four lookups.
    chars3: Box<[u64]>,
    /// The token of each character of three bytes that is one token, by code point
    /// ([`NO_RANK`] where none; 256 KiB): `encode` asks it for each such character a merge
    /// left whole, where the table of short tokens is megabytes ([`Vocab::part_rank`]).
    /// `chars3` tells the same characters apart in 8 KiB, which counting, needing no ids,
    /// keeps in the core's first-level cache.
    ids3: Box<[u32]>,
}

/// A missing rank in [`Vocab::pairs`] (ranks are far below it).
const NO_RANK: u32 = u32::MAX;

/// Where the pair of bytes `a`, `b` sits in a table of every pair.
#[inline(always)]
pub(super) fn pair_index(a: u8, b: u8) -> usize {
    (usize::from(a) << 8) | usize::from(b)
}

/// The code point of `bytes` if they are one character of three bytes.
#[inline(always)]
fn char3_index(bytes: &[u8]) -> Option<usize> {
    match *bytes {
        [a @ 0xE0..=0xEF, b, c] if b & 0xC0 == 0x80 && c & 0xC0 == 0x80 => {
            Some((usize::from(a & 0x0F) << 12) | (usize::from(b & 0x3F) << 6) | usize::from(c & 0x3F))
        }
        _ => None,
    }
}

/// The hash factor `bpe-openai` uses for these vocabularies: no collisions among their tokens.
const HASH_FACTOR: u64 = 17846336922010275747;

impl Vocab {
    /// Expand `packed` (deflated, see the module doc). Panics on corrupt data: it is
    /// embedded at build time and checked by the tests, never read from outside.
    pub fn unpack(packed: &[u8]) -> Self {
        let raw = miniz_oxide::inflate::decompress_to_vec_zlib(packed).expect("embedded vocabulary inflates");
        let raw: &'static [u8] = Box::leak(raw.into_boxed_slice());
        let mut tokens = Vec::with_capacity(raw.len() / 7);
        let mut i = 0;
        while i < raw.len() {
            let n = raw[i] as usize;
            tokens.push(&raw[i + 1..i + 1 + n]);
            i += 1 + n;
        }
        let mut short = ShortTokens::with_capacity(tokens.len());
        let mut long = FxHashMap::default();
        let mut pairs = vec![NO_RANK; 1 << 16].into_boxed_slice();
        let mut loose = Loose::default();
        let mut joins = Joins::with_capacity(tokens.len() / 10);
        let mut chars3 = vec![0u64; (1 << 16) / 64].into_boxed_slice();
        let mut ids3 = vec![NO_RANK; 1 << 16].into_boxed_slice();
        for (rank, &t) in tokens.iter().enumerate() {
            if let [a, b] = *t {
                pairs[pair_index(a, b)] = rank as u32;
            }
            if let Some(at) = char3_index(t) {
                chars3[at / 64] |= 1 << (at % 64);
                ids3[at] = rank as u32;
            }
            // one walk of the token's characters notes its pairs and tells whether it is whole
            // characters; one that is not is where a token may take part of one
            if !t.is_ascii() && !joins.note(t) {
                loose.note(t);
            }
            if t.len() <= SHORT {
                short.insert(pack(t), rank as u32);
            } else {
                long.insert(t, rank as u32);
            }
        }
        let longest = tokens.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let every_byte = (0..=255u8).all(|b| short.get(pack(&[b])).is_some());
        Self { tokens, short, long, pairs, giant: OnceLock::new(), longest, every_byte, loose, joins, chars3, ids3 }
    }

    /// Where a token may take part of a character with a neighbour.
    #[inline(always)]
    pub fn loose(&self) -> &Loose {
        &self.loose
    }

    /// Which whole characters some token holds side by side.
    #[inline(always)]
    pub fn joins(&self) -> &Joins {
        &self.joins
    }

    /// Bytes of the longest token.
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// The number of tokens (ranks run from 0 to one less).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The bytes of token `rank`, if it exists.
    #[inline]
    pub fn bytes(&self, rank: u32) -> Option<&'static [u8]> {
        self.tokens.get(rank as usize).copied()
    }

    /// The rank of `bytes`, if they are one token.
    #[inline(always)]
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        if let [a, b] = *bytes {
            let r = self.pairs[pair_index(a, b)];
            return (r != NO_RANK).then_some(r);
        }
        if bytes.len() <= SHORT {
            self.short.get(pack(bytes))
        } else {
            self.long.get(bytes).copied()
        }
    }

    /// Where the parts of `bytes`, one character of three bytes, end when it is merged
    /// alone: bit 0 after its first byte, bit 1 after its second (0: it is one token). `None`
    /// for other bytes. A character that is not one token merges its lower-ranked pair of
    /// bytes, if either is a token, and stops there.
    #[inline(always)]
    pub fn char3(&self, bytes: &[u8]) -> Option<u8> {
        let at = char3_index(bytes)?;
        if self.chars3[at / 64] >> (at % 64) & 1 == 1 {
            return Some(0);
        }
        Some(match (self.pairs[pair_index(bytes[0], bytes[1])], self.pairs[pair_index(bytes[1], bytes[2])]) {
            (NO_RANK, NO_RANK) => 0b11,
            (first, second) if first < second => 0b10,
            _ => 0b01,
        })
    }

    /// [`Vocab::rank`] of a part a merge's seed gave: a character of three bytes is looked up by
    /// its code point.
    #[inline(always)]
    pub fn part_rank(&self, bytes: &[u8]) -> Option<u32> {
        match char3_index(bytes) {
            Some(at) => Some(self.ids3[at]).filter(|&r| r != NO_RANK),
            None => self.rank(bytes),
        }
    }

    /// Tokens of a piece of one or two bytes, when every byte is a token: no table to ask
    /// but the dense pairs (`None` for other pieces, or another vocabulary).
    #[inline(always)]
    pub fn count_tiny(&self, piece: &[u8]) -> Option<usize> {
        match *piece {
            [_] if self.every_byte => Some(1),
            [a, b] if self.every_byte => Some(if self.pairs[pair_index(a, b)] == NO_RANK { 2 } else { 1 }),
            _ => None,
        }
    }

    /// The rank of the short `bytes` already packed.
    #[inline(always)]
    pub fn rank_packed(&self, key: u128) -> Option<u32> {
        self.short.get(key)
    }

    /// The backtracking encoder over the same tokens, built once on first use. For these
    /// vocabularies it yields tiktoken's tokens with memory of a few bits per input byte.
    pub fn giant(&self) -> &BytePairEncoding {
        self.giant.get_or_init(|| {
            BytePairEncoding::from_dictionary(self.tokens.iter().map(|t| t.to_vec()), Some(HASH_FACTOR))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_holds_the_bytes_and_the_length() {
        let data: Vec<u8> = (1..=40u8).map(|b| b.wrapping_mul(37)).collect();
        for start in 0..20 {
            for n in 0..=SHORT {
                let bytes = &data[start..start + n];
                let mut b = [0u8; 16];
                b[..n].copy_from_slice(bytes);
                b[15] = n as u8;
                assert_eq!(pack(bytes), u128::from_le_bytes(b), "{bytes:?}");
            }
        }
    }

    #[test]
    fn pack_at_equals_pack_of_the_piece() {
        let data: Vec<u8> = (1..=60u8).map(|b| b.wrapping_mul(91)).collect();
        for start in 0..data.len() {
            for n in 1..=SHORT.min(data.len() - start) {
                assert_eq!(pack_at(&data[start..], n), pack(&data[start..start + n]), "{start} {n}");
            }
        }
    }

    #[test]
    fn tiny_pieces_count_as_their_merge() {
        for packed in
            [&include_bytes!("../data/cl100k_base.bin.z")[..], &include_bytes!("../data/o200k_base.bin.z")[..]]
        {
            let vocab = Vocab::unpack(packed);
            assert!(vocab.every_byte);
            for a in 0..=255u8 {
                assert_eq!(vocab.count_tiny(&[a]), Some(1));
                for b in 0..=255u8 {
                    let merged = crate::tokenize::engine::bpe::count(&[a, b], |x| vocab.rank(x));
                    assert_eq!(vocab.count_tiny(&[a, b]), Some(merged), "{a} {b}");
                }
            }
            assert_eq!(vocab.count_tiny(b"abc"), None);
        }
        // A vocabulary without every byte answers nothing.
        let partial = Vocab { every_byte: false, ..Vocab::unpack(&include_bytes!("../data/cl100k_base.bin.z")[..]) };
        assert_eq!(partial.count_tiny(b"a"), None);
    }

    #[test]
    fn every_token_and_every_byte_pair_has_its_rank() {
        for packed in
            [&include_bytes!("../data/cl100k_base.bin.z")[..], &include_bytes!("../data/o200k_base.bin.z")[..]]
        {
            let vocab = Vocab::unpack(packed);
            let by_bytes: FxHashMap<&[u8], u32> =
                vocab.tokens.iter().enumerate().map(|(r, &t)| (t, r as u32)).collect();
            for (rank, &t) in vocab.tokens.iter().enumerate() {
                assert_eq!(vocab.rank(t), Some(rank as u32), "{t:?}");
            }
            // byte strings of every short length that are no token: none has a rank
            let mut next = crate::tokenize::engine::split::tests::xorshift();
            for _ in 0..200_000 {
                let x = next();
                let n = 1 + (x % SHORT as u64) as usize;
                let t: Vec<u8> = (0..n)
                    .map(|i| {
                        vocab.tokens[(x >> 20) as usize % 3000][..].get(i).copied().unwrap_or((x >> (i % 8 * 8)) as u8)
                    })
                    .collect();
                assert_eq!(vocab.rank(&t), by_bytes.get(&t[..]).copied(), "{t:?}");
            }
            // the dense pair table against the token list, absent pairs included
            for a in 0..=255u8 {
                for b in 0..=255u8 {
                    assert_eq!(vocab.rank(&[a, b]), by_bytes.get(&[a, b][..]).copied(), "{a} {b}");
                }
            }
        }
    }
}
