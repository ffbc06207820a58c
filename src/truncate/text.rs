//! Text helpers: newlines, marker filling, char and short-cluster boundaries.

use super::*;

pub(super) fn count_newlines(s: &str) -> usize {
    // This runs over the whole input for `original_lines`, so it must stay far below the
    // cost of counting its tokens: the compiler's own vectorising of a byte count left it at
    // 4-5 ms of a 10 MB truncation, the memory's pace is under 2 ms.
    #[cfg(target_arch = "x86_64")]
    {
        newlines_sse2(s.as_bytes())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        s.bytes().filter(|&b| b == b'\n').count()
    }
}

/// Newlines of `bytes`, 64 bytes per step: four 16-byte compares subtracted from one set of
/// byte counters (a match is all ones, -1), so a counter gains at most 4 a step; they are
/// summed into 64-bit totals every 63 steps, before one could pass 255. SSE2 is part of
/// every x86-64.
#[cfg(target_arch = "x86_64")]
fn newlines_sse2(bytes: &[u8]) -> usize {
    use std::arch::x86_64::*;
    let whole = bytes.len() / 64 * 64;
    let (steps, rest) = bytes.split_at(whole);
    let mut n = rest.iter().filter(|&&b| b == b'\n').count();
    // SAFETY: SSE2 is baseline on x86_64; loads are unaligned loads within `steps`.
    unsafe {
        let nl = _mm_set1_epi8(b'\n' as i8);
        let zero = _mm_setzero_si128();
        let mut total = _mm_setzero_si128();
        for block in steps.chunks(63 * 64) {
            let mut counts = _mm_setzero_si128();
            for step in block.chunks_exact(64) {
                let p = step.as_ptr() as *const __m128i;
                for k in 0..4 {
                    let eq = _mm_cmpeq_epi8(_mm_loadu_si128(p.add(k)), nl);
                    counts = _mm_sub_epi8(counts, eq);
                }
            }
            // each half's eight byte counters (at most 252) summed into its u64
            total = _mm_add_epi64(total, _mm_sad_epu8(counts, zero));
        }
        let mut lanes = [0u64; 2];
        _mm_storeu_si128(lanes.as_mut_ptr() as *mut __m128i, total);
        n += (lanes[0] + lanes[1]) as usize;
    }
    n
}

/// Whether `count_lines(s) <= k`, reading `s` only up to its line `k + 1`.
pub(super) fn lines_at_most(s: &str, k: usize) -> bool {
    let mut seen = 0usize;
    for (i, _) in s.match_indices('\n') {
        seen += 1;
        if seen > k {
            return false;
        }
        if seen == k {
            // Exactly k newlines so far: fits iff nothing follows this one.
            return i + 1 == s.len();
        }
    }
    // Fewer than k newlines: at most k lines (the last may be open).
    seen + usize::from(!s.is_empty() && !s.ends_with('\n')) <= k
}

/// The start of the line holding `i` (`i` itself when a line starts there).
pub(super) fn line_start_at_or_before(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    s[..i].rfind('\n').map_or(0, |n| n + 1)
}

/// The first line start at or after `i` (`s.len()` when none).
pub(super) fn line_start_at_or_after(s: &str, i: usize) -> usize {
    if i == 0 || s.as_bytes()[i - 1] == b'\n' {
        return i;
    }
    s[i..].find('\n').map_or(s.len(), |n| i + n + 1)
}

/// The line start after the one at `i` (`s.len()` at the last line).
pub(super) fn next_line_start(s: &str, i: usize) -> usize {
    s[i..].find('\n').map_or(s.len(), |n| i + n + 1)
}

/// The line start before `i` (0 at the first line).
pub(super) fn prev_line_start(s: &str, i: usize) -> usize {
    s[..prev_boundary(s, i)].rfind('\n').map_or(0, |n| n + 1)
}

pub(super) fn push_marker(out: &mut String, marker: &str, omitted: usize) {
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
pub(super) fn head_line_cap(text: &str, k: usize, partial: bool) -> usize {
    if partial {
        text.match_indices('\n').nth(k).map_or(text.len(), |(i, _)| i)
    } else if k == 0 {
        0
    } else {
        text.match_indices('\n').nth(k - 1).map_or(text.len(), |(i, _)| i + 1)
    }
}

/// The smallest start whose suffix has at most `k` lines.
pub(super) fn tail_line_floor(text: &str, k: usize) -> usize {
    if k == 0 {
        return text.len();
    }
    // Lines of text[c..] (non-empty) = newlines at or after c, plus one if the text does not
    // end with '\n'.
    let open_last = usize::from(!text.is_empty() && !text.ends_with('\n'));
    let allowed = k - open_last;
    text.rmatch_indices('\n').nth(allowed).map_or(0, |(i, _)| i + 1)
}

pub(super) fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(super) fn ceil_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The char boundary after `i` (`s.len()` at the end).
pub(super) fn next_boundary(s: &str, i: usize) -> usize {
    s[i..].chars().next().map_or(s.len(), |c| i + c.len_utf8())
}

/// The char boundary before `i` (0 at the start).
pub(super) fn prev_boundary(s: &str, i: usize) -> usize {
    s[..i].chars().next_back().map_or(0, |c| i - c.len_utf8())
}

/// Clusters longer than this many chars (e.g. "zalgo" text) may be cut anywhere: keeping
/// clusters whole is a preference, not worth losing a large part of the room.
pub(super) const MAX_CLUSTER_CHARS: usize = 16;

/// A char that belongs with the one before it: combining marks, joiners, variation selectors,
/// emoji modifiers and tags.
pub(super) fn extends(c: char) -> bool {
    matches!(c,
        '\u{200C}' | '\u{200D}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{1F3FB}'..='\u{1F3FF}'
        | '\u{E0020}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
        || unicode_normalization::char::is_combining_mark(c)
}

pub(super) fn is_regional_indicator(c: char) -> bool {
    ('\u{1F1E6}'..='\u{1F1FF}').contains(&c)
}

/// Whether cutting `s` at char boundary `i` keeps user-perceived characters whole (a cheap
/// approximation of grapheme cluster boundaries).
pub(super) fn is_cluster_boundary(s: &str, i: usize) -> bool {
    let (Some(prev), Some(next)) = (s[..i].chars().next_back(), s[i..].chars().next()) else {
        return true;
    };
    if extends(next) || prev == '\u{200D}' || (prev == '\r' && next == '\n') {
        return false;
    }
    if is_regional_indicator(prev) && is_regional_indicator(next) {
        // Flags pair regional indicators from the start of their run.
        let run = s[..i].chars().rev().take(4096).take_while(|&c| is_regional_indicator(c)).count();
        return run % 2 == 0;
    }
    true
}

/// The short cluster (at most [`MAX_CLUSTER_CHARS`] chars) that char boundary `i` falls
/// strictly inside, if any.
pub(super) fn short_cluster_around(s: &str, i: usize) -> Option<(usize, usize)> {
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
pub(super) fn snap_back(s: &str, i: usize) -> usize {
    short_cluster_around(s, i).map_or(i, |(start, _)| start)
}

/// `i`, or the end of the short cluster it falls inside.
pub(super) fn snap_forward(s: &str, i: usize) -> usize {
    short_cluster_around(s, i).map_or(i, |(_, end)| end)
}

/// The next cut after `i` that keeps short clusters whole.
pub(super) fn next_cluster(s: &str, i: usize) -> usize {
    snap_forward(s, next_boundary(s, i))
}

/// The previous cut before `i` that keeps short clusters whole.
pub(super) fn prev_cluster(s: &str, i: usize) -> usize {
    snap_back(s, prev_boundary(s, i))
}
