//! The counting engine for byte-level BPE vocabularies whose pre-tokenizer pattern it knows
//! by heart (cl100k_base, o200k_base).
//!
//! Per piece of the hand-written split ([`split`], 64 ASCII bytes at a time by [`blocks`]),
//! in order of cost:
//! 1. the piece was counted before on this thread: one probe of the thread's hot table of
//!    recent pieces (2,048; 32,768 for a larger working vocabulary; 131,072 once that one
//!    misses often), else one probe of one line of a bounded per-thread table of short
//!    pieces packed inline with their counts ([`pieces`]), large enough for a working
//!    vocabulary of code and prose. Those probes go sixteen pieces behind the split, their
//!    lines asked of memory as the pieces are found;
//! 2. a piece of one or two bytes: one token, or two when the pair is not one (a dense
//!    table of pairs);
//! 3. the piece is one token (a word with its leading space, usually): one probe of the
//!    vocabulary;
//! 4. byte-pair merge ([`bpe`]), for a piece with characters past ASCII started from whole
//!    characters where that gives the same result ([`chars`]).
//!
//! Pieces longer than a packed key are looked up in the vocabulary, then in a smaller
//! per-thread map by their bytes.
//!
//! Counting never builds ids, and `count_until` stops once a limit is passed.

pub mod blocks;
pub mod bpe;
pub mod chars;
pub mod classes;
pub mod ids;
pub mod long_pieces;
pub mod merges;
pub mod pieces;
pub mod split;
pub mod vocab;

use std::cell::RefCell;

use blocks::{Classify, OverBlocks};
pub use split::{Pattern, Splitter};
pub use vocab::Vocab;
use vocab::{pack_at, SHORT};

/// Vocabularies the per-thread caches are kept apart for (one slot each).
pub const SLOTS: usize = 2;

/// Longer pieces (indentation, rules of `=`, long words) are cached by their bytes up to
/// this length ([`long_pieces`]).
const LONG_CACHED: usize = long_pieces::MAX_LEN;

/// One thread's caches for one vocabulary: short pieces packed inline in a bounded table,
/// longer ones by their bytes.
#[derive(Default)]
struct PieceCache {
    table: pieces::PieceTable,
    long: long_pieces::LongPieces,
}

thread_local! {
    static PIECES: [RefCell<PieceCache>; SLOTS] = Default::default();
    static IDS: [RefCell<ids::IdCache>; SLOTS] = Default::default();
}

/// Pieces of more than one token whose ids a thread keeps per vocabulary: [`ids::ENTRIES`],
/// and at most an eighth of the piece table's bound (none when that is 0: the caches off).
fn ids_bound() -> usize {
    ids::ENTRIES.min(pieces::entries() / 8)
}

/// Short pieces split ahead of their table probes (see [`Engine::count_serial`]).
const AHEAD: usize = 16;

/// Texts this long are counted in chunks on all cores. Each core keeps its own piece table,
/// so a text cut smaller is counted by cores that each learn its words: for source code of
/// 32 KB to 256 KB, in chunks of 16 KB on two cores, no faster than on one (`count_serial`).
/// From 512 KiB, in chunks of up to 256 KiB, a log counted again is 1.2-1.5x faster on two
/// cores and its first pass no slower at the median (benches/RESULTS.md, 2026-11-27).
const PARALLEL_MIN: usize = 512 << 10;
const PARALLEL_CHUNK: usize = 256 << 10;

/// Chunks are no shorter than this, however many threads there are: each thread learns the
/// words of the text it counts, and source code in chunks of 16 KB was counted no faster on
/// two threads than on one (above). Not measured on many cores.
const PARALLEL_CHUNK_MIN: usize = 64 << 10;

/// How long the chunks of a text of `len` bytes are on `threads` threads: as many chunks as
/// make them at most [`PARALLEL_CHUNK`] long, rounded up to a multiple of the threads so each
/// counts as many, and none shorter than [`PARALLEL_CHUNK_MIN`]. A 750 KB log in three
/// chunks of 256 KiB kept one of two threads counting two while the other had finished.
fn chunk_len(len: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let rounds = len.div_ceil(threads * PARALLEL_CHUNK);
    let count = (rounds * threads).min(len / PARALLEL_CHUNK_MIN).max(1);
    len.div_ceil(count)
}

/// `text` cut into chunks of about `size` bytes at places no piece of any pattern crosses:
/// after a line break, before an ASCII character that is neither whitespace nor `/`. A line
/// break ends every piece that holds it when no whitespace follows (whitespace pieces end at
/// their last break; punctuation takes breaks only up to the next non-break, and o200k's
/// slashes after them too), and a letter or punctuation piece's optional prefix is never a
/// break. A text with no such place stays whole.
pub fn chunks(text: &str, size: usize) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / size + 1);
    let mut start = 0;
    while b.len() - start > size {
        let from = start + size;
        let cut = b[from..].windows(2).position(|w| (w[0] == b'\n' || w[0] == b'\r') && starts_a_chunk(w[1]));
        match cut {
            Some(k) => {
                out.push(&text[start..from + k + 1]);
                start = from + k + 1;
            }
            None => break,
        }
    }
    out.push(&text[start..]);
    out
}

/// Whether a chunk may start at this byte after a line break ([`chunks`]). With letters
/// alone, a log whose every line starts with its time had no place to cut and was counted
/// on one thread.
fn starts_a_chunk(b: u8) -> bool {
    b.is_ascii_graphic() && b != b'/'
}

/// A vocabulary with its pattern: everything counting and encoding need.
#[derive(Clone, Copy)]
pub struct Engine {
    pub pattern: Pattern,
    pub vocab: &'static Vocab,
    /// Which per-thread cache this vocabulary uses.
    pub slot: usize,
}

impl Engine {
    pub fn pieces<'t>(&self, text: &'t str) -> Splitter<'t> {
        Splitter::new(text, self.pattern)
    }

    #[inline(always)]
    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.vocab.rank(bytes)
    }

    /// Tokens of a piece longer than a packed key. Up to [`LONG_CACHED`] bytes the thread's
    /// map is asked first, whole tokens included: one hash of the piece where it was seen.
    fn count_long(&self, cache: &mut PieceCache, piece: &[u8]) -> usize {
        if piece.len() > LONG_CACHED {
            if self.rank(piece).is_some() {
                return 1;
            }
            if piece.len() >= bpe::BLOCKED_PIECE {
                return self.count_huge(piece);
            }
            return self.merge_count(piece);
        }
        if let Some(n) = cache.long.get(piece) {
            return n;
        }
        let n = if self.rank(piece).is_some() { 1 } else { self.merge_count(piece) };
        cache.long.insert(piece, n, long_pieces::ENTRIES.min(pieces::entries() / 16));
        n
    }

    /// Tokens of a piece of [`bpe::BLOCKED_PIECE`] bytes or more: merged in blocks, in linear
    /// time; should two blocks not agree on a part, merged whole (the backtracking encoder
    /// for giant pieces, whose memory is a few bits per byte, else the heap).
    fn count_huge(&self, piece: &[u8]) -> usize {
        if let Some(n) = bpe::count_blocked(piece, &|b| self.rank(b)) {
            return n;
        }
        if piece.len() >= bpe::GIANT_PIECE {
            return self.vocab.giant().count(piece);
        }
        self.merge_count(piece)
    }

    /// Token ids of a piece that is not one token.
    fn encode_piece(&self, b: &[u8], out: &mut Vec<u32>) {
        if b.len() >= bpe::BLOCKED_PIECE {
            if let Some(parts) = bpe::split_blocked(b, &|x| self.rank(x)) {
                return out.extend(parts.into_iter().filter_map(|part| self.rank(part)));
            }
            if b.len() >= bpe::GIANT_PIECE {
                return out.extend(self.vocab.giant().encode_via_backtracking(b));
            }
        }
        chars::ids_into(b, self.vocab, out);
    }

    /// Tokens of `piece` by byte-pair merge, started from whole characters where that gives
    /// the same merge, and cut where no token crosses ([`chars`]): for Chinese, a lookup per
    /// character where the merge from bytes made two merges, and runs of a few characters
    /// merged alone.
    fn merge_count(&self, piece: &[u8]) -> usize {
        chars::count(piece, self.vocab)
    }

    /// Tokens of the piece made of the first `n` bytes of `rest` (the text from its start:
    /// the key is packed with one load that may read past the piece, see [`pack_at`]).
    #[inline(always)]
    fn count_span_with(&self, cache: &mut PieceCache, rest: &[u8], n: usize) -> usize {
        if n > SHORT {
            return self.count_long(cache, &rest[..n]);
        }
        let key = pack_at(rest, n);
        match cache.table.get_hot(key) {
            Some(count) => count,
            None => self.count_packed(cache, &[key]),
        }
    }

    /// Tokens of a short piece the table missed. One of one or two bytes is answered by the
    /// dense table of pairs; such pieces are a third of source code's (operators, breaks, a
    /// space), and they go through the piece table all the same: asked first by its length,
    /// a branch the predictor misses on every other piece of code, they cost more than their
    /// hot-table probe (steady source code 1.2x faster so, benches/RESULTS.md, 2026-11-27).
    #[inline(always)]
    fn count_short(&self, piece: &[u8], key: u128) -> usize {
        if let Some(count) = self.vocab.count_tiny(piece) {
            return count;
        }
        if self.vocab.rank_packed(key).is_some() {
            return 1;
        }
        self.merge_count(piece)
    }

    fn with_cache<R>(&self, f: impl FnOnce(&mut PieceCache) -> R) -> R {
        PIECES.with(|slots| {
            let mut cache = slots[self.slot].borrow_mut();
            cache.table.ready();
            f(&mut cache)
        })
    }

    pub fn count_piece(&self, piece: &str) -> usize {
        self.with_cache(|cache| self.count_span_with(cache, piece.as_bytes(), piece.len()))
    }

    /// Tokens of `text`. A text of `PARALLEL_MIN` bytes or more is counted in chunks that
    /// the calling thread and the pool's threads take in turn
    /// ([`crate::parallel::map_largest_first`]): the caller starts at once, where a parallel
    /// iterator waited for the pool's threads to wake (a 1 MB log truncated with its whole
    /// count after a pause of 20 ms: 2.4 against 1.6 ms, benches/RESULTS.md, 2026-11-27).
    pub fn count(&self, text: &str) -> usize {
        if text.len() >= PARALLEL_MIN {
            let size = chunk_len(text.len(), crate::parallel::threads());
            let parts = chunks(text, size);
            let counts = crate::parallel::map_largest_first(&parts, text.len(), |p| p.len(), |p| self.count_serial(p));
            return counts.into_iter().sum();
        }
        self.count_serial(text)
    }

    /// Tokens of `text` on this thread. Short pieces are split [`AHEAD`] at a time before
    /// their table probes, each probe's set asked of memory as its piece is found: on a
    /// working vocabulary of megabytes most probes miss the core's caches, and this way the
    /// misses overlap with each other and with the splitting.
    fn count_serial(&self, text: &str) -> usize {
        self.with_cache(|cache| blocks::widest(CountSpans { engine: self, cache, text }))
    }

    /// Tokens of short pieces already packed, from the table or merged (and then stored).
    #[inline(always)]
    fn count_packed(&self, cache: &mut PieceCache, queue: &[u128]) -> usize {
        let mut n = 0;
        for &key in queue {
            let count = match cache.table.get(key) {
                Some(count) => count,
                None => {
                    // The key holds the piece: its bytes, then its length in the last byte.
                    let bytes = key.to_le_bytes();
                    let count = self.count_short(&bytes[..usize::from(bytes[15])], key);
                    cache.table.insert(key, count);
                    count
                }
            };
            cache.table.keep_hot(key, count);
            n += count;
        }
        n
    }

    /// The count of `text` if it is at most `limit`, else `None`, having read only as far
    /// as the piece that passed the limit.
    pub fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        self.with_cache(|cache| blocks::widest(CountSpansUntil { engine: self, cache, text, limit }))
    }

    /// Token ids of `text`. A piece of more than one token is merged once per thread and
    /// its ids kept ([`ids`]), up to [`LONG_CACHED`] bytes.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.encode_keeping(text, ids_bound())
    }

    /// [`Self::encode`] keeping the ids of at most `bound` pieces.
    fn encode_keeping(&self, text: &str, bound: usize) -> Vec<u32> {
        IDS.with(|slots| {
            let cache = &mut *slots[self.slot].borrow_mut();
            blocks::widest(EncodeSpans { engine: self, cache, text, bound })
        })
    }
}

/// [`Engine::count_serial`]'s loop, its blocks classified as [`blocks::widest`] chooses.
struct CountSpans<'a> {
    engine: &'a Engine,
    cache: &'a mut PieceCache,
    text: &'a str,
}

impl OverBlocks for CountSpans<'_> {
    type Out = usize;
    #[inline(always)]
    fn run(self, classify: impl Classify) -> usize {
        let CountSpans { engine, cache, text } = self;
        let mut n = 0;
        let mut queue = [0u128; AHEAD];
        let mut queued = 0;
        engine.pieces(text).for_each_span_with(classify, |rest, len| {
            if len > SHORT {
                n += engine.count_long(cache, &rest[..len]);
                return true;
            }
            let key = pack_at(rest, len);
            if let Some(count) = cache.table.get_hot(key) {
                n += count;
                return true;
            }
            cache.table.prefetch(key);
            queue[queued] = key;
            queued += 1;
            if queued == AHEAD {
                n += engine.count_packed(cache, &queue);
                queued = 0;
            }
            true
        });
        n + engine.count_packed(cache, &queue[..queued])
    }
}

/// [`Engine::count_until`]'s loop, its blocks classified as [`blocks::widest`] chooses.
struct CountSpansUntil<'a> {
    engine: &'a Engine,
    cache: &'a mut PieceCache,
    text: &'a str,
    limit: usize,
}

impl OverBlocks for CountSpansUntil<'_> {
    type Out = Option<usize>;
    #[inline(always)]
    fn run(self, classify: impl Classify) -> Option<usize> {
        let CountSpansUntil { engine, cache, text, limit } = self;
        let longest = engine.vocab.longest();
        let mut n = 0usize;
        engine.pieces(text).for_each_span_with(classify, |rest, len| {
            // A piece past the limit by its length alone is not encoded (a megabyte of
            // one letter, DNA, base64 of zeros: one piece, seconds of merging).
            let at_least = n.saturating_add(len / longest);
            n = if at_least > limit { at_least } else { n + engine.count_span_with(cache, rest, len) };
            n <= limit
        });
        (n <= limit).then_some(n)
    }
}

/// [`Engine::encode_keeping`]'s loop, its blocks classified as [`blocks::widest`] chooses.
struct EncodeSpans<'a> {
    engine: &'a Engine,
    cache: &'a mut ids::IdCache,
    text: &'a str,
    bound: usize,
}

impl OverBlocks for EncodeSpans<'_> {
    type Out = Vec<u32>;
    #[inline(always)]
    fn run(self, classify: impl Classify) -> Vec<u32> {
        let EncodeSpans { engine, cache, text, bound } = self;
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        engine.pieces(text).for_each_span_with(classify, |rest, len| {
            let piece = &rest[..len];
            if len <= SHORT {
                let key = pack_at(rest, len);
                if cache.extend_hot(key, &mut out) {
                    return true;
                }
                match engine.rank(piece) {
                    Some(r) => {
                        out.push(r);
                        cache.keep_token(key, r, bound);
                    }
                    None => cache.extend_short(key, bound, &mut out, |o| engine.encode_piece(piece, o)),
                }
            } else if let Some(r) = engine.rank(piece) {
                out.push(r);
            } else if len <= LONG_CACHED {
                cache.extend_long(piece, bound, &mut out, |o| engine.encode_piece(piece, o));
            } else {
                engine.encode_piece(piece, &mut out);
            }
            true
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::{Backend, OpenAiEncoding};

    #[test]
    fn kept_ids_encode_as_a_fresh_merge() {
        // Words of several tokens, short and long (past a packed key, and past LONG_CACHED),
        // in several scripts, each met many times.
        let unit = format!(
            "fn parse_configuration_entries() {{ let rétablissement = 42; }} 上下文窗口的令牌计数 {} {}\n",
            "Donaudampfschifffahrtsgesellschaftskapitän",
            "x".repeat(LONG_CACHED + 7),
        );
        let text = unit.repeat(20);
        for name in ["cl100k_base", "o200k_base"] {
            let enc = OpenAiEncoding::get(name).unwrap();
            let engine = enc.engine();
            let mut fresh = Vec::new();
            engine.pieces(&text).for_each_bytes(|b| {
                match engine.rank(b) {
                    Some(r) => fresh.push(r),
                    None => {
                        fresh.extend(bpe::split(b, |x| engine.rank(x)).into_iter().map(|p| engine.rank(p).unwrap()))
                    }
                }
                true
            });
            assert!(fresh.len() > 20 * 30, "{name}");
            // bound 0 keeps nothing; 3 empties the cache again and again; the default keeps all
            for bound in [0, 3, ids::ENTRIES] {
                for pass in 0..2 {
                    assert_eq!(engine.encode_keeping(&text, bound), fresh, "{name} bound {bound} pass {pass}");
                }
            }
        }
    }

    #[test]
    fn chunked_count_equals_serial_count() {
        let unit =
            "fn main() {\n    let x = 42; // the answer\n}\nWord after break.\r\nZ  \n\n  \nétat 中文\n'quoted'\n";
        let text = unit.repeat((PARALLEL_MIN / unit.len()) * 3);
        let parts = chunks(&text, PARALLEL_CHUNK);
        assert!(parts.len() > 4);
        assert_eq!(parts.concat(), text);
        for name in ["cl100k_base", "o200k_base"] {
            let enc = OpenAiEncoding::get(name).unwrap();
            let serial: usize = enc.pieces(&text).unwrap().map(|p| enc.count_piece(p)).sum();
            assert_eq!(enc.count(&text), serial, "{name}");
            assert_eq!(enc.encode(&text).unwrap().len(), serial, "{name}");
        }
        // A text just at the threshold is cut too: the threshold is worth its chunks.
        assert!(chunks(&unit.repeat(PARALLEL_MIN / unit.len() + 1), PARALLEL_CHUNK).len() >= 2);
        // No cut point: one chunk.
        assert_eq!(chunks(&"x".repeat(1000), 100).len(), 1);
    }

    /// Every place `chunks` may cut leaves each pattern's pieces as they were: the regex of
    /// each, run on the chunks, gives the pieces it gives on the whole text. The text puts
    /// every ASCII character after breaks that follow each kind of piece.
    #[test]
    fn chunks_are_cut_where_no_piece_of_any_pattern_crosses() {
        let before = ["x", "  ", ".", "42", "\u{4E2D}", "'s", " \t", "\u{3000}", "(", "/"];
        let breaks = ["\n", "\r\n", "\n\n", " \n", "\n\r"];
        let mut text = String::new();
        for b in before {
            for br in breaks {
                for c in (0x21u8..0x7F).map(char::from) {
                    text.push_str(&format!("{b}{br}{c}{c}s 1\u{301}"));
                }
            }
        }
        let split = |re: &fancy_regex::Regex, t: &str| -> Vec<String> {
            re.find_iter(t).map(|m| m.unwrap().as_str().to_owned()).collect()
        };
        let parts = chunks(&text, 1);
        assert!(parts.len() > 4000, "{} chunks", parts.len());
        for pattern in [split::CL100K, split::O200K, split::QWEN] {
            let re = fancy_regex::Regex::new(pattern).unwrap();
            let chunked: Vec<String> = parts.iter().flat_map(|p| split(&re, p)).collect();
            assert_eq!(chunked, split(&re, &text), "{pattern}");
        }
        // and the engine's own splitter counts the chunks as the whole
        for name in ["cl100k_base", "o200k_base"] {
            let enc = OpenAiEncoding::get(name).unwrap();
            let serial: usize = enc.pieces(&text).unwrap().map(|p| enc.count_piece(p)).sum();
            assert_eq!(parts.iter().map(|p| enc.count(p)).sum::<usize>(), serial, "{name}");
        }
        // A cut before a slash would not be: o200k's punctuation takes it after the break.
        let re = fancy_regex::Regex::new(split::O200K).unwrap();
        assert_eq!(split(&re, ".\n/x"), [".\n/", "x"]);
    }

    #[test]
    fn chunks_come_in_a_multiple_of_the_threads() {
        let kib = 1 << 10;
        let count = |len: usize, threads| len.div_ceil(chunk_len(len, threads));
        assert_eq!(count(750_000, 2), 4, "a 750 KB log on two threads: two chunks each");
        assert_eq!(count(512 * kib, 2), 2);
        assert_eq!(count(10_000_000, 2), 40);
        assert_eq!(count(10_000_000, 16), 48);
        assert!(chunk_len(10_000_000, 16) <= PARALLEL_CHUNK);
        // many threads: as many chunks as the floor allows
        assert_eq!(count(750_000, 16), 11);
        assert!(chunk_len(750_000, 16) >= PARALLEL_CHUNK_MIN);
        assert_eq!(count(750_000, 1), 3);
        // what `chunks` makes of it: cut a little past each length, the last one shorter
        let line = "2026-01-01T00:00:00.000Z INFO  api-gateway req=7467 GET /v1/search status=200\n";
        let text = line.repeat(750_000 / line.len());
        let parts = chunks(&text, chunk_len(text.len(), 2));
        assert_eq!(parts.len(), 4);
        let longest = parts.iter().map(|p| p.len()).max().unwrap();
        let shortest = parts.iter().map(|p| p.len()).min().unwrap();
        assert!(longest - shortest < 4 * line.len(), "{longest} against {shortest}");
    }

    /// Each embedded encoding, with its vocabulary unpacked apart from the engine's: the
    /// reference that cached and queued counts are merged against.
    fn engines_with_references() -> Vec<(&'static str, OpenAiEncoding, Vocab)> {
        [
            ("cl100k_base", &include_bytes!("../data/cl100k_base.bin.z")[..]),
            ("o200k_base", &include_bytes!("../data/o200k_base.bin.z")[..]),
        ]
        .into_iter()
        .map(|(name, packed)| (name, OpenAiEncoding::get(name).unwrap(), Vocab::unpack(packed)))
        .collect()
    }

    #[test]
    fn cached_counts_equal_fresh_merges() {
        // Far more distinct short pieces than a small table holds, so sets overflow and
        // entries are pushed out; every count, first or cached, must equal a merge of its own.
        let _guard = pieces::tests::BOUND.lock().unwrap_or_else(|p| p.into_inner());
        pieces::set_entries(1024);
        let mut next = split::tests::xorshift();
        let alphabet = b"abcdefghij _=(";
        let pieces: Vec<Vec<u8>> = (0..20_000)
            .map(|_| {
                let n = 1 + (next() % SHORT as u64) as usize;
                (0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect()
            })
            .collect();
        for (name, enc, vocab) in engines_with_references() {
            let fresh: Vec<usize> = pieces.iter().map(|p| bpe::split(p, |b| vocab.rank(b)).len()).collect();
            for round in 0..3 {
                for (p, &fresh) in pieces.iter().zip(&fresh) {
                    let piece = std::str::from_utf8(p).unwrap();
                    assert_eq!(enc.count_piece(piece), fresh, "{name} round {round}: {piece:?}");
                }
            }
        }
        pieces::set_entries(pieces::DEFAULT_ENTRIES);
    }

    #[test]
    fn counts_of_queued_pieces_equal_fresh_merges() {
        // Whole texts through `count_serial`'s queue, on a table of a few sets and on the
        // default one, with its hot table: a piece that repeats inside one queue, pieces
        // evicted between queues or pushed out of a hot slot, tiny and long pieces between
        // short ones; each text's count must equal its pieces merged one by one.
        let _guard = pieces::tests::BOUND.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = split::tests::xorshift();
        let common = ["a", "ab", "abc", "the", " the", "x_y", "zzzzzzzz", "(", ") ", "=", "\n", "Ωμέγα", "中文"];
        // Far more distinct words than the hot table has slots.
        let rare: Vec<String> = (0..pieces::HOT_ENTRIES * 4).map(|k| format!(" q{}z", k * 7919 % 100_000)).collect();
        let words: Vec<&str> = common.iter().copied().chain(rare.iter().map(String::as_str)).collect();
        let texts: Vec<String> = (0..300)
            .map(|_| {
                let n = (next() % 80) as usize;
                let mut t: String = (0..n)
                    .map(|_| {
                        let k = next() as usize;
                        if k.is_multiple_of(2) {
                            common[k / 2 % common.len()]
                        } else {
                            words[k / 2 % words.len()]
                        }
                    })
                    .collect();
                if next().is_multiple_of(4) {
                    t.push_str(&"word".repeat(10)); // longer than a packed key
                }
                t
            })
            .collect();
        for (name, enc, vocab) in engines_with_references() {
            for round in 0..4 {
                pieces::set_entries(if round < 2 { 64 } else { pieces::DEFAULT_ENTRIES });
                for text in &texts {
                    let fresh: usize =
                        enc.pieces(text).unwrap().map(|p| bpe::split(p.as_bytes(), |b| vocab.rank(b)).len()).sum();
                    assert_eq!(enc.count(text), fresh, "{name} round {round}: {text:?}");
                }
            }
        }
        pieces::set_entries(pieces::DEFAULT_ENTRIES);
    }

    #[test]
    fn count_until_refuses_a_huge_piece_by_its_length_and_agrees_with_count() {
        for name in ["cl100k_base", "o200k_base"] {
            let enc = OpenAiEncoding::get(name).unwrap();
            for unit in ["z", "ACGT", "word "] {
                let text = unit.repeat(100_000 / unit.len());
                let n = enc.count(&text);
                assert_eq!(enc.count_until(&text, n), Some(n), "{name} {unit:?}");
                assert_eq!(enc.count_until(&text, n - 1), None, "{name} {unit:?}");
                assert_eq!(enc.count_until(&text, 10), None, "{name} {unit:?}");
            }
        }
    }

    #[test]
    fn giant_piece_encoder_equals_heap_merge() {
        let mut next = split::tests::xorshift();
        let len = bpe::GIANT_PIECE + 1234;
        let fill = |unit: &str| unit.repeat(len / unit.len() + 1);
        let mut pieces: Vec<Vec<u8>> =
            ["a", " ", "中", "😀", "ab", "xyz "].iter().map(|u| fill(u).into_bytes()).collect();
        // Random runs of one class: letters, Han, spaces mixed with tabs, arbitrary bytes.
        let letters: Vec<char> = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéàü".chars().collect();
        let han: Vec<char> = "中文字的一是不了人我在有他这为之大来以个".chars().collect();
        for alphabet in [&letters[..], &han[..], &[' ', '\t'][..], &['a', 'b'][..]] {
            let s: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            pieces.push(s.into_bytes());
        }
        pieces.push((0..len).map(|_| next() as u8).collect());
        for (name, packed) in [
            ("cl100k_base", &include_bytes!("../data/cl100k_base.bin.z")[..]),
            ("o200k_base", &include_bytes!("../data/o200k_base.bin.z")[..]),
        ] {
            let vocab = Vocab::unpack(packed);
            let started = std::time::Instant::now();
            vocab.giant();
            eprintln!("{name}: giant encoder built in {:?}", started.elapsed());
            for piece in &pieces {
                assert!(piece.len() >= bpe::GIANT_PIECE);
                let heap: Vec<u32> = bpe::merge_long(piece, &|b| vocab.rank(b), &bpe::Bytes)
                    .into_iter()
                    .map(|p| vocab.rank(p).unwrap())
                    .collect();
                assert_eq!(vocab.giant().encode_via_backtracking(piece), heap, "{name}");
                assert_eq!(vocab.giant().count(piece), heap.len(), "{name}");
            }
        }
    }
}
