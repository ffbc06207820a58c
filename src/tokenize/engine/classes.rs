//! Character classes the OpenAI pre-tokenizer patterns test, one byte per code point.
//!
//! The ranges come from `regex-syntax`'s own Unicode tables (the ones a regex engine would use
//! for `\p{L}`, `\s`, ...), so the hand-written splitter classifies every scalar exactly as
//! the pattern would. ASCII is a constant table; the rest is a two-level table of 256-code
//! point blocks, identical blocks shared, built once on first use (about a millisecond).

use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};

/// `\p{L}`: any letter.
pub const LETTER: u8 = 1;
/// `\p{N}`: any number.
pub const NUMBER: u8 = 2;
/// `\s`: Unicode White_Space.
pub const SPACE: u8 = 4;
/// `\p{Lu}` or `\p{Lt}`: in o200k's "upper" set only.
pub const UPPER: u8 = 8;
/// `\p{Ll}`: in o200k's "lower" set only.
pub const LOWER: u8 = 16;
/// `\p{Lm}`, `\p{Lo}` or `\p{M}`: in both of o200k's letter sets.
pub const CASELESS: u8 = 32;
/// `\p{P}` or `\p{S}`: DeepSeek's punctuation class.
pub const PUNCT: u8 = 64;
/// `\p{M}`: a mark (DeepSeek's words are `[\p{L}\p{M}]+`).
pub const MARK: u8 = 128;

const BLOCK: usize = 256;

pub struct Classes {
    /// Block index per 256 code points.
    index: Vec<u16>,
    /// The distinct blocks, concatenated.
    blocks: Vec<u8>,
}

fn ranges(property: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::ParserBuilder::new().build().parse(property).expect("a valid Unicode property");
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class.iter().map(|r| (r.start() as u32, r.end() as u32)).collect(),
        _ => unreachable!("a property parses to a class"),
    }
}

fn build() -> Classes {
    let mut flat = vec![0u8; 0x110000];
    let sets: [(&str, u8); 10] = [
        (r"\p{L}", LETTER),
        (r"\p{N}", NUMBER),
        (r"\s", SPACE),
        (r"[\p{Lu}\p{Lt}]", UPPER),
        (r"\p{Ll}", LOWER),
        (r"\p{Lm}", CASELESS),
        (r"\p{Lo}", CASELESS),
        (r"\p{M}", CASELESS),
        (r"[\p{P}\p{S}]", PUNCT),
        (r"\p{M}", MARK),
    ];
    for (property, bit) in sets {
        for (lo, hi) in ranges(property) {
            for c in lo..=hi {
                flat[c as usize] |= bit;
            }
        }
    }
    let mut index = Vec::with_capacity(flat.len() / BLOCK);
    let mut blocks: Vec<u8> = Vec::new();
    let mut seen: rustc_hash::FxHashMap<&[u8], u16> = rustc_hash::FxHashMap::default();
    for block in flat.chunks(BLOCK) {
        let next = seen.len() as u16;
        let id = *seen.entry(block).or_insert_with(|| {
            blocks.extend_from_slice(block);
            next
        });
        index.push(id);
    }
    Classes { index, blocks }
}

static TABLE: LazyLock<Classes> = LazyLock::new(build);

/// ASCII classes, written out so the common case needs no table load.
const fn ascii() -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut c = 0;
    while c < 128 {
        let b = c as u8;
        t[c] = if b.is_ascii_uppercase() {
            LETTER | UPPER
        } else if b.is_ascii_lowercase() {
            LETTER | LOWER
        } else if b.is_ascii_digit() {
            NUMBER
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            SPACE
        } else if b.is_ascii_punctuation() {
            PUNCT
        } else {
            0
        };
        c += 1;
    }
    t
}

pub const ASCII: [u8; 128] = ascii();

impl Classes {
    /// The table, built on first use.
    pub fn get() -> &'static Classes {
        &TABLE
    }

    #[inline]
    pub fn of(&self, c: u32) -> u8 {
        if c < 128 {
            ASCII[c as usize]
        } else {
            let block = self.index[(c as usize) / BLOCK] as usize;
            self.blocks[block * BLOCK + (c as usize) % BLOCK]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_table_agrees_with_the_unicode_tables() {
        let t = build();
        for c in 0..128u32 {
            let block = t.index[0] as usize;
            assert_eq!(ASCII[c as usize], t.blocks[block * BLOCK + c as usize], "U+{c:04X}");
        }
    }

    #[test]
    fn some_known_classes() {
        let t = Classes::get();
        assert_eq!(t.of('é' as u32), LETTER | LOWER);
        assert_eq!(t.of('Σ' as u32), LETTER | UPPER);
        assert_eq!(t.of('中' as u32), LETTER | CASELESS);
        assert_eq!(t.of(0x0301), CASELESS | MARK); // combining acute: a mark, not a letter
        assert_eq!(t.of('٣' as u32), NUMBER);
        assert_eq!(t.of(0x3000), SPACE);
        assert_eq!(t.of(0x85), SPACE);
        assert_eq!(t.of('🙂' as u32), PUNCT); // a symbol
        assert_eq!(t.of('、' as u32), PUNCT);
        assert_eq!(t.of(0x200d), 0); // a format character: none of the classes
        assert_eq!(t.of(0x10FFFF), 0);
    }
}
