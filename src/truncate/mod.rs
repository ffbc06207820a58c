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
//! Cost follows the output, not the input. Whether the text already fits is decided with
//! `count_until` (reading at most `max_tokens` tokens) and a bounded newline scan; the cut is
//! found by walking pre-tokenizer pieces from the front (head) or from a window near the end
//! (tail), encoding only the piece that crosses the cut; the small candidate result is then
//! re-counted exactly, the cut backs off if tokens merge differently across a seam, and grows
//! again into any room left. The whole text's token count (`original_tokens`, and so
//! `omitted_tokens`) is computed only when asked for ([`TruncateOptions::count_total`]) or when
//! the marker shows it (`{omitted}`; [`DEFAULT_MARKER`] does not): then one counting pass over the
//! whole text, in parallel chunks for long texts ([`count_text`]). Otherwise those fields are
//! `None` and a caller that wants them later counts the input itself (the Python result does so
//! on first access). Backends without pieces: exact ones encode the whole text once (that is
//! the counting pass), estimates search char boundaries with `count`.
//!
//! `lines: true` cuts at whole lines only: the head ends just after a `'\n'`, the tail starts
//! just after one (or at the text's start), within the same limits.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::tokenize::Backend;

mod cut;
mod parallel;
#[cfg(test)]
mod tests;
mod text;

use cut::*;
pub use parallel::count_text;
#[cfg(test)]
use parallel::*;
use text::*;

/// The default marker. It shows no number, so a default cut reads only what it keeps.
pub const DEFAULT_MARKER: &str = "\n…[truncated]…\n";
/// The marker of callers that count the whole input anyway (the observation truncator, the
/// CLI): filling in `{omitted}` then costs nothing more.
pub const TOKENS_OMITTED_MARKER: &str = "\n…[{omitted} tokens omitted]…\n";
/// The placeholder a marker may contain.
pub const OMITTED_PLACEHOLDER: &str = "{omitted}";

/// Which part of the text to keep. The default, [`DEFAULT_DIRECTION`], is the one default of
/// every truncating entry point (Python `truncate`, `ObservationTruncator`, the manager's
/// tool-output cap, the CLI).
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

/// The direction every truncating entry point uses unless told otherwise: the head, as an
/// observation truncator shows a tool's output (read from the start; the saved full output
/// holds the rest) and as only a head cut can stop reading early on a stream.
pub const DEFAULT_DIRECTION: Direction = Direction::Head;

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
            _ => Err(Error::Value(format!("direction must be 'head', 'tail' or 'head_tail', got {s:?}"))),
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
        Limits { max_tokens: Some(max_tokens), ..Limits::default() }
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
    /// Cut only at whole lines: the kept head ends after a `'\n'`, the kept tail starts after one.
    pub lines: bool,
    /// Count the whole input (`original_tokens`, `omitted_tokens`, `original_lines`) even when
    /// the marker does not show it: one more pass over the whole text.
    pub count_total: bool,
}

impl Default for TruncateOptions<'_> {
    fn default() -> Self {
        TruncateOptions {
            direction: DEFAULT_DIRECTION,
            marker: DEFAULT_MARKER,
            head_ratio: 0.5,
            lines: false,
            count_total: false,
        }
    }
}

impl TruncateOptions<'_> {
    /// Whether the marker shows the omitted count, so a cut needs the whole text's count.
    pub fn marker_needs_total(&self) -> bool {
        self.marker.contains(OMITTED_PLACEHOLDER)
    }
}

/// The result of [`truncate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The kept text, marker included.
    pub text: String,
    /// False iff `text` is the input unchanged (it fit every limit).
    pub truncated: bool,
    /// `backend.count(input)`; `None` when it was not needed (a cut whose marker does not show
    /// it, without `count_total`).
    pub original_tokens: Option<usize>,
    /// `backend.count(text)` (marker included).
    pub tokens: usize,
    /// `original_tokens - head_tokens - tail_tokens`, saturating at 0; the number written into
    /// the marker. `Some(0)` when not truncated, `None` when `original_tokens` is.
    pub omitted_tokens: Option<usize>,
    /// `backend.count(input[..head_end])` and `backend.count(input[tail_start..])`, each part
    /// counted alone (0 when not truncated).
    pub head_tokens: usize,
    pub tail_tokens: usize,
    /// `count_lines(input)`; `None` when not needed (as `original_tokens`).
    pub original_lines: Option<usize>,
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

impl Truncation {
    /// `head_end` and `tail_start` in chars of `input` (the text this was cut from, `chars`
    /// chars long), for callers that index strings by character (Python) rather than by byte.
    /// Reads only the kept parts: the tail is counted back from the end.
    pub fn char_bounds(&self, input: &str, chars: usize) -> (usize, usize) {
        let head = input.get(..self.head_end).map_or(0, |h| h.chars().count());
        let tail = chars - input.get(self.tail_start..).map_or(0, |t| t.chars().count());
        (head, tail.max(head))
    }
}

/// [`truncate`] for a counter whose counts are scaled by a calibration factor (an estimate
/// learning from a provider's reported usage): the cut is made to the raw count that scales
/// to at most `max_tokens`, so re-counting the result with the same counter stays within the
/// limit, and the token figures of the result are scaled as that counter reports them.
/// `scale == 1.0` (exact counters) is plain [`truncate`].
pub fn truncate_calibrated(
    backend: &dyn Backend,
    text: &str,
    limits: &Limits,
    opts: &TruncateOptions<'_>,
    scale: f64,
) -> Result<Truncation> {
    if scale == 1.0 {
        return truncate(backend, text, limits, opts);
    }
    let raw = Limits { max_tokens: limits.max_tokens.map(|m| (m as f64 / scale).floor() as usize), ..*limits };
    let mut t = truncate(backend, text, &raw, opts)?;
    let scaled = |n: usize| (n as f64 * scale).ceil() as usize;
    t.original_tokens = t.original_tokens.map(scaled);
    t.tokens = scaled(t.tokens);
    t.omitted_tokens = t.omitted_tokens.map(scaled);
    t.head_tokens = scaled(t.head_tokens);
    t.tail_tokens = scaled(t.tail_tokens);
    Ok(t)
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
pub fn truncate(backend: &dyn Backend, text: &str, limits: &Limits, opts: &TruncateOptions<'_>) -> Result<Truncation> {
    let ratio = opts.head_ratio;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(Error::Value(format!("head_ratio must be between 0 and 1, got {ratio}")));
    }
    let len = text.len();
    let has_pieces = backend.pieces("").is_some();

    // Does it fit? Bytes are free, lines and tokens are read only up to their limit.
    let mut known_tokens = None;
    let fits = limits.max_bytes.is_none_or(|b| len <= b)
        && limits.max_lines.is_none_or(|l| lines_at_most(text, l))
        && limits.max_tokens.is_none_or(|t| {
            known_tokens = backend.count_until(text, t);
            known_tokens.is_some()
        });
    if fits {
        // The result is the input: counting it is counting the output.
        let n = known_tokens.unwrap_or_else(|| count_text(backend, text));
        let lines = count_lines(text);
        return Ok(Truncation {
            text: text.to_owned(),
            truncated: false,
            original_tokens: Some(n),
            tokens: n,
            omitted_tokens: Some(0),
            head_tokens: 0,
            tail_tokens: 0,
            original_lines: Some(lines),
            kept_lines: lines,
            original_bytes: len,
            kept_bytes: len,
            head_end: len,
            tail_start: len,
            marker_used: false,
        });
    }

    // Without pieces an exact backend's cut comes from the whole text's ids; encoding once
    // gives the count too, so it is still a single pass. With pieces the whole count is taken
    // only when the marker shows it or the caller asked.
    let mut whole_ids = None;
    let total = std::cell::OnceCell::new();
    if !has_pieces && backend.is_exact() && limits.max_tokens.is_some() {
        match backend.encode(text) {
            Ok(ids) => {
                let _ = total.set(ids.len());
                whole_ids = Some(ids);
            }
            Err(_) => {
                let _ = total.set(backend.count(text));
            }
        }
    } else if opts.count_total || opts.marker_needs_total() {
        let _ = total.set(count_text(backend, text));
    }
    let original_lines = opts.count_total.then(|| count_lines(text));

    // The marker is sized with the largest number it can show (nothing kept), so the room
    // reserved for it is enough whatever is finally omitted. Without the total, its byte length
    // bounds it (a byte-level tokenizer never makes more tokens than bytes).
    let mut marker = (!opts.marker.is_empty()).then_some(opts.marker);
    let (mut m_tokens, mut m_bytes, mut m_lines, mut m_newlines) = (0, 0, 0, 0);
    if let Some(m) = marker {
        let full = fill_marker(m, total.get().copied().unwrap_or(len));
        m_bytes = full.len();
        m_lines = count_lines(&full);
        m_newlines = count_newlines(&full);
        let fits_lb = limits.max_lines.is_none_or(|l| m_lines <= l) && limits.max_bytes.is_none_or(|b| m_bytes <= b);
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

    let ctx = Ctx { backend, text, has_pieces, whole_ids, total, lines: opts.lines };
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
            let line_floor = limits.max_lines.map_or(0, |l| tail_line_floor(text, l - m_newlines));
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
            let line_floor = line_room.map_or(0, |k| tail_line_floor(text, k.saturating_sub(used_lines)));
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
        original_tokens: ctx.total.get().copied(),
        tokens: r.tokens,
        omitted_tokens: r.omitted,
        head_tokens: r.head_tokens,
        tail_tokens: r.tail_tokens,
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
