//! Whole characters as the first parts of a merge.
//!
//! tiktoken merges a piece from its bytes. A character of two to four bytes (Chinese,
//! Cyrillic, an accented letter) merges the same way wherever it stands, unless a token
//! of the vocabulary can take part of it together with a neighbour: until it is whole its
//! bytes meet only each other, and a merge across it joins it whole. So its own merge can be
//! taken first, with one lookup (the character is one token, or its own merge's few parts),
//! and the piece's merge goes on from there: for a Chinese character, one lookup where the
//! merge from bytes made two merges and four lookups.
//!
//! That gives tiktoken's result when:
//! 1. every token's own merge takes its pairs in rank order (a test checks both
//!    vocabularies): a token made across a whole character then ranks after that character,
//!    so the character made earlier brings forward no merge that would have come later;
//! 2. neither boundary of the character is *loose*: a pair of bytes at which some token
//!    crosses from part of a character into the next ([`Loose`]; a space and a character's
//!    first byte, " \xe2", or "о" and the next one's first byte: 96 pairs of bytes in
//!    cl100k_base, 207 in o200k_base). A character at a loose boundary starts from its
//!    bytes, as in tiktoken.
//!
//! A piece is also cut where no token can join its two sides ([`Joins`]): between two whole
//! characters of two bytes or more, at a boundary that is not loose, that no token holds side
//! by side. No merge can make a part across such a boundary (the part would be a token
//! holding both characters whole, or one holding part of a character, which makes the
//! boundary loose), so each side merges as if alone and the piece's count is theirs summed.
//! A sentence of Chinese falls into runs of a few characters: the lookups that asked whether
//! a merged word joins its neighbour, nine in ten of them for a token no vocabulary has, are
//! not made, and no long piece's heap is built.
//!
//! A test compares the merge from whole characters with the merge from bytes on random
//! text of every script the vocabularies know, and the exactness suites with tiktoken.

use hashbrown::HashSet;
use rustc_hash::FxBuildHasher;

use super::bpe::{self, Seed};
use super::vocab::{pair_index, Vocab};

/// The pairs of bytes at which a token crosses into or out of part of a character: for each
/// token that is not whole characters ([`width`]'s), every place in it where a character
/// starts (a byte that is not a continuation byte) after the first, by the byte before and
/// the byte there.
pub struct Loose(Box<[u64; 1024]>);

impl Default for Loose {
    fn default() -> Self {
        Self(Box::new([0; 1024]))
    }
}

impl Loose {
    /// Add the pairs of `token`, one that is not whole characters ([`Joins::note`] tells).
    #[inline]
    pub fn note(&mut self, token: &[u8]) {
        for w in token.windows(2).filter(|w| !continues(w[1])) {
            let at = pair_index(w[0], w[1]);
            self.0[at / 64] |= 1 << (at % 64);
        }
    }

    /// Whether a token may cross the boundary between `a` and `b`.
    #[inline(always)]
    pub fn at(&self, a: u8, b: u8) -> bool {
        let at = pair_index(a, b);
        self.0[at / 64] >> (at % 64) & 1 == 1
    }

    /// Pairs of bytes that are loose.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// The pairs of characters that some token holds side by side, each of two bytes or more
/// and whole (as [`width`] finds them in the token): where two such characters of a piece
/// stand side by side and no token holds them so, no part of the merge can cross between them
/// ([`for_each_segment`]). Keyed by the two code points (21 bits each): 16,412 pairs in
/// o200k_base, 761 in cl100k_base.
#[derive(Default)]
pub struct Joins(HashSet<u64, FxBuildHasher>);

impl Joins {
    /// Room for `pairs` pairs: grown from empty, the set's rehashes cost o200k_base's load
    /// a millisecond (the vocabulary's loader asks for a tenth of its tokens).
    pub fn with_capacity(pairs: usize) -> Self {
        Self(HashSet::with_capacity_and_hasher(pairs, FxBuildHasher))
    }

    /// Add the pairs of `token`, and tell whether it is whole characters (each byte past
    /// ASCII inside a whole character, as [`width`] finds them); one that is not adds the
    /// pairs it holds whole all the same, a set larger than needed only cutting less.
    pub fn note(&mut self, token: &[u8]) -> bool {
        let mut whole = true;
        let mut before = None;
        let mut i = 0;
        while i < token.len() {
            let w = width(token, i);
            whole &= w > 1 || token[i] < 0x80;
            let here = (w > 1).then(|| code_point(&token[i..i + w]));
            if let (Some(a), Some(b)) = (before, here) {
                self.0.insert(pair_key(a, b));
            }
            before = here;
            i += w;
        }
        whole
    }

    /// Whether some token holds the characters `a` and `b` side by side.
    #[inline(always)]
    fn hold(&self, a: u32, b: u32) -> bool {
        self.0.contains(&pair_key(a, b))
    }

    /// Pairs held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[inline(always)]
fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 21) | u64::from(b)
}

/// The code point of one whole character of 2 to 4 bytes, its width known: the splitter's
/// decoder (`split::char_at`), which finds the width again, made the Chinese dialog's first
/// pass 0.98x as fast (paired fresh processes, 7 of 8 pairs at or below 1.00x).
#[inline(always)]
fn code_point(c: &[u8]) -> u32 {
    let tail = |k: usize| u32::from(c[k] & 0x3F);
    match c.len() {
        2 => (u32::from(c[0] & 0x1F) << 6) | tail(1),
        3 => (u32::from(c[0] & 0x0F) << 12) | (tail(1) << 6) | tail(2),
        _ => (u32::from(c[0] & 0x07) << 18) | (tail(1) << 12) | (tail(2) << 6) | tail(3),
    }
}

/// `segment(part)` for each part of `piece` that merges alone: the piece cut between two
/// whole characters of two bytes or more where no token holds the two side by side and
/// the boundary is not loose (see the module doc). A piece of ASCII is one part.
#[inline]
pub fn for_each_segment<'p>(piece: &'p [u8], vocab: &Vocab, mut segment: impl FnMut(&'p [u8])) {
    if piece.is_ascii() {
        return segment(piece);
    }
    let (joins, loose) = (vocab.joins(), vocab.loose());
    let mut start = 0;
    let mut before = None;
    let mut i = 0;
    while i < piece.len() {
        let w = width(piece, i);
        let here = (w > 1).then(|| code_point(&piece[i..i + w]));
        if let (Some(a), Some(b)) = (before, here) {
            if !joins.hold(a, b) && !loose.at(piece[i - 1], piece[i]) {
                segment(&piece[start..i]);
                start = i;
            }
        }
        before = here;
        i += w;
    }
    segment(&piece[start..]);
}

/// Tokens of `piece` by byte-pair merge, each of its segments ([`for_each_segment`]) merged
/// alone from whole characters ([`WholeChars`]).
pub fn count(piece: &[u8], vocab: &Vocab) -> usize {
    let mut n = 0;
    for_each_segment(piece, vocab, |part| n += bpe::count_from(part, |b| vocab.rank(b), &WholeChars(vocab)));
    n
}

/// The token ids of `piece` by byte-pair merge, appended to `out`: each of its segments
/// merged as [`count`] merges it ([`bpe::ids_into`]).
pub fn ids_into(piece: &[u8], vocab: &Vocab, out: &mut Vec<u32>) {
    for_each_segment(piece, vocab, |part| {
        bpe::ids_into(part, |b| vocab.rank(b), |b| vocab.part_rank(b), &WholeChars(vocab), out)
    });
}

/// A UTF-8 continuation byte (`10xxxxxx`).
#[inline(always)]
fn continues(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Bytes of the whole character at `i`: 2 to 4 for a first byte followed by its
/// continuation bytes and then by none more, else 1 (ASCII, a byte of a character cut off by
/// the slice, or of bytes that are not UTF-8). A token that crosses a boundary of a whole
/// character then has a byte there that is not a continuation byte, which [`Loose`] notes.
#[inline(always)]
fn width(piece: &[u8], i: usize) -> usize {
    let w = match piece[i] {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return 1,
    };
    match piece.get(i + 1..i + w) {
        Some(tail) if tail.iter().all(|&b| continues(b)) && !piece.get(i + w).is_some_and(|&b| continues(b)) => w,
        _ => 1,
    }
}

/// The seed of a piece's merge: each character of two bytes or more whose boundaries in the
/// piece are not loose, merged alone; every other byte a part of its own (all of them in a
/// piece of ASCII, which merges as it did from bytes).
pub struct WholeChars<'v>(pub &'v Vocab);

impl Seed for WholeChars<'_> {
    #[inline]
    fn parts(&self, piece: &[u8], mut part: impl FnMut(usize)) {
        if piece.is_ascii() {
            // every character one byte: asked once, not per byte
            return bpe::Bytes.parts(piece, part);
        }
        let vocab = self.0;
        let loose = |at: usize| at > 0 && at < piece.len() && vocab.loose().at(piece[at - 1], piece[at]);
        let mut i = 0;
        while i < piece.len() {
            let w = width(piece, i);
            if w == 1 || loose(i) || loose(i + w) {
                (i..i + w).for_each(&mut part);
            } else if let Some(ends) = vocab.char3(&piece[i..i + w]) {
                part(i);
                if ends & 1 != 0 {
                    part(i + 1);
                }
                if ends & 2 != 0 {
                    part(i + 2);
                }
            } else if vocab.rank(&piece[i..i + w]).is_some() {
                part(i);
            } else {
                bpe::for_each_short_part(&piece[i..i + w], |b| vocab.rank(b), |s| part(i + s));
            }
            i += w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::engine::split::tests::xorshift;

    fn vocabularies() -> [(&'static str, Vocab); 2] {
        [
            ("cl100k_base", Vocab::unpack(include_bytes!("../data/cl100k_base.bin.z"))),
            ("o200k_base", Vocab::unpack(include_bytes!("../data/o200k_base.bin.z"))),
        ]
    }

    /// Condition 1 of the module doc.
    #[test]
    fn every_token_merges_from_its_bytes_in_rising_rank() {
        for (name, vocab) in vocabularies() {
            for rank in 0..vocab.len() as u32 {
                let token = vocab.bytes(rank).unwrap();
                let mut parts: Vec<&[u8]> = token.chunks(1).collect();
                let mut last = None;
                while parts.len() > 1 {
                    let best = (0..parts.len() - 1)
                        .filter_map(|k| vocab.rank(&token_of(&parts[k..k + 2])).map(|r| (r, k)))
                        .min();
                    let Some((r, k)) = best else { break };
                    // equal ranks: the same pair again, further right
                    assert!(last <= Some(r), "{name}: token {rank} merges rank {r} after {last:?}");
                    last = Some(r);
                    let joined = &token[offset(token, parts[k])..offset(token, parts[k + 1]) + parts[k + 1].len()];
                    parts.splice(k..k + 2, [joined]);
                }
                assert_eq!(parts, [token], "{name}: token {rank} is not its own merge");
            }
        }
    }

    fn token_of(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    fn offset(whole: &[u8], part: &[u8]) -> usize {
        part.as_ptr() as usize - whole.as_ptr() as usize
    }

    #[test]
    fn every_character_of_three_bytes_merges_alone_as_its_table_says() {
        for (name, vocab) in vocabularies() {
            for c in ('\u{800}'..='\u{FFFF}').filter(|c| c.len_utf8() == 3) {
                let mut bytes = [0; 3];
                c.encode_utf8(&mut bytes);
                let mut ends = 0;
                let mut start = 0;
                for part in bpe::split(&bytes, |b| vocab.rank(b)) {
                    start += part.len();
                    if start < 3 {
                        ends |= 1 << (start - 1);
                    }
                }
                assert_eq!(vocab.char3(&bytes), Some(ends), "{name}: U+{:04X}", u32::from(c));
            }
            // the token of every three bytes shaped as a character (overlong and surrogate ones
            // too) by its code point, as the table of short tokens has it
            for a in 0xE0..=0xEFu8 {
                for b in 0x80..=0xBFu8 {
                    for c in [0x80..=0xBFu8, 0x00..=0x02, 0xFE..=0xFF].into_iter().flatten() {
                        let bytes = [a, b, c];
                        assert_eq!(vocab.part_rank(&bytes), vocab.rank(&bytes), "{name}: {bytes:x?}");
                    }
                }
            }
        }
    }

    #[test]
    fn loose_pairs_are_the_crossings_of_partial_tokens() {
        for (name, vocab) in vocabularies() {
            let loose = vocab.loose();
            // a space before a character's first byte: " \xe2\x80" is a token of both
            assert!(loose.at(b' ', 0xE2), "{name}");
            // inside a character, or between ASCII bytes, no token crosses part of one
            assert!(!loose.at(0xE4, 0xB8) && !loose.at(b'a', b'b'), "{name}");
            assert!((90..300).contains(&loose.len()), "{name}: {}", loose.len());
        }
    }

    /// The property the cuts rest on, checked on every token: a token's own bytes are never
    /// cut, so no part a merge makes is.
    #[test]
    fn no_token_is_cut() {
        for (name, vocab) in vocabularies() {
            for rank in 0..vocab.len() as u32 {
                let token = vocab.bytes(rank).unwrap();
                let mut parts = Vec::new();
                for_each_segment(token, &vocab, |p| parts.push(p));
                assert_eq!(parts, [token], "{name}: token {rank} {:?}", String::from_utf8_lossy(token));
            }
        }
    }

    #[test]
    fn chinese_is_cut_into_runs_that_merge_alone() {
        // 16,412 pairs of whole characters in o200k_base, 761 in cl100k_base
        for (name, vocab) in vocabularies() {
            assert!((500..40_000).contains(&vocab.joins().len()), "{name}: {}", vocab.joins().len());
            let text = "我昨天和朋友一起去看了一部科幻电影，我们都觉得非常精彩".as_bytes();
            let mut parts = Vec::new();
            for_each_segment(text, &vocab, |p| parts.push(p));
            assert!(parts.len() >= 4, "{name}: {} parts", parts.len());
            assert_eq!(parts.concat(), text);
            let whole: Vec<u32> = bpe::split(text, |b| vocab.rank(b)).iter().map(|p| vocab.rank(p).unwrap()).collect();
            let mut ids = Vec::new();
            ids_into(text, &vocab, &mut ids);
            assert_eq!(ids, whole, "{name}");
            assert_eq!(count(text, &vocab), whole.len(), "{name}");
        }
    }

    /// Random pieces of the scripts the vocabularies know, with the bytes around loose pairs
    /// (spaces, Cyrillic, Devanagari, emoji, characters cut off), merged from whole characters
    /// and from bytes: the same parts.
    #[test]
    fn merge_from_whole_characters_equals_merge_from_bytes() {
        let alphabets = [
            "中文字的一是不了人我在有他这为之大来以个们说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁伸摩盟末乃悲拍丁赵侧",
            "приветмирдобропожаловатьязыкмодельокнотокен",
            "éàüöçñøåßœæîôûëï",
            "नमस्तेदुनियाभाषा",
            "مرحبابالعالمنموذج",
            "こんにちは世界カタカナひらがな",
            "안녕하세요세계",
            "😀🎉👍🏽🚀✨",
            " \n\t.,!?'\"abcXYZ019",
        ];
        let alphabets: Vec<Vec<char>> = alphabets.iter().map(|a| a.chars().collect()).collect();
        let mut next = xorshift();
        for (name, vocab) in vocabularies() {
            let rank = |b: &[u8]| vocab.rank(b);
            for round in 0..30_000 {
                let len = 1 + (next() % 48) as usize;
                // mostly one script at a time, sometimes mixed
                let mixed = round % 4 == 0;
                let first = (next() % alphabets.len() as u64) as usize;
                let text: String = (0..len)
                    .map(|_| {
                        let a = if mixed { (next() % alphabets.len() as u64) as usize } else { first };
                        alphabets[a][(next() % alphabets[a].len() as u64) as usize]
                    })
                    .collect();
                let mut piece = text.into_bytes();
                if round % 7 == 0 && piece.len() > 3 {
                    // a character cut off at either end, as a block of a long piece may be
                    piece = piece[1..piece.len() - 1].to_vec();
                }
                if round % 11 == 0 {
                    // bytes that are not UTF-8: a continuation byte where none belongs
                    let at = (next() % (piece.len() as u64 + 1)) as usize;
                    piece.insert(at, 0x80 | (next() % 64) as u8);
                }
                if piece.is_empty() {
                    continue;
                }
                let from_bytes = bpe::split(&piece, rank);
                let from_chars = bpe::split_from(&piece, rank, &WholeChars(&vocab));
                assert_eq!(from_chars, from_bytes, "{name}: {:?}", String::from_utf8_lossy(&piece));
                assert_eq!(bpe::count_from(&piece, rank, &WholeChars(&vocab)), from_bytes.len(), "{name}");
                assert_eq!(count(&piece, &vocab), from_bytes.len(), "{name}");
                // the ids the merge kept, against each part looked up
                let looked_up: Vec<u32> = from_bytes.iter().map(|p| rank(p).unwrap()).collect();
                let mut ids = Vec::new();
                ids_into(&piece, &vocab, &mut ids);
                assert_eq!(ids, looked_up, "{name}: {:?}", String::from_utf8_lossy(&piece));
                ids.clear();
                bpe::ids_into(&piece, rank, rank, &bpe::Bytes, &mut ids);
                assert_eq!(ids, looked_up, "{name}: {:?}", String::from_utf8_lossy(&piece));
            }
        }
    }
}
