//! A hand-written pre-tokenizer for the cl100k_base and o200k_base patterns.
//!
//! A regex engine spends most of its time deciding between alternatives the text's next
//! character already settles. Here each piece is found by looking at the character class of
//! the first one or two characters and then scanning one run, reproducing exactly what the
//! leftmost-first, backtracking regex would match (the cases below follow the patterns'
//! alternatives in order; `tests` check them against the regex itself).
//!
//! cl100k_base: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
//!   ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
//! o200k_base: `[^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//!   [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:'s|...)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
//!   \s*[\r\n]+|\s+(?!\S)|\s+` with UPPER = `\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}` and
//!   LOWER = `\p{Ll}\p{Lm}\p{Lo}\p{M}`.

use super::blocks::{self, Classify, Detected};
use super::classes::{Classes, CASELESS, LETTER, LOWER, MARK, NUMBER, PUNCT, SPACE, UPPER};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Cl100k,
    O200k,
    /// Qwen's classic pattern: cl100k's with one digit per number and no `\s++$`.
    Qwen,
    /// The last split of DeepSeek's pre-tokenizer ([`DEEPSEEK_WORDS`]), on a piece the two
    /// before it left (see `engine::merges`), its unmatched stretches kept as pieces.
    DeepSeek,
}

pub const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
pub const O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
pub const QWEN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek's third split: `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|
/// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
pub const DEEPSEEK_WORDS: &str = concat!(
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"##,
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);

impl Pattern {
    /// The hand-written splitter equal to the regex `pattern`, if there is one.
    pub fn recognize(pattern: &str) -> Option<Pattern> {
        match pattern {
            CL100K => Some(Pattern::Cl100k),
            O200K => Some(Pattern::O200k),
            QWEN => Some(Pattern::Qwen),
            _ => None,
        }
    }
}

/// Decode the scalar starting at byte `i` of valid UTF-8: (code point, byte length).
#[inline(always)]
fn char_at(b: &[u8], i: usize) -> (u32, usize) {
    let b0 = b[i] as u32;
    if b0 < 0x80 {
        (b0, 1)
    } else if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F), 2)
    } else if b0 < 0xF0 {
        (((b0 & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F), 3)
    } else {
        (
            ((b0 & 0x07) << 18)
                | ((b[i + 1] as u32 & 0x3F) << 12)
                | ((b[i + 2] as u32 & 0x3F) << 6)
                | (b[i + 3] as u32 & 0x3F),
            4,
        )
    }
}

/// Eight bytes of the text from `i` as one little-endian word, when there are eight.
#[inline(always)]
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i..i + 8).map(|w| u64::from_le_bytes(w.try_into().unwrap()))
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that is in `lo..=hi` (both below 0x80): byte-wise
/// compares by carries that never cross a byte, eight bytes per step with no branch.
#[inline(always)]
fn in_range(w: u64, lo: u8, hi: u8) -> u64 {
    let low7 = w & !HIGH;
    let ge = low7.wrapping_add(ONES * u64::from(0x80 - lo));
    let gt = low7.wrapping_add(ONES * u64::from(0x7F - hi));
    ge & !gt & !w & HIGH
}

/// The high bit of each byte of `w` that is an ASCII letter.
#[inline(always)]
fn ascii_letters(w: u64) -> u64 {
    // `| 0x20` folds case and maps no non-letter onto a lowercase letter.
    in_range(w | (ONES * 0x20), b'a', b'z') & !w & HIGH
}

/// The high bit of each byte of `w` that is not `byte`.
#[inline(always)]
fn not_byte(w: u64, byte: u8) -> u64 {
    let x = w ^ (ONES * u64::from(byte));
    (((x & !HIGH).wrapping_add(!HIGH)) | x) & HIGH
}

const A_SET: u8 = UPPER | CASELESS;
const B_SET: u8 = LOWER | CASELESS;

pub struct Splitter<'t> {
    text: &'t str,
    pos: usize,
    pattern: Pattern,
    classes: &'static Classes,
    /// The block rules of the pattern, where it has them (not DeepSeek's).
    rules: Option<blocks::Rules>,
    /// Where the block read last still has pieces to give (the iterator's).
    cursor: Cursor,
}

/// The block read last: pieces start at `base` plus each bit of `marks`, in order. Before
/// `alone_until` the splitter goes on alone (past a block's foreign bytes).
#[derive(Clone, Copy, Default)]
struct Cursor {
    base: usize,
    marks: u64,
    alone_until: usize,
}

impl<'t> Splitter<'t> {
    pub fn new(text: &'t str, pattern: Pattern) -> Self {
        let rules = match pattern {
            Pattern::DeepSeek => None,
            _ => Some(blocks::Rules { o200k: pattern == Pattern::O200k, single_digits: pattern == Pattern::Qwen }),
        };
        Self { text, pos: 0, pattern, classes: Classes::get(), rules, cursor: Cursor::default() }
    }

    /// Class of the scalar at `i` (0 past the end) and its byte length.
    #[inline(always)]
    fn class_at(&self, i: usize) -> (u8, u32, usize) {
        let b = self.text.as_bytes();
        if i >= b.len() {
            return (0, u32::MAX, 0);
        }
        let (c, n) = char_at(b, i);
        (self.classes.of(c), c, n)
    }

    /// End of the run of scalars whose class has a bit of `set`, from `i`.
    #[inline(always)]
    fn run(&self, mut i: usize, set: u8) -> usize {
        let b = self.text.as_bytes();
        while i < b.len() {
            let c = b[i];
            if c < 0x80 {
                if super::classes::ASCII[c as usize] & set == 0 {
                    break;
                }
                i += 1;
            } else {
                let (c, n) = char_at(b, i);
                if self.classes.of(c) & set == 0 {
                    break;
                }
                i += n;
            }
        }
        i
    }

    /// End of the run of "other" scalars (not letter, number or space) from `i`.
    #[inline(always)]
    fn other_run(&self, mut i: usize) -> usize {
        let b = self.text.as_bytes();
        while i < b.len() {
            let c = b[i];
            if c < 0x80 {
                if super::classes::ASCII[c as usize] & (LETTER | NUMBER | SPACE) != 0 {
                    break;
                }
                i += 1;
                continue;
            }
            let (cls, _, n) = self.class_at(i);
            if cls & (LETTER | NUMBER | SPACE) != 0 {
                break;
            }
            i += n;
        }
        i
    }

    /// End of the run of bytes in `set` (ASCII only) from `i`.
    #[inline(always)]
    fn byte_run(&self, mut i: usize, set: &[u8]) -> usize {
        let b = self.text.as_bytes();
        while i < b.len() && set.contains(&b[i]) {
            i += 1;
        }
        i
    }

    /// Length of an English contraction (`'s`, `'ll`, ... any case) at `i`, or 0.
    /// `short` lists the one-letter ones; `ſ` (U+017F) case-folds to `s`.
    #[inline(always)]
    fn contraction(&self, i: usize, short: &[u8]) -> usize {
        let b = &self.text.as_bytes()[i..];
        if b.first() != Some(&b'\'') {
            return 0;
        }
        match b.get(1).map(u8::to_ascii_lowercase) {
            Some(c) if short.contains(&c) => 2,
            Some(b'l') if b.get(2).map(u8::to_ascii_lowercase) == Some(b'l') => 3,
            Some(b'v') | Some(b'r') if b.get(2).map(u8::to_ascii_lowercase) == Some(b'e') => 3,
            _ if b.len() >= 3 && b[1] == 0xC5 && b[2] == 0xBF => 3,
            _ => 0,
        }
    }

    /// Whitespace alternatives shared by both patterns, at `i` (a space character).
    /// `to_end`: cl100k's `\s++$` comes first and takes a final run whole.
    #[inline(always)]
    fn spaces(&self, i: usize, to_end: bool) -> usize {
        let b = self.text.as_bytes();
        // One pass over the run: its end, the end of its last line break (0: none) and the
        // length of its last scalar.
        let (mut j, mut after_break, mut last) = (i, 0, 1);
        while j < b.len() {
            let c = b[j];
            if c < 0x80 {
                if super::classes::ASCII[c as usize] & SPACE == 0 {
                    break;
                }
                if c == b'\n' || c == b'\r' {
                    after_break = j + 1;
                }
                last = 1;
                j += 1;
            } else {
                let (c, n) = char_at(b, j);
                if self.classes.of(c) & SPACE == 0 {
                    break;
                }
                last = n;
                j += n;
            }
        }
        if to_end && j == b.len() {
            return j;
        }
        // `\s*[\r\n]`: up to and including the run's last line break.
        if after_break > 0 {
            return after_break;
        }
        if j == b.len() {
            return j;
        }
        // `\s+(?!\S)`: the run less its last scalar, when that leaves something.
        if j - last > i {
            j - last
        } else {
            j
        }
    }

    /// End of the run of ASCII letters from `i`, eight bytes a step; a non-ASCII byte
    /// hands the rest of the run to [`Self::run`].
    #[inline(always)]
    fn letters(&self, mut i: usize) -> usize {
        let b = self.text.as_bytes();
        while let Some(w) = word_at(b, i) {
            let stop = !ascii_letters(w) & HIGH;
            if stop != 0 {
                i += (stop.trailing_zeros() / 8) as usize;
                return if b[i] < 0x80 { i } else { self.run(i, LETTER) };
            }
            i += 8;
        }
        self.run(i, LETTER)
    }

    /// End of the run of ASCII bytes in `lo..=hi` from `i`, and whether a non-ASCII byte
    /// stopped it (the caller then takes the general path).
    #[inline(always)]
    fn ascii_range(&self, mut i: usize, lo: u8, hi: u8) -> (usize, bool) {
        let b = self.text.as_bytes();
        while let Some(w) = word_at(b, i) {
            let stop = !in_range(w, lo, hi) & HIGH;
            if stop != 0 {
                i += (stop.trailing_zeros() / 8) as usize;
                return (i, b[i] >= 0x80);
            }
            i += 8;
        }
        while i < b.len() && (lo..=hi).contains(&b[i]) {
            i += 1;
        }
        (i, i < b.len() && b[i] >= 0x80)
    }

    /// End of the run of b' ' from `i` (indentation, alignment).
    #[inline(always)]
    fn blanks(&self, mut i: usize) -> usize {
        let b = self.text.as_bytes();
        while let Some(w) = word_at(b, i) {
            let stop = not_byte(w, b' ');
            if stop != 0 {
                return i + (stop.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        i
    }

    /// Whether the byte at `j` is ASCII and not whitespace (false past the end).
    #[inline(always)]
    fn ascii_non_space(&self, j: usize) -> bool {
        matches!(self.text.as_bytes().get(j), Some(&c) if c < 0x80 && super::classes::ASCII[c as usize] & SPACE == 0)
    }

    /// The pieces of all three patterns that start with a line break, when the bytes after
    /// it settle them: a break before a non-space is a piece alone, and so is `\n` before
    /// indentation that a non-space ends (the whitespace alternatives stop at the run's
    /// last break, which is this one).
    #[inline(always)]
    fn ascii_break(&self, i: usize, b0: u8, b1: u8) -> Option<usize> {
        if super::classes::ASCII[b1 as usize] & SPACE == 0 {
            return Some(i + 1);
        }
        if b0 == b'\n' && b1 == b' ' && self.ascii_non_space(self.blanks(i + 2)) {
            return Some(i + 1);
        }
        None
    }

    /// A run of two or more b' ' from `i`: to the end of the text (`\s++$` or `\s+(?!\S)`)
    /// or, before a non-space, less its last space (`\s+(?!\S)`); `None` when other
    /// whitespace follows.
    #[inline(always)]
    fn ascii_blanks(&self, i: usize) -> Option<usize> {
        let j = self.blanks(i + 2);
        if j == self.text.len() {
            Some(j)
        } else if self.ascii_non_space(j) {
            Some(j - 1)
        } else {
            None
        }
    }

    /// The common ASCII cases of cl100k_base, o200k_base and Qwen's pattern, settled by the
    /// first two bytes: a word (after a space, tab or mark), a number, a contraction
    /// (cl100k, Qwen), a punctuation run, runs of spaces, line breaks. `None` sends the rest
    /// (a non-ASCII byte second, mixed whitespace) down the general path. Inlined with a
    /// constant `pattern`, so each pattern gets its own straight code.
    #[inline(always)]
    fn ascii_piece(&self, i: usize, pattern: Pattern) -> Option<usize> {
        use super::classes::ASCII;
        let o200k = pattern == Pattern::O200k;
        // o200k's words split by case; the others' are one run of letters.
        let word = |p: usize| if o200k { self.ascii_word(p) } else { Some(self.letters(p)) };
        let after_punctuation: &[u8] = if o200k { b"\r\n/" } else { b"\r\n" };
        let b = self.text.as_bytes();
        let b0 = b[i];
        if b0 >= 0x80 {
            return None;
        }
        let cls = ASCII[b0 as usize];
        if cls & LETTER != 0 {
            return word(i);
        }
        if cls & NUMBER != 0 {
            return Some(if pattern == Pattern::Qwen { i + 1 } else { self.digits(i + 1) });
        }
        // The text's last byte is a piece alone, whatever it is.
        let Some(&b1) = b.get(i + 1) else {
            return Some(i + 1);
        };
        if b1 >= 0x80 {
            return None;
        }
        if b0 == b'\r' || b0 == b'\n' {
            return self.ascii_break(i, b0, b1);
        }
        if !o200k && b0 == b'\'' {
            let k = self.contraction(i, b"sdmt");
            if k > 0 {
                return Some(i + k);
            }
        }
        let next = ASCII[b1 as usize];
        // `[^\r\n\p{L}\p{N}]?` before a word: any byte left here.
        if next & LETTER != 0 {
            return word(i + 1);
        }
        if cls & SPACE == 0 {
            return Some(self.byte_run(self.other_run(i + 1), after_punctuation));
        }
        if b0 != b' ' {
            return None;
        }
        if next & (NUMBER | SPACE) == 0 {
            return Some(self.byte_run(self.other_run(i + 2), after_punctuation));
        }
        if b1 == b' ' {
            return self.ascii_blanks(i);
        }
        None
    }

    /// o200k's word from `p` (an ASCII letter) when it is all ASCII: capitals, then small
    /// letters (either run may be empty, not both), then a contraction. No ASCII letter is
    /// in both of the pattern's sets, so the regex's backtracking never moves the end.
    #[inline(always)]
    fn ascii_word(&self, p: usize) -> Option<usize> {
        // A word inside eight bytes (most of them): both runs from one load.
        if let Some(w) = word_at(self.text.as_bytes(), p) {
            let not_upper = !in_range(w, b'A', b'Z') & HIGH;
            if not_upper != 0 {
                // The bytes from the first that is not a capital on.
                let rest = HIGH & (u64::MAX << (not_upper.trailing_zeros() & !7));
                let stop = !in_range(w, b'a', b'z') & rest;
                if stop != 0 {
                    let end = p + (stop.trailing_zeros() / 8) as usize;
                    if self.text.as_bytes()[end] >= 0x80 {
                        return None;
                    }
                    return Some(end + self.contraction(end, b"stmd"));
                }
            }
        }
        let (k, other) = self.ascii_range(p, b'A', b'Z');
        if other {
            return None;
        }
        let (end, other) = self.ascii_range(k, b'a', b'z');
        if other {
            return None;
        }
        Some(end + self.contraction(end, b"stmd"))
    }

    /// cl100k_base, or Qwen's pattern when `qwen` (single digits; no `\s++$`): every case.
    #[inline(never)]
    fn next_cl100k(&self, i: usize, qwen: bool) -> usize {
        let (cls, c, n) = self.class_at(i);
        if c == u32::from(b'\'') {
            let k = self.contraction(i, b"sdmt");
            if k > 0 {
                return i + k;
            }
        }
        if cls & LETTER != 0 {
            return self.run(i + n, LETTER);
        }
        if cls & NUMBER == 0 && c != u32::from(b'\r') && c != u32::from(b'\n') {
            let (next, _, _) = self.class_at(i + n);
            if next & LETTER != 0 {
                return self.run(i + n, LETTER);
            }
        }
        if cls & NUMBER != 0 {
            return if qwen { i + n } else { self.digits(i + n) };
        }
        if let Some(j) = self.punctuation(i, cls, c, n) {
            return self.byte_run(j, b"\r\n");
        }
        self.spaces(i, !qwen)
    }

    /// `\p{N}{1,3}` after the first number.
    #[inline(always)]
    fn digits(&self, mut j: usize) -> usize {
        let b = self.text.as_bytes();
        for _ in 0..2 {
            match b.get(j) {
                Some(c) if c.is_ascii_digit() => {
                    j += 1;
                    continue;
                }
                Some(&c) if c >= 0x80 => {}
                _ => break,
            }
            let (cls, _, n) = self.class_at(j);
            if cls & NUMBER == 0 {
                break;
            }
            j += n;
        }
        j
    }

    /// ` ?[^\s\p{L}\p{N}]+`: the end of the run, when the piece is punctuation.
    #[inline(always)]
    fn punctuation(&self, i: usize, cls: u8, c: u32, n: usize) -> Option<usize> {
        if cls & (LETTER | NUMBER | SPACE) == 0 {
            return Some(self.other_run(i + n));
        }
        if c == u32::from(b' ') {
            let (next, _, _) = self.class_at(i + 1);
            if i + 1 < self.text.len() && next & (LETTER | NUMBER | SPACE) == 0 {
                return Some(self.other_run(i + 1));
            }
        }
        None
    }

    /// o200k's `[UPPER]*[LOWER]+` from `p`, with the regex's backtracking: the greedy
    /// upper run, then the lower run after it, or else the run cut back to its last scalar
    /// that is also in LOWER. That scalar is looked for from the run's end back: a run of
    /// Chinese (each scalar in both sets) ends with one, where a scan from its start read the
    /// whole run a second time.
    fn upper_lower(&self, p: usize) -> Option<usize> {
        let k = self.run(p, A_SET);
        let (cls, _, _) = self.class_at(k);
        if cls & LOWER != 0 {
            return Some(self.run(k, B_SET));
        }
        let run = &self.text[p..k];
        let (at, c) = run.char_indices().rev().find(|&(_, c)| self.classes.of(c as u32) & B_SET != 0)?;
        Some(p + at + c.len_utf8())
    }

    /// o200k's `[UPPER]+[LOWER]*` from `p`.
    fn upper_then_lower(&self, p: usize) -> Option<usize> {
        let k = self.run(p, A_SET);
        (k > p).then(|| self.run(k, B_SET))
    }

    #[inline(never)]
    fn next_o200k(&self, i: usize) -> usize {
        let (cls, c, n) = self.class_at(i);
        let prefix = cls & (LETTER | NUMBER) == 0 && c != u32::from(b'\r') && c != u32::from(b'\n');
        // The two letter alternatives, each first with the optional prefix taken, then
        // without it (which only matters when the prefix is itself a mark).
        let word = |alt: &dyn Fn(usize) -> Option<usize>| {
            if prefix {
                alt(i + n).or_else(|| if cls & CASELESS != 0 { alt(i) } else { None })
            } else {
                alt(i)
            }
        };
        if cls & NUMBER == 0 {
            if let Some(end) = word(&|p| self.upper_lower(p)).or_else(|| word(&|p| self.upper_then_lower(p))) {
                return end + self.contraction(end, b"stmd");
            }
        }
        if cls & NUMBER != 0 {
            return self.digits(i + n);
        }
        if let Some(j) = self.punctuation(i, cls, c, n) {
            return self.byte_run(j, b"\r\n/");
        }
        self.spaces(i, false)
    }
}

impl Splitter<'_> {
    /// Where a match of [`DEEPSEEK_WORDS`] starting at `i` ends, if one does.
    fn deepseek_match(&self, i: usize) -> Option<usize> {
        let b = self.text.as_bytes();
        let (cls, c, n) = self.class_at(i);
        let (next, nc, _) = self.class_at(i + n);
        // An ASCII punctuation mark before ASCII letters.
        if c < 0x80 && cls & PUNCT != 0 && nc < 0x80 && (nc as u8).is_ascii_alphabetic() {
            return Some(self.byte_run_by(i + 1, u8::is_ascii_alphabetic));
        }
        // A word of letters and marks, after one optional other scalar.
        let prefix = cls & (LETTER | PUNCT) == 0 && c != u32::from(b'\r') && c != u32::from(b'\n');
        if prefix && next & (LETTER | MARK) != 0 || cls & (LETTER | MARK) != 0 {
            return Some(self.run(i + n, LETTER | MARK));
        }
        if c == u32::from(b' ') && next & PUNCT != 0 {
            return Some(self.byte_run(self.run(i + 1, PUNCT), b"\r\n"));
        }
        if cls & PUNCT != 0 {
            return Some(self.byte_run(self.run(i + n, PUNCT), b"\r\n"));
        }
        if cls & SPACE != 0 {
            return Some(self.spaces(i, false));
        }
        debug_assert!(i < b.len());
        None
    }

    /// The DeepSeek piece at `i`: a match, or the stretch up to the next one.
    fn next_deepseek(&self, i: usize) -> usize {
        if let Some(end) = self.deepseek_match(i) {
            return end;
        }
        let mut j = i + self.class_at(i).2;
        while j < self.text.len() && self.deepseek_match(j).is_none() {
            j += self.class_at(j).2;
        }
        j
    }

    /// End of the run of bytes satisfying `keep`, from `i`.
    #[inline(always)]
    fn byte_run_by(&self, mut i: usize, keep: impl Fn(&u8) -> bool) -> usize {
        let b = self.text.as_bytes();
        while i < b.len() && keep(&b[i]) {
            i += 1;
        }
        i
    }
}

impl<'t> Splitter<'t> {
    /// End of the piece starting at `i` (before the end of the text): the ASCII fast path
    /// inline, the general one a call away.
    #[inline(always)]
    fn piece_end(&self, i: usize) -> usize {
        let end = match self.pattern {
            Pattern::Cl100k => self.ascii_piece(i, Pattern::Cl100k).unwrap_or_else(|| self.next_cl100k(i, false)),
            Pattern::O200k => self.ascii_piece(i, Pattern::O200k).unwrap_or_else(|| self.next_o200k(i)),
            Pattern::Qwen => self.ascii_piece(i, Pattern::Qwen).unwrap_or_else(|| self.next_cl100k(i, true)),
            Pattern::DeepSeek => self.next_deepseek(i),
        };
        debug_assert!(end > i && self.text.is_char_boundary(end));
        end
    }

    /// End of the piece starting at `at` (before the end of the text): the next mark of the
    /// block in `cursor`, else of a block read at `at` where 64 bytes are left and the block
    /// settles a piece; else one piece by the byte-at-a-time rules. A block leaves undecided a
    /// long run, an apostrophe, bytes that are not ASCII.
    #[inline(always)]
    fn end_from(&self, at: usize, cursor: &mut Cursor, classify: impl Classify) -> usize {
        if cursor.marks != 0 {
            let end = cursor.base + cursor.marks.trailing_zeros() as usize;
            cursor.marks &= cursor.marks - 1;
            return end;
        }
        if let Some(rules) = self.rules.filter(|_| at >= cursor.alone_until) {
            if let Some(block) = self.text.as_bytes().get(at..at + blocks::LEN) {
                let block = classify.starts(block.try_into().unwrap(), rules);
                // The pieces between trusted starts; the last one begins the next block.
                let starts = block.starts & (block.starts - 1);
                if starts != 0 {
                    *cursor = Cursor { base: at, marks: starts & (starts - 1), ..*cursor };
                    return at + starts.trailing_zeros() as usize;
                }
                cursor.alone_until = at + block.foreign_end.max(1) as usize;
            }
        }
        self.piece_end(at)
    }

    /// Calls `f` with the bytes of each remaining piece, in order, while it returns true:
    /// the counting loop, with no string slicing per piece.
    #[inline(always)]
    pub fn for_each_bytes(self, mut f: impl FnMut(&'t [u8]) -> bool) {
        self.for_each_span(|rest, n| f(&rest[..n]))
    }

    /// Calls `f(rest, n)` for each remaining piece, in order, while it returns true: `rest`
    /// is the text from the piece's start on, the piece its first `n` bytes (a caller may
    /// read past the piece in one load, see [`super::vocab::pack_at`]). The cursor is a local
    /// here, kept in registers; one call of `f`, so it is inlined once.
    #[inline(always)]
    pub fn for_each_span(self, f: impl FnMut(&'t [u8], usize) -> bool) {
        self.for_each_span_with(Detected, f)
    }

    /// [`Self::for_each_span`], finding block classes by `classify`: a loop compiled for
    /// AVX2 or AVX-512 (see [`blocks::widest`]) passes its way, so the whole loop is inlined
    /// with its masks.
    #[inline(always)]
    pub fn for_each_span_with(mut self, classify: impl Classify, mut f: impl FnMut(&'t [u8], usize) -> bool) {
        let b = self.text.as_bytes();
        let (mut at, mut cursor) = (self.pos, self.cursor);
        while at < b.len() {
            let end = self.end_from(at, &mut cursor, classify);
            if !f(&b[at..], end - at) {
                break;
            }
            at = end;
        }
        (self.pos, self.cursor) = (at, cursor);
    }
}

impl<'t> Iterator for Splitter<'t> {
    type Item = &'t str;

    #[inline]
    fn next(&mut self) -> Option<&'t str> {
        let i = self.pos;
        if i >= self.text.len() {
            return None;
        }
        let mut cursor = self.cursor;
        let end = self.end_from(i, &mut cursor, Detected);
        (self.pos, self.cursor) = (end, cursor);
        Some(&self.text[i..end])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    static REGEXES: std::sync::LazyLock<[fancy_regex::Regex; 3]> =
        std::sync::LazyLock::new(|| [CL100K, O200K, QWEN].map(|p| fancy_regex::Regex::new(p).unwrap()));

    fn by_regex(re: &fancy_regex::Regex, text: &str) -> Vec<String> {
        re.find_iter(text).map(|m| m.unwrap().as_str().to_string()).collect()
    }

    fn check(text: &str) {
        for (pattern, regex) in [Pattern::Cl100k, Pattern::O200k, Pattern::Qwen].iter().zip(REGEXES.iter()) {
            let expected = by_regex(regex, text);
            let ours: Vec<&str> = Splitter::new(text, *pattern).collect();
            assert_eq!(ours, expected, "{pattern:?} on {text:?}");
            let mut by_bytes = Vec::new();
            Splitter::new(text, *pattern).for_each_bytes(|p| {
                by_bytes.push(std::str::from_utf8(p).unwrap());
                true
            });
            assert_eq!(by_bytes, expected, "{pattern:?} on {text:?} (bytes)");
        }
    }

    #[test]
    fn known_texts() {
        for text in [
            "hello world",
            "Hello, World! It's 2024; we've 12345 items.\n\n  Next   line\t\r\n",
            "don't STOP'S 'll 'LL 'ſ x'ſ",
            "a\n  ",
            "  \n \n  x",
            "fn main() {\n    println!(\"hi   there\");\n}\n\n  ",
            "上下文窗口 fits 128K tokens 🙂\n\tdone",
            "e\u{301}\u{301}x \u{301}ab \u{301}\u{301} AʰB ǅa Σσ",
            "path/to/file.rs//\n/x",
            " \u{3000} \u{a0}a",
            "",
            " ",
            "\n",
            "''''",
            "١٢٣٤٥ ⅫⅫⅫⅫ",
            // runs of o200k's upper set whose last scalar in its lower set is not their last
            "中ǅǅ ʰǅ中ǅ \u{301}中Ǆ. 上下文ǄǄǄ!ǅ\u{301}ǅ 中\u{301}Σ",
        ] {
            check(text);
        }
    }

    #[test]
    fn random_texts_from_a_tricky_alphabet() {
        let alphabet = " \t\n\r\u{b}\u{3000}\u{a0}aZ'sStTlLvVrReEdDmMſ0١Ⅻ.,!/-_中ʰǅ\u{301}\u{20dd}🙂é";
        for text in random_texts(alphabet, 40, 300) {
            check(&text);
        }
    }

    #[test]
    fn random_code_like_texts() {
        // The ASCII fast paths: runs of spaces longer than a word (eight bytes), indentation
        // after breaks, words, contractions and punctuation, with a few non-ASCII scalars,
        // tabs and breaks at the places where the fast path must hand over.
        let alphabet = "        \n\n\r\t aAzZ_sStTdDlLvVrReEmM'.:(){}/=#-09é中\u{a0}\u{301}Σſ";
        for text in random_texts(alphabet, 48, 200) {
            check(&text);
        }
        let units = ["    def f(self):\n", "        return x\n", "\n\n", "  ", "\t", "SHOUT", "Word's", "x = 1234\n"];
        let mut next = xorshift();
        for _ in 0..3000 {
            let n = (next() % 12) as usize;
            let text: String = (0..n).map(|_| units[(next() % units.len() as u64) as usize]).collect();
            check(&text);
        }
    }

    #[test]
    fn long_texts_split_a_block_at_a_time() {
        // Texts of a block and more, so the block rules meet every class at every offset,
        // runs that cross a block's end, apostrophes and foreign bytes at the edges.
        let alphabets = [
            "        \n\n\r\t\u{b} aAbBzZ_sStTdDlLvVrR'.:;(){}/=#-\"0912",
            "  \n\r\t aZyY'.,-09",
            "     \n\n  \t\r\r\n\u{c}.;x",
            "aAbBcC'''sSlL ",
            "0123456789 .a\n",
            "   aé中 .\n\u{a0}\u{301}1'",
            "//\n\r\n/ /a.'*",
            "aA'sSdDlLvVeErR tT mM'''\n ",
            "\u{1}\u{0}\u{1f} \t\n\u{7f}aB9_",
            "        \n   \t   a",
        ];
        let mut next = xorshift();
        for alphabet in alphabets {
            let chars: Vec<char> = alphabet.chars().collect();
            for _ in 0..1500 {
                let len = 60 + (next() % 200) as usize;
                let text: String = (0..len).map(|_| chars[(next() % chars.len() as u64) as usize]).collect();
                check(&text);
            }
        }
        // Real source and prose, whole and from every offset of a block.
        for text in [include_str!("split.rs"), include_str!("../../../README.md")] {
            check(text);
            for k in 1..blocks::LEN {
                let from = text.char_indices().nth(k).unwrap().0;
                check(&text[from..text.len().min(from + 4000)]);
            }
        }
    }

    /// `per_len` random texts of each length below `max_len` drawn from `alphabet`'s scalars
    /// (a fixed seed: the same texts every run).
    pub(crate) fn random_texts(alphabet: &str, max_len: usize, per_len: usize) -> Vec<String> {
        let alphabet: Vec<char> = alphabet.chars().collect();
        let mut next = xorshift();
        (1..max_len)
            .flat_map(|len| std::iter::repeat_n(len, per_len))
            .map(|len| (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect())
            .collect()
    }

    /// A fixed-seed xorshift generator: test data that is the same on every run.
    pub(crate) fn xorshift() -> impl FnMut() -> u64 {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }
}
