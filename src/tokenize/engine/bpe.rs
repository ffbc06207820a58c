//! Byte-pair merging of one pre-tokenizer piece, with tiktoken's exact result: repeatedly
//! merge the adjacent pair of lowest rank, the leftmost among equal ranks.
//!
//! Short pieces (nearly all) rescan their few pair ranks per merge; long ones (a 1 MB run of
//! one letter is a single piece) use a heap so the cost stays O(n log n).

/// Pieces at least this long are merged with the heap. Rescanning costs a pass over the
/// parts per merge: from 32 bytes on (a sentence of Chinese or Japanese is one piece) the heap
/// merges a multilingual dialog's new pieces 5-10% faster, and its first pass 3-4%
/// (benches/RESULTS.md, 2026-11-27); shorter pieces rescan faster.
pub const LONG_PIECE: usize = 32;

/// Pieces at least this long are counted and encoded by the vocabulary's backtracking
/// encoder ([`super::Vocab::giant`]): the heap merge needs ~21 bytes per input byte. Above
/// 100 KB so common long pieces never pay the encoder's construction (seconds for o200k).
pub const GIANT_PIECE: usize = 1 << 20;

const NONE: u32 = u32::MAX;

/// The parts a merge starts from. tiktoken's starts from single bytes ([`Bytes`]); a seed
/// whose parts are merges the byte merge makes whatever else the piece holds gives the same
/// result and saves their lookups ([`super::chars::WholeChars`]).
pub trait Seed {
    /// `part(start)` for each first part of `piece`, in order: the first at 0, each before
    /// `piece.len()`.
    fn parts(&self, piece: &[u8], part: impl FnMut(usize));
}

/// One part per byte.
pub struct Bytes;

impl Seed for Bytes {
    #[inline(always)]
    fn parts(&self, piece: &[u8], part: impl FnMut(usize)) {
        (0..piece.len()).for_each(part);
    }
}

/// The BPE parts of `piece` (2+ bytes), every part a token: `rank` must know every single
/// byte, which byte-level vocabularies guarantee.
pub fn split(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>) -> Vec<&[u8]> {
    split_from(piece, rank, &Bytes)
}

/// [`split`], the merge started from `seed`'s parts.
pub fn split_from<'p>(piece: &'p [u8], rank: impl Fn(&[u8]) -> Option<u32>, seed: &impl Seed) -> Vec<&'p [u8]> {
    if piece.len() >= LONG_PIECE {
        return merge_long(piece, &rank, seed);
    }
    if piece.len() < 2 {
        return vec![piece];
    }
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    let len = merge_short(piece, &rank, seed, &mut parts, &mut ());
    parts[..len].windows(2).map(|w| &piece[w[0].0 as usize..w[1].0 as usize]).collect()
}

/// The token ids of [`split_from`]'s parts, appended to `out`: a part the merge made is the
/// token of the pair's rank, so only the parts the seed gave are looked up, by `part_rank`
/// (the same ranks as `rank`; each part looked up again was most of what `encode` spent on a
/// new piece beyond counting it).
pub fn ids_into(
    piece: &[u8],
    rank: impl Fn(&[u8]) -> Option<u32>,
    part_rank: impl Fn(&[u8]) -> Option<u32>,
    seed: &impl Seed,
    out: &mut Vec<u32>,
) {
    if piece.len() >= LONG_PIECE {
        return out.extend(merge_long(piece, &rank, seed).into_iter().filter_map(&part_rank));
    }
    if piece.len() < 2 {
        return out.extend(part_rank(piece));
    }
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    let mut merged = [NONE; LONG_PIECE + 1];
    let len = merge_short(piece, &rank, seed, &mut parts, &mut merged);
    for k in 0..len - 1 {
        match merged[k] {
            NONE => out.extend(part_rank(&piece[parts[k].0 as usize..parts[k + 1].0 as usize])),
            id => out.push(id),
        }
    }
}

/// How many parts [`split`] gives `piece`, without building them: a piece shorter than
/// [`LONG_PIECE`] merges in a table on the stack, allocating nothing; a longer one counts the
/// heap merge's part ends.
pub fn count(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>) -> usize {
    count_from(piece, rank, &Bytes)
}

/// [`count`], the merge started from `seed`'s parts.
pub fn count_from(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>, seed: &impl Seed) -> usize {
    if piece.len() >= LONG_PIECE {
        return long_ends(piece, &rank, seed).len();
    }
    if piece.len() < 2 {
        return 1;
    }
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    merge_short(piece, &rank, seed, &mut parts, &mut ()) - 1
}

/// `part(start)` for each part of the merge of `piece` (2 to [`LONG_PIECE`] - 1 bytes) from
/// its bytes, allocating nothing.
pub fn for_each_short_part(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>, part: impl FnMut(usize)) {
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    let len = merge_short(piece, &rank, &Bytes, &mut parts, &mut ());
    parts[..len - 1].iter().map(|p| p.0 as usize).for_each(part);
}

/// What [`merge_short`] keeps of its merges besides the parts' bounds.
trait Merged {
    /// Parts `k` and `k + 1` of `len` entries (the end's included) became the token `id`.
    fn merge(&mut self, k: usize, id: u32, len: usize);
}

/// Nothing: counting needs the parts' bounds alone.
impl Merged for () {
    #[inline(always)]
    fn merge(&mut self, _: usize, _: u32, _: usize) {}
}

/// Each part's token where a merge made it, [`NONE`] where the seed did, kept beside `parts`.
impl Merged for [u32; LONG_PIECE + 1] {
    #[inline(always)]
    fn merge(&mut self, k: usize, id: u32, len: usize) {
        self[k] = id;
        self.copy_within(k + 2..len, k + 1);
    }
}

/// Merges a piece shorter than [`LONG_PIECE`] in `parts`: on return `parts[..len]` holds each
/// part's start, then the piece's end; `len` is returned. Each entry also holds the rank of
/// the pair its part starts (rescanned per merge: few pairs, no heap). `merged` is told of
/// each merge ([`Merged`]).
fn merge_short(
    piece: &[u8],
    rank: &impl Fn(&[u8]) -> Option<u32>,
    seed: &impl Seed,
    parts: &mut [(u32, u32); LONG_PIECE + 1],
    merged: &mut impl Merged,
) -> usize {
    let n = piece.len();
    debug_assert!((2..LONG_PIECE).contains(&n));
    let mut first = 0;
    seed.parts(piece, |start| {
        parts[first] = (start as u32, NONE);
        first += 1;
    });
    // the end, after the last part (whose pair is none)
    parts[first] = (n as u32, NONE);
    for k in 0..first.saturating_sub(1) {
        parts[k].1 = rank(&piece[parts[k].0 as usize..parts[k + 2].0 as usize]).unwrap_or(NONE);
    }
    let mut len = first + 1;
    let pair_rank = |parts: &[(u32, u32)], len: usize, k: usize| -> u32 {
        if k + 3 < len {
            rank(&piece[parts[k].0 as usize..parts[k + 3].0 as usize]).unwrap_or(NONE)
        } else {
            NONE
        }
    };
    loop {
        let mut best = (NONE, 0);
        for (k, &(_, r)) in parts[..len - 1].iter().enumerate() {
            if r < best.0 {
                best = (r, k);
            }
        }
        if best.0 == NONE {
            return len;
        }
        let k = best.1;
        // Merging parts k and k+1: the pairs that change are (k-1, k) and (k, k+2).
        parts[k].1 = pair_rank(&parts[..], len, k);
        if k > 0 {
            parts[k - 1].1 = pair_rank(&parts[..], len, k - 1);
        }
        parts.copy_within(k + 2..len, k + 1);
        merged.merge(k, best.0, len);
        len -= 1;
    }
}

/// The heap-based merge: parts form a linked list; a min-heap of (rank, start) holds
/// candidate pairs, and stale entries (a part that has since changed) are skipped.
pub(crate) fn merge_long<'p>(piece: &'p [u8], rank: &dyn Fn(&[u8]) -> Option<u32>, seed: &impl Seed) -> Vec<&'p [u8]> {
    let mut parts = Vec::new();
    let mut start = 0;
    for end in long_ends(piece, rank, seed) {
        parts.push(&piece[start..end]);
        start = end;
    }
    parts
}

/// Where the parts of [`merge_long`] end, in order (the last is `piece.len()`).
fn long_ends(piece: &[u8], rank: &dyn Fn(&[u8]) -> Option<u32>, seed: &impl Seed) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    // Positions are u32, so a byte of the piece costs 9 bytes of links plus 12 per heap
    // entry (41 with usize). A piece over 4 GB is merged in 4 GB parts, which may differ
    // from one whole merge at the seam: a bounded overcount, never a panic.
    const MAX: usize = u32::MAX as usize;
    if piece.len() > MAX {
        let (a, b) = piece.split_at(MAX);
        let mut ends = long_ends(a, rank, seed);
        ends.extend(long_ends(b, rank, seed).into_iter().map(|e| e + MAX));
        return ends;
    }
    let n = piece.len() as u32;
    // Part i spans [i, end[i]); prev links the live parts by their start; cand[i] is the
    // rank of the pair part i starts (NONE: none, or i is no longer a part's start). A pair's
    // rank names its bytes, so a heap entry (rank, start) is current iff cand[start] == rank,
    // and entries are one u64 (rank, then start: the leftmost of equal ranks first).
    let mut end: Vec<u32> = vec![n; n as usize];
    let mut prev: Vec<u32> = vec![NONE; n as usize];
    let mut last = NONE;
    seed.parts(piece, |start| {
        let start = start as u32;
        if last != NONE {
            end[last as usize] = start;
            prev[start as usize] = last;
        }
        last = start;
    });
    let mut cand = vec![NONE; n as usize];
    let rank_of = |a: u32, b_end: u32| rank(&piece[a as usize..b_end as usize]);
    let key = |r: u32, start: u32| Reverse((u64::from(r) << 32) | u64::from(start));
    let mut initial = Vec::with_capacity(n as usize);
    let mut i = 0;
    while i < n && end[i as usize] < n {
        let mid = end[i as usize];
        if let Some(r) = rank_of(i, end[mid as usize]) {
            cand[i as usize] = r;
            initial.push(key(r, i));
        }
        i = mid;
    }
    let mut heap = BinaryHeap::from(initial);
    while let Some(Reverse(k)) = heap.pop() {
        let (r, start) = ((k >> 32) as u32, k as u32);
        if cand[start as usize] != r {
            continue; // stale: the pair changed since
        }
        let mid = end[start as usize];
        let pair_end = end[mid as usize];
        cand[mid as usize] = NONE;
        end[start as usize] = pair_end;
        if pair_end < n {
            prev[pair_end as usize] = start;
        }
        // New candidate pairs: (prev, merged) and (merged, next).
        let p = prev[start as usize];
        if p < n {
            cand[p as usize] = rank_of(p, pair_end).unwrap_or(NONE);
            if cand[p as usize] != NONE {
                heap.push(key(cand[p as usize], p));
            }
        }
        cand[start as usize] = NONE;
        if pair_end < n {
            let next_end = end[pair_end as usize];
            cand[start as usize] = rank_of(start, next_end).unwrap_or(NONE);
            if cand[start as usize] != NONE {
                heap.push(key(cand[start as usize], start));
            }
        }
    }
    let mut ends = Vec::with_capacity(piece.len() / 2 + 1);
    let mut i = 0;
    while i < n {
        i = end[i as usize];
        ends.push(i as usize);
    }
    ends
}

/// Pieces at least this long are merged in blocks ([`merge_blocked`]).
pub const BLOCKED_PIECE: usize = 64 << 10;
/// A block's stride, and how far past the next block's start it is merged.
const BLOCK: usize = 16 << 10;
const OVERLAP: usize = 1 << 10;
/// Pieces at least this long have their blocks merged ahead on all cores, this many at a time.
const PARALLEL_BLOCKED: usize = 1 << 20;
const AHEAD: usize = 64;

/// The merge of a long piece (a megabyte of one letter, DNA, base64: no break point, one
/// pre-tokenizer piece) in blocks of about [`BLOCK`] bytes, each merged alone on a heap that
/// stays in cache, so the cost is linear in the piece. Calls `part(end)` for each part's end,
/// in order, and returns true; false when two blocks did not agree on a part (what was
/// reported must then be dropped and the piece merged whole).
///
/// Exact by three properties of byte-pair encoding (the `bpe` crate's README proves them for
/// vocabularies whose every token is the merge of two earlier ones, as tiktoken's are): a
/// text has exactly one valid encoding (the merge's result); any run of consecutive tokens
/// of a valid encoding is the valid encoding of its bytes; two valid encodings that share a
/// token, one ending with it and the other starting with it, join into a valid encoding.
/// Each block overlaps the next by at least [`OVERLAP`] bytes and the two are joined at the
/// first part they share (same start and end). Long pieces have blocks at every multiple of
/// [`BLOCK`] merged ahead in parallel; where such a block does not meet the one before it
/// (a run of one letter whose parts repeat with a period the stride does not hold), the
/// next block starts at a part boundary of the one before instead, and consecutive blocks
/// of the same bytes are merged once.
pub(crate) fn merge_blocked(
    piece: &[u8],
    rank: &(dyn Fn(&[u8]) -> Option<u32> + Sync),
    part: &mut dyn FnMut(usize),
) -> bool {
    let n = piece.len();
    // A block's part boundaries, its start first and its end last.
    let merge = |s: usize| -> Vec<usize> {
        let e = (s + BLOCK + OVERLAP).min(n);
        std::iter::once(s).chain(long_ends(&piece[s..e], rank, &Bytes).into_iter().map(|x| x + s)).collect()
    };
    let parallel = n >= PARALLEL_BLOCKED && crate::parallel::threads() > 1;
    // Blocks at multiples of BLOCK, merged ahead.
    let mut ahead: std::collections::VecDeque<Vec<usize>> = Default::default();
    let mut cur = merge(0);
    // Parts up to `from` were reported; `from` is a boundary of `cur`.
    let mut from = 0;
    loop {
        let (s, e) = (cur[0], cur[cur.len() - 1]);
        if e == n {
            cur.iter().filter(|&&x| x > from).for_each(|&x| part(x));
            return true;
        }
        let mut joined = None;
        if parallel {
            while ahead.front().is_some_and(|b| b[0] <= s) {
                ahead.pop_front();
            }
            if ahead.is_empty() {
                let first = (s / BLOCK + 1) * BLOCK;
                let starts: Vec<usize> = (0..AHEAD).map(|k| first + k * BLOCK).take_while(|&x| x < n).collect();
                let bytes = |x: usize| &piece[x..(x + BLOCK + OVERLAP).min(n)];
                // A block of the same bytes as the one before is that merge, shifted.
                let same: Vec<bool> =
                    (0..starts.len()).map(|k| k > 0 && bytes(starts[k]) == bytes(starts[k - 1])).collect();
                let blocks: Vec<(usize, bool)> = starts.iter().copied().zip(same).collect();
                let merged = crate::parallel::map_largest_first(
                    &blocks,
                    blocks.len(),
                    |&(_, same)| usize::from(!same),
                    |&(x, same)| (!same).then(|| merge(x)),
                );
                for (k, m) in merged.into_iter().enumerate() {
                    let block = m.unwrap_or_else(|| {
                        let prev: &Vec<usize> = &ahead[k - 1];
                        prev.iter().map(|&x| x - starts[k - 1] + starts[k]).collect()
                    });
                    ahead.push_back(block);
                }
            }
            if let Some(next) = ahead.front().filter(|b| b[0] >= s + BLOCK / 2 && b[0] > from) {
                let k = cur.partition_point(|&x| x < next[0]);
                if let Some(p) = first_shared_part(&cur[k..], next).filter(|&p| p > from) {
                    joined = Some((p, ahead.pop_front().unwrap()));
                }
            }
        }
        if joined.is_none() {
            // The next block starts at this one's last part boundary at or before s + BLOCK.
            let k = cur.partition_point(|&x| x <= s + BLOCK) - 1;
            let next_s = cur[k];
            if next_s <= from {
                return false;
            }
            let next_e = (next_s + BLOCK + OVERLAP).min(n);
            let next = if next_e - next_s == e - s && piece[next_s..next_e] == piece[s..e] {
                cur.iter().map(|&x| x - s + next_s).collect()
            } else {
                merge(next_s)
            };
            let Some(p) = first_shared_part(&cur[k..], &next) else { return false };
            joined = Some((p, next));
        }
        let (p, next) = joined.unwrap();
        cur.iter().filter(|&&x| x > from && x <= p).for_each(|&x| part(x));
        from = p;
        cur = next;
    }
}

/// The start of the first part two merges share (the same start and end): `a` and `b` list
/// their part boundaries in order.
fn first_shared_part(a: &[usize], b: &[usize]) -> Option<usize> {
    let (mut i, mut j) = (0, 0);
    while i + 1 < a.len() && j + 1 < b.len() {
        if a[i] < b[j] {
            i += 1;
        } else if a[i] > b[j] {
            j += 1;
        } else if a[i + 1] == b[j + 1] {
            return Some(a[i]);
        } else {
            (i, j) = (i + 1, j + 1);
        }
    }
    None
}

/// How many parts `piece` has: [`merge_blocked`] when it is long, else one heap merge.
pub fn count_blocked(piece: &[u8], rank: &(dyn Fn(&[u8]) -> Option<u32> + Sync)) -> Option<usize> {
    let mut n = 0;
    merge_blocked(piece, rank, &mut |_| n += 1).then_some(n)
}

/// The parts of a long piece by [`merge_blocked`]; `None` when its blocks did not agree.
pub fn split_blocked<'p>(piece: &'p [u8], rank: &(dyn Fn(&[u8]) -> Option<u32> + Sync)) -> Option<Vec<&'p [u8]>> {
    let mut parts = Vec::with_capacity(piece.len() / 3);
    let mut start = 0;
    merge_blocked(piece, rank, &mut |end| {
        parts.push(&piece[start..end]);
        start = end;
    })
    .then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    #[test]
    fn both_merges_equal_tiktoken_rs() {
        // A vocabulary with overlapping merges, so merge order matters.
        let mut ranks: FxHashMap<Vec<u8>, u32> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
        for (i, t) in
            [&b"ab"[..], b"bc", b"abc", b"ca", b"cab", b"aa", b"aaa", b"bcab", b"  ", b"    "].iter().enumerate()
        {
            ranks.insert(t.to_vec(), 256 + i as u32);
        }
        let rank = |b: &[u8]| ranks.get(b).copied();
        assert_eq!((split(b"a", rank), count(b"a", rank)), (vec![&b"a"[..]], 1));
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in [2usize, 3, 5, 17, 31, 32, 33, 99, 126, 127, 128, 130, 400, 1000] {
            for _ in 0..40 {
                let piece: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        b"abc  "[(seed % 5) as usize]
                    })
                    .collect();
                let expected = tiktoken_rs::byte_pair_split(&piece, &ranks);
                assert_eq!(split(&piece, rank), expected, "piece {:?}", String::from_utf8_lossy(&piece));
                assert_eq!(count(&piece, rank), expected.len());
                assert_eq!(merge_long(&piece, &rank, &Bytes), expected);
            }
        }
    }
}

#[cfg(test)]
mod blocked_tests {
    use super::*;
    use crate::tokenize::engine::split::tests::xorshift;
    use crate::tokenize::engine::Vocab;

    /// Long break-free pieces of the kinds that reach the blocked merge: one letter, DNA,
    /// base64 (of zeros and of random bytes), random letters, Han, spaces, arbitrary bytes.
    fn pieces(len: usize) -> Vec<(String, Vec<u8>)> {
        let mut next = xorshift();
        let mut out: Vec<(String, Vec<u8>)> = ["z", "AAAA", " ", "中", "ab", "xyz"]
            .iter()
            .map(|u| (format!("{u:?}*"), u.repeat(len / u.len()).into_bytes()))
            .collect();
        for (name, alphabet) in [
            ("dna", "ACGT"),
            ("base64", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
            ("letters", "abcdefghijklmnopqrstuvwxyzéàü"),
            ("han", "中文字的一是不了人我在有他这为之大来以个"),
            ("ab", "ab"),
        ] {
            let chars: Vec<char> = alphabet.chars().collect();
            let s: String = (0..len).map(|_| chars[(next() % chars.len() as u64) as usize]).collect();
            out.push((name.to_string(), s.into_bytes()));
        }
        out.push(("bytes".to_string(), (0..len).map(|_| next() as u8).collect()));
        out
    }

    #[test]
    fn blocked_merge_equals_one_heap_merge() {
        for packed in
            [&include_bytes!("../data/cl100k_base.bin.z")[..], &include_bytes!("../data/o200k_base.bin.z")[..]]
        {
            let vocab = Vocab::unpack(packed);
            let rank = |b: &[u8]| vocab.rank(b);
            // lengths around the block sizes, and many blocks
            for len in [BLOCKED_PIECE, BLOCK + OVERLAP + 1, 3 * BLOCK + 7, 200_003, PARALLEL_BLOCKED + 3 * BLOCK + 7] {
                for (name, piece) in pieces(len) {
                    if len > PARALLEL_BLOCKED && !["\"z\"*", "\"xyz\"*", "dna", "letters"].contains(&name.as_str()) {
                        continue; // blocks merged ahead in parallel: a few kinds (the heap merge is slow)
                    }
                    let whole = merge_long(&piece, &rank, &Bytes);
                    let blocked = split_blocked(&piece, &rank).unwrap_or_else(|| panic!("{name} {len}: no seam"));
                    assert!(blocked == whole, "{name} {len}: blocked merge differs");
                    assert_eq!(count_blocked(&piece, &rank), Some(whole.len()), "{name} {len}");
                }
            }
        }
    }

    #[test]
    fn shared_part_is_found_where_both_merges_cut_alike() {
        // a: parts [10,12) [12,15) [15,20); b: [10,13) [13,15) [15,20)
        assert_eq!(first_shared_part(&[10, 12, 15, 20], &[10, 13, 15, 20]), Some(15));
        assert_eq!(first_shared_part(&[10, 12, 15], &[10, 12, 15]), Some(10));
        assert_eq!(first_shared_part(&[10, 12, 14], &[10, 11, 13, 14]), None);
        assert_eq!(first_shared_part(&[8, 10, 12], &[9, 10, 12]), Some(10));
        assert_eq!(first_shared_part(&[10], &[10, 12]), None);
    }
}
