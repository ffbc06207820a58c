//! A script-aware token estimate for models without a public tokenizer (Claude) or when a
//! tokenizer package is not installed. It walks the text once, cuts it into runs of one
//! character class (the way BPE pre-tokenizers split text), and charges each run what
//! cl100k_base / o200k_base charge for such runs on average.
//!
//! The constants were fitted (quantile regression at the 85th percentile, so estimates lean
//! high: undercounting is what overflows a window) against max(cl100k_base, o200k_base) on
//! the mixed English / Chinese / multilingual / code / JSON / log corpus of
//! `tests/_corpus.py`; `tests/counting/test_heuristic.py` mirrors this file in Python, measures the
//! error per category (numbers in `benches/RESULTS.md`) and refits with `--fit`.
//! Keep the two in step: the test checks that they agree on every corpus text.

use super::Backend;
use crate::error::{Error, Result};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// ASCII letters, Latin-1 and Latin Extended letters.
    Letter,
    /// ASCII digits (grouped by three, as cl100k/o200k do).
    Digit,
    Newline,
    /// Whitespace other than newlines.
    Space,
    /// ASCII punctuation.
    Punct,
    /// Combining diacritics (U+0300..U+036F): they join the run before them.
    Mark,
    /// Greek, Cyrillic, Armenian.
    Alpha2,
    /// Hebrew, Arabic, Syriac, Thaana, N'Ko and Arabic presentation forms.
    Rtl,
    /// Indic, Southeast Asian, Georgian, Ethiopic... (U+0800..U+1FFF).
    Brahmic,
    Han,
    Kana,
    Hangul,
    /// CJK punctuation and fullwidth forms.
    CjkPunct,
    /// Symbols, emoji, control characters, anything else: charged by UTF-8 bytes.
    Other,
}

use Class::*;

fn classify(c: char) -> Class {
    let o = c as u32;
    if o < 0x80 {
        return match c {
            'a'..='z' | 'A'..='Z' => Letter,
            '0'..='9' => Digit,
            '\n' | '\r' => Newline,
            '\t' | '\u{b}' | '\u{c}' | ' ' => Space,
            c if c.is_ascii_punctuation() => Punct,
            _ => Other,
        };
    }
    // The order of the arms matters (the first match wins): the Python mirror checks the same
    // ranges in the same order.
    match o {
        0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 => Space,
        0xD7 | 0xF7 => Other,
        0xC0..=0x24F => Letter,
        0x300..=0x36F => Mark,
        0x370..=0x58F | 0x1F00..=0x1FFF => Alpha2,
        0x590..=0x7FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF => Rtl,
        0x1E00..=0x1EFF => Letter,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => Hangul,
        0x800..=0x1FFF => Brahmic,
        0x3040..=0x30FF | 0x31F0..=0x31FF => Kana,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF => Han,
        0x3000..=0x303F | 0xFF00..=0xFFEF => CjkPunct,
        _ => Other,
    }
}

/// Classes a single preceding punctuation character joins (`[^\r\n\p{L}\p{N}]?\p{L}+`).
fn is_letterish(c: Class) -> bool {
    matches!(c, Letter | Alpha2 | Rtl | Brahmic | Han | Kana | Hangul)
}

// ---- the fitted constants (tokens) ----------------------------------------------------------

/// A word of up to `LETTER_FREE` letters is one token...
const LETTER_RUN: f64 = 1.0;
const LETTER_FREE: usize = 7;
/// ...longer words add this per extra letter;
const LETTER_EXCESS: f64 = 0.28;
/// each non-ASCII letter (accents: "café", "Zürich") splits the word further;
const LETTER_NON_ASCII: f64 = 1.87;
/// a word with no space or punctuation before it (text start, after a newline or a quote)
/// is less often a single token than " word";
const LETTER_BARE: f64 = 0.37;
/// capitals inside a word (camelCase, ALLCAPS) split it.
const LETTER_CAPS: f64 = 0.07;
/// Per group of up to three digits.
const DIGIT_GROUP: f64 = 1.0;
/// CJK characters that are a single token in cl100k_base (`CJK_COMMON`: the frequent ones)...
const CJK_COMMON_CHAR: f64 = 1.0;
/// ...and the others, which byte-level BPE splits into two or three tokens.
const HAN_CHAR: f64 = 2.3;
const KANA_CHAR: f64 = 1.78;
const HANGUL_CHAR: f64 = 2.17;
/// A single space joins the next word (free); longer runs cost this, plus a little per space.
const SPACE_RUN: f64 = 0.5;
const SPACE_EXTRA: f64 = 0.01;
const NEWLINE_RUN: f64 = 1.2;
const NEWLINE_EXTRA: f64 = 0.65;
/// A punctuation run (less one character that joins a following word) costs this...
const PUNCT_RUN: f64 = 1.12;
/// ...plus this per further character ("{\"", "\"}," and "==" are single tokens).
const PUNCT_EXTRA: f64 = 0.06;
const CJK_PUNCT_CHAR: f64 = 1.31;
const ALPHA2_RUN: f64 = 0.1;
const ALPHA2_CHAR: f64 = 0.67;
const RTL_RUN: f64 = 2.04;
const RTL_CHAR: f64 = 0.72;
const BRAHMIC_CHAR: f64 = 2.01;
const OTHER_BYTE: f64 = 0.78;

/// The kana, Hangul and Han characters that cl100k_base encodes as one token, sorted.
#[rustfmt::skip]
static CJK_COMMON: [u16; 776] = [
    0x3042, 0x3044, 0x3046, 0x3048, 0x304A, 0x304B, 0x304C, 0x304D, 0x304F, 0x3051, 0x3053, 0x3054,
    0x3055, 0x3056, 0x3057, 0x3058, 0x3059, 0x305B, 0x305D, 0x305F, 0x3060, 0x3061, 0x3063, 0x3064,
    0x3066, 0x3067, 0x3068, 0x3069, 0x306A, 0x306B, 0x306E, 0x306F, 0x3070, 0x307E, 0x307F, 0x3081,
    0x3082, 0x3084, 0x3088, 0x3089, 0x308A, 0x308B, 0x308C, 0x308D, 0x308F, 0x3092, 0x3093, 0x30A2,
    0x30A3, 0x30A4, 0x30A6, 0x30A7, 0x30A8, 0x30AA, 0x30AB, 0x30AD, 0x30AF, 0x30B0, 0x30B3, 0x30B5,
    0x30B7, 0x30B8, 0x30B9, 0x30BA, 0x30BB, 0x30BF, 0x30C0, 0x30C1, 0x30C3, 0x30C6, 0x30C7, 0x30C8,
    0x30C9, 0x30CA, 0x30CB, 0x30D0, 0x30D1, 0x30D3, 0x30D4, 0x30D5, 0x30D6, 0x30D7, 0x30DA, 0x30DD,
    0x30DE, 0x30E0, 0x30E1, 0x30E3, 0x30E5, 0x30E7, 0x30E9, 0x30EA, 0x30EB, 0x30EC, 0x30ED, 0x30F3,
    0x30FB, 0x30FC, 0x4E00, 0x4E07, 0x4E09, 0x4E0A, 0x4E0B, 0x4E0D, 0x4E0E, 0x4E13, 0x4E1A, 0x4E1C,
    0x4E24, 0x4E2A, 0x4E2D, 0x4E32, 0x4E3A, 0x4E3B, 0x4E48, 0x4E49, 0x4E4B, 0x4E5F, 0x4E66, 0x4E86,
    0x4E8B, 0x4E8C, 0x4E8E, 0x4E94, 0x4E9B, 0x4EA4, 0x4EA7, 0x4EAB, 0x4EAC, 0x4EBA, 0x4EBF, 0x4ECA,
    0x4ECB, 0x4ECE, 0x4ED6, 0x4ED8, 0x4EE3, 0x4EE5, 0x4EEC, 0x4EF6, 0x4EF7, 0x4EFB, 0x4EFD, 0x4F01,
    0x4F18, 0x4F1A, 0x4F20, 0x4F46, 0x4F4D, 0x4F53, 0x4F55, 0x4F59, 0x4F5C, 0x4F60, 0x4F7F, 0x4F8B,
    0x4F9B, 0x4FA1, 0x4FDD, 0x4FE1, 0x4FEE, 0x500D, 0x503C, 0x505C, 0x50CF, 0x5143, 0x5148, 0x5165,
    0x5168, 0x516C, 0x5171, 0x5173, 0x5176, 0x5177, 0x5185, 0x5186, 0x518C, 0x518D, 0x5199, 0x51FA,
    0x51FB, 0x5206, 0x5217, 0x5219, 0x521D, 0x5229, 0x522B, 0x5230, 0x5236, 0x524D, 0x529B, 0x529F,
    0x52A0, 0x52A1, 0x52A8, 0x52D5, 0x5305, 0x5316, 0x5317, 0x533A, 0x5341, 0x5348, 0x534E, 0x5355,
    0x5357, 0x5373, 0x5386, 0x539F, 0x53BB, 0x53BF, 0x53C2, 0x53CA, 0x53CB, 0x53CD, 0x53D1, 0x53D6,
    0x53D8, 0x53E3, 0x53EA, 0x53EF, 0x53F0, 0x53F3, 0x53F7, 0x53F8, 0x5408, 0x540C, 0x540D, 0x540E,
    0x5411, 0x5426, 0x542B, 0x542C, 0x542F, 0x544A, 0x5458, 0x5468, 0x547D, 0x548C, 0x54C1, 0x54C8,
    0x5546, 0x554F, 0x5668, 0x56DB, 0x56DE, 0x56E0, 0x56FD, 0x56FE, 0x571F, 0x5728, 0x5730, 0x573A,
    0x5740, 0x578B, 0x57CE, 0x57FA, 0x5831, 0x5834, 0x586B, 0x589E, 0x58F0, 0x5904, 0x5907, 0x590D,
    0x5916, 0x591A, 0x5927, 0x5929, 0x5931, 0x5934, 0x5973, 0x597D, 0x5982, 0x59CB, 0x5B50, 0x5B57,
    0x5B58, 0x5B66, 0x5B89, 0x5B8B, 0x5B8C, 0x5B9A, 0x5B9E, 0x5BA1, 0x5BA2, 0x5BB6, 0x5BB9, 0x5BC6,
    0x5BF9, 0x5BFC, 0x5C06, 0x5C0F, 0x5C11, 0x5C14, 0x5C31, 0x5C40, 0x5C55, 0x5C71, 0x5C81, 0x5DDE,
    0x5DE5, 0x5DE6, 0x5DF2, 0x5E02, 0x5E03, 0x5E38, 0x5E73, 0x5E74, 0x5E76, 0x5E7F, 0x5E8F, 0x5E93,
    0x5E94, 0x5E97, 0x5EA6, 0x5EFA, 0x5F00, 0x5F02, 0x5F0F, 0x5F15, 0x5F20, 0x5F53, 0x5F55, 0x5F62,
    0x5F71, 0x5F84, 0x5F85, 0x5F8C, 0x5F97, 0x5FAE, 0x5FC3, 0x5FC5, 0x5FD7, 0x6001, 0x601D, 0x6027,
    0x603B, 0x606F, 0x60A8, 0x60C5, 0x610F, 0x611F, 0x6210, 0x6211, 0x6216, 0x6237, 0x6240, 0x624B,
    0x6253, 0x627E, 0x6280, 0x6295, 0x62A5, 0x62C9, 0x6301, 0x6307, 0x6309, 0x6362, 0x636E, 0x6392,
    0x63A5, 0x63A8, 0x63D0, 0x64AD, 0x652F, 0x6536, 0x6539, 0x653E, 0x653F, 0x6548, 0x6570, 0x6574,
    0x6587, 0x6599, 0x65AD, 0x65B0, 0x65B9, 0x65CF, 0x65E0, 0x65E5, 0x65F6, 0x660E, 0x6613, 0x661F,
    0x662F, 0x6642, 0x666F, 0x66F4, 0x6700, 0x6708, 0x6709, 0x670D, 0x671F, 0x6728, 0x672A, 0x672C,
    0x673A, 0x6743, 0x675F, 0x6761, 0x6765, 0x677F, 0x6784, 0x6790, 0x679C, 0x67E5, 0x6807, 0x6837,
    0x6838, 0x683C, 0x6848, 0x68C0, 0x6A21, 0x6B21, 0x6B3E, 0x6B62, 0x6B63, 0x6B64, 0x6B65, 0x6B73,
    0x6BB5, 0x6BCF, 0x6BD4, 0x6C11, 0x6C17, 0x6C34, 0x6C42, 0x6C5F, 0x6C7D, 0x6CA1, 0x6CBB, 0x6CD5,
    0x6CE8, 0x6D3B, 0x6D41, 0x6D77, 0x6D88, 0x6E05, 0x6E38, 0x6E90, 0x706B, 0x70B9, 0x7121, 0x7136,
    0x7247, 0x7248, 0x7269, 0x7279, 0x7387, 0x73AF, 0x73B0, 0x7403, 0x7406, 0x751F, 0x7528, 0x7531,
    0x7535, 0x7537, 0x753B, 0x754C, 0x756A, 0x767B, 0x7684, 0x76D1, 0x76EE, 0x76F4, 0x76F8, 0x7701,
    0x770B, 0x770C, 0x771F, 0x77E5, 0x7801, 0x786E, 0x793A, 0x793E, 0x7968, 0x79C1, 0x79CD, 0x79D1,
    0x79D2, 0x79F0, 0x79FB, 0x7A0B, 0x7A0D, 0x7A0E, 0x7A3F, 0x7A7A, 0x7ACB, 0x7AD9, 0x7AE0, 0x7AEF,
    0x7B11, 0x7B26, 0x7B2C, 0x7B49, 0x7B7E, 0x7B80, 0x7B97, 0x7BA1, 0x7BB1, 0x7C73, 0x7C7B, 0x7CFB,
    0x7D20, 0x7D22, 0x7EA6, 0x7EA7, 0x7EBF, 0x7EC4, 0x7ECF, 0x7ED3, 0x7ED9, 0x7EDC, 0x7EDF, 0x7F16,
    0x7F51, 0x7F6E, 0x7F8E, 0x8001, 0x8003, 0x8005, 0x800C, 0x8054, 0x80FD, 0x81EA, 0x81F3, 0x8272,
    0x8282, 0x82F1, 0x85CF, 0x884C, 0x8868, 0x88C5, 0x897F, 0x8981, 0x898B, 0x89C1, 0x89C4, 0x89C6,
    0x89D2, 0x89E3, 0x8A00, 0x8A08, 0x8A18, 0x8A71, 0x8AAD, 0x8BA1, 0x8BA4, 0x8BAE, 0x8BB0, 0x8BBA,
    0x8BBE, 0x8BC1, 0x8BC4, 0x8BD5, 0x8BDD, 0x8BE2, 0x8BE5, 0x8BE6, 0x8BED, 0x8BEF, 0x8BF4, 0x8BF7,
    0x8BFB, 0x8C03, 0x8C61, 0x8D23, 0x8D25, 0x8D26, 0x8D27, 0x8D2D, 0x8D39, 0x8D44, 0x8D77, 0x8D85,
    0x8DEF, 0x8EAB, 0x8F66, 0x8F6C, 0x8F6F, 0x8F7D, 0x8F91, 0x8F93, 0x8FBE, 0x8FC7, 0x8FD0, 0x8FD1,
    0x8FD8, 0x8FD9, 0x8FDB, 0x8FDE, 0x8FF0, 0x9000, 0x9001, 0x9009, 0x901A, 0x901F, 0x9020, 0x9023,
    0x9053, 0x90AE, 0x90E8, 0x90FD, 0x914D, 0x91CA, 0x91CC, 0x91CD, 0x91CF, 0x91D1, 0x949F, 0x94AE,
    0x94FE, 0x9500, 0x9519, 0x952E, 0x957F, 0x958B, 0x9593, 0x95A2, 0x95E8, 0x95ED, 0x95EE, 0x95F4,
    0x961F, 0x9633, 0x9646, 0x9650, 0x9662, 0x9664, 0x96C5, 0x96C6, 0x96F7, 0x9700, 0x975E, 0x9762,
    0x97F3, 0x9875, 0x9879, 0x9884, 0x9891, 0x9898, 0x989D, 0x9996, 0x9A8C, 0x9AD8, 0x9ED1, 0xAC00,
    0xAC04, 0xAC12, 0xAC1C, 0xAC70, 0xAC8C, 0xACB0, 0xACBD, 0xACE0, 0xACF5, 0xACFC, 0xAD6C, 0xADF8,
    0xAE00, 0xAE30, 0xB098, 0xB0B4, 0xB294, 0xB2A5, 0xB2C8, 0xB2E4, 0xB2F9, 0xB300, 0xB3C4, 0xB3D9,
    0xB418, 0xB41C, 0xB4DC, 0xB4E0, 0xB4E4, 0xB514, 0xB77C, 0xB798, 0xB7EC, 0xB825, 0xB85C, 0xB85D,
    0xB8CC, 0xB958, 0xB978, 0xB97C, 0xB984, 0xB9AC, 0xB9CC, 0xBA54, 0xBA74, 0xBA85, 0xBAA9, 0xBB38,
    0xBBF8, 0xBC84, 0xBC88, 0xBCF4, 0xBCF5, 0xBD80, 0xBD84, 0xBE44, 0xC0AC, 0xC0B0, 0xC0C1, 0xC0C9,
    0xC0DD, 0xC11C, 0xC131, 0xC138, 0xC158, 0xC18C, 0xC218, 0xC2A4, 0xC2B5, 0xC2DC, 0xC2DD, 0xC2E0,
    0xC544, 0xC57C, 0xC5B4, 0xC5D0, 0xC5EC, 0xC5F4, 0xC624, 0xC640, 0xC694, 0xC6A9, 0xC6B0, 0xC6B4,
    0xC6D0, 0xC704, 0xC73C, 0xC740, 0xC744, 0xC74C, 0xC758, 0xC774, 0xC778, 0xC77C, 0xC784, 0xC785,
    0xC790, 0xC791, 0xC7A5, 0xC7AC, 0xC801, 0xC804, 0xC815, 0xC81C, 0xC838, 0xC870, 0xC8FC, 0xC9C0,
    0xC9C4, 0xC9F8, 0xCCB4, 0xCD9C, 0xCE58, 0xD06C, 0xD0DC, 0xD130, 0xD134, 0xD2B8, 0xD2BC, 0xD558,
    0xD55C, 0xD560, 0xD568, 0xD574, 0xD638, 0xD654, 0xD658, 0xD68C,
];

fn is_common_cjk(c: char) -> bool {
    u16::try_from(c as u32).is_ok_and(|o| CJK_COMMON.binary_search(&o).is_ok())
}

/// What the cost of a run depends on.
struct Run {
    class: Class,
    chars: usize,
    bytes: usize,
    non_ascii: usize,
    /// ASCII capitals after the run's first character.
    caps: usize,
    /// Characters in `CJK_COMMON`.
    common: usize,
}

impl Run {
    fn new(class: Class, c: char) -> Self {
        let mut run = Run { class, chars: 0, bytes: 0, non_ascii: 0, caps: 0, common: 0 };
        run.push(c);
        run
    }

    fn push(&mut self, c: char) {
        if self.chars > 0 && c.is_ascii_uppercase() {
            self.caps += 1;
        }
        self.chars += 1;
        self.bytes += c.len_utf8();
        self.non_ascii += usize::from(!c.is_ascii());
        if matches!(self.class, Han | Kana | Hangul) && is_common_cjk(c) {
            self.common += 1;
        }
    }

    /// Estimated tokens of this run, given the classes of the runs around it. The
    /// expressions are written exactly as in the Python mirror (same operations, same
    /// order), so both give the same floating-point result.
    fn cost(&self, prev: Option<Class>, next: Option<Class>) -> f64 {
        let n = self.chars as f64;
        match self.class {
            Letter => {
                let excess = self.chars.saturating_sub(LETTER_FREE) as f64;
                let mut c = LETTER_RUN
                    + LETTER_EXCESS * excess
                    + LETTER_NON_ASCII * self.non_ascii as f64
                    + LETTER_CAPS * self.caps as f64;
                if !matches!(prev, Some(Space) | Some(Punct)) {
                    c += LETTER_BARE;
                }
                c
            }
            Digit => DIGIT_GROUP * self.chars.div_ceil(3) as f64,
            Han | Kana | Hangul => {
                let rare = match self.class {
                    Han => HAN_CHAR,
                    Kana => KANA_CHAR,
                    _ => HANGUL_CHAR,
                };
                CJK_COMMON_CHAR * self.common as f64 + rare * (self.chars - self.common) as f64
            }
            Space => {
                if self.chars >= 2 {
                    SPACE_RUN + SPACE_EXTRA * (self.chars - 2) as f64
                } else {
                    0.0
                }
            }
            Newline => NEWLINE_RUN + NEWLINE_EXTRA * (self.chars - 1) as f64,
            Punct => {
                let effective = self.chars - usize::from(next.is_some_and(is_letterish));
                if effective > 0 {
                    PUNCT_RUN + PUNCT_EXTRA * (effective - 1) as f64
                } else {
                    0.0
                }
            }
            CjkPunct => CJK_PUNCT_CHAR * n,
            Alpha2 => ALPHA2_RUN + ALPHA2_CHAR * n,
            Rtl => RTL_RUN + RTL_CHAR * n,
            Brahmic => BRAHMIC_CHAR * n,
            Mark | Other => OTHER_BYTE * self.bytes as f64,
        }
    }
}

pub struct Heuristic;

impl Heuristic {
    pub fn estimate(text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let mut total = 0.0f64;
        let mut prev: Option<Class> = None;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let mut run = Run::new(classify(c), c);
            // Extend the run while the class stays; combining marks join whatever precedes them.
            while let Some(&next) = chars.peek() {
                let class = classify(next);
                if class != run.class && class != Mark {
                    break;
                }
                run.push(next);
                chars.next();
            }
            let next = chars.peek().map(|&c| classify(c));
            total += run.cost(prev, next);
            prev = Some(run.class);
        }
        // A non-empty text is at least one token.
        (total.ceil() as usize).max(1)
    }
}

impl Backend for Heuristic {
    fn name(&self) -> &str {
        "estimate"
    }

    fn is_exact(&self) -> bool {
        false
    }

    fn count(&self, text: &str) -> usize {
        Self::estimate(text)
    }

    fn encode(&self, _text: &str) -> Result<Vec<u32>> {
        Err(Error::Unsupported("the heuristic estimate has no vocabulary: it counts but cannot encode".into()))
    }

    fn decode_bytes(&self, _ids: &[u32]) -> Result<Vec<u8>> {
        Err(Error::Unsupported("the heuristic estimate has no vocabulary: it cannot decode".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_monotone_pieces() {
        assert_eq!(Heuristic::estimate(""), 0);
        assert_eq!(Heuristic::estimate(" "), 1);
        assert!((1..=2).contains(&Heuristic::estimate("hello")));
        assert!(Heuristic::estimate("你好世界") >= 4);
        assert!(Heuristic::estimate("hello world, this is a test.") >= 7);
        // 1 MB of Chinese estimates at least one token per character.
        let zh = "上下文窗口".repeat(200_000);
        assert!(Heuristic::estimate(&zh) >= 1_000_000);
    }

    #[test]
    fn common_cjk_table_is_sorted_and_used() {
        assert!(CJK_COMMON.windows(2).all(|w| w[0] < w[1]));
        assert!(is_common_cjk('的') && is_common_cjk('人'));
        assert!(!is_common_cjk('a') && !is_common_cjk('😀'));
        // a frequent character costs less than a rare one
        assert!(Heuristic::estimate("的的的的") < Heuristic::estimate("龘龘龘龘"));
    }

    #[test]
    fn classes_and_runs() {
        assert_eq!(classify('é'), Letter);
        assert_eq!(classify('\u{301}'), Mark);
        assert_eq!(classify('\u{3000}'), Space);
        assert_eq!(classify('，'), CjkPunct);
        assert_eq!(classify('ж'), Alpha2);
        assert_eq!(classify('ع'), Rtl);
        assert_eq!(classify('न'), Brahmic);
        assert_eq!(classify('한'), Hangul);
        assert_eq!(classify('😀'), Other);
        // a combining mark joins the word before it: "cafe\u{301}" is one letter run
        assert_eq!(Heuristic::estimate("cafe\u{301}"), Heuristic::estimate("cafés"));
        // a single punctuation character before a word is free (".items"), alone it is not
        assert!(Heuristic::estimate("a.b") < Heuristic::estimate("a . b"));
    }
}
