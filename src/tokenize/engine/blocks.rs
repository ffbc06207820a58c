//! Piece starts of 64 ASCII bytes at once, for the cl100k_base, o200k_base and Qwen patterns.
//!
//! The byte-at-a-time splitter ([`super::split`]) decides each piece by the class of its
//! first characters: on source code, where a word, an operator, a space and a break follow
//! each other in no order a branch predictor can learn, most of its time is mispredicted
//! branches. Here the class of every byte of a block becomes a bit mask (SSE2 compares), and
//! the patterns' alternatives become bit operations over the masks that mark where pieces
//! start; the caller then walks the marks. A block always begins where a piece begins, so no
//! state crosses blocks.
//!
//! A mark is trusted only where the block's bytes settle it: not on the block's last byte
//! (a piece there may take the next one as its letters), not inside a run of whitespace that
//! reaches the block's end (its split depends on how the run ends), not past an apostrophe
//! that may begin a contraction (the rarer rule is left to the splitter), and not past a
//! byte that is not ASCII.
//!
//! The rules, for the ASCII classes letter `L`, number `N`, whitespace `W`, break `R`
//! (`\r`, `\n`), blank `SP` (` `) and other `P` (none of those):
//! - a run of `L` starts a piece, or its previous byte does when that byte is free and may
//!   lead a word (`[^\r\n\p{L}\p{N}]?`): a `W` but not `R`, or a `P` that begins its run and
//!   does not follow `SP`; o200k also starts one at each capital after a small letter;
//! - a run of `N` starts a piece every three bytes (`\p{N}{1,3}`), or every byte (Qwen's
//!   `\p{N}`);
//! - a run of `P` starts a piece, unless an `SP` before it does (` ?[^\s\p{L}\p{N}]+`); the
//!   piece takes the `R` right after the run (`[\r\n]*`), and o200k's the `/` among them;
//! - what is left of a run of `W` starts a piece; so does the byte after its last `R`
//!   (`\s*[\r\n]`) when that is not the run's end, and its last byte when that is not an `R`
//!   (`\s+(?!\S)`: the last blank goes with what follows, or alone).

/// The trusted piece starts of one block.
pub struct Block {
    /// Bit `k`: a piece starts at the block's byte `k`, for the bytes whose marks are
    /// trusted. Bit 0 is always set.
    pub starts: u64,
    /// One past the block's last byte that is not ASCII (0: all ASCII): the splitter's
    /// business up to there.
    pub foreign_end: u32,
}

/// The bytes a block reads.
pub const LEN: usize = 64;

/// Per-byte class masks of a block.
#[derive(Default, Debug, PartialEq, Eq)]
struct Masks {
    letter: u64,
    upper: u64,
    lower: u64,
    digit: u64,
    space: u64,
    brk: u64,
    blank: u64,
    quote: u64,
    slash: u64,
    foreign: u64,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks(b: &[u8; LEN]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; the loads read 16 of the block's 64 bytes each.
    unsafe {
        let mut m = Masks::default();
        let between = |v: __m128i, lo: u8, hi: u8| {
            // Signed compares: bytes of 0x80 and up are negative and fall outside.
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1)),
            )
        };
        let bits = |v: __m128i| u64::from(_mm_movemask_epi8(v) as u16);
        for k in 0..LEN / 16 {
            let v = _mm_loadu_si128(b.as_ptr().add(16 * k).cast());
            let at = 16 * k;
            let upper = between(v, b'A', b'Z');
            let lower = between(v, b'a', b'z');
            let blank = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
            let brk = _mm_or_si128(
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
            );
            m.upper |= bits(upper) << at;
            m.lower |= bits(lower) << at;
            m.letter |= bits(_mm_or_si128(upper, lower)) << at;
            m.digit |= bits(between(v, b'0', b'9')) << at;
            // \t \n \v \f \r and the blank: Unicode's White_Space in ASCII.
            m.space |= bits(_mm_or_si128(blank, between(v, 0x09, 0x0d))) << at;
            m.brk |= bits(brk) << at;
            m.blank |= bits(blank) << at;
            m.quote |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\'' as i8))) << at;
            m.slash |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'/' as i8))) << at;
            m.foreign |= bits(v) << at;
        }
        m
    }
}

/// The masks from the splitter's own class table, a byte at a time: where SSE2 is not, and
/// the reference the SSE2 compares are tested against.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn masks_by_table(b: &[u8; LEN]) -> Masks {
    use super::classes::{ASCII, LETTER, LOWER, NUMBER, SPACE, UPPER};
    let mut m = Masks::default();
    for (k, &c) in b.iter().enumerate() {
        let class = if c < 0x80 { ASCII[c as usize] } else { 0 };
        let set = |mask: &mut u64, yes: bool| *mask |= u64::from(yes) << k;
        set(&mut m.upper, class & UPPER != 0);
        set(&mut m.lower, class & LOWER != 0);
        set(&mut m.letter, class & LETTER != 0);
        set(&mut m.digit, class & NUMBER != 0);
        set(&mut m.space, class & SPACE != 0);
        set(&mut m.brk, c == b'\n' || c == b'\r');
        set(&mut m.blank, c == b' ');
        set(&mut m.quote, c == b'\'');
        set(&mut m.slash, c == b'/');
        set(&mut m.foreign, c >= 0x80);
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
fn masks(b: &[u8; LEN]) -> Masks {
    masks_by_table(b)
}

/// Bit `k` of the result is bit `k - 1` of `x`: "the byte before is ...".
#[inline(always)]
fn before(x: u64) -> u64 {
    x << 1
}

/// Bit `k` of the result is bit `k + 1` of `x`: "the byte after is ...".
#[inline(always)]
fn after(x: u64) -> u64 {
    x >> 1
}

/// The runs of `runs` that hold a bit of `last`, each given at its run's last bit: a carry
/// through the runs, from their high ends down (bits reversed, added, reversed back).
#[inline(always)]
fn runs_ending_at(last: u64, runs: u64) -> u64 {
    let (r, l) = (runs.reverse_bits(), last.reverse_bits());
    (r & !r.wrapping_add(l)).reverse_bits()
}

/// What sets the patterns' block rules apart.
#[derive(Clone, Copy)]
pub struct Rules {
    /// o200k splits words by case and lets a word take a contraction.
    pub o200k: bool,
    /// Each digit a piece (Qwen), else numbers go three digits a piece.
    pub single_digits: bool,
}

/// The piece starts of the 64 bytes of `b` (a piece starts at `b[0]`) under `rules`.
#[inline(always)]
pub fn starts(b: &[u8; LEN], rules: Rules) -> Block {
    let Rules { o200k, single_digits } = rules;
    let m = masks(b);
    let foreign_end = if m.foreign == 0 { 0 } else { LEN as u32 - m.foreign.leading_zeros() };
    // Bytes from the first foreign one on are not classed.
    let known = if m.foreign == 0 { LEN as u32 } else { m.foreign.trailing_zeros() };
    let ascii = if m.foreign == 0 { u64::MAX } else { (1u64 << known) - 1 };
    let (letter, digit, space, brk, blank) =
        (m.letter & ascii, m.digit & ascii, m.space & ascii, m.brk & ascii, m.blank & ascii);
    let free_space = space & !brk;
    // The breaks right after a run of punctuation go with it (`[\r\n]*`), o200k's slashes
    // too (`[\r\n/]*`): those slashes begin no run of their own.
    let other = ascii & !(letter | digit | space);
    let trail = if o200k { brk | m.slash } else { brk };
    // A break after a taken slash is a second carry into the same run, which the sum leaves
    // set: it is taken all the same.
    let seeds = brk & before(other);
    let carried = trail & !trail.wrapping_add(seeds);
    let taken = carried | (seeds & before(carried));
    let other = other & !taken;

    // Words: at the run, or at the free byte before it.
    let run = letter & !before(letter);
    let lead = before(free_space) | (before(other) & !before(before(other | blank)));
    let mut starts = 1 | (run & !lead) | after(run & lead);
    if o200k {
        starts |= m.upper & before(m.lower) & ascii;
    }

    // Numbers, a group at a time.
    if single_digits {
        starts |= digit;
    } else {
        let three = digit & before(digit) & before(before(digit));
        let mut numbers = digit & !before(digit);
        while numbers != 0 {
            starts |= numbers;
            numbers = (numbers << 3) & three;
        }
    }

    // Punctuation, unless a blank before leads it.
    starts |= other & !before(other) & !before(blank);

    // Whitespace: what the punctuation left, the tail after the last break, the last byte.
    let left = space & !taken;
    let last = free_space & !after(space);
    starts |= left & !before(left) | last | (runs_ending_at(last, free_space) & before(brk));

    // Where the marks are trusted: before the last classed byte, before a run of whitespace
    // that reaches it, before an apostrophe that may begin a contraction (a free one for
    // cl100k and Qwen, one after a word for o200k).
    let mut cut = known.saturating_sub(1);
    if known > 0 && space >> (known - 1) & 1 == 1 {
        let outside = !space & ((1u64 << (known - 1)) - 1);
        cut = cut.min(LEN as u32 - outside.leading_zeros());
    }
    let may_contract = if o200k { before(letter) } else { !before(other | blank) };
    let quotes = m.quote & ascii & may_contract & after(letter);
    cut = cut.min(quotes.trailing_zeros());
    let trusted = if cut == 0 { 1 } else { starts & (u64::MAX >> (LEN as u32 - cut)) };
    Block { starts: trusted, foreign_end }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse2_masks_equal_the_class_table_for_every_byte_at_every_place() {
        // Four blocks hold the 256 byte values; rotating them puts each value at each place.
        let bytes: Vec<u8> = (0..=255u8).collect();
        for shift in 0..LEN {
            for block in bytes.chunks(LEN) {
                let mut b = [0u8; LEN];
                for (k, &c) in block.iter().enumerate() {
                    b[(k + shift) % LEN] = c;
                }
                assert_eq!(masks(&b), masks_by_table(&b), "shift {shift}");
            }
        }
    }
}
