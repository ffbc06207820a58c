//! The cut search: walking pre-tokenizer pieces from either end, and the cutter that
//! re-counts, backs off and grows a candidate result.

use super::*;

/// Inputs shared by both sides.
pub(super) struct Ctx<'t> {
    pub(super) backend: &'t dyn Backend,
    pub(super) text: &'t str,
    pub(super) has_pieces: bool,
    /// The whole text's ids (exact backend without pieces).
    pub(super) whole_ids: Option<Vec<u32>>,
    /// The whole text's token count, once something needed it.
    pub(super) total: std::cell::OnceCell<usize>,
    /// Cut at whole lines only.
    pub(super) lines: bool,
}

impl Ctx<'_> {
    /// The whole text's token count, counted on first use.
    pub(super) fn total(&self) -> usize {
        *self.total.get_or_init(|| count_text(self.backend, self.text))
    }
}

/// One pre-tokenizer piece `text[start..end]` with its token count `cnt`; `before` is the tokens
/// of the pieces walked before it (head: to its left; tail: to its right).
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) before: usize,
    pub(super) cnt: usize,
}

/// Byte ends of a piece's first (or, for a tail, last) tokens, decoded lazily.
pub(super) struct PieceTokens {
    pub(super) span: usize,
    /// `None`: the span is the whole text; use `Ctx::whole_ids`.
    pub(super) ids: Option<Vec<u32>>,
    /// `ends[k]` = bytes of the first (last) k tokens; `ends[0] == 0`.
    pub(super) ends: Vec<usize>,
    /// Decoding did not reproduce the piece (e.g. a normalizing tokenizer): search by counts.
    pub(super) broken: bool,
}

/// One side of the cut: the head (a prefix ending at most at `bound`) or the tail (a suffix
/// starting at least at `bound`), found from a token target `t` by [`Side::point`].
pub(super) struct Side {
    pub(super) tail: bool,
    /// False when there is no token limit: the cut is just `bound`.
    pub(super) limited: bool,
    /// Head: pieces from the start, in order. Tail: pieces from the end, last piece first.
    pub(super) spans: Vec<Span>,
    /// `spans` is a single pseudo-piece covering the text (no usable pre-tokenizer).
    pub(super) whole: bool,
    pub(super) bound: usize,
    pub(super) cache: Vec<PieceTokens>,
    /// Head: where the walked pieces end, their tokens, and the next window's size.
    pub(super) walked_end: usize,
    pub(super) walked_tokens: usize,
    pub(super) window: usize,
    /// Tail: the budget and floor the window was last walked with.
    pub(super) walked_budget: usize,
    pub(super) walked_floor: usize,
}

/// Pieces are split from windows of this many bytes per budget token (doubling while short);
/// this many pieces at a window's open end may be split differently in the full text.
pub(super) const WINDOW_BYTES_PER_TOKEN: usize = 6;
pub(super) const UNTRUSTED_WINDOW_PIECES: usize = 2;

pub(super) fn window_for(budget: usize) -> usize {
    budget.saturating_mul(WINDOW_BYTES_PER_TOKEN).saturating_add(64)
}

impl Side {
    pub(super) fn unused(tail: bool) -> Side {
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

    pub(super) fn new(ctx: &Ctx<'_>, tail: bool, budget: Option<usize>, bound: usize) -> Side {
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
    pub(super) fn make_whole(&mut self, ctx: &Ctx<'_>) {
        self.whole = true;
        self.cache.clear();
        let len = ctx.text.len();
        self.spans = vec![Span { start: 0, end: len, before: 0, cnt: ctx.total() }];
    }

    /// Walk head pieces until one crosses `t` tokens or reaches `bound`. Pieces come from
    /// windows split one after the other, each starting where the walk ended (a true piece
    /// boundary); the last pieces of a window may be split differently from the full text, so the
    /// walk stops short of them and the next window (twice as large) starts there.
    pub(super) fn extend_head(&mut self, ctx: &Ctx<'_>, t: usize, bound: usize) {
        let text = ctx.text;
        let len = text.len();
        while self.walked_tokens <= t && self.walked_end < bound && !self.whole {
            let from = self.walked_end;
            let to = ceil_boundary(text, from.saturating_add(self.window.max(64)));
            self.window = self.window.saturating_mul(2);
            let Some(bounds) = piece_bounds(ctx, from, to) else {
                return self.make_whole(ctx);
            };
            let trusted = if to == len { bounds.len() } else { bounds.len().saturating_sub(UNTRUSTED_WINDOW_PIECES) };
            if trusted == 0 && self.bounded_giant(ctx, t, from, &bounds) {
                return;
            }
            for &(start, end) in &bounds[..trusted] {
                let cnt = ctx.backend.count_piece(&text[start..end]);
                self.spans.push(Span { start, end, before: self.walked_tokens, cnt });
                self.walked_end = end;
                self.walked_tokens = self.walked_tokens.saturating_add(cnt);
                if self.walked_tokens > t || end >= bound {
                    break;
                }
            }
        }
    }

    /// Ends the head walk inside a piece too long for the room left: when the first piece of
    /// the window (it starts at `from`, a true piece boundary, and runs at least as far in the
    /// whole text, give or take a lookahead's char) is by its length alone more tokens than
    /// are left to `t`, it is recorded as far as the window reaches, with that lower bound as
    /// its count. The cut falls inside it and the result is re-counted exactly, so only the
    /// part of the piece a cut can keep is ever split or encoded.
    fn bounded_giant(&mut self, ctx: &Ctx<'_>, t: usize, from: usize, bounds: &[(usize, usize)]) -> bool {
        let (Some(longest), Some(&(start, end))) = (ctx.backend.longest_token(), bounds.first()) else {
            return false;
        };
        // 4: a lookahead (`\s+(?!\S)`) may end the true piece one char earlier.
        let lower = (end - start).saturating_sub(4) / longest;
        let left = t.saturating_sub(self.walked_tokens);
        // Twice the room: growing the cut later (into room the marker left) stays inside.
        if start != from || lower <= left.saturating_mul(2).saturating_add(16) {
            return false;
        }
        self.spans.push(Span { start, end, before: self.walked_tokens, cnt: lower });
        self.walked_end = end;
        self.walked_tokens = self.walked_tokens.saturating_add(lower);
        true
    }

    /// [`Side::bounded_giant`] for the tail walk: the piece `text[s..e]` ends where the walked
    /// pieces start (or at the text's end), a true piece boundary, but the window's start may
    /// have cut it; when its length alone is more tokens than are left to `budget`, it is
    /// recorded as it stands with that lower bound as its count, and the walk ends there. The
    /// cut falls inside it and the result is re-counted exactly, so a tail cut of a text
    /// without break points reads only the window it keeps, not the whole piece.
    fn bounded_giant_tail(&mut self, ctx: &Ctx<'_>, budget: usize, acc: usize, s: usize, e: usize) -> bool {
        let Some(longest) = ctx.backend.longest_token() else { return false };
        // 4: the window's split may end the piece a lookahead's char off the true one.
        let lower = (e - s).saturating_sub(4) / longest;
        // Twice the room: growing the cut later (into room the marker left) stays inside.
        if lower <= budget.saturating_sub(acc).saturating_mul(2).saturating_add(16) {
            return false;
        }
        self.spans.push(Span { start: s, end: e, before: acc, cnt: lower });
        true
    }

    /// Walk pieces from the end while they fit `budget` tokens, plus the piece that crosses,
    /// never before `floor`. Only a window near the end is split: it starts at a char boundary
    /// sized from the budget and doubles while the walk would reach its first pieces (which may
    /// be split differently from the full text) without crossing the budget.
    pub(super) fn walk_tail(&mut self, ctx: &Ctx<'_>, budget: usize, floor: usize) {
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
                    if self.bounded_giant_tail(ctx, budget, acc, s, e) {
                        return;
                    }
                    short = true;
                    break;
                }
                let cnt = ctx.backend.count_piece(&text[s..e]);
                self.spans.push(Span { start: s, end: e, before: acc, cnt });
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
    pub(super) fn point(&mut self, ctx: &Ctx<'_>, t: usize) -> (usize, usize) {
        let (cut, est) = self.point_any(ctx, t);
        if !ctx.lines {
            return (cut, est);
        }
        let text = ctx.text;
        let snapped = if self.tail { line_start_at_or_after(text, cut) } else { line_start_at_or_before(text, cut) };
        (snapped, self.walked_before(snapped).min(est))
    }

    /// Walked tokens of the pieces wholly kept by a cut at `pos` (an estimate of its tokens).
    pub(super) fn walked_before(&self, pos: usize) -> usize {
        if !self.limited {
            return 0;
        }
        let tail = self.tail;
        // Spans are in walk order: from the start (head) or from the end (tail).
        let n = self.spans.partition_point(|s| if tail { s.start >= pos } else { s.end <= pos });
        match n {
            0 => 0,
            n => self.spans[n - 1].before + self.spans[n - 1].cnt,
        }
    }

    /// [`Side::point`] at any char boundary (not only at line starts).
    pub(super) fn point_any(&mut self, ctx: &Ctx<'_>, t: usize) -> (usize, usize) {
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
        let n = self.spans.partition_point(|s| s.before <= t && if tail { s.end > bound } else { s.start < bound });
        if n == 0 {
            return (if tail { text.len() } else { 0 }, 0);
        }
        let i = n - 1;
        let sp = self.spans[i];
        let rem = t - sp.before;
        let room = if tail { sp.end - bound } else { bound - sp.start };
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
    pub(super) fn split(&mut self, ctx: &Ctx<'_>, i: usize, rem: usize, room: usize) -> (usize, usize) {
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
    pub(super) fn split_by_ids(
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
                let ids =
                    if self.whole && ctx.whole_ids.is_some() { None } else { Some(ctx.backend.encode(piece).ok()?) };
                // Backing off revisits a handful of pieces; keep the cache small.
                if self.cache.len() >= 8 {
                    self.cache.remove(0);
                }
                self.cache.push(PieceTokens { span: i, ids, ends: vec![0], broken: false });
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
            let id = if tail { ids[ids.len() - 1 - done] } else { ids[done] };
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
            .find(|&(e, _)| e <= room && piece.is_char_boundary(if tail { piece.len() - e } else { e }))
            .unwrap_or((0, 0));
        Some((bytes, k, room_bound))
    }
}

/// Offset of `piece` inside `text`, if it is a slice of it.
/// The byte spans of the backend's pieces of `text[from..to]`, or `None` when the backend has
/// no pieces or they do not tile the slice exactly (the caller then falls back to encoding
/// the whole text).
pub(super) fn piece_bounds(ctx: &Ctx<'_>, from: usize, to: usize) -> Option<Vec<(usize, usize)>> {
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

pub(super) fn offset_in(text: &str, piece: &str) -> Option<usize> {
    let base = text.as_ptr() as usize;
    let p = piece.as_ptr() as usize;
    (p >= base && p + piece.len() <= base + text.len()).then(|| p - base)
}

/// The longest prefix of `s` (char boundary, at most `max_bytes`) accepted by `ok`, given that
/// `s[..lo]` is accepted: steps forward from `lo` by `step` bytes, doubling, then bisects. `ok`
/// should be mostly monotone; the answer is always `lo` or a prefix `ok` accepted.
pub(super) fn search_prefix(s: &str, lo: usize, max_bytes: usize, ok: impl Fn(&str) -> bool, step: usize) -> usize {
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
pub(super) fn search_suffix(s: &str, hi: usize, max_bytes: usize, ok: impl Fn(&str) -> bool, step: usize) -> usize {
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

pub(super) struct Rendered {
    pub(super) text: String,
    pub(super) tokens: usize,
    pub(super) lines: usize,
    /// `None` when the whole text's count was not needed.
    pub(super) omitted: Option<usize>,
    pub(super) head_tokens: usize,
    pub(super) tail_tokens: usize,
}

pub(super) struct Cutter<'c, 't> {
    pub(super) ctx: &'c Ctx<'t>,
    pub(super) limits: &'c Limits,
    pub(super) direction: Direction,
    pub(super) marker: Option<&'c str>,
    pub(super) head: Side,
    pub(super) tail: Side,
    /// Kept: `text[..a]` and `text[b..]`, with their walked token estimates.
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) est_a: usize,
    pub(super) est_b: usize,
}

/// Rounds of backing off before giving up on the cut and keeping only the marker. Each round
/// shrinks the kept text, and seams rarely cost more than a round or two.
pub(super) const MAX_BACKOFF_ROUNDS: usize = 64;
/// Re-counts spent growing into room left by backing off or by cluster boundaries.
pub(super) const MAX_GROW_RENDERS: usize = 12;

impl Cutter<'_, '_> {
    pub(super) fn render(&self, a: usize, b: usize) -> Rendered {
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
        // The whole count is forced only by a marker that shows it.
        let total = match self.marker {
            Some(m) if m.contains(OMITTED_PLACEHOLDER) => Some(ctx.total()),
            _ => ctx.total.get().copied(),
        };
        let omitted = total.map(|n| n.saturating_sub(head_tokens.saturating_add(tail_tokens)));
        let mut out = String::with_capacity(a + tail.len() + self.marker.map_or(0, |m| m.len() + 20));
        out.push_str(head);
        if let Some(m) = self.marker {
            push_marker(&mut out, m, omitted.unwrap_or(0));
        }
        out.push_str(tail);
        Rendered { tokens: count(&out), lines: count_lines(&out), text: out, omitted, head_tokens, tail_tokens }
    }

    /// Excess (tokens, lines, bytes) of `r` over the limits.
    pub(super) fn excess(&self, r: &Rendered) -> (usize, usize, usize) {
        let over = |limit: Option<usize>, v: usize| limit.map_or(0, |l| v.saturating_sub(l));
        (
            over(self.limits.max_tokens, r.tokens),
            over(self.limits.max_lines, r.lines),
            over(self.limits.max_bytes, r.text.len()),
        )
    }

    pub(super) fn fits(&self, r: &Rendered) -> bool {
        self.excess(r) == (0, 0, 0)
    }

    pub(super) fn fit(&mut self) -> Rendered {
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
    pub(super) fn shrink_for_lines_or_bytes(&mut self, el: usize, eb: usize) {
        let text = self.ctx.text;
        let len = text.len();
        let use_tail = match self.direction {
            Direction::Head => false,
            Direction::Tail => true,
            Direction::HeadTail => self.b < len && (self.a == 0 || el > 0 || len - self.b >= self.a),
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
    pub(super) fn shrink_for_tokens(&mut self, et: usize, r: &Rendered) {
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

    pub(super) fn shrink_head(&mut self, n: usize) {
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

    pub(super) fn shrink_tail(&mut self, n: usize) {
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
    pub(super) fn grow(&mut self, mut r: Rendered) -> Rendered {
        let mut open = [self.direction != Direction::Tail, self.direction != Direction::Head];
        let mut renders = 0;
        while open.contains(&true) && renders < MAX_GROW_RENDERS {
            for tail in [false, true] {
                let side = usize::from(tail);
                if !open[side] || renders >= MAX_GROW_RENDERS {
                    continue;
                }
                self.relax(tail, &r);
                let mut jump = self.limits.max_tokens.map_or(usize::MAX, |m| m.saturating_sub(r.tokens));
                let mut tried = None;
                let grown = loop {
                    if renders >= MAX_GROW_RENDERS {
                        break false;
                    }
                    let candidate =
                        if jump > 0 { self.grown_by_tokens(tail, jump) } else { self.grown_by_cluster(tail, &r) };
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
    pub(super) fn grown_by_tokens(&mut self, tail: bool, jump: usize) -> Option<(usize, usize, usize)> {
        if tail {
            let (b, est) = self.tail.point(self.ctx, self.est_b.saturating_add(jump));
            (b < self.b && b >= self.a).then_some((self.a, b, est))
        } else {
            let (a, est) = self.head.point(self.ctx, self.est_a.saturating_add(jump));
            (a > self.a && a <= self.b).then_some((a, self.b, est))
        }
    }

    /// The cut one cluster further out, if the side's bound allows it.
    pub(super) fn grown_by_cluster(&self, tail: bool, r: &Rendered) -> Option<(usize, usize, usize)> {
        let text = self.ctx.text;
        let lines = self.ctx.lines;
        if tail {
            let b = if lines { prev_line_start(text, self.b) } else { prev_cluster(text, self.b) };
            let est = self.est_b + 1 + r.tail_tokens.saturating_sub(self.est_b);
            (self.b > self.a && b >= self.tail.bound && b >= self.a).then_some((self.a, b, est))
        } else {
            let a = if lines { next_line_start(text, self.a) } else { next_cluster(text, self.a) };
            let est = self.est_a + 1 + r.head_tokens.saturating_sub(self.est_a);
            (self.a < self.b && a <= self.head.bound && a <= self.b).then_some((a, self.b, est))
        }
    }

    /// Move one side's bound as far as the lines and bytes left unused by the result `r` allow
    /// (each side was first given only its share).
    pub(super) fn relax(&mut self, tail: bool, r: &Rendered) {
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
                let k = if before.is_empty() { max } else { max.saturating_sub(count_newlines(before)) };
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
