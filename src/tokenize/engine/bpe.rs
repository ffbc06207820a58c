//! Byte-pair merging of one pre-tokenizer piece, with tiktoken's exact result: repeatedly
//! merge the adjacent pair of lowest rank, the leftmost among equal ranks.
//!
//! Short pieces (nearly all) rescan their few pair ranks per merge; long ones (a 1 MB run of
//! one letter is a single piece) use a heap so the cost stays O(n log n).

/// Pieces at least this long are merged with the heap.
pub const LONG_PIECE: usize = 128;

/// Pieces at least this long are counted and encoded by the vocabulary's backtracking
/// encoder ([`super::Vocab::giant`]): the heap merge needs ~21 bytes per input byte. Above
/// 100 KB so common long pieces never pay the encoder's construction (seconds for o200k).
pub const GIANT_PIECE: usize = 1 << 20;

const NONE: u32 = u32::MAX;

/// The BPE parts of `piece` (2+ bytes), every part a token: `rank` must know every single
/// byte, which byte-level vocabularies guarantee.
pub fn split(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>) -> Vec<&[u8]> {
    if piece.len() >= LONG_PIECE {
        return merge_long(piece, &rank);
    }
    if piece.len() < 2 {
        return vec![piece];
    }
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    let len = merge_short(piece, &rank, &mut parts);
    parts[..len].windows(2).map(|w| &piece[w[0].0 as usize..w[1].0 as usize]).collect()
}

/// How many parts [`split`] gives `piece`, without building them: counting a piece never
/// seen before allocates nothing (a short piece merges in a table on the stack).
pub fn count(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>) -> usize {
    if piece.len() >= LONG_PIECE {
        return merge_long(piece, &rank).len();
    }
    if piece.len() < 2 {
        return 1;
    }
    let mut parts = [(0u32, NONE); LONG_PIECE + 1];
    merge_short(piece, &rank, &mut parts) - 1
}

/// Merges a piece shorter than [`LONG_PIECE`] in `parts`: on return `parts[..len]` holds each
/// part's start, then the piece's end; `len` is returned. Each entry also holds the rank of
/// the pair its part starts (rescanned per merge: few pairs, no heap).
fn merge_short(piece: &[u8], rank: &impl Fn(&[u8]) -> Option<u32>, parts: &mut [(u32, u32); LONG_PIECE + 1]) -> usize {
    let n = piece.len();
    debug_assert!((2..LONG_PIECE).contains(&n));
    for (i, part) in parts[..n - 1].iter_mut().enumerate() {
        *part = (i as u32, rank(&piece[i..i + 2]).unwrap_or(NONE));
    }
    // two sentinels: the last byte's part and the end
    parts[n - 1] = ((n - 1) as u32, NONE);
    parts[n] = (n as u32, NONE);
    let mut len = n + 1;
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
        len -= 1;
    }
}

/// The heap-based merge: parts form a linked list; a min-heap of (rank, start) holds
/// candidate pairs, and stale entries (a part that has since changed) are skipped.
pub(crate) fn merge_long<'p>(piece: &'p [u8], rank: &dyn Fn(&[u8]) -> Option<u32>) -> Vec<&'p [u8]> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    // Positions are u32, so a byte of the piece costs 9 bytes of links plus 12 per heap
    // entry (41 with usize). A piece over 4 GB is merged in 4 GB parts, which may differ
    // from one whole merge at the seam: a bounded overcount, never a panic.
    const MAX: usize = u32::MAX as usize;
    if piece.len() > MAX {
        let (a, b) = piece.split_at(MAX);
        let mut parts = merge_long(a, rank);
        parts.extend(merge_long(b, rank));
        return parts;
    }
    let n = piece.len() as u32;
    // Part i spans [i, end[i]); prev links the live parts by their start.
    let mut end: Vec<u32> = (1..=n).collect();
    let mut prev: Vec<u32> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut live = vec![true; n as usize];
    let rank_of = |a: u32, b_end: u32| rank(&piece[a as usize..b_end as usize]);
    let mut heap = BinaryHeap::new();
    for i in 0..n.saturating_sub(1) {
        if let Some(r) = rank_of(i, i + 2) {
            heap.push(Reverse((r, i, i + 2)));
        }
    }
    while let Some(Reverse((_, start, pair_end))) = heap.pop() {
        // Valid only if `start` is live and its pair still spans exactly [start, pair_end).
        if !live[start as usize] {
            continue;
        }
        let mid = end[start as usize];
        if mid >= n || end[mid as usize] != pair_end || !live[mid as usize] {
            continue;
        }
        live[mid as usize] = false;
        end[start as usize] = pair_end;
        if pair_end < n {
            prev[pair_end as usize] = start;
        }
        // New candidate pairs: (prev, merged) and (merged, next).
        let p = prev[start as usize];
        if p < n {
            if let Some(r) = rank_of(p, pair_end) {
                heap.push(Reverse((r, p, pair_end)));
            }
        }
        if pair_end < n {
            let next_end = end[pair_end as usize];
            if let Some(r) = rank_of(start, next_end) {
                heap.push(Reverse((r, start, next_end)));
            }
        }
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < n {
        parts.push(&piece[i as usize..end[i as usize] as usize]);
        i = end[i as usize];
    }
    parts
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
        for len in [2usize, 3, 5, 17, 99, 126, 127, 128, 130, 400, 1000] {
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
                assert_eq!(merge_long(&piece, &rank), expected);
            }
        }
    }
}
