//! Token-exact truncation of one text: keep its head, its tail, or both around a marker, within
//! token, line and byte limits at once (the tightest wins).
//!
//! ```text
//! truncate(backend, text, &Limits { max_tokens: Some(2000), ..Default::default() },
//!          &TruncateOptions { direction: Direction::HeadTail, ..Default::default() })
//! ```
//!
//! Guarantees, for a text that does not already fit (a text that fits comes back unchanged with
//! `truncated == false`):
//! - `backend.count(result.text) <= max_tokens`, `count_lines(result.text) <= max_lines` and
//!   `result.text.len() <= max_bytes`, marker included;
//! - `result.text == text[..head_end] + marker + text[tail_start..]` with `head_end <= tail_start`
//!   (`Head`: `tail_start == len`; `Tail`: `head_end == 0`); cuts fall on char boundaries and,
//!   where a cluster is short, not inside it (a base letter and its combining marks, ZWJ emoji
//!   sequences, flags, CRLF stay together);
//! - the marker is dropped (`marker_used == false`) when it alone does not fit the limits;
//! - near-maximal: growing either kept part by one more cluster would break a limit, or at most
//!   a couple of tokens (or the bytes reserved for the marker's number) are left unused;
//! - `HeadTail` gives the head `head_ratio` of the room (tokens, lines and bytes left after the
//!   marker) and the tail the rest; room one side leaves unused goes to the other.
//!
//! Cost: one counting pass over the whole text (for the exact `original_tokens`; see
//! [`count_text`], parallel for long texts) plus work proportional to what is kept. The cut is
//! found by walking pre-tokenizer pieces from the front (head) or from a window near the end
//! (tail), encoding only the piece that crosses the cut; the small candidate result is then
//! re-counted exactly, the cut backs off if tokens merge differently across a seam, and grows
//! again into any room left. Backends without pieces: exact ones encode the whole text once
//! (that is the counting pass), estimates search char boundaries with `count`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::tokenize::Backend;

/// The default marker; `{omitted}` becomes the number of omitted tokens.
pub const DEFAULT_MARKER: &str = "\n…[{omitted} tokens omitted]…\n";
/// The placeholder a marker may contain.
pub const OMITTED_PLACEHOLDER: &str = "{omitted}";

/// Which part of the text to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Keep a prefix; the marker follows it.
    #[default]
    Head,
    /// Keep a suffix; the marker precedes it.
    Tail,
    /// Keep a prefix and a suffix with the marker between them.
    HeadTail,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Head => "head",
            Direction::Tail => "tail",
            Direction::HeadTail => "head_tail",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Direction {
    type Err = Error;

    /// Exactly "head", "tail" or "head_tail".
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "head" => Ok(Direction::Head),
            "tail" => Ok(Direction::Tail),
            "head_tail" => Ok(Direction::HeadTail),
            _ => Err(Error::Value(format!(
                "direction must be 'head', 'tail' or 'head_tail', got {s:?}"
            ))),
        }
    }
}

/// Limits on the result, marker included. `None` means unlimited; all given limits hold at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Tokens as re-counted with the backend's `count`.
    pub max_tokens: Option<usize>,
    /// Lines as counted by [`count_lines`].
    pub max_lines: Option<usize>,
    /// UTF-8 bytes.
    pub max_bytes: Option<usize>,
}

impl Limits {
    /// Only a token limit.
    pub fn tokens(max_tokens: usize) -> Self {
        Limits {
            max_tokens: Some(max_tokens),
            ..Limits::default()
        }
    }
}

/// How to truncate.
#[derive(Clone, Copy, Debug)]
pub struct TruncateOptions<'a> {
    pub direction: Direction,
    /// Inserted where text was cut; every `{omitted}` becomes the omitted token count.
    /// `""` gives a bare prefix / suffix.
    pub marker: &'a str,
    /// `HeadTail` only: the share of the room (tokens, lines, bytes) given to the head, in
    /// `[0, 1]`. Room the head does not use goes to the tail.
    pub head_ratio: f64,
}

impl Default for TruncateOptions<'_> {
    fn default() -> Self {
        TruncateOptions {
            direction: Direction::Head,
            marker: DEFAULT_MARKER,
            head_ratio: 0.5,
        }
    }
}

/// The result of [`truncate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The kept text, marker included.
    pub text: String,
    /// False iff `text` is the input unchanged (it fit every limit).
    pub truncated: bool,
    /// `backend.count(input)`.
    pub original_tokens: usize,
    /// `backend.count(text)` (marker included).
    pub tokens: usize,
    /// `original_tokens - count(kept head) - count(kept tail)`, each part counted alone,
    /// saturating at 0; the number written into the marker. 0 when not truncated.
    pub omitted_tokens: usize,
    pub original_lines: usize,
    /// `count_lines(text)` (marker included).
    pub kept_lines: usize,
    pub original_bytes: usize,
    /// `text.len()` (marker included).
    pub kept_bytes: usize,
    /// `input[..head_end]` starts `text`.
    pub head_end: usize,
    /// `input[tail_start..]` ends `text`; `head_end <= tail_start`.
    pub tail_start: usize,
    /// Whether the marker was inserted (false when none was asked for, when it alone does not fit
    /// the limits, or when the text was not truncated).
    pub marker_used: bool,
}

/// Lines of `s`: its `'\n'` count, plus one for a last line without a `'\n'`.
/// `"" -> 0`, `"a" -> 1`, `"a\n" -> 1`, `"a\nb" -> 2`, `"\n\n" -> 2`.
pub fn count_lines(s: &str) -> usize {
    count_newlines(s) + usize::from(!s.is_empty() && !s.ends_with('\n'))
}

/// `marker` with every `{omitted}` replaced by `omitted`.
pub fn fill_marker(marker: &str, omitted: usize) -> String {
    let mut out = String::with_capacity(marker.len() + 8);
    push_marker(&mut out, marker, omitted);
    out
}

/// Truncates `text` to fit `limits`; see the module docs for the guarantees.
///
/// Errors: `Error::Value` when `head_ratio` is NaN or outside `[0, 1]`.
pub fn truncate(
    backend: &dyn Backend,
    text: &str,
    limits: &Limits,
    opts: &TruncateOptions<'_>,
) -> Result<Truncation> {
    let ratio = opts.head_ratio;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(Error::Value(format!(
            "head_ratio must be between 0 and 1, got {ratio}"
        )));
    }
    let len = text.len();
    let original_lines = count_lines(text);
    let has_pieces = backend.pieces("").is_some();

    // Without pieces an exact backend's cut comes from the whole text's ids; encoding once
    // gives the count too, so it is still a single pass.
    let mut whole_ids = None;
    let original_tokens = if !has_pieces && backend.is_exact() && limits.max_tokens.is_some() {
        match backend.encode(text) {
            Ok(ids) => {
                let n = ids.len();
                whole_ids = Some(ids);
                n
            }
            Err(_) => backend.count(text),
        }
    } else if has_pieces {
        count_text(backend, text)
    } else {
        backend.count(text)
    };

    let fits = limits.max_tokens.is_none_or(|t| original_tokens <= t)
        && limits.max_lines.is_none_or(|l| original_lines <= l)
        && limits.max_bytes.is_none_or(|b| len <= b);
    if fits {
        return Ok(Truncation {
            text: text.to_owned(),
            truncated: false,
            original_tokens,
            tokens: original_tokens,
            omitted_tokens: 0,
            original_lines,
            kept_lines: original_lines,
            original_bytes: len,
            kept_bytes: len,
            head_end: len,
            tail_start: len,
            marker_used: false,
        });
    }

    // The marker is sized with the largest number it can show (nothing kept), so the room
    // reserved for it is enough whatever is finally omitted.
    let mut marker = (!opts.marker.is_empty()).then_some(opts.marker);
    let (mut m_tokens, mut m_bytes, mut m_lines, mut m_newlines) = (0, 0, 0, 0);
    if let Some(m) = marker {
        let full = fill_marker(m, original_tokens);
        m_bytes = full.len();
        m_lines = count_lines(&full);
        m_newlines = count_newlines(&full);
        let fits_lb = limits.max_lines.is_none_or(|l| m_lines <= l)
            && limits.max_bytes.is_none_or(|b| m_bytes <= b);
        let fits_t = fits_lb && {
            m_tokens = backend.count(&full);
            limits.max_tokens.is_none_or(|t| m_tokens <= t)
        };
        if !fits_t {
            marker = None;
            (m_tokens, m_bytes, m_lines, m_newlines) = (0, 0, 0, 0);
        }
    }
    let room_tokens = limits.max_tokens.map(|t| t - m_tokens);
    let room_bytes = limits.max_bytes.map(|b| b - m_bytes);

    let ctx = Ctx {
        backend,
        text,
        has_pieces,
        whole_ids,
        original_tokens,
    };
    let mut cut = Cutter {
        ctx: &ctx,
        limits,
        direction: opts.direction,
        marker,
        head: Side::unused(false),
        tail: Side::unused(true),
        a: 0,
        b: len,
        est_a: 0,
        est_b: 0,
    };

    match opts.direction {
        Direction::Head => {
            // With a marker after it, the prefix may end inside a line (the marker closes it).
            let line_cap = limits.max_lines.map_or(len, |l| match marker {
                Some(_) => head_line_cap(text, l - m_lines, true),
                None => head_line_cap(text, l, false),
            });
            let cap = floor_boundary(text, line_cap.min(room_bytes.unwrap_or(len)));
            cut.head = Side::new(&ctx, false, room_tokens, cap);
            (cut.a, cut.est_a) = cut.head.point(&ctx, room_tokens.unwrap_or(usize::MAX));
        }
        Direction::Tail => {
            let line_floor = limits
                .max_lines
                .map_or(0, |l| tail_line_floor(text, l - m_newlines));
            let byte_floor = room_bytes.map_or(0, |b| len.saturating_sub(b));
            let floor = ceil_boundary(text, line_floor.max(byte_floor));
            cut.tail = Side::new(&ctx, true, room_tokens, floor);
            (cut.b, cut.est_b) = cut.tail.point(&ctx, room_tokens.unwrap_or(usize::MAX));
        }
        Direction::HeadTail => {
            let share = |room: usize| ((room as f64 * ratio) as usize).min(room);
            // Lines of prefix + marker + suffix = nl(prefix) + nl(marker) + lines(suffix).
            let line_room = limits.max_lines.map(|l| l - m_newlines);
            let head_lines = line_room.map_or(len, |k| head_line_cap(text, share(k), true));
            let head_bytes = room_bytes.map_or(len, share);
            let cap = floor_boundary(text, head_lines.min(head_bytes));
            let head_budget = room_tokens.map(share);
            cut.head = Side::new(&ctx, false, head_budget, cap);
            (cut.a, cut.est_a) = cut.head.point(&ctx, head_budget.unwrap_or(usize::MAX));

            let used_lines = count_newlines(&text[..cut.a]);
            let line_floor =
                line_room.map_or(0, |k| tail_line_floor(text, k.saturating_sub(used_lines)));
            let byte_floor = room_bytes.map_or(0, |b| len.saturating_sub(b.saturating_sub(cut.a)));
            let floor = ceil_boundary(text, line_floor.max(byte_floor).max(cut.a));
            let tail_budget = room_tokens.map(|r| r.saturating_sub(cut.est_a));
            cut.tail = Side::new(&ctx, true, tail_budget, floor);
            (cut.b, cut.est_b) = cut.tail.point(&ctx, tail_budget.unwrap_or(usize::MAX));
        }
    }

    let r = cut.fit();
    Ok(Truncation {
        truncated: true,
        original_tokens,
        tokens: r.tokens,
        omitted_tokens: r.omitted,
        original_lines,
        kept_lines: r.lines,
        original_bytes: len,
        kept_bytes: r.text.len(),
        head_end: cut.a,
        tail_start: cut.b,
        marker_used: cut.marker.is_some(),
        text: r.text,
    })
}

// ---------------------------------------------------------------------------------------------
// The one counting pass, in parallel for long texts

/// Texts at least this long are counted in parallel chunks (exact backends with pieces).
const PARALLEL_COUNT_MIN_BYTES: usize = 1 << 20;
/// Chunks are at least this long...
const PARALLEL_CHUNK_MIN_BYTES: usize = 256 << 10;
/// ...and a chunk's split must meet its neighbour's within this many bytes past the seam.
const PARALLEL_SYNC_BYTES: usize = 16 << 10;
/// A worker's split may differ from the true one this close to the end of the slice it splits.
const SLICE_MARGIN: usize = 256;

/// `backend.count(text)`, computed in parallel chunks for texts of 1 MiB or more when the backend
/// is exact and has pieces. Relies on what the `Backend` contract implies for exact backends:
/// the pieces' `count_piece` add up to `count`; and on the pre-tokenizer deciding each piece from
/// the rest of the text with little look-around (see [`count_pieces_parallel`]). Falls back to
/// `backend.count` whenever a chunk's pieces do not line up.
pub fn count_text(backend: &dyn Backend, text: &str) -> usize {
    if text.len() >= PARALLEL_COUNT_MIN_BYTES
        && backend.is_exact()
        && rayon::current_num_threads() > 1
    {
        let chunks = (rayon::current_num_threads() * 4).min(text.len() / PARALLEL_CHUNK_MIN_BYTES);
        if let Some(n) = count_pieces_parallel(backend, text, chunks, PARALLEL_SYNC_BYTES) {
            return n;
        }
    }
    backend.count(text)
}

/// A chunk's walk: boundaries (piece starts, and the text end) with the tokens walked before
/// them, near the chunk's start and just past its end.
struct ChunkWalk {
    head: Vec<(usize, usize)>,
    tail: Vec<(usize, usize)>,
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
fn count_pieces_parallel(
    backend: &dyn Backend,
    text: &str,
    chunks: usize,
    sync: usize,
) -> Option<usize> {
    use rayon::prelude::*;
    let len = text.len();
    let mut starts = vec![0];
    for k in 1..chunks.max(1) {
        let target = ceil_boundary(text, len / chunks * k);
        // Start after a newline when one is near: splits meet sooner there.
        let start = text[target..]
            .find('\n')
            .filter(|&i| i < 4096)
            .map_or(target, |i| target + i + 1);
        if start > starts[starts.len() - 1] && start < len {
            starts.push(start);
        }
    }
    if starts.len() < 2 {
        return None;
    }
    let walks: Vec<Option<ChunkWalk>> = (0..starts.len())
        .into_par_iter()
        .map(|k| {
            let start = starts[k];
            let end = starts.get(k + 1).copied().unwrap_or(len);
            // Boundaries from here on are not needed (and near the slice's end, not trusted).
            let stop = end.saturating_add(sync).min(len);
            let slice_end = ceil_boundary(text, stop.saturating_add(SLICE_MARGIN));
            let mut walk = ChunkWalk {
                head: Vec::new(),
                tail: Vec::new(),
            };
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
        })
        .collect();
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

// ---------------------------------------------------------------------------------------------
// Cut search

/// Inputs shared by both sides.
struct Ctx<'t> {
    backend: &'t dyn Backend,
    text: &'t str,
    has_pieces: bool,
    /// The whole text's ids (exact backend without pieces).
    whole_ids: Option<Vec<u32>>,
    original_tokens: usize,
}

/// One pre-tokenizer piece `text[start..end]` with its token count `cnt`; `before` is the tokens
/// of the pieces walked before it (head: to its left; tail: to its right).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    before: usize,
    cnt: usize,
}

/// Byte ends of a piece's first (or, for a tail, last) tokens, decoded lazily.
struct PieceTokens {
    span: usize,
    /// `None`: the span is the whole text; use `Ctx::whole_ids`.
    ids: Option<Vec<u32>>,
    /// `ends[k]` = bytes of the first (last) k tokens; `ends[0] == 0`.
    ends: Vec<usize>,
    /// Decoding did not reproduce the piece (e.g. a normalizing tokenizer): search by counts.
    broken: bool,
}

/// One side of the cut: the head (a prefix ending at most at `bound`) or the tail (a suffix
/// starting at least at `bound`), found from a token target `t` by [`Side::point`].
struct Side {
    tail: bool,
    /// False when there is no token limit: the cut is just `bound`.
    limited: bool,
    /// Head: pieces from the start, in order. Tail: pieces from the end, last piece first.
    spans: Vec<Span>,
    /// `spans` is a single pseudo-piece covering the text (no usable pre-tokenizer).
    whole: bool,
    bound: usize,
    cache: Vec<PieceTokens>,
    /// Head: where the walked pieces end, their tokens, and the next window's size.
    walked_end: usize,
    walked_tokens: usize,
    window: usize,
    /// Tail: the budget and floor the window was last walked with.
    walked_budget: usize,
    walked_floor: usize,
}

/// Pieces are split from windows of this many bytes per budget token (doubling while short);
/// this many pieces at a window's open end may be split differently in the full text.
const WINDOW_BYTES_PER_TOKEN: usize = 6;
const UNTRUSTED_WINDOW_PIECES: usize = 2;

fn window_for(budget: usize) -> usize {
    budget
        .saturating_mul(WINDOW_BYTES_PER_TOKEN)
        .saturating_add(64)
}

impl Side {
    fn unused(tail: bool) -> Side {
        Side {
            tail,
            limited: false,
            spans: Vec::new(),
            whole: false,
            bound: 0,
            cache: Vec::new(),
            walked_end: 0,
            walked_tokens: 0,
            window: 0,
            walked_budget: 0,
            walked_floor: 0,
        }
    }

    fn new(ctx: &Ctx<'_>, tail: bool, budget: Option<usize>, bound: usize) -> Side {
        let mut side = Side::unused(tail);
        side.bound = bound;
        let Some(budget) = budget else { return side };
        side.limited = true;
        if !ctx.has_pieces {
            side.make_whole(ctx);
        } else if tail {
            side.walk_tail(ctx, budget, bound);
        } else {
            side.window = window_for(budget);
            side.extend_head(ctx, budget, bound);
        }
        side
    }

    /// Treat the text as one piece (no pre-tokenizer, or one whose pieces do not tile the text).
    fn make_whole(&mut self, ctx: &Ctx<'_>) {
        self.whole = true;
        self.cache.clear();
        let len = ctx.text.len();
        self.spans = vec![Span {
            start: 0,
            end: len,
            before: 0,
            cnt: ctx.original_tokens,
        }];
    }

    /// Walk head pieces until one crosses `t` tokens or reaches `bound`. Pieces come from
    /// windows split one after the other, each starting where the walk ended (a true piece
    /// boundary); the last pieces of a window may be split differently from the full text, so the
    /// walk stops short of them and the next window (twice as large) starts there.
    fn extend_head(&mut self, ctx: &Ctx<'_>, t: usize, bound: usize) {
        let text = ctx.text;
        let len = text.len();
        while self.walked_tokens <= t && self.walked_end < bound && !self.whole {
            let from = self.walked_end;
            let to = ceil_boundary(text, from.saturating_add(self.window.max(64)));
            self.window = self.window.saturating_mul(2);
            let Some(bounds) = piece_bounds(ctx, from, to) else {
                return self.make_whole(ctx);
            };
            let trusted = if to == len {
                bounds.len()
            } else {
                bounds.len().saturating_sub(UNTRUSTED_WINDOW_PIECES)
            };
            for &(start, end) in &bounds[..trusted] {
                let cnt = ctx.backend.count_piece(&text[start..end]);
                self.spans.push(Span {
                    start,
                    end,
                    before: self.walked_tokens,
                    cnt,
                });
                self.walked_end = end;
                self.walked_tokens = self.walked_tokens.saturating_add(cnt);
                if self.walked_tokens > t || end >= bound {
                    break;
                }
            }
        }
    }

    /// Walk pieces from the end while they fit `budget` tokens, plus the piece that crosses,
    /// never before `floor`. Only a window near the end is split: it starts at a char boundary
    /// sized from the budget and doubles while the walk would reach its first pieces (which may
    /// be split differently from the full text) without crossing the budget.
    fn walk_tail(&mut self, ctx: &Ctx<'_>, budget: usize, floor: usize) {
        let text = ctx.text;
        let len = text.len();
        self.cache.clear();
        self.walked_budget = budget;
        self.walked_floor = floor;
        let mut window = window_for(budget);
        loop {
            let start = ceil_boundary(text, len.saturating_sub(window).max(floor));
            let trusted = start <= floor;
            let Some(bounds) = piece_bounds(ctx, start, len) else {
                return self.make_whole(ctx);
            };
            self.spans.clear();
            let mut acc = 0usize;
            let mut short = false;
            for (j, &(s, e)) in bounds.iter().enumerate().rev() {
                if !trusted && j < UNTRUSTED_WINDOW_PIECES {
                    short = true;
                    break;
                }
                let cnt = ctx.backend.count_piece(&text[s..e]);
                self.spans.push(Span {
                    start: s,
                    end: e,
                    before: acc,
                    cnt,
                });
                acc = acc.saturating_add(cnt);
                if acc > budget {
                    return;
                }
            }
            if !short {
                return;
            }
            window = window.saturating_mul(2);
        }
    }

    /// The cut keeping the most text within `bound` whose walked tokens are at most `t`, and
    /// those tokens. The cut is moved out of a short cluster (head: back, tail: forward).
    fn point(&mut self, ctx: &Ctx<'_>, t: usize) -> (usize, usize) {
        let text = ctx.text;
        let bound = self.bound;
        if !self.limited {
            return if self.tail {
                (snap_forward(text, ceil_boundary(text, bound)), 0)
            } else {
                (snap_back(text, floor_boundary(text, bound)), 0)
            };
        }
        if !self.whole {
            if !self.tail {
                self.extend_head(ctx, t, bound);
            } else {
                // Growing past what the window walk covered: walk again, further.
                let short = self.spans.last().is_some_and(|last| {
                    let walked = last.before.saturating_add(last.cnt);
                    walked > self.walked_budget && t >= walked && last.start > bound
                });
                if short || bound < self.walked_floor {
                    self.walk_tail(ctx, t, bound);
                }
            }
        }
        let tail = self.tail;
        let n = self.spans.partition_point(|s| {
            s.before <= t && if tail { s.end > bound } else { s.start < bound }
        });
        if n == 0 {
            return (if tail { text.len() } else { 0 }, 0);
        }
        let i = n - 1;
        let sp = self.spans[i];
        let rem = t - sp.before;
        let room = if tail {
            sp.end - bound
        } else {
            bound - sp.start
        };
        let (bytes, k) = if rem >= sp.cnt && room >= sp.end - sp.start {
            (sp.end - sp.start, sp.cnt)
        } else {
            self.split(ctx, i, rem, room)
        };
        if tail {
            (snap_forward(text, sp.end - bytes), sp.before + k)
        } else {
            (snap_back(text, sp.start + bytes), sp.before + k)
        }
    }

    /// The longest part of span `i` (prefix for the head, suffix for the tail) of at most `rem`
    /// tokens and `room` bytes ending on a char boundary: (bytes, tokens).
    fn split(&mut self, ctx: &Ctx<'_>, i: usize, rem: usize, room: usize) -> (usize, usize) {
        let sp = self.spans[i];
        let piece = &ctx.text[sp.start..sp.end];
        let mut known = None;
        if ctx.backend.is_exact() {
            match self.split_by_ids(ctx, i, piece, rem, room) {
                Some((bytes, k, false)) => return (bytes, k),
                // The room ends the cut inside a token: a char boundary inside it may still fit.
                Some((bytes, k, true)) => known = Some((bytes, k)),
                None => {}
            }
        }
        // Estimates (and tokenizers whose decoding is not the text): search char boundaries
        // with counts.
        let whole = self.whole;
        let count = |s: &str| {
            if s.is_empty() {
                0
            } else if whole {
                ctx.backend.count(s)
            } else {
                ctx.backend.count_piece(s)
            }
        };
        let (from, step) = match known {
            Some((bytes, _)) => (bytes, 8),
            None => (0, rem.saturating_mul(4).saturating_add(4)),
        };
        let found = if self.tail {
            let start = search_suffix(piece, piece.len() - from, room, |s| count(s) <= rem, step);
            piece.len() - start
        } else {
            search_prefix(piece, from, room, |s| count(s) <= rem, step)
        };
        match known {
            Some((bytes, k)) if found == bytes => (bytes, k),
            _ if self.tail => (found, count(&piece[piece.len() - found..])),
            _ => (found, count(&piece[..found])),
        }
    }

    /// [`Side::split`] from the piece's own tokens: the longest run of first (last) tokens that
    /// ends on a char boundary, and whether the byte room (rather than `rem`) stopped it. `None`
    /// when the backend cannot encode or decoding does not reproduce the piece.
    fn split_by_ids(
        &mut self,
        ctx: &Ctx<'_>,
        i: usize,
        piece: &str,
        rem: usize,
        room: usize,
    ) -> Option<(usize, usize, bool)> {
        let pos = match self.cache.iter().position(|c| c.span == i) {
            Some(p) => p,
            None => {
                let ids = if self.whole && ctx.whole_ids.is_some() {
                    None
                } else {
                    Some(ctx.backend.encode(piece).ok()?)
                };
                // Backing off revisits a handful of pieces; keep the cache small.
                if self.cache.len() >= 8 {
                    self.cache.remove(0);
                }
                self.cache.push(PieceTokens {
                    span: i,
                    ids,
                    ends: vec![0],
                    broken: false,
                });
                self.cache.len() - 1
            }
        };
        let tail = self.tail;
        let entry = &mut self.cache[pos];
        let ids: &[u32] = match &entry.ids {
            Some(ids) => ids,
            None => ctx.whole_ids.as_deref().unwrap_or(&[]),
        };
        let bytes = piece.as_bytes();
        let want = rem.min(ids.len());
        // Decode just the tokens needed, checking each against the text.
        while entry.ends.len() <= want && !entry.broken {
            let done = entry.ends.len() - 1;
            let last = entry.ends[done];
            if last > room {
                break;
            }
            let id = if tail {
                ids[ids.len() - 1 - done]
            } else {
                ids[done]
            };
            let ok = match ctx.backend.decode_bytes(&[id]) {
                Ok(tok) => {
                    let end = last + tok.len();
                    let same = end <= bytes.len()
                        && if tail {
                            bytes[bytes.len() - end..bytes.len() - last] == tok[..]
                        } else {
                            bytes[last..end] == tok[..]
                        };
                    if same {
                        entry.ends.push(end);
                    }
                    same
                }
                Err(_) => false,
            };
            entry.broken = !ok;
        }
        if entry.broken {
            return None;
        }
        let top = want.min(entry.ends.len() - 1);
        let room_bound = entry.ends[entry.ends.len() - 1] > room;
        let (bytes, k) = (0..=top)
            .rev()
            .map(|k| (entry.ends[k], k))
            .find(|&(e, _)| {
                e <= room && piece.is_char_boundary(if tail { piece.len() - e } else { e })
            })
            .unwrap_or((0, 0));
        Some((bytes, k, room_bound))
    }
}

/// Offset of `piece` inside `text`, if it is a slice of it.
/// The byte spans of the backend's pieces of `text[from..to]`, or `None` when the backend has
/// no pieces or they do not tile the slice exactly (the caller then falls back to encoding
/// the whole text).
fn piece_bounds(ctx: &Ctx<'_>, from: usize, to: usize) -> Option<Vec<(usize, usize)>> {
    let text = ctx.text;
    let mut bounds = Vec::new();
    let mut pos = from;
    for piece in ctx.backend.pieces(&text[from..to])? {
        if piece.is_empty() {
            continue;
        }
        if offset_in(text, piece) != Some(pos) {
            return None;
        }
        bounds.push((pos, pos + piece.len()));
        pos += piece.len();
    }
    (pos == to).then_some(bounds)
}

fn offset_in(text: &str, piece: &str) -> Option<usize> {
    let base = text.as_ptr() as usize;
    let p = piece.as_ptr() as usize;
    (p >= base && p + piece.len() <= base + text.len()).then(|| p - base)
}

/// The longest prefix of `s` (char boundary, at most `max_bytes`) accepted by `ok`, given that
/// `s[..lo]` is accepted: steps forward from `lo` by `step` bytes, doubling, then bisects. `ok`
/// should be mostly monotone; the answer is always `lo` or a prefix `ok` accepted.
fn search_prefix(
    s: &str,
    lo: usize,
    max_bytes: usize,
    ok: impl Fn(&str) -> bool,
    step: usize,
) -> usize {
    let limit = floor_boundary(s, max_bytes.min(s.len()));
    if limit <= lo {
        return lo;
    }
    let mut lo = lo;
    let mut step = step.max(1);
    let mut hi = loop {
        let mut probe = floor_boundary(s, lo.saturating_add(step).min(limit));
        if probe <= lo {
            probe = next_boundary(s, lo);
        }
        if !ok(&s[..probe]) {
            break probe;
        }
        lo = probe;
        if probe >= limit {
            return limit;
        }
        step = step.saturating_mul(2);
    };
    loop {
        let mut mid = floor_boundary(s, lo + (hi - lo) / 2);
        if mid <= lo {
            mid = next_boundary(s, lo);
        }
        if mid >= hi {
            return lo;
        }
        if ok(&s[..mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
}

/// The start of the longest suffix of `s` (char boundary, at most `max_bytes` long) accepted by
/// `ok`, given that `s[hi..]` is accepted; the mirror of [`search_prefix`].
fn search_suffix(
    s: &str,
    hi: usize,
    max_bytes: usize,
    ok: impl Fn(&str) -> bool,
    step: usize,
) -> usize {
    let len = s.len();
    let limit = ceil_boundary(s, len - max_bytes.min(len));
    if limit >= hi {
        return hi;
    }
    let mut hi = hi;
    let mut step = step.max(1);
    let mut lo = loop {
        let mut probe = ceil_boundary(s, hi.saturating_sub(step).max(limit));
        if probe >= hi {
            probe = prev_boundary(s, hi);
        }
        if !ok(&s[probe..]) {
            break probe;
        }
        hi = probe;
        if probe <= limit {
            return limit;
        }
        step = step.saturating_mul(2);
    };
    loop {
        let mut mid = ceil_boundary(s, lo + (hi - lo).div_ceil(2));
        if mid >= hi {
            mid = prev_boundary(s, hi);
        }
        if mid <= lo {
            return hi;
        }
        if ok(&s[mid..]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fitting: re-count candidates exactly, back off, then grow into leftover room

struct Rendered {
    text: String,
    tokens: usize,
    lines: usize,
    omitted: usize,
    head_tokens: usize,
    tail_tokens: usize,
}

struct Cutter<'c, 't> {
    ctx: &'c Ctx<'t>,
    limits: &'c Limits,
    direction: Direction,
    marker: Option<&'c str>,
    head: Side,
    tail: Side,
    /// Kept: `text[..a]` and `text[b..]`, with their walked token estimates.
    a: usize,
    b: usize,
    est_a: usize,
    est_b: usize,
}

/// Rounds of backing off before giving up on the cut and keeping only the marker. Each round
/// shrinks the kept text, and seams rarely cost more than a round or two.
const MAX_BACKOFF_ROUNDS: usize = 64;
/// Re-counts spent growing into room left by backing off or by cluster boundaries.
const MAX_GROW_RENDERS: usize = 12;

impl Cutter<'_, '_> {
    fn render(&self, a: usize, b: usize) -> Rendered {
        let ctx = self.ctx;
        let (head, tail) = (&ctx.text[..a], &ctx.text[b..]);
        let count = |s: &str| {
            if s.is_empty() {
                0
            } else {
                ctx.backend.count(s)
            }
        };
        let head_tokens = count(head);
        let tail_tokens = count(tail);
        let omitted = ctx
            .original_tokens
            .saturating_sub(head_tokens.saturating_add(tail_tokens));
        let mut out =
            String::with_capacity(a + tail.len() + self.marker.map_or(0, |m| m.len() + 20));
        out.push_str(head);
        if let Some(m) = self.marker {
            push_marker(&mut out, m, omitted);
        }
        out.push_str(tail);
        Rendered {
            tokens: count(&out),
            lines: count_lines(&out),
            text: out,
            omitted,
            head_tokens,
            tail_tokens,
        }
    }

    /// Excess (tokens, lines, bytes) of `r` over the limits.
    fn excess(&self, r: &Rendered) -> (usize, usize, usize) {
        let over = |limit: Option<usize>, v: usize| limit.map_or(0, |l| v.saturating_sub(l));
        (
            over(self.limits.max_tokens, r.tokens),
            over(self.limits.max_lines, r.lines),
            over(self.limits.max_bytes, r.text.len()),
        )
    }

    fn fits(&self, r: &Rendered) -> bool {
        self.excess(r) == (0, 0, 0)
    }

    fn fit(&mut self) -> Rendered {
        let len = self.ctx.text.len();
        let mut r = self.render(self.a, self.b);
        let mut rounds = 0;
        loop {
            let (et, el, eb) = self.excess(&r);
            if (et, el, eb) == (0, 0, 0) {
                break;
            }
            rounds += 1;
            let empty = self.a == 0 && self.b == len;
            if empty || rounds > MAX_BACKOFF_ROUNDS {
                if !empty {
                    (self.a, self.b) = (0, len);
                } else if self.marker.is_some() {
                    self.marker = None;
                } else {
                    // Nothing kept and no marker: "" is all that can fit.
                    return self.render(0, len);
                }
            } else if el > 0 || eb > 0 {
                self.shrink_for_lines_or_bytes(el, eb);
            } else {
                self.shrink_for_tokens(et, &r);
            }
            r = self.render(self.a, self.b);
        }
        self.grow(r)
    }

    /// Lines or bytes over (an edge the caps did not foresee, e.g. an empty tail after a marker
    /// without a final newline): drop the last line / the excess bytes from one side.
    fn shrink_for_lines_or_bytes(&mut self, el: usize, eb: usize) {
        let text = self.ctx.text;
        let len = text.len();
        let use_tail = match self.direction {
            Direction::Head => false,
            Direction::Tail => true,
            Direction::HeadTail => {
                self.b < len && (self.a == 0 || el > 0 || len - self.b >= self.a)
            }
        };
        if use_tail {
            let floor = if el > 0 {
                text[self.b..].find('\n').map_or(len, |i| self.b + i + 1)
            } else {
                ceil_boundary(text, self.b + eb)
            };
            self.tail.bound = self.tail.bound.max(floor).max(next_boundary(text, self.b));
            (self.b, self.est_b) = self.tail.point(self.ctx, self.est_b);
        } else {
            let head = &text[..self.a];
            let cap = if el > 0 {
                if self.marker.is_none() && head.ends_with('\n') {
                    // Without a marker a trailing "\n" ends the line; drop the whole last line.
                    head[..head.len() - 1].rfind('\n').map_or(0, |i| i + 1)
                } else {
                    head.rfind('\n').unwrap_or(0)
                }
            } else {
                floor_boundary(text, self.a.saturating_sub(eb))
            };
            self.head.bound = self.head.bound.min(cap).min(prev_boundary(text, self.a));
            (self.a, self.est_a) = self.head.point(self.ctx, self.est_a);
        }
    }

    /// Tokens over by `et`: give back about `et` walked tokens, from the side that overran its
    /// estimate, otherwise split between the sides.
    fn shrink_for_tokens(&mut self, et: usize, r: &Rendered) {
        let len = self.ctx.text.len();
        let (mut from_head, mut from_tail) = match self.direction {
            Direction::Head => (et, 0),
            Direction::Tail => (0, et),
            Direction::HeadTail => {
                let h = r.head_tokens.saturating_sub(self.est_a).min(et);
                let t = r.tail_tokens.saturating_sub(self.est_b).min(et - h);
                let rest = et - h - t;
                (h + rest.div_ceil(2), t + rest / 2)
            }
        };
        if self.a == 0 {
            (from_head, from_tail) = (0, from_head + from_tail);
        }
        if self.b == len {
            (from_head, from_tail) = (from_head + from_tail, 0);
        }
        if from_head > 0 {
            self.shrink_head(from_head);
        }
        if from_tail > 0 {
            self.shrink_tail(from_tail);
        }
    }

    fn shrink_head(&mut self, n: usize) {
        let mut t = self.est_a.saturating_sub(n);
        loop {
            let (a, est) = self.head.point(self.ctx, t);
            if a < self.a {
                (self.a, self.est_a) = (a, est);
                return;
            }
            if t == 0 || est == 0 {
                (self.a, self.est_a) = (0, 0);
                return;
            }
            // Every target from `est` to `t` gives this same cut.
            t = est.min(t) - 1;
        }
    }

    fn shrink_tail(&mut self, n: usize) {
        let len = self.ctx.text.len();
        let mut t = self.est_b.saturating_sub(n);
        loop {
            let (b, est) = self.tail.point(self.ctx, t);
            if b > self.b {
                (self.b, self.est_b) = (b, est);
                return;
            }
            if t == 0 || est == 0 {
                (self.b, self.est_b) = (len, 0);
                return;
            }
            t = est.min(t) - 1;
        }
    }

    /// Grow the kept parts into room left unused (by backing off a whole piece, cluster
    /// snapping, a seam, or one side not using its share of the room) while the result fits:
    /// first by the token room left (halving when it overshoots), then by one cluster.
    fn grow(&mut self, mut r: Rendered) -> Rendered {
        let mut open = [
            self.direction != Direction::Tail,
            self.direction != Direction::Head,
        ];
        let mut renders = 0;
        while open.contains(&true) && renders < MAX_GROW_RENDERS {
            for tail in [false, true] {
                let side = usize::from(tail);
                if !open[side] || renders >= MAX_GROW_RENDERS {
                    continue;
                }
                self.relax(tail, &r);
                let mut jump = self
                    .limits
                    .max_tokens
                    .map_or(usize::MAX, |m| m.saturating_sub(r.tokens));
                let mut tried = None;
                let grown = loop {
                    if renders >= MAX_GROW_RENDERS {
                        break false;
                    }
                    let candidate = if jump > 0 {
                        self.grown_by_tokens(tail, jump)
                    } else {
                        self.grown_by_cluster(tail, &r)
                    };
                    let Some((a, b, est)) = candidate.filter(|&c| Some(c) != tried) else {
                        if jump == 0 {
                            break false;
                        }
                        jump = 0;
                        continue;
                    };
                    tried = Some((a, b, est));
                    let next = self.render(a, b);
                    renders += 1;
                    if self.fits(&next) {
                        (self.a, self.b) = (a, b);
                        if tail {
                            self.est_b = est;
                        } else {
                            self.est_a = est;
                        }
                        r = next;
                        break true;
                    }
                    if jump == 0 {
                        break false;
                    }
                    jump /= 2;
                };
                if !grown {
                    open[side] = false;
                }
            }
        }
        r
    }

    /// The cut `jump` walked tokens further out, if it moves.
    fn grown_by_tokens(&mut self, tail: bool, jump: usize) -> Option<(usize, usize, usize)> {
        if tail {
            let (b, est) = self.tail.point(self.ctx, self.est_b.saturating_add(jump));
            (b < self.b && b >= self.a).then_some((self.a, b, est))
        } else {
            let (a, est) = self.head.point(self.ctx, self.est_a.saturating_add(jump));
            (a > self.a && a <= self.b).then_some((a, self.b, est))
        }
    }

    /// The cut one cluster further out, if the side's bound allows it.
    fn grown_by_cluster(&self, tail: bool, r: &Rendered) -> Option<(usize, usize, usize)> {
        let text = self.ctx.text;
        if tail {
            let b = prev_cluster(text, self.b);
            let est = self.est_b + 1 + r.tail_tokens.saturating_sub(self.est_b);
            (self.b > self.a && b >= self.tail.bound && b >= self.a).then_some((self.a, b, est))
        } else {
            let a = next_cluster(text, self.a);
            let est = self.est_a + 1 + r.head_tokens.saturating_sub(self.est_a);
            (self.a < self.b && a <= self.head.bound && a <= self.b).then_some((a, self.b, est))
        }
    }

    /// Move one side's bound as far as the lines and bytes left unused by the result `r` allow
    /// (each side was first given only its share).
    fn relax(&mut self, tail: bool, r: &Rendered) {
        let text = self.ctx.text;
        let (a, b) = (self.a, self.b);
        let kept_tail = text.len() - b;
        if tail {
            let mut floor = a;
            if let Some(max) = self.limits.max_bytes {
                floor = floor.max(b.saturating_sub(max.saturating_sub(r.text.len())));
            }
            if let Some(max) = self.limits.max_lines {
                // Lines of X + suffix (X non-empty) = newlines of X + lines of the suffix.
                let before = &r.text[..r.text.len() - kept_tail];
                let k = if before.is_empty() {
                    max
                } else {
                    max.saturating_sub(count_newlines(before))
                };
                floor = floor.max(tail_line_floor(text, k));
            }
            self.tail.bound = ceil_boundary(text, floor).min(b);
        } else {
            let mut cap = b;
            if let Some(max) = self.limits.max_bytes {
                cap = cap.min(a.saturating_add(max.saturating_sub(r.text.len())));
            }
            if let Some(max) = self.limits.max_lines {
                // Lines of prefix + X (X non-empty) = newlines of the prefix + lines of X.
                let after = &r.text[a..];
                cap = cap.min(if after.is_empty() {
                    head_line_cap(text, max, false)
                } else {
                    head_line_cap(text, max.saturating_sub(count_lines(after)), true)
                });
            }
            self.head.bound = floor_boundary(text, cap).max(a);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Text helpers

fn count_newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

fn push_marker(out: &mut String, marker: &str, omitted: usize) {
    let mut rest = marker;
    while let Some(i) = rest.find(OMITTED_PLACEHOLDER) {
        out.push_str(&rest[..i]);
        out.push_str(&omitted.to_string());
        rest = &rest[i + OMITTED_PLACEHOLDER.len()..];
    }
    out.push_str(rest);
}

/// The longest prefix end with at most `k` newlines (`partial`: it may end inside the next line,
/// i.e. just before newline k+1) or whose lines are at most `k` (not `partial`: it ends right
/// after newline k).
fn head_line_cap(text: &str, k: usize, partial: bool) -> usize {
    if partial {
        text.match_indices('\n')
            .nth(k)
            .map_or(text.len(), |(i, _)| i)
    } else if k == 0 {
        0
    } else {
        text.match_indices('\n')
            .nth(k - 1)
            .map_or(text.len(), |(i, _)| i + 1)
    }
}

/// The smallest start whose suffix has at most `k` lines.
fn tail_line_floor(text: &str, k: usize) -> usize {
    if k == 0 {
        return text.len();
    }
    // Lines of text[c..] (non-empty) = newlines at or after c, plus one if the text does not
    // end with '\n'.
    let open_last = usize::from(!text.is_empty() && !text.ends_with('\n'));
    let allowed = k - open_last;
    text.rmatch_indices('\n')
        .nth(allowed)
        .map_or(0, |(i, _)| i + 1)
}

fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The char boundary after `i` (`s.len()` at the end).
fn next_boundary(s: &str, i: usize) -> usize {
    s[i..].chars().next().map_or(s.len(), |c| i + c.len_utf8())
}

/// The char boundary before `i` (0 at the start).
fn prev_boundary(s: &str, i: usize) -> usize {
    s[..i].chars().next_back().map_or(0, |c| i - c.len_utf8())
}

/// Clusters longer than this many chars (e.g. "zalgo" text) may be cut anywhere: keeping
/// clusters whole is a preference, not worth losing a large part of the room.
const MAX_CLUSTER_CHARS: usize = 16;

/// A char that belongs with the one before it: combining marks, joiners, variation selectors,
/// emoji modifiers and tags.
fn extends(c: char) -> bool {
    matches!(c,
        '\u{200C}' | '\u{200D}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{1F3FB}'..='\u{1F3FF}'
        | '\u{E0020}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
        || unicode_normalization::char::is_combining_mark(c)
}

fn is_regional_indicator(c: char) -> bool {
    ('\u{1F1E6}'..='\u{1F1FF}').contains(&c)
}

/// Whether cutting `s` at char boundary `i` keeps user-perceived characters whole (a cheap
/// approximation of grapheme cluster boundaries).
fn is_cluster_boundary(s: &str, i: usize) -> bool {
    let (Some(prev), Some(next)) = (s[..i].chars().next_back(), s[i..].chars().next()) else {
        return true;
    };
    if extends(next) || prev == '\u{200D}' || (prev == '\r' && next == '\n') {
        return false;
    }
    if is_regional_indicator(prev) && is_regional_indicator(next) {
        // Flags pair regional indicators from the start of their run.
        let run = s[..i]
            .chars()
            .rev()
            .take(4096)
            .take_while(|&c| is_regional_indicator(c))
            .count();
        return run % 2 == 0;
    }
    true
}

/// The short cluster (at most [`MAX_CLUSTER_CHARS`] chars) that char boundary `i` falls
/// strictly inside, if any.
fn short_cluster_around(s: &str, i: usize) -> Option<(usize, usize)> {
    let mut chars = 0;
    let mut start = i;
    while !is_cluster_boundary(s, start) {
        start = prev_boundary(s, start);
        chars += 1;
        if chars > MAX_CLUSTER_CHARS {
            return None;
        }
    }
    if start == i {
        return None;
    }
    let mut end = i;
    while !is_cluster_boundary(s, end) {
        end = next_boundary(s, end);
        chars += 1;
        if chars > MAX_CLUSTER_CHARS {
            return None;
        }
    }
    Some((start, end))
}

/// `i`, or the start of the short cluster it falls inside.
fn snap_back(s: &str, i: usize) -> usize {
    short_cluster_around(s, i).map_or(i, |(start, _)| start)
}

/// `i`, or the end of the short cluster it falls inside.
fn snap_forward(s: &str, i: usize) -> usize {
    short_cluster_around(s, i).map_or(i, |(_, end)| end)
}

/// The next cut after `i` that keeps short clusters whole.
fn next_cluster(s: &str, i: usize) -> usize {
    snap_forward(s, next_boundary(s, i))
}

/// The previous cut before `i` that keeps short clusters whole.
fn prev_cluster(s: &str, i: usize) -> usize {
    snap_back(s, prev_boundary(s, i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // ---- test backends (self-contained: bpe-openai / tiktoken-rs directly) -------------------

    /// Exact, with pieces: what the crate's OpenAI backend does.
    struct Bpe {
        name: &'static str,
        tok: &'static bpe_openai::Tokenizer,
    }

    fn cl100k() -> Bpe {
        Bpe {
            name: "cl100k_base",
            tok: bpe_openai::cl100k_base(),
        }
    }

    fn o200k() -> Bpe {
        Bpe {
            name: "o200k_base",
            tok: bpe_openai::o200k_base(),
        }
    }

    impl Backend for Bpe {
        fn name(&self) -> &str {
            self.name
        }
        fn is_exact(&self) -> bool {
            true
        }
        fn count(&self, text: &str) -> usize {
            self.tok.count(text)
        }
        fn encode(&self, text: &str) -> Result<Vec<u32>> {
            Ok(self.tok.encode(text))
        }
        fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
            Ok(self.tok.bpe.decode_tokens(ids))
        }
        fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
            Some(Box::new(self.tok.split(text)))
        }
        fn count_piece(&self, piece: &str) -> usize {
            self.tok.bpe.count(piece.as_bytes())
        }
    }

    /// Exact, no pieces: tiktoken-rs (the reference implementation).
    struct Tiktoken(&'static tiktoken_rs::CoreBPE);

    impl Backend for Tiktoken {
        fn name(&self) -> &str {
            "tiktoken-cl100k"
        }
        fn is_exact(&self) -> bool {
            true
        }
        fn count(&self, text: &str) -> usize {
            self.0.encode_ordinary(text).len()
        }
        fn encode(&self, text: &str) -> Result<Vec<u32>> {
            Ok(self.0.encode_ordinary(text))
        }
        fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
            self.0
                .decode_bytes(ids)
                .map_err(|e| Error::UnknownToken(e.token))
        }
    }

    /// Delegates everything but `pieces` (and optionally breaks decoding / pieces).
    struct Wrap<B> {
        inner: B,
        pieces: bool,
        /// Decoding no longer reproduces the text (like SentencePiece's "▁" handling).
        lossy_decode: bool,
        /// Pieces that do not tile the text.
        bad_pieces: bool,
    }

    fn no_pieces<B: Backend>(inner: B) -> Wrap<B> {
        Wrap {
            inner,
            pieces: false,
            lossy_decode: false,
            bad_pieces: false,
        }
    }

    impl<B: Backend> Backend for Wrap<B> {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn is_exact(&self) -> bool {
            self.inner.is_exact()
        }
        fn count(&self, text: &str) -> usize {
            self.inner.count(text)
        }
        fn encode(&self, text: &str) -> Result<Vec<u32>> {
            self.inner.encode(text)
        }
        fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
            let mut bytes = self.inner.decode_bytes(ids)?;
            if self.lossy_decode {
                bytes.insert(0, b'#');
            }
            Ok(bytes)
        }
        fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
            if !self.pieces {
                return None;
            }
            let it = self.inner.pieces(text)?;
            Some(if self.bad_pieces {
                Box::new(it.skip(1))
            } else {
                it
            })
        }
        fn count_piece(&self, piece: &str) -> usize {
            self.inner.count_piece(piece)
        }
    }

    /// A heuristic-like estimate with no vocabulary: ASCII letter/digit runs cost a token per 4
    /// bytes, other non-space chars a token each, whitespace runs one token.
    struct Estimate {
        pieces: bool,
    }

    fn estimate_runs(text: &str) -> impl Iterator<Item = &str> {
        let class = |c: char| {
            if c.is_whitespace() {
                0
            } else if c.is_ascii_alphanumeric() {
                1
            } else {
                2
            }
        };
        let mut rest = text;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let k = class(first);
            let end = if k == 2 {
                first.len_utf8()
            } else {
                rest.find(|c: char| class(c) != k).unwrap_or(rest.len())
            };
            let (piece, tail) = rest.split_at(end);
            rest = tail;
            Some(piece)
        })
    }

    fn estimate_piece(piece: &str) -> usize {
        if piece.is_empty() {
            0
        } else if piece.chars().all(char::is_whitespace) {
            1
        } else {
            piece
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { 1 } else { 4 })
                .sum::<usize>()
                .div_ceil(4)
        }
    }

    impl Backend for Estimate {
        fn name(&self) -> &str {
            "estimate"
        }
        fn is_exact(&self) -> bool {
            false
        }
        fn count(&self, text: &str) -> usize {
            estimate_runs(text).map(estimate_piece).sum()
        }
        fn encode(&self, _text: &str) -> Result<Vec<u32>> {
            Err(Error::Unsupported("estimate has no vocabulary".into()))
        }
        fn decode_bytes(&self, _ids: &[u32]) -> Result<Vec<u8>> {
            Err(Error::Unsupported("estimate has no vocabulary".into()))
        }
        fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
            self.pieces
                .then(|| Box::new(estimate_runs(text)) as Box<dyn Iterator<Item = &'a str>>)
        }
        fn count_piece(&self, piece: &str) -> usize {
            estimate_piece(piece)
        }
    }

    /// Counts the bytes each method is given, to check the work done.
    struct Metered<B> {
        inner: B,
        counted: AtomicUsize,
        encoded: AtomicUsize,
        split: AtomicUsize,
    }

    impl<B: Backend> Backend for Metered<B> {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn is_exact(&self) -> bool {
            self.inner.is_exact()
        }
        fn count(&self, text: &str) -> usize {
            self.counted.fetch_add(text.len(), Ordering::Relaxed);
            self.inner.count(text)
        }
        fn encode(&self, text: &str) -> Result<Vec<u32>> {
            self.encoded.fetch_add(text.len(), Ordering::Relaxed);
            self.inner.encode(text)
        }
        fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
            self.inner.decode_bytes(ids)
        }
        fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
            let split = &self.split;
            Some(Box::new(self.inner.pieces(text)?.inspect(move |p| {
                split.fetch_add(p.len(), Ordering::Relaxed);
            })))
        }
        fn count_piece(&self, piece: &str) -> usize {
            self.counted.fetch_add(piece.len(), Ordering::Relaxed);
            self.inner.count_piece(piece)
        }
    }

    fn metered<B>(inner: B) -> Metered<B> {
        Metered {
            inner,
            counted: AtomicUsize::new(0),
            encoded: AtomicUsize::new(0),
            split: AtomicUsize::new(0),
        }
    }

    // ---- generated text ------------------------------------------------------------------------

    /// SplitMix64: deterministic, dependency-free.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn range_char(&mut self, lo: u32, hi: u32) -> char {
            char::from_u32(lo + self.below((hi - lo + 1) as usize) as u32).unwrap_or('?')
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const WORDS: &[&str] = &[
        "the",
        "context",
        "window",
        "token",
        "agent",
        "Überprüfung",
        "naïve",
        "résumé",
        "über",
        "data",
        "return",
        "function",
        "internationalization",
        "x",
        "I'm",
        "don't",
        "we'll",
    ];

    fn unicode_text(rng: &mut Rng, target: usize) -> String {
        let mut s = String::new();
        while s.len() < target {
            match rng.below(20) {
                0..=3 => s.push_str(rng.pick(WORDS)),
                4 | 5 => s.push(' '),
                6 => s.push_str(rng.pick(&["\n", "\r\n", "\n\n", "\t", "   ", "\u{3000}", " \n "])),
                7 | 8 => (0..1 + rng.below(8)).for_each(|_| s.push(rng.range_char(0x4E00, 0x9FFF))),
                9 => (0..1 + rng.below(5)).for_each(|_| s.push(rng.range_char(0x3041, 0x3096))),
                10 => {
                    s.push(rng.range_char(0x1F600, 0x1F64F));
                    if rng.below(2) == 0 {
                        s.push(rng.range_char(0x1F3FB, 0x1F3FF));
                    }
                }
                11 => s.push_str(rng.pick(&[
                    "👨\u{200D}👩\u{200D}👧\u{200D}👦",
                    "🏳\u{FE0F}\u{200D}🌈",
                    "🇫🇷",
                    "🇯🇵🇺🇸",
                    "❤\u{FE0F}",
                    "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}",
                ])),
                12 => {
                    s.push(rng.range_char(0x61, 0x7A));
                    (0..1 + rng.below(3)).for_each(|_| s.push(rng.range_char(0x300, 0x36F)));
                }
                13 => (0..2 + rng.below(6)).for_each(|_| s.push(rng.range_char(0x627, 0x64A))),
                14 => s.push_str(rng.pick(&["क्षि", "नमस्ते", "हिन्दी", "ि"])),
                15 => (0..2 + rng.below(6)).for_each(|_| s.push(rng.range_char(0x430, 0x44F))),
                16 => s.push_str(&rng.next().to_string()[..1 + rng.below(8)]),
                17 => s.push_str(
                    rng.pick(&[".", ",", "!?", "...", "—", "«»", "「", "」", "()", "->"]),
                ),
                18 => s.push(rng.range_char(0x1D400, 0x1D7FF)),
                _ => {
                    // Zalgo-ish: a long run of combining marks.
                    s.push('Z');
                    (0..rng.below(24)).for_each(|_| s.push(rng.range_char(0x300, 0x36F)));
                }
            }
        }
        s
    }

    fn code_text(rng: &mut Rng, target: usize) -> String {
        let mut s = String::new();
        let mut i = 0;
        while s.len() < target {
            i += 1;
            let n = rng.below(1000);
            s.push_str(&match rng.below(5) {
                0 => format!("fn handler_{i}(ctx: &mut Context, n: usize) -> Result<u32> {{\n"),
                1 => format!("    let value_{i} = ctx.items[{n}].map(|x| x * {n} + 1)?;\n"),
                2 => format!("    // 注释: retry #{n} — see issue {i}\n"),
                3 => "    }\n}\n\n".to_string(),
                _ => format!(
                    "\tif (x_{i} >= {n} && !done) {{ return \"{}\"; }}\n",
                    rng.pick(WORDS)
                ),
            });
        }
        s
    }

    fn log_text(rng: &mut Rng, target: usize) -> String {
        let mut s = String::new();
        let mut t = 0;
        while s.len() < target {
            t += rng.below(900);
            let level = rng.pick(&["INFO", "WARN", "ERROR", "DEBUG"]);
            s.push_str(&format!(
                "2026-01-01T{:02}:{:02}:{:02}.{:03}Z {level} [worker-{}] req={:016x} path=/api/v1/items/{} took={}ms msg=\"{}\"\n",
                t / 3_600_000 % 24,
                t / 60_000 % 60,
                t / 1000 % 60,
                t % 1000,
                rng.below(16),
                rng.next(),
                rng.below(100_000),
                rng.below(5000),
                rng.pick(&["ok", "timeout talking to upstream", "用户未找到", "retrying…", "cache miss 🚫"]),
            ));
        }
        s
    }

    fn json_text(rng: &mut Rng, target: usize) -> String {
        let mut s = String::from("[");
        let mut i = 0;
        while s.len() < target {
            if i > 0 {
                s.push(',');
            }
            i += 1;
            s.push_str(&format!(
                "\n  {{\"id\": {i}, \"title\": \"{} {}\", \"tags\": [\"{}\", \"日本語\"], \"score\": {}.{}, \"ok\": {}, \"note\": null}}",
                rng.pick(WORDS),
                rng.pick(&["会议", "réunion", "meeting 📅", "встреча"]),
                rng.pick(WORDS),
                rng.below(100),
                rng.below(1000),
                rng.below(2) == 0
            ));
        }
        s.push_str("\n]\n");
        s
    }

    fn gen_text(rng: &mut Rng, kind: usize, target: usize) -> String {
        match kind % 4 {
            0 => unicode_text(rng, target),
            1 => code_text(rng, target),
            2 => log_text(rng, target),
            _ => json_text(rng, target),
        }
    }

    // ---- the property check ----------------------------------------------------------------------

    fn fits_all(backend: &dyn Backend, s: &str, limits: &Limits) -> bool {
        limits.max_tokens.is_none_or(|t| backend.count(s) <= t)
            && limits.max_lines.is_none_or(|l| count_lines(s) <= l)
            && limits.max_bytes.is_none_or(|b| s.len() <= b)
    }

    /// What `truncate` must return for kept parts `text[..a]`, `text[b..]`.
    fn assemble(
        backend: &dyn Backend,
        text: &str,
        a: usize,
        b: usize,
        marker: Option<&str>,
    ) -> (String, usize) {
        let count = |s: &str| if s.is_empty() { 0 } else { backend.count(s) };
        let omitted = backend
            .count(text)
            .saturating_sub(count(&text[..a]) + count(&text[b..]));
        let mut s = text[..a].to_string();
        if let Some(m) = marker {
            s.push_str(&fill_marker(m, omitted));
        }
        s.push_str(&text[b..]);
        (s, omitted)
    }

    fn digits(n: usize) -> usize {
        n.to_string().len()
    }

    /// Runs `truncate` and checks every rule; returns the result.
    #[track_caller]
    fn check(
        backend: &dyn Backend,
        text: &str,
        limits: Limits,
        opts: TruncateOptions<'_>,
    ) -> Truncation {
        let ctx = format!(
            "{} {:?} {:?} text={:?}",
            backend.name(),
            limits,
            opts,
            text.chars().take(200).collect::<String>()
        );
        let r = truncate(backend, text, &limits, &opts).unwrap_or_else(|e| panic!("{e} for {ctx}"));
        let orig = backend.count(text);
        assert_eq!(r.original_tokens, orig, "{ctx}");
        assert_eq!(r.original_bytes, text.len(), "{ctx}");
        assert_eq!(r.original_lines, count_lines(text), "{ctx}");
        if fits_all(backend, text, &limits) {
            assert!(!r.truncated, "{ctx}");
            assert_eq!(r.text, text, "{ctx}");
            assert_eq!((r.tokens, r.omitted_tokens), (orig, 0), "{ctx}");
            return r;
        }
        assert!(r.truncated, "{ctx}");
        // Limits, re-counted.
        let tokens = backend.count(&r.text);
        assert_eq!(r.tokens, tokens, "{ctx}");
        assert_eq!(r.kept_bytes, r.text.len(), "{ctx}");
        assert_eq!(r.kept_lines, count_lines(&r.text), "{ctx}");
        assert!(
            fits_all(backend, &r.text, &limits),
            "limit broken: {} tokens, {} lines, {} bytes: {ctx}\nresult={:?}",
            tokens,
            r.kept_lines,
            r.kept_bytes,
            r.text
        );
        if limits.max_tokens == Some(0) {
            assert_eq!(r.text, "", "{ctx}");
        }
        // Shape: prefix + marker + suffix.
        let (a, b) = (r.head_end, r.tail_start);
        assert!(a <= b && b <= text.len(), "{ctx}");
        match opts.direction {
            Direction::Head => assert_eq!(b, text.len(), "{ctx}"),
            Direction::Tail => assert_eq!(a, 0, "{ctx}"),
            Direction::HeadTail => {}
        }
        let full_marker = fill_marker(opts.marker, orig);
        let marker_fits = !opts.marker.is_empty() && fits_all(backend, &full_marker, &limits);
        assert_eq!(r.marker_used, marker_fits, "{ctx}");
        let marker = r.marker_used.then_some(opts.marker);
        let (expected, omitted) = assemble(backend, text, a, b, marker);
        assert_eq!(r.omitted_tokens, omitted, "{ctx}");
        assert_eq!(r.text, expected, "{ctx}");
        // Maximal: growing either side by one more cluster breaks a limit, unless at most a
        // couple of tokens (or the bytes reserved for the marker's number) are unused.
        let token_slack_ok = limits.max_tokens.is_some_and(|t| tokens + 2 >= t);
        let reserved = if r.marker_used {
            digits(orig) - digits(omitted)
        } else {
            0
        };
        let byte_slack_ok = limits
            .max_bytes
            .is_some_and(|m| r.kept_bytes + reserved >= m);
        if !token_slack_ok && !byte_slack_ok {
            if opts.direction != Direction::Tail && a < b {
                let a2 = next_cluster(text, a);
                if a2 <= b {
                    let (s, _) = assemble(backend, text, a2, b, marker);
                    assert!(!fits_all(backend, &s, &limits), "head could grow {a}->{a2} ({tokens} tokens, {} lines, {} bytes; grown: {} tokens {} lines {} bytes) around {:?}: {ctx}\nresult={:?}", r.kept_lines, r.kept_bytes, backend.count(&s), count_lines(&s), s.len(), &text[floor_boundary(text, a.saturating_sub(12))..ceil_boundary(text, a2 + 12)], r.text);
                }
            }
            if opts.direction != Direction::Head && a < b {
                let b2 = prev_cluster(text, b);
                if b2 >= a {
                    let (s, _) = assemble(backend, text, a, b2, marker);
                    assert!(!fits_all(backend, &s, &limits), "tail could grow {b}->{b2} ({tokens} tokens, {} lines, {} bytes; grown: {} tokens {} lines {} bytes) around {:?}: {ctx}\nresult={:?}", r.kept_lines, r.kept_bytes, backend.count(&s), count_lines(&s), s.len(), &text[floor_boundary(text, b2.saturating_sub(12))..ceil_boundary(text, b + 12)], r.text);
                }
            }
        }
        r
    }

    const DIRECTIONS: [Direction; 3] = [Direction::Head, Direction::Tail, Direction::HeadTail];
    const MARKERS: [&str; 5] = [
        DEFAULT_MARKER,
        "",
        "[{omitted}]",
        "\n…\n",
        " <<{omitted} tokens cut; {omitted}>> ",
    ];

    fn opts(direction: Direction, marker: &str, head_ratio: f64) -> TruncateOptions<'_> {
        TruncateOptions {
            direction,
            marker,
            head_ratio,
        }
    }

    /// Token limits from 0 to above the text's size.
    fn token_limits(rng: &mut Rng, total: usize) -> Vec<usize> {
        let mut v = vec![
            0,
            1,
            2,
            3,
            7,
            12,
            20,
            total / 3,
            total / 2,
            total.saturating_sub(1),
            total,
            total + 3,
        ];
        v.push(rng.below(total + 2));
        v.push(rng.below(total + 2));
        v
    }

    fn run_random(backend: &dyn Backend, seed: u64, cases: usize, max_len: usize) {
        let mut rng = Rng(seed);
        for case in 0..cases {
            let kind = case % 4;
            let target = 1 + rng.below(max_len);
            let text = gen_text(&mut rng, kind, target);
            let total = backend.count(&text);
            for &direction in &DIRECTIONS {
                for t in token_limits(&mut rng, total) {
                    let marker = MARKERS[rng.below(MARKERS.len())];
                    let ratio = [0.0, 0.25, 0.5, 0.8, 1.0][rng.below(5)];
                    check(
                        backend,
                        &text,
                        Limits::tokens(t),
                        opts(direction, marker, ratio),
                    );
                }
                // Lines and bytes, alone and together with tokens.
                let lines = count_lines(&text);
                for _ in 0..4 {
                    let limits = Limits {
                        max_tokens: (rng.below(3) == 0).then(|| rng.below(total + 2)),
                        max_lines: (rng.below(2) == 0).then(|| rng.below(lines + 2)),
                        max_bytes: (rng.below(2) == 0).then(|| rng.below(text.len() + 2)),
                    };
                    let marker = MARKERS[rng.below(MARKERS.len())];
                    let ratio = [0.0, 0.3, 0.5, 1.0][rng.below(4)];
                    check(backend, &text, limits, opts(direction, marker, ratio));
                }
            }
        }
    }

    // ---- randomized properties -------------------------------------------------------------------

    #[test]
    fn random_cl100k() {
        run_random(&cl100k(), 1, 60, 3000);
    }

    #[test]
    fn random_o200k() {
        run_random(&o200k(), 2, 60, 3000);
    }

    #[test]
    fn random_exact_without_pieces() {
        run_random(&no_pieces(o200k()), 3, 25, 2000);
        run_random(&Tiktoken(tiktoken_rs::cl100k_base_singleton()), 4, 15, 2000);
    }

    #[test]
    fn random_estimate() {
        run_random(&Estimate { pieces: true }, 5, 40, 3000);
        run_random(&Estimate { pieces: false }, 6, 40, 3000);
    }

    #[test]
    fn random_broken_backends() {
        // Decoding that does not reproduce the text: cut by counts instead of ids.
        let lossy = Wrap {
            inner: cl100k(),
            pieces: true,
            lossy_decode: true,
            bad_pieces: false,
        };
        run_random(&lossy, 7, 15, 2000);
        let lossy_whole = Wrap {
            inner: cl100k(),
            pieces: false,
            lossy_decode: true,
            bad_pieces: false,
        };
        run_random(&lossy_whole, 8, 15, 2000);
        // Pieces that do not tile the text: the whole text is one piece.
        let bad = Wrap {
            inner: cl100k(),
            pieces: true,
            lossy_decode: false,
            bad_pieces: true,
        };
        run_random(&bad, 9, 15, 2000);
    }

    #[test]
    fn random_larger_texts() {
        // Long enough that the tail window has to grow and pieces are many.
        run_random(&cl100k(), 10, 4, 60_000);
        run_random(&o200k(), 11, 4, 60_000);
    }

    #[test]
    fn tiny_and_degenerate_texts() {
        let texts = [
            "",
            "a",
            "\n",
            "\n\n\n",
            " ",
            "     ",
            "é",
            "e\u{301}",
            "👨\u{200D}👩\u{200D}👧",
            "🇫🇷🇩🇪🇮🇹",
            "\r\n\r\n",
            "中",
            "中文字符",
            "a\u{300}\u{301}\u{302}\u{303}",
            "\u{301}\u{301}",
            "\u{200D}",
            "x\n",
            "\nx",
            "1234567890",
            "                                                   x",
        ];
        let backends: [&dyn Backend; 4] = [
            &cl100k(),
            &o200k(),
            &Estimate { pieces: false },
            &no_pieces(cl100k()),
        ];
        for backend in backends {
            for text in texts {
                for direction in DIRECTIONS {
                    for marker in MARKERS {
                        for t in 0..6 {
                            for ratio in [0.0, 0.5, 1.0] {
                                check(
                                    backend,
                                    text,
                                    Limits::tokens(t),
                                    opts(direction, marker, ratio),
                                );
                                let limits = Limits {
                                    max_tokens: None,
                                    max_lines: Some(t / 2),
                                    max_bytes: Some(t * 3),
                                };
                                check(backend, text, limits, opts(direction, marker, ratio));
                            }
                        }
                    }
                }
            }
        }
    }

    // ---- specific rules -----------------------------------------------------------------------

    fn lorem(n: usize) -> String {
        (0..n)
            .map(|i| format!("line {i}: the quick brown fox jumps over the lazy dog\n"))
            .collect()
    }

    #[test]
    fn fits_unchanged() {
        let b = cl100k();
        let text = lorem(10);
        let n = b.count(&text);
        for direction in DIRECTIONS {
            let limits = Limits {
                max_tokens: Some(n),
                max_lines: Some(10),
                max_bytes: Some(text.len()),
            };
            let r = truncate(&b, &text, &limits, &opts(direction, DEFAULT_MARKER, 0.5)).unwrap();
            assert!(!r.truncated);
            assert_eq!(r.text, text);
            assert_eq!((r.original_tokens, r.tokens, r.omitted_tokens), (n, n, 0));
            let r = truncate(&b, &text, &Limits::default(), &opts(direction, "", 0.5)).unwrap();
            assert!(!r.truncated && r.text == text);
        }
    }

    #[test]
    fn head_tail_shapes_and_omitted() {
        let b = cl100k();
        let text = lorem(200);
        let n = b.count(&text);
        let head = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::Head, "", 0.5),
        );
        assert!(text.starts_with(&head.text) && head.tokens >= 98 && head.tokens <= 100);
        assert_eq!(head.omitted_tokens, n - head.tokens);

        let tail = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::Tail, "", 0.5),
        );
        assert!(text.ends_with(&tail.text) && tail.tokens >= 98);

        let m = "\n[{omitted} omitted]\n";
        let ht = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::HeadTail, m, 0.5),
        );
        let kept_head = &text[..ht.head_end];
        let kept_tail = &text[ht.tail_start..];
        let omitted = n - b.count(kept_head) - b.count(kept_tail);
        assert_eq!(ht.omitted_tokens, omitted);
        assert_eq!(
            ht.text,
            format!("{kept_head}\n[{omitted} omitted]\n{kept_tail}")
        );
        // The ratio splits the room: each side gets about half.
        let (h, t) = (b.count(kept_head) as i64, b.count(kept_tail) as i64);
        assert!((h - t).abs() <= 6, "{h} vs {t}");

        let skewed = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::HeadTail, m, 0.8),
        );
        let (h, t) = (
            b.count(&text[..skewed.head_end]),
            b.count(&text[skewed.tail_start..]),
        );
        assert!(h > 3 * t, "{h} vs {t}");
        // All room to one side.
        let all_tail = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::HeadTail, m, 0.0),
        );
        assert_eq!(all_tail.head_end, 0);
        let all_head = check(
            &b,
            &text,
            Limits::tokens(100),
            opts(Direction::HeadTail, m, 1.0),
        );
        assert!(all_head.head_end > 0 && all_head.tail_start >= text.len() - 2);
    }

    #[test]
    fn marker_dropped_when_it_alone_does_not_fit() {
        let b = cl100k();
        let text = lorem(50);
        let mt = b.count(&fill_marker(DEFAULT_MARKER, b.count(&text)));
        for direction in DIRECTIONS {
            let r = check(
                &b,
                &text,
                Limits::tokens(mt - 1),
                opts(direction, DEFAULT_MARKER, 0.5),
            );
            assert!(!r.marker_used && !r.text.contains('…'));
            assert!(r.tokens < mt && !r.text.is_empty());
            let r = check(
                &b,
                &text,
                Limits::tokens(mt),
                opts(direction, DEFAULT_MARKER, 0.5),
            );
            assert!(r.marker_used && r.text.contains("tokens omitted"));
            // Lines and bytes too.
            let r = check(
                &b,
                &text,
                Limits {
                    max_lines: Some(1),
                    ..Limits::default()
                },
                opts(direction, DEFAULT_MARKER, 0.5),
            );
            assert!(!r.marker_used && r.kept_lines == 1);
        }
    }

    #[test]
    fn zero_tokens_gives_empty() {
        for direction in DIRECTIONS {
            let r = check(
                &cl100k(),
                "hello world",
                Limits::tokens(0),
                opts(direction, DEFAULT_MARKER, 0.5),
            );
            assert_eq!(r.text, "");
            assert!(r.truncated && !r.marker_used);
            assert_eq!(r.omitted_tokens, 2);
            let r = truncate(
                &cl100k(),
                "",
                &Limits::tokens(0),
                &opts(direction, DEFAULT_MARKER, 0.5),
            )
            .unwrap();
            assert!(!r.truncated && r.text.is_empty());
        }
    }

    #[test]
    fn lines_and_bytes_limits() {
        let b = o200k();
        let text = lorem(100);
        let r = check(
            &b,
            &text,
            Limits {
                max_lines: Some(10),
                ..Default::default()
            },
            opts(Direction::Head, "", 0.5),
        );
        assert_eq!(r.text, lorem(10));
        let r = check(
            &b,
            &text,
            Limits {
                max_lines: Some(10),
                ..Default::default()
            },
            opts(Direction::Tail, "", 0.5),
        );
        assert_eq!(r.kept_lines, 10);
        assert!(r.text.starts_with("line 90:"));
        let r = check(
            &b,
            &text,
            Limits {
                max_lines: Some(10),
                ..Default::default()
            },
            opts(Direction::HeadTail, "\n--\n", 0.5),
        );
        assert_eq!(r.kept_lines, 10);
        let r = check(
            &b,
            &text,
            Limits {
                max_bytes: Some(500),
                ..Default::default()
            },
            opts(Direction::HeadTail, DEFAULT_MARKER, 0.5),
        );
        assert!(r.kept_bytes <= 500 && r.kept_bytes >= 495);
        // The tightest limit wins.
        let limits = Limits {
            max_tokens: Some(40),
            max_lines: Some(10),
            max_bytes: Some(5000),
        };
        let r = check(
            &b,
            &text,
            limits,
            opts(Direction::Head, DEFAULT_MARKER, 0.5),
        );
        assert!(r.tokens <= 40 && r.tokens >= 38);
        let limits = Limits {
            max_tokens: Some(4000),
            max_lines: Some(3),
            max_bytes: Some(5000),
        };
        let r = check(&b, &text, limits, opts(Direction::Head, "", 0.5));
        assert_eq!(r.text, lorem(3));
    }

    #[test]
    fn never_splits_chars_or_clusters() {
        let b = cl100k();
        let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
        let accented = "e\u{301}\u{302}";
        for unit in [family, accented, "🇫🇷", "中", "🏳\u{FE0F}\u{200D}🌈", "\r\n"] {
            let text = unit.repeat(200);
            for direction in DIRECTIONS {
                for t in 1..40 {
                    let r = check(&b, &text, Limits::tokens(t), opts(direction, "", 0.5));
                    let (h, tl) = (&text[..r.head_end], &text[r.tail_start..]);
                    assert_eq!(
                        h.len() % unit.len(),
                        0,
                        "{unit:?} head cut inside a cluster at t={t}"
                    );
                    assert_eq!(
                        tl.len() % unit.len(),
                        0,
                        "{unit:?} tail cut inside a cluster at t={t}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_arguments() {
        assert_eq!("head".parse::<Direction>().unwrap(), Direction::Head);
        assert_eq!("tail".parse::<Direction>().unwrap(), Direction::Tail);
        assert_eq!(
            "head_tail".parse::<Direction>().unwrap(),
            Direction::HeadTail
        );
        for d in DIRECTIONS {
            assert_eq!(d.as_str().parse::<Direction>().unwrap(), d);
            assert_eq!(d.to_string(), d.as_str());
        }
        match "middle".parse::<Direction>() {
            Err(Error::Value(msg)) => assert!(
                msg.contains("\"middle\"") && msg.contains("head_tail"),
                "{msg}"
            ),
            other => panic!("{other:?}"),
        }
        for ratio in [f64::NAN, -0.1, 1.01, f64::INFINITY, f64::NEG_INFINITY] {
            match truncate(
                &cl100k(),
                "abc",
                &Limits::tokens(1),
                &opts(Direction::HeadTail, "", ratio),
            ) {
                Err(Error::Value(msg)) => assert!(msg.contains("head_ratio"), "{msg}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn marker_placeholder_filled() {
        assert_eq!(fill_marker("[{omitted}|{omitted}]", 42), "[42|42]");
        assert_eq!(fill_marker("{omitted", 1), "{omitted");
        assert_eq!(fill_marker("", 1), "");
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines("\n\n"), 2);
    }

    #[test]
    fn seams_that_merge_are_backed_off() {
        // Cuts where the marker merges with the kept text ("x" + "yz..."): limits must still hold.
        let b = cl100k();
        let text = "abc".repeat(500);
        for direction in DIRECTIONS {
            for marker in ["abc", "c", "bca{omitted}abc", " ", "  "] {
                for t in 0..30 {
                    check(&b, &text, Limits::tokens(t), opts(direction, marker, 0.5));
                }
            }
        }
        let spaces = format!("a{}b{}c", " ".repeat(3000), "\n ".repeat(2000));
        for direction in DIRECTIONS {
            for t in [1, 2, 5, 50, 300] {
                check(&b, &spaces, Limits::tokens(t), opts(direction, " ", 0.5));
            }
        }
    }

    #[test]
    fn long_single_pieces() {
        // One huge piece (no separators): only it is encoded, and the cut is inside it.
        let b = cl100k();
        let text = "x".repeat(200_000) + &"漢".repeat(50_000);
        for direction in DIRECTIONS {
            let r = check(
                &b,
                &text,
                Limits::tokens(1000),
                opts(direction, DEFAULT_MARKER, 0.5),
            );
            assert!(r.tokens >= 998);
        }
    }

    #[test]
    fn work_is_one_counting_pass_plus_the_kept_part() {
        let mut rng = Rng(42);
        let text = log_text(&mut rng, 2_000_000) + &unicode_text(&mut rng, 1_000_000);
        for direction in DIRECTIONS {
            let b = metered(cl100k());
            let r = truncate(
                &b,
                &text,
                &Limits::tokens(2000),
                &opts(direction, DEFAULT_MARKER, 0.5),
            )
            .unwrap();
            assert!(r.tokens <= 2000 && r.tokens >= 1990);
            // The counting pass tokenizes the text once (through `count` or, in parallel, through
            // the pieces, with short overlaps at the seams)...
            let counted = b.counted.load(Ordering::Relaxed);
            let split = b.split.load(Ordering::Relaxed);
            let encoded = b.encoded.load(Ordering::Relaxed);
            let parallel = split >= text.len();
            let (extra_counted, extra_split) = if parallel {
                (counted - text.len(), split - text.len())
            } else {
                (counted - text.len(), split)
            };
            // ...and the rest is re-counts of ~2000-token candidates and the walked pieces: tens
            // of KB, not MB.
            assert!(
                extra_counted < 300_000,
                "{direction}: counted {extra_counted} extra bytes"
            );
            assert!(
                extra_split < 300_000,
                "{direction}: split {extra_split} extra bytes"
            );
            assert!(encoded < 10_000, "{direction}: encoded {encoded} bytes");
        }
    }

    #[test]
    fn parallel_count_is_exact() {
        let mut rng = Rng(77);
        let backends: [&dyn Backend; 2] = [&cl100k(), &o200k()];
        let mut joined = 0;
        for case in 0..25 {
            let size = 20_000 + rng.below(40_000);
            let mut text = gen_text(&mut rng, case, size);
            if case % 5 == 4 {
                // Seams inside long whitespace runs and long single pieces.
                for (div, filler) in [
                    (2, " ".repeat(3000)),
                    (3, "\n \n\t".repeat(500)),
                    (4, "z".repeat(5000)),
                ] {
                    let at = floor_boundary(&text, text.len() / div);
                    text.insert_str(at, &filler);
                }
            }
            for backend in backends {
                let exact = backend.count(&text);
                for (chunks, sync) in [(2, 64), (7, 256), (16, 1024), (40, 4096), (200, 8192)] {
                    if let Some(n) = count_pieces_parallel(backend, &text, chunks, sync) {
                        assert_eq!(n, exact, "case {case} chunks {chunks} sync {sync}");
                        joined += 1;
                    }
                }
            }
        }
        assert!(joined > 150, "seams rarely met: {joined}");
        // Pieces that do not tile the text: no parallel count.
        let bad = Wrap {
            inner: cl100k(),
            pieces: true,
            lossy_decode: false,
            bad_pieces: true,
        };
        assert_eq!(
            count_pieces_parallel(&bad, &"abc def\n".repeat(1000), 4, 1024),
            None
        );
        // The public entry point agrees on a long text.
        let long = log_text(&mut rng, 3 << 20);
        assert_eq!(count_text(&cl100k(), &long), cl100k().count(&long));
    }

    /// Many more random cases: `STRESS=50 cargo test --release -- --ignored stress`.
    #[test]
    #[ignore]
    fn stress() {
        let n: u64 = std::env::var("STRESS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10);
        for seed in 100..100 + n {
            run_random(&cl100k(), seed, 20, 5000);
            run_random(&o200k(), seed, 20, 5000);
            run_random(&no_pieces(cl100k()), seed, 8, 3000);
            run_random(
                &Estimate {
                    pieces: seed % 2 == 0,
                },
                seed,
                10,
                3000,
            );
            run_random(
                &Wrap {
                    inner: o200k(),
                    pieces: true,
                    lossy_decode: true,
                    bad_pieces: false,
                },
                seed,
                5,
                3000,
            );
        }
    }

    /// Process CPU seconds (Linux; 0 elsewhere): timings on a loaded machine are more stable in
    /// CPU time than in wall time.
    fn cpu() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Timing of the counting pass alone: `cargo test --release -- --ignored --nocapture bench_count`.
    #[test]
    #[ignore]
    fn bench_count() {
        use std::time::Instant;
        let mut rng = Rng(9);
        let text = log_text(&mut rng, 10_000_000);
        let b = cl100k();
        let dynb: &dyn Backend = &b;
        for _ in 0..2 {
            let c0 = cpu();
            let _ = b.count(&text);
            let c1 = cpu();
            let _ = count_pieces_parallel(dynb, &text, 8, PARALLEL_SYNC_BYTES);
            eprintln!("cpu: count {:.2}s, parallel(8) {:.2}s", c1 - c0, cpu() - c1);
            let t0 = Instant::now();
            let n = b.count(&text);
            let seq = t0.elapsed();
            let t0 = Instant::now();
            let m: usize = dynb
                .pieces(&text)
                .unwrap()
                .map(|p| dynb.count_piece(p))
                .sum();
            let dyn_seq = t0.elapsed();
            assert_eq!(n, m);
            let mut par = Vec::new();
            for chunks in [2, 4, 8, 16] {
                let t0 = Instant::now();
                let k = count_pieces_parallel(dynb, &text, chunks, PARALLEL_SYNC_BYTES);
                par.push((chunks, t0.elapsed()));
                assert_eq!(k, Some(n));
            }
            eprintln!(
                "count {seq:.1?} | dyn pieces {dyn_seq:.1?} | parallel {par:.1?} | threads {}",
                rayon::current_num_threads()
            );
        }
    }

    /// Timing printout, no assertions on time:
    /// `cargo test --release -- --ignored --nocapture bench_10mb` (env SIZES=100000,... KINDS=log,...).
    /// Compares `truncate` head_tail to 2,000 tokens with encoding the whole text and slicing
    /// (bpe-openai, and tiktoken-rs: the core of Python's tiktoken). Best of 3 runs each.
    #[test]
    #[ignore]
    fn bench_10mb() {
        use std::time::{Duration, Instant};
        /// Best wall time of 3 runs, CPU seconds per run, and the result.
        fn best<T>(mut f: impl FnMut() -> T) -> (Duration, f64, T) {
            let mut out = None;
            let mut best = Duration::MAX;
            let c0 = cpu();
            for _ in 0..3 {
                let t0 = Instant::now();
                let r = f();
                best = best.min(t0.elapsed());
                out = Some(r);
            }
            (best, (cpu() - c0) / 3.0, out.unwrap())
        }
        let mut rng = Rng(7);
        let sizes: Vec<usize> = std::env::var("SIZES").ok().map_or(vec![10_000_000], |s| {
            s.split(',').map(|x| x.parse().unwrap()).collect()
        });
        let kinds = std::env::var("KINDS").unwrap_or_else(|_| "log,code,json,unicode".into());
        let b = cl100k();
        let tik = tiktoken_rs::cl100k_base_singleton();
        let o = opts(Direction::HeadTail, DEFAULT_MARKER, 0.5);
        for kind in kinds.split(',') {
            for &size in &sizes {
                let mut text = String::with_capacity(size + 30_000);
                while text.len() < size {
                    text.push_str(&gen_text(
                        &mut rng,
                        match kind {
                            "unicode" => 0,
                            "code" => 1,
                            "log" => 2,
                            _ => 3,
                        },
                        20_000,
                    ));
                }
                let (ours, ours_cpu, r) =
                    best(|| truncate(&b, &text, &Limits::tokens(2000), &o).unwrap());
                let (count, count_cpu, n) = best(|| b.count(&text));
                let (bpe, _, _) = best(|| {
                    let ids = b.tok.encode(text.as_str());
                    let kept: Vec<u32> = ids[..1000]
                        .iter()
                        .chain(&ids[ids.len() - 1000..])
                        .copied()
                        .collect();
                    b.tok.bpe.decode_tokens(&kept)
                });
                let (tk, tk_cpu, _) = best(|| {
                    let ids = tik.encode_ordinary(&text);
                    let kept: Vec<u32> = ids[..1000]
                        .iter()
                        .chain(&ids[ids.len() - 1000..])
                        .copied()
                        .collect();
                    tik.decode(&kept).unwrap()
                });
                assert_eq!(r.original_tokens, n);
                let x = |d: Duration| d.as_secs_f64() / ours.as_secs_f64();
                eprintln!(
                    "{kind:>8} {:>10} B {:>9} tok | truncate {:>7.1?} (cpu {:.2}s) | bpe count 1 thread {:>7.1?} (cpu {:.2}s) | bpe encode+slice {:>7.1?} ({:.1}x) | tiktoken-rs encode+slice {:>7.1?} (cpu {:.2}s) wall {:.1}x cpu {:.1}x",
                    text.len(), n, ours, ours_cpu, count, count_cpu, bpe, x(bpe), tk, tk_cpu, x(tk), tk_cpu / ours_cpu,
                );
            }
        }
    }
}
