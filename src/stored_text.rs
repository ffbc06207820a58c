//! Text as a Python `str` stores it, read by the core as UTF-8.
//!
//! CPython keeps a string one byte a character when every character is Latin-1, two when all
//! are in the Basic Multilingual Plane, four otherwise; only ASCII text is UTF-8 as it lies.
//! Asking CPython for the UTF-8 of any other string encodes it with the interpreter held and
//! keeps a copy beside the string for its lifetime: for a batch of Chinese dialog that was a
//! fifth of the batch's time, spent on one thread. Here the core writes the UTF-8 itself,
//! into a buffer of the counting thread, on every thread of a batch.
//!
//! Lone surrogates (from JSON, `os.fsdecode`, bad decoders) are read as tiktoken reads them:
//! the string as UTF-16 with surrogates passed through, decoded with replacement. A high
//! surrogate followed by a low one becomes their character; any other becomes one U+FFFD.

use std::cell::Cell;

/// A text in the storage its string keeps.
#[derive(Clone, Copy, Debug)]
pub enum Stored<'a> {
    /// UTF-8 already (an ASCII `str`, or a Rust one).
    Utf8(&'a str),
    /// One byte a character, some past ASCII.
    Latin1(&'a [u8]),
    /// Two bytes a character.
    Ucs2(&'a [u16]),
    /// Four bytes a character.
    Ucs4(&'a [u32]),
}

/// A text the core can read as UTF-8: a Rust string as it is, or a [`Stored`] one written out.
pub trait AsUtf8 {
    /// Its UTF-8 bytes, or for stored text a guess from its characters: what a batch weighs
    /// its texts by before any is written out. 0 exactly when the text is empty.
    fn size_hint(&self) -> usize;
    /// `f` of its UTF-8.
    fn with_utf8<R>(&self, f: impl FnOnce(&str) -> R) -> R;
}

impl<S: AsRef<str>> AsUtf8 for S {
    #[inline]
    fn size_hint(&self) -> usize {
        self.as_ref().len()
    }

    #[inline]
    fn with_utf8<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        f(self.as_ref())
    }
}

impl AsUtf8 for Stored<'_> {
    #[inline]
    fn size_hint(&self) -> usize {
        match *self {
            Stored::Utf8(s) => s.len(),
            Stored::Latin1(s) => s.len() + s.len() / 4,
            Stored::Ucs2(s) => 3 * s.len(),
            Stored::Ucs4(s) => 3 * s.len(),
        }
    }

    #[inline]
    fn with_utf8<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match *self {
            Stored::Utf8(s) => f(s),
            other => with_buffer(|buf| {
                other.write_utf8(buf);
                // SAFETY: `write_utf8` writes whole UTF-8 sequences of scalar values only
                // (surrogates are replaced), as the tests check against the standard library.
                f(unsafe { std::str::from_utf8_unchecked(buf) })
            }),
        }
    }
}

impl Stored<'_> {
    /// Append the text's UTF-8 to `out`.
    pub fn write_utf8(&self, out: &mut Vec<u8>) {
        match *self {
            Stored::Utf8(s) => out.extend_from_slice(s.as_bytes()),
            Stored::Latin1(s) => write_units(s, out),
            Stored::Ucs2(s) => write_units(s, out),
            Stored::Ucs4(s) => write_units(s, out),
        }
    }

    /// The text's UTF-8 as a new string.
    pub fn to_utf8(&self) -> String {
        let mut out = Vec::new();
        self.write_utf8(&mut out);
        // SAFETY: as in `with_utf8`
        unsafe { String::from_utf8_unchecked(out) }
    }
}

/// A character of fixed-width storage.
trait Unit: Copy {
    /// Most UTF-8 bytes one unit writes (a surrogate pair writes four for two units).
    const MAX_UTF8: usize;
    fn code(self) -> u32;
}

impl Unit for u8 {
    const MAX_UTF8: usize = 2;
    #[inline(always)]
    fn code(self) -> u32 {
        u32::from(self)
    }
}

impl Unit for u16 {
    const MAX_UTF8: usize = 3;
    #[inline(always)]
    fn code(self) -> u32 {
        u32::from(self)
    }
}

impl Unit for u32 {
    const MAX_UTF8: usize = 4;
    #[inline(always)]
    fn code(self) -> u32 {
        self
    }
}

/// U+FFFD, which each lone surrogate becomes, as the low three bytes of a little-endian word.
const REPLACEMENT: u32 = 0x00BD_BFEF;

/// Units written at once, a byte each, where all of them are ASCII.
const ASCII_BLOCK: usize = 32;

/// Units written at once where none of them is a surrogate or past the Basic Multilingual
/// Plane.
const RUN: usize = 8;

/// Append the UTF-8 of `units` to `out`. Room for the longest output is reserved once, and
/// every character is written as one 4-byte store, its length chosen without a branch: text
/// that mixes scripts (a Chinese line quoting English) changes length every few characters,
/// and a branch per length was mispredicted there (420 MB/s). ASCII that goes on for blocks
/// (a log quoting a name in Chinese now and then) is copied a block at a time: a character
/// a store wrote such a log at 400 MB/s, ten times slower (benches/RESULTS.md, 2026-12-07).
/// Where the processor has AVX-512's byte compress, sixteen characters are written a step
/// ([`simd`]): the short texts of the multilingual dialog corpus (Arabic, Cyrillic and ASCII)
/// at 2,380 against 675 MB/s, Chinese dialog at 2,820 against 960-1,020 MB/s. A step of
/// ASCII is narrowed a byte a lane, no compress: with the compress for every step a log in
/// ASCII quoting a Chinese name now and then (stored two bytes a character) was written at
/// 3,300-3,500 MB/s against the block copy's 5,900-7,700; narrowed, 5,100-8,700.
fn write_units<U: Unit>(units: &[U], out: &mut Vec<u8>) {
    write_units_with(units, out, simd::available())
}

/// [`write_units`], sixteen characters a step where `wide` (the processor's compress
/// instructions, [`simd::available`]): the tests take both ways.
fn write_units_with<U: Unit>(units: &[U], out: &mut Vec<u8>, wide: bool) {
    // slack: the last character's store writes a whole word, a step of sixteen a whole
    // vector ([`simd::STORE`])
    out.reserve(units.len() * U::MAX_UTF8 + simd::STORE);
    let start = out.len();
    // SAFETY: every store below is at `at`, which stays at most `U::MAX_UTF8` bytes a unit
    // read so far, so each 4-byte store lies within the reserved room; `set_len` covers only
    // the bytes written.
    unsafe {
        let base = out.as_mut_ptr().add(start);
        let mut at = 0usize;
        let mut i = 0;
        while i < units.len() {
            if wide && units.len() - i >= simd::STEP {
                let (read, wrote) = simd::write_plain(&units[i..], base.add(at));
                i += read;
                at += wrote;
                // stopped before sixteen that hold a surrogate or a character past the
                // Basic Multilingual Plane: those go the way below
                let stop = (i + simd::STEP).min(units.len());
                while i < stop {
                    (i, at) = write_one(units, i, base, at);
                }
                continue;
            }
            if let Some(run) = units.get(i..i + RUN) {
                if run.iter().fold(0, |seen, u| seen | u.code()) < 0x80 {
                    // all ASCII: the text may go on so for a while
                    let n = copy_ascii(&units[i..], base.add(at));
                    if n > 0 {
                        i += n;
                        at += n;
                        continue;
                    }
                }
                if run.iter().all(|u| plain(u.code())) {
                    for u in run {
                        at += store_plain(base.add(at), u.code());
                    }
                    i += RUN;
                    continue;
                }
            }
            (i, at) = write_one(units, i, base, at);
        }
        out.set_len(start + at);
    }
}

/// Write the character of `units` at `i` (two units for a surrogate pair) at `base + at`;
/// the next unit and the next byte.
///
/// # Safety
/// Four bytes at `base + at` are writable.
#[inline(always)]
unsafe fn write_one<U: Unit>(units: &[U], mut i: usize, base: *mut u8, mut at: usize) -> (usize, usize) {
    let c = units[i].code();
    i += 1;
    unsafe {
        if plain(c) {
            at += store_plain(base.add(at), c);
        } else if c >= 0x10000 {
            store(base.add(at), four(c));
            at += 4;
        } else {
            // a surrogate: a high one with a low one after it is their character
            match units.get(i).map(|u| u.code()) {
                Some(low @ 0xDC00..=0xDFFF) if c < 0xDC00 => {
                    i += 1;
                    store(base.add(at), four(0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00)));
                    at += 4;
                }
                _ => {
                    store(base.add(at), REPLACEMENT);
                    at += 3;
                }
            }
        }
    }
    (i, at)
}

/// Sixteen characters a step with AVX-512's byte compress (VBMI2): each character's UTF-8
/// (one to three bytes) made in a lane of four, then the lanes' unused bytes squeezed out.
/// Text of mixed widths (Cyrillic or Arabic words between ASCII spaces and punctuation)
/// wrote a character a store, its length a dependency of the next store's address.
mod simd {
    use super::Unit;

    /// Characters a step.
    pub const STEP: usize = 16;
    /// Bytes one step's store writes: room the caller keeps past the text's UTF-8.
    pub const STORE: usize = 64;

    /// Whether the processor has the instructions (asked once; always false off x86_64).
    pub fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            *HAS.get_or_init(|| {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vbmi2")
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Write steps of [`STEP`] characters of the Basic Multilingual Plane, none a surrogate,
    /// from the start of `units` to `at`, up to the first step that holds another or the
    /// last whole step; the units read and the bytes written.
    ///
    /// # Safety
    /// [`available`] is true, and `U::MAX_UTF8 * units.len() + STORE` bytes at `at` are
    /// writable.
    #[cfg(target_arch = "x86_64")]
    #[inline(never)]
    pub unsafe fn write_plain<U: Unit>(units: &[U], at: *mut u8) -> (usize, usize) {
        // SAFETY: as the caller promises
        unsafe { write_plain_avx512(units, at) }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub unsafe fn write_plain<U: Unit>(_units: &[U], _at: *mut u8) -> (usize, usize) {
        (0, 0)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
    unsafe fn write_plain_avx512<U: Unit>(units: &[U], at: *mut u8) -> (usize, usize) {
        use std::arch::x86_64::*;
        let (mut read, mut wrote) = (0, 0);
        let v = |x: u32| _mm512_set1_epi32(x as i32);
        while units.len() - read >= STEP {
            // SAFETY: STEP units from `read` lie within `units`.
            let c = unsafe { load(units.as_ptr().add(read)) };
            // a surrogate (0xD800-0xDFFF) or a character past 0xFFFF: not this way
            let other = _mm512_cmpge_epu32_mask(c, v(0x10000))
                | _mm512_cmpeq_epi32_mask(_mm512_and_si512(c, v(0xF800)), v(0xD800));
            if other != 0 {
                break;
            }
            let wide = _mm512_cmpge_epu32_mask(c, v(0x80));
            if wide == 0 {
                // all ASCII (a log's lines between its quotes): a byte a lane, no compress
                // SAFETY: as the store below, sixteen of its bytes
                unsafe { _mm_storeu_si128(at.add(wrote).cast(), _mm512_cvtepi32_epi8(c)) };
                read += STEP;
                wrote += STEP;
                continue;
            }
            let two = _mm512_or_si512(
                _mm512_or_si512(v(0x80C0), _mm512_srli_epi32::<6>(c)),
                _mm512_slli_epi32::<8>(_mm512_and_si512(c, v(0x3F))),
            );
            let three = _mm512_or_si512(
                _mm512_or_si512(v(0x0080_80E0), _mm512_srli_epi32::<12>(c)),
                _mm512_or_si512(
                    _mm512_slli_epi32::<8>(_mm512_and_si512(_mm512_srli_epi32::<6>(c), v(0x3F))),
                    _mm512_slli_epi32::<16>(_mm512_and_si512(c, v(0x3F))),
                ),
            );
            let wider = _mm512_cmpge_epu32_mask(c, v(0x800));
            let word = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(c, wide, two), wider, three);
            // the bytes each lane writes: one, two or three
            let keep = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(v(0xFF), wide, v(0xFFFF)), wider, v(0xFF_FFFF));
            let bytes = _mm512_movepi8_mask(keep);
            let packed = _mm512_maskz_compress_epi8(bytes, word);
            // SAFETY: `wrote` is at most `U::MAX_UTF8` bytes a unit read, so STORE bytes from
            // it lie within the room the caller keeps.
            unsafe { _mm512_storeu_si512(at.add(wrote).cast(), packed) };
            read += STEP;
            wrote += bytes.count_ones() as usize;
        }
        (read, wrote)
    }

    /// [`STEP`] units from `p`, widened to 32 bits a lane.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load<U: Unit>(p: *const U) -> std::arch::x86_64::__m512i {
        use std::arch::x86_64::*;
        // SAFETY: the caller's STEP units; the width is the storage's (1, 2 or 4 bytes).
        unsafe {
            match std::mem::size_of::<U>() {
                1 => _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast())),
                2 => _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast())),
                _ => _mm512_loadu_si512(p.cast()),
            }
        }
    }
}

/// Copy the ASCII blocks that open `units` to `at`, a byte each, up to the first block with
/// another character; the units copied (whole blocks).
///
/// # Safety
/// `units.len()` bytes at `at` are writable.
#[inline(never)]
unsafe fn copy_ascii<U: Unit>(units: &[U], at: *mut u8) -> usize {
    let mut n = 0;
    while let Some(block) = units.get(n..n + ASCII_BLOCK) {
        if block.iter().fold(0, |seen, u| seen | u.code()) >= 0x80 {
            break;
        }
        let to = unsafe { std::slice::from_raw_parts_mut(at.add(n), ASCII_BLOCK) };
        for (byte, u) in to.iter_mut().zip(block) {
            *byte = u.code() as u8;
        }
        n += ASCII_BLOCK;
    }
    n
}

/// A character of the Basic Multilingual Plane that is not a surrogate: one to three bytes.
#[inline(always)]
fn plain(c: u32) -> bool {
    c < 0xD800 || (0xE000..0x10000).contains(&c)
}

/// Write `c` ([`plain`]) as UTF-8 at `at` in one 4-byte store; its length in bytes.
///
/// # Safety
/// Four bytes at `at` are writable.
#[inline(always)]
unsafe fn store_plain(at: *mut u8, c: u32) -> usize {
    let two = 0x80C0 | (c >> 6) | ((c & 0x3F) << 8);
    let three = 0x0080_80E0 | (c >> 12) | (((c >> 6) & 0x3F) << 8) | ((c & 0x3F) << 16);
    // masks, not a choice: the compiler made the choice a branch
    let wide = u32::from(c >= 0x80).wrapping_neg();
    let wider = u32::from(c >= 0x800).wrapping_neg();
    let word = (c & !wide) | (two & wide & !wider) | (three & wider);
    unsafe { store(at, word) };
    1 + (wide & 1) as usize + (wider & 1) as usize
}

/// # Safety
/// Four bytes at `at` are writable.
#[inline(always)]
unsafe fn store(at: *mut u8, word: u32) {
    unsafe { at.cast::<u32>().write_unaligned(word.to_le()) }
}

/// The UTF-8 of a character past the Basic Multilingual Plane, as a little-endian word.
#[inline(always)]
fn four(c: u32) -> u32 {
    u32::from_le_bytes([
        0xF0 | (c >> 18) as u8,
        0x80 | ((c >> 12) & 0x3F) as u8,
        0x80 | ((c >> 6) & 0x3F) as u8,
        0x80 | (c & 0x3F) as u8,
    ])
}

/// Bytes of a thread's buffer kept between texts: a long text's is let go after it.
const KEEP_BUFFER: usize = 1 << 20;

thread_local! {
    /// The buffer stored texts are written out into, one per thread.
    static BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// `f` of this thread's emptied buffer. Taken out while `f` runs, so a nested call gets a
/// buffer of its own rather than a borrow error.
fn with_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut buf = BUFFER.take();
    buf.clear();
    let r = f(&mut buf);
    if buf.capacity() <= KEEP_BUFFER {
        BUFFER.set(buf);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: code points as UTF-16 with surrogates passed through, decoded with one
    /// U+FFFD per unpaired surrogate (the standard library's decoder, not this module's).
    fn reference(codes: &[u32]) -> String {
        let mut units = Vec::new();
        for &c in codes {
            if c >= 0x10000 {
                let c = c - 0x10000;
                units.extend([0xD800 + (c >> 10) as u16, 0xDC00 + (c & 0x3FF) as u16]);
            } else {
                units.push(c as u16);
            }
        }
        char::decode_utf16(units).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)).collect()
    }

    fn written(codes: &[u32]) -> Vec<u8> {
        let mut out = b"kept".to_vec();
        let stored: Vec<u32> = codes.to_vec();
        Stored::Ucs4(&stored).write_utf8(&mut out);
        out.split_off(4)
    }

    /// A small deterministic generator (no dependency for one test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
    }

    /// Code points drawn from every width class, surrogates of both kinds weighted up.
    fn draw(rng: &mut Lcg) -> u32 {
        match rng.next() % 8 {
            0 => rng.next() % 0x80,
            1 => 0x80 + rng.next() % 0x780,
            2 => 0x800 + rng.next() % 0xD000,
            3 => 0xD800 + rng.next() % 0x400,
            4 => 0xDC00 + rng.next() % 0x400,
            5 => 0xE000 + rng.next() % 0x2000,
            _ => 0x10000 + rng.next() % 0x100000,
        }
    }

    /// `codes` written from four bytes a character against the reference, and those of them
    /// that fit from two bytes and from one.
    fn assert_written_in_every_width(codes: &[u32]) {
        assert_eq!(written(codes), reference(codes).into_bytes(), "{codes:x?}");
        let bmp: Vec<u16> = codes.iter().filter(|&&c| c < 0x10000).map(|&c| c as u16).collect();
        let wide: Vec<u32> = bmp.iter().map(|&c| u32::from(c)).collect();
        assert_eq!(Stored::Ucs2(&bmp).to_utf8(), reference(&wide), "{bmp:x?}");
        let latin: Vec<u8> = codes.iter().filter(|&&c| c < 0x100).map(|&c| c as u8).collect();
        let want: String = latin.iter().map(|&b| char::from(b)).collect();
        assert_eq!(Stored::Latin1(&latin).to_utf8(), want);
    }

    #[test]
    fn every_width_and_surrogates_match_utf16_decoded_with_replacement() {
        let mut rng = Lcg(7);
        for _ in 0..20_000 {
            let n = (rng.next() % 24) as usize;
            let codes: Vec<u32> = (0..n).map(|_| draw(&mut rng)).collect();
            assert_written_in_every_width(&codes);
        }
    }

    /// Runs of ASCII of every length up to a few blocks between other characters: the block
    /// copy starts and stops at every offset.
    #[test]
    fn ascii_runs_between_other_characters_match_the_reference() {
        let mut rng = Lcg(11);
        for _ in 0..5_000 {
            let mut codes = Vec::new();
            for _ in 0..rng.next() % 6 {
                let run = (rng.next() % (3 * ASCII_BLOCK as u32 + 2)) as usize;
                codes.extend((0..run).map(|_| rng.next() % 0x80));
                codes.push(draw(&mut rng));
            }
            assert_written_in_every_width(&codes);
        }
    }

    /// Texts of hundreds of characters in runs of one width (words of Cyrillic, Chinese or
    /// ASCII, now and then a surrogate or an emoji): sixteen a step where the processor
    /// can, a character a store everywhere; both against the reference, in every storage.
    #[test]
    fn long_texts_of_runs_write_alike_sixteen_a_step_and_one_by_one() {
        let mut rng = Lcg(13);
        let ways: &[bool] = if simd::available() { &[false, true] } else { &[false] };
        for _ in 0..3_000 {
            let mut codes = Vec::new();
            while codes.len() < (rng.next() % 300) as usize {
                let run = 1 + rng.next() % 40;
                let class = rng.next() % 16;
                for _ in 0..run {
                    codes.push(match class {
                        0..=4 => rng.next() % 0x80,
                        5..=8 => 0x80 + rng.next() % 0x780,
                        9..=12 => 0x800 + rng.next() % 0xD000,
                        13 => 0xE000 + rng.next() % 0x2000,
                        _ => draw(&mut rng),
                    });
                }
            }
            let bmp: Vec<u16> = codes.iter().filter(|&&c| c < 0x10000).map(|&c| c as u16).collect();
            let latin: Vec<u8> = codes.iter().filter(|&&c| c < 0x100).map(|&c| c as u8).collect();
            for &wide in ways {
                let mut out = Vec::new();
                write_units_with(&codes, &mut out, wide);
                assert_eq!(out, reference(&codes).into_bytes(), "wide {wide}: {codes:x?}");
                out.clear();
                write_units_with(&bmp, &mut out, wide);
                let want = reference(&bmp.iter().map(|&c| u32::from(c)).collect::<Vec<_>>());
                assert_eq!(out, want.into_bytes(), "wide {wide}: {bmp:x?}");
                out.clear();
                write_units_with(&latin, &mut out, wide);
                assert_eq!(out, latin.iter().map(|&b| char::from(b)).collect::<String>().into_bytes());
            }
        }
    }

    #[test]
    fn surrogate_pairs_join_and_lone_ones_are_replaced_one_each() {
        assert_eq!(Stored::Ucs2(&[0xD83D, 0xDE00]).to_utf8(), "\u{1F600}");
        assert_eq!(Stored::Ucs2(&[0xDE00, 0xD83D]).to_utf8(), "\u{FFFD}\u{FFFD}");
        assert_eq!(Stored::Ucs2(&[0xD800, 0xD800, 0xDC00]).to_utf8(), "\u{FFFD}\u{10000}");
        assert_eq!(Stored::Ucs4(&[0xD800, 0x1F600]).to_utf8(), "\u{FFFD}\u{1F600}");
        assert_eq!(Stored::Ucs4(&[0x1F600, 0xDC00]).to_utf8(), "\u{1F600}\u{FFFD}");
        assert_eq!(Stored::Ucs2(&[u16::from(b'a'), 0xDFFF]).to_utf8(), "a\u{FFFD}");
    }

    #[test]
    fn every_scalar_value_writes_as_the_standard_library_does() {
        let scalars: Vec<u32> = (0..0x110000).filter(|c| !(0xD800..0xE000).contains(c)).collect();
        let want: String = scalars.iter().map(|&c| char::from_u32(c).unwrap()).collect();
        assert_eq!(Stored::Ucs4(&scalars).to_utf8(), want);
    }

    #[test]
    fn stored_text_is_read_through_the_buffer_and_a_long_one_is_let_go() {
        let chinese: Vec<u16> = "你好, world".encode_utf16().collect();
        assert_eq!(Stored::Ucs2(&chinese).with_utf8(|s| s.to_owned()), "你好, world");
        assert_eq!(Stored::Utf8("plain").with_utf8(str::len), 5);
        // a nested read gets a buffer of its own
        let outer = Stored::Latin1(b"caf\xE9");
        let inner = Stored::Ucs2(&chinese);
        assert_eq!(outer.with_utf8(|a| inner.with_utf8(|b| format!("{a}|{b}"))), "café|你好, world");
        let long = vec![0x4E2Du16; KEEP_BUFFER];
        assert_eq!(Stored::Ucs2(&long).with_utf8(str::len), 3 * KEEP_BUFFER);
        BUFFER.with(|b| {
            let kept = b.take();
            assert!(kept.capacity() <= KEEP_BUFFER, "a {} byte buffer was kept", kept.capacity());
        });
    }

    #[test]
    fn a_size_hint_weighs_stored_text_by_its_characters() {
        assert_eq!(Stored::Utf8("abc").size_hint(), 3);
        assert_eq!(Stored::Ucs2(&[0x4E2D; 10]).size_hint(), 30);
        assert_eq!("héllo".size_hint(), 6);
        assert_eq!(Stored::Latin1(b"\xE9").size_hint(), 1);
        for empty in [Stored::Utf8(""), Stored::Latin1(&[]), Stored::Ucs2(&[]), Stored::Ucs4(&[])] {
            assert_eq!(empty.size_hint(), 0);
        }
    }
}
