//! Piece starts of 64 ASCII bytes at once, for the cl100k_base, o200k_base and Qwen patterns.
//!
//! The byte-at-a-time splitter ([`super::split`]) decides each piece by the class of its
//! first characters: on source code, where a word, an operator, a space and a break follow
//! each other in no order a branch predictor can learn, most of its time is mispredicted
//! branches. Here the class of every byte of a block becomes a bit mask, and the patterns'
//! alternatives become bit operations over the masks that mark where pieces start; the
//! caller then walks the marks. A block always begins where a piece begins, so no state
//! crosses blocks.
//!
//! The masks come from SSE2 compares, sixteen bytes at a time; where the processor has AVX2,
//! thirty-two; where it has AVX-512BW, compares of the whole block into mask registers, a
//! tenth of SSE2's instructions (the processor asked once, at run time). With AVX-512 a
//! steady pass over source code counts 1.07-1.09x as fast (benches/RESULTS.md, 2026-11-27).
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
pub struct Masks {
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

/// The masks of a block from AVX2 compares, thirty-two bytes at a time.
///
/// # Safety
/// The processor has AVX2 ([`Widest::detect`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn masks_avx2(b: &[u8; LEN]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks::default();
    // Signed compares, as SSE2's: bytes of 0x80 and up are negative and fall outside.
    let between = |v: __m256i, lo: u8, hi: u8| {
        _mm256_and_si256(
            _mm256_cmpgt_epi8(v, _mm256_set1_epi8(lo as i8 - 1)),
            _mm256_cmpgt_epi8(_mm256_set1_epi8(hi as i8 + 1), v),
        )
    };
    let eq = |v: __m256i, c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
    let bits = |v: __m256i| u64::from(_mm256_movemask_epi8(v) as u32);
    for k in 0..LEN / 32 {
        // SAFETY: the load reads 32 of the block's 64 bytes.
        let v = unsafe { _mm256_loadu_si256(b.as_ptr().add(32 * k).cast()) };
        let at = 32 * k;
        let upper = between(v, b'A', b'Z');
        let lower = between(v, b'a', b'z');
        let blank = eq(v, b' ');
        m.upper |= bits(upper) << at;
        m.lower |= bits(lower) << at;
        m.letter |= bits(_mm256_or_si256(upper, lower)) << at;
        m.digit |= bits(between(v, b'0', b'9')) << at;
        m.space |= bits(_mm256_or_si256(blank, between(v, 0x09, 0x0d))) << at;
        m.brk |= bits(_mm256_or_si256(eq(v, b'\n'), eq(v, b'\r'))) << at;
        m.blank |= bits(blank) << at;
        m.quote |= bits(eq(v, b'\'')) << at;
        m.slash |= bits(eq(v, b'/')) << at;
        m.foreign |= bits(v) << at;
    }
    m
}

/// The masks of the whole block at once, each class one or two compares into a mask register.
///
/// # Safety
/// The processor has AVX-512F and AVX-512BW ([`Widest::detect`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn masks_avx512(b: &[u8; LEN]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: the caller's promise of AVX-512BW; the load reads the block's 64 bytes.
    let v = unsafe { _mm512_loadu_si512(b.as_ptr().cast()) };
    let set = |c: u8| _mm512_set1_epi8(c as i8);
    let eq = |c: u8| _mm512_cmpeq_epi8_mask(v, set(c));
    // `lo..=hi` as one unsigned compare: bytes below `lo` wrap around to large values.
    let range = |lo: u8, hi: u8| _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, set(lo)), set(hi - lo));
    let (upper, lower, blank) = (range(b'A', b'Z'), range(b'a', b'z'), eq(b' '));
    Masks {
        letter: upper | lower,
        upper,
        lower,
        digit: range(b'0', b'9'),
        // \t \n \v \f \r and the blank: Unicode's White_Space in ASCII.
        space: blank | range(0x09, 0x0d),
        brk: eq(b'\n') | eq(b'\r'),
        blank,
        quote: eq(b'\''),
        slash: eq(b'/'),
        foreign: _mm512_movepi8_mask(v),
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

/// How a block's byte classes are found. Every way gives the same [`Block`]; the hot loops
/// run through [`widest`], compiled once for each way.
pub trait Classify: Copy {
    /// The class masks of the 64 bytes of `b`.
    fn masks(self, b: &[u8; LEN]) -> Masks;

    /// The piece starts of the 64 bytes of `b` (a piece starts at `b[0]`) under `rules`.
    #[inline(always)]
    fn starts(self, b: &[u8; LEN], rules: Rules) -> Block {
        starts_from(self.masks(b), rules)
    }
}

/// SSE2 compares, sixteen bytes at a time (every x86_64), or the class table elsewhere.
#[derive(Clone, Copy)]
pub struct Narrow;

/// AVX2 compares, thirty-two bytes at a time. Made only by [`Widest::detect`], so holding
/// one proves the processor has the instructions.
#[derive(Clone, Copy)]
pub struct Avx2(());

/// AVX-512BW compares of the whole block into mask registers. Made only by
/// [`Widest::detect`], so holding one proves the processor has the instructions.
#[derive(Clone, Copy)]
pub struct Avx512(());

/// Asks the processor at each block and calls its widest way, for callers not compiled for
/// it (the splitter as an iterator).
#[derive(Clone, Copy)]
pub struct Detected;

/// The widest way to classify a block that this processor has.
#[derive(Clone, Copy)]
pub enum Widest {
    Avx512(Avx512),
    Avx2(Avx2),
    Narrow,
}

impl Widest {
    /// Asked of the processor once; the standard library keeps the answer.
    #[inline(always)]
    pub fn detect() -> Widest {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512bw") && has!("avx512f") {
                return Widest::Avx512(Avx512(()));
            }
            if has!("avx2") {
                return Widest::Avx2(Avx2(()));
            }
        }
        Widest::Narrow
    }
}

impl Classify for Narrow {
    #[inline(always)]
    fn masks(self, b: &[u8; LEN]) -> Masks {
        masks(b)
    }
}

impl Classify for Avx2 {
    #[inline(always)]
    fn masks(self, b: &[u8; LEN]) -> Masks {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Avx2` exists only where the processor has AVX2.
        return unsafe { masks_avx2(b) };
        #[cfg(not(target_arch = "x86_64"))]
        masks(b)
    }
}

impl Classify for Avx512 {
    #[inline(always)]
    fn masks(self, b: &[u8; LEN]) -> Masks {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Avx512` exists only where the processor has AVX-512F and AVX-512BW.
        return unsafe { masks_avx512(b) };
        #[cfg(not(target_arch = "x86_64"))]
        masks(b)
    }
}

impl Classify for Detected {
    /// Every way's masks are the same; [`Self::starts`] takes the widest.
    #[inline(always)]
    fn masks(self, b: &[u8; LEN]) -> Masks {
        masks(b)
    }

    #[inline(always)]
    fn starts(self, b: &[u8; LEN], rules: Rules) -> Block {
        widest(StartsOf { b, rules })
    }
}

/// One block's starts as work for [`widest`] (a call per block).
struct StartsOf<'b> {
    b: &'b [u8; LEN],
    rules: Rules,
}

impl OverBlocks for StartsOf<'_> {
    type Out = Block;
    #[inline(always)]
    fn run(self, classify: impl Classify) -> Block {
        classify.starts(self.b, self.rules)
    }
}

/// Work that classifies blocks: a loop over a text's pieces.
pub trait OverBlocks {
    type Out;
    fn run(self, classify: impl Classify) -> Self::Out;
}

/// `work` run with the widest way this processor has, in a copy compiled for its
/// instructions: a loop whose masks a function without them had to call for (one call per
/// block) kept about half the gain (benches/RESULTS.md, 2026-11-27).
#[inline(always)]
pub fn widest<W: OverBlocks>(work: W) -> W::Out {
    #[cfg(target_arch = "x86_64")]
    match Widest::detect() {
        // SAFETY: each way is made only where the processor has its instructions.
        Widest::Avx512(way) => unsafe { run_avx512(work, way) },
        Widest::Avx2(way) => unsafe { run_avx2(work, way) },
        Widest::Narrow => work.run(Narrow),
    }
    #[cfg(not(target_arch = "x86_64"))]
    work.run(Narrow)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn run_avx512<W: OverBlocks>(work: W, way: Avx512) -> W::Out {
    work.run(way)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2<W: OverBlocks>(work: W, way: Avx2) -> W::Out {
    work.run(way)
}

/// The piece starts of a block whose byte classes are `m`.
#[inline(always)]
fn starts_from(m: Masks, rules: Rules) -> Block {
    let Rules { o200k, single_digits } = rules;
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
                #[cfg(target_arch = "x86_64")]
                {
                    use std::arch::is_x86_feature_detected as has;
                    if has!("avx2") {
                        // SAFETY: detected.
                        assert_eq!(unsafe { masks_avx2(&b) }, masks_by_table(&b), "AVX2, shift {shift}");
                    }
                    if has!("avx512bw") && has!("avx512f") {
                        // SAFETY: detected.
                        assert_eq!(unsafe { masks_avx512(&b) }, masks_by_table(&b), "AVX-512, shift {shift}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_way_to_classify_finds_the_same_starts() {
        // Blocks of the bytes where the rules differ (letters of both cases, digits, blanks,
        // breaks, tabs, quotes, slashes, punctuation, a non-ASCII byte), at random.
        let alphabet = b"aZq09 \t\n\r\x0b'/.(_-\xc3\xa9";
        let mut next = crate::tokenize::engine::split::tests::xorshift();
        let widest = Widest::detect();
        if matches!(widest, Widest::Narrow) {
            eprintln!("no AVX2 here: only the SSE2 way is compared with the detected one");
        }
        for _ in 0..20_000 {
            let b: [u8; LEN] = std::array::from_fn(|_| alphabet[(next() % alphabet.len() as u64) as usize]);
            for (o200k, single_digits) in [(false, false), (true, false), (false, true)] {
                let rules = Rules { o200k, single_digits };
                let expect = Narrow.starts(&b, rules);
                let mut ways = vec![Detected.starts(&b, rules)];
                if let Widest::Avx512(way) = widest {
                    ways.push(way.starts(&b, rules));
                }
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    ways.push(Avx2(()).starts(&b, rules)); // AVX2 where AVX-512 is the widest too
                }
                for got in ways {
                    assert_eq!((got.starts, got.foreign_end), (expect.starts, expect.foreign_end), "{b:?}");
                }
            }
        }
    }
}
