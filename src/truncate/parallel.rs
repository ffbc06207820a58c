//! The one counting pass over a whole text, in parallel chunks for long texts.

use super::*;

/// Texts at least this long are counted in parallel chunks (exact backends with pieces).
pub(super) const PARALLEL_COUNT_MIN_BYTES: usize = 1 << 20;
/// Chunks are at least this long...
pub(super) const PARALLEL_CHUNK_MIN_BYTES: usize = 256 << 10;
/// ...and a chunk's split must meet its neighbour's within this many bytes past the seam.
pub(super) const PARALLEL_SYNC_BYTES: usize = 16 << 10;
/// A worker's split may differ from the true one this close to the end of the slice it splits.
pub(super) const SLICE_MARGIN: usize = 256;

/// `backend.count(text)`, computed in parallel chunks for texts of 1 MiB or more when the backend
/// is exact and has pieces. A backend that counts in parallel itself (the engine, which cuts
/// at places no piece crosses and counts each chunk on its fast path) is simply asked. Relies on what the `Backend` contract implies for exact backends:
/// the pieces' `count_piece` add up to `count`; and on the pre-tokenizer deciding each piece from
/// the rest of the text with little look-around (see [`count_pieces_parallel`]). Falls back to
/// `backend.count` whenever a chunk's pieces do not line up.
pub fn count_text(backend: &dyn Backend, text: &str) -> usize {
    if backend.counts_in_parallel() {
        return backend.count(text);
    }
    if text.len() >= PARALLEL_COUNT_MIN_BYTES && backend.is_exact() && crate::parallel::threads() > 1 {
        let chunks = (crate::parallel::threads() * 4).min(text.len() / PARALLEL_CHUNK_MIN_BYTES);
        if let Some(n) = count_pieces_parallel(backend, text, chunks, PARALLEL_SYNC_BYTES) {
            return n;
        }
    }
    backend.count(text)
}

/// A chunk's walk: boundaries (piece starts, and the text end) with the tokens walked before
/// them, near the chunk's start and just past its end.
pub(super) struct ChunkWalk {
    pub(super) head: Vec<(usize, usize)>,
    pub(super) tail: Vec<(usize, usize)>,
}

/// Sum of `count_piece` over the pieces of `text`, with `chunks` workers each splitting from
/// its own start. A split started mid-text may differ from the true one at first, but once it
/// shares a boundary with it they coincide (each piece is matched on the rest of the text), so
/// each worker walks past its end until its boundaries meet the next worker's, and the counts
/// are joined there. A worker splits only up to a little past where it may meet the next one
/// (some backends split eagerly) and trusts no boundary within [`SLICE_MARGIN`] bytes of its
/// slice's end: this assumes, as tiktoken-style patterns do, that a piece is decided by the text
/// it covers and a few characters of look-around. `None` when the pieces do not tile the text or
/// a seam does not meet within `sync` bytes (e.g. one giant piece): count sequentially instead.
pub(super) fn count_pieces_parallel(backend: &dyn Backend, text: &str, chunks: usize, sync: usize) -> Option<usize> {
    let len = text.len();
    let mut starts = vec![0];
    for k in 1..chunks.max(1) {
        let target = ceil_boundary(text, len / chunks * k);
        // Start after a newline when one is near: splits meet sooner there.
        let start = text[target..].find('\n').filter(|&i| i < 4096).map_or(target, |i| target + i + 1);
        if start > starts[starts.len() - 1] && start < len {
            starts.push(start);
        }
    }
    if starts.len() < 2 {
        return None;
    }
    // Chunks of about one size: each is taken alone by the calling thread or the pool's.
    let chunk_of: Vec<usize> = (0..starts.len()).collect();
    let walks: Vec<Option<ChunkWalk>> = crate::parallel::map_largest_first(
        &chunk_of,
        len,
        |&k| starts.get(k + 1).copied().unwrap_or(len) - starts[k],
        |&k| {
            let start = starts[k];
            let end = starts.get(k + 1).copied().unwrap_or(len);
            // Boundaries from here on are not needed (and near the slice's end, not trusted).
            let stop = end.saturating_add(sync).min(len);
            let slice_end = ceil_boundary(text, stop.saturating_add(SLICE_MARGIN));
            let mut walk = ChunkWalk { head: Vec::new(), tail: Vec::new() };
            let (mut pos, mut tokens) = (start, 0usize);
            for piece in backend.pieces(&text[start..slice_end])? {
                if piece.is_empty() {
                    continue;
                }
                if offset_in(text, piece)? != pos {
                    return None;
                }
                if pos >= stop {
                    return Some(walk);
                }
                if pos < start + sync {
                    walk.head.push((pos, tokens));
                }
                if pos >= end {
                    walk.tail.push((pos, tokens));
                }
                tokens = tokens.saturating_add(backend.count_piece(piece));
                pos += piece.len();
            }
            if pos != slice_end {
                return None;
            }
            if slice_end == len {
                walk.head.push((len, tokens));
                walk.tail.push((len, tokens));
            }
            Some(walk)
        },
    );
    let mut total = 0;
    // Where the current worker's split is known to be the true one, and its tokens before that.
    let (mut synced, mut from) = (0, 0);
    for k in 0..walks.len() {
        let walk = walks[k].as_ref()?;
        let Some(next) = walks.get(k + 1) else {
            total += walk.tail.last()?.1 - from;
            break;
        };
        let next = next.as_ref()?;
        // The first boundary past the seam (and past where this worker's split became the true
        // one) that both splits have; both lists are sorted.
        let after = starts[k + 1].max(synced);
        let (mut i, mut j) = (0, 0);
        let (at, here, there) = loop {
            let (a, b) = (walk.tail.get(i)?, next.head.get(j)?);
            if a.0 <= after || a.0 < b.0 {
                i += 1;
            } else if b.0 < a.0 {
                j += 1;
            } else {
                break (a.0, a.1, b.1);
            }
        };
        total += here - from;
        (synced, from) = (at, there);
    }
    Some(total)
}
