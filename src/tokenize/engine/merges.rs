//! The fast path for Hugging Face `tokenizer.json` byte-level BPE models whose
//! pre-tokenizer the engine knows: DeepSeek's (V3 / R1 / chat), three `Split` steps and a
//! `ByteLevel` without its own regex.
//!
//! Unlike tiktoken's vocabularies, these merge by their list of merges, not by the rank of
//! the merged token: a piece that is itself a token may still come out as several tokens,
//! so every piece goes through the merges (its count cached per thread). Texts holding an
//! added token's text (`<｜end▁of▁sentence｜>`, ...) are left to the `tokenizers` crate,
//! which splits those out first.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::long_pieces::{self, LongPieces};
use super::split::{Pattern, Splitter};
use super::vocab::{pack, SHORT};

/// DeepSeek's pre-tokenizer, as its `tokenizer.json` spells it.
const DEEPSEEK_PRE_TOKENIZER: &str = r##"{"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}"##;

/// GPT-2's byte-to-character table: the characters byte-level vocabularies spell bytes with.
fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("a scalar")
        };
    }
    table
}

/// Distinguishes the per-thread caches of different vocabularies.
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// Pieces cached per thread before the cache is emptied.
const CACHE_ENTRIES: usize = 1 << 17;
/// Pieces longer than a packed key kept per thread before that map is emptied (and at most
/// 4 MiB of them, reported; `long_pieces.rs`).
const LONG_ENTRIES: usize = CACHE_ENTRIES / 4;

#[derive(Default)]
struct PieceCache {
    owner: usize,
    short: FxHashMap<u128, u32>,
    long: LongPieces,
}

thread_local! {
    static PIECES: RefCell<PieceCache> = RefCell::default();
}

pub struct MergeBpe {
    id: usize,
    /// The token of each single byte.
    byte_token: [u32; 256],
    /// (left, right) -> (merge rank, merged token).
    merges: FxHashMap<(u32, u32), (u32, u32)>,
}

impl MergeBpe {
    /// The fast path for the `tokenizer.json` `json`, or `None` when its normalizer,
    /// pre-tokenizer or model is not one it reproduces exactly (the caller keeps the
    /// `tokenizers` crate then).
    pub fn from_json(json: &Value) -> Option<Self> {
        let expected: Value = serde_json::from_str(DEEPSEEK_PRE_TOKENIZER).expect("a valid constant");
        if json.get("pre_tokenizer")? != &expected {
            return None;
        }
        match json.get("normalizer")? {
            Value::Null => {}
            n if n.get("type")? == "Sequence" && n.get("normalizers")?.as_array()?.is_empty() => {}
            _ => return None,
        }
        let model = json.get("model")?;
        let unset = |key: &str| model.get(key).is_none_or(|v| v.is_null() || v == &Value::Bool(false));
        if model.get("type")? != "BPE"
            || !["dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback", "ignore_merges"]
                .iter()
                .all(|k| unset(k))
        {
            return None;
        }
        // Tokens spelled outside the byte alphabet (the added tokens' texts, which the
        // vocabulary lists too) are never reached from bytes, so they need no check.
        let chars = byte_chars();
        let mut vocab: FxHashMap<&str, u32> = FxHashMap::default();
        for (token, id) in model.get("vocab")?.as_object()? {
            vocab.insert(token.as_str(), u32::try_from(id.as_u64()?).ok()?);
        }
        let mut byte_token = [0u32; 256];
        for (b, &c) in chars.iter().enumerate() {
            byte_token[b] = *vocab.get(c.encode_utf8(&mut [0; 4]) as &str)?;
        }
        let mut merges = FxHashMap::default();
        for (rank, m) in model.get("merges")?.as_array()?.iter().enumerate() {
            let (a, b) = match m {
                Value::String(s) => s.split_once(' ')?,
                Value::Array(pair) if pair.len() == 2 => (pair[0].as_str()?, pair[1].as_str()?),
                _ => return None,
            };
            let merged = *vocab.get(format!("{a}{b}").as_str())?;
            merges.entry((*vocab.get(a)?, *vocab.get(b)?)).or_insert((rank as u32, merged));
        }
        Some(Self { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), byte_token, merges })
    }

    /// The pre-tokenizer's pieces of `text`, in order.
    pub fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
        numbers(text, |p| cjk(p, |p| Splitter::new(p, Pattern::DeepSeek).for_each(&mut f)));
    }

    /// The tokens of one piece, merged as the `tokenizers` crate merges: the adjacent
    /// pair of lowest merge rank first, the leftmost among equals.
    pub fn merge(&self, piece: &[u8]) -> Vec<u32> {
        let n = piece.len();
        let mut token: Vec<u32> = piece.iter().map(|&b| self.byte_token[b as usize]).collect();
        if n < 2 {
            return token;
        }
        // Parts form a linked list by start; a heap holds candidate pairs (rank, start),
        // stale entries (a part that has since changed) skipped.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut heap = BinaryHeap::new();
        let pair = |token: &[u32], a: usize, b: usize| self.merges.get(&(token[a], token[b])).copied();
        for i in 0..n - 1 {
            if let Some((rank, merged)) = pair(&token, i, i + 1) {
                heap.push(Reverse((rank, i, i + 1, merged)));
            }
        }
        while let Some(Reverse((_, a, b, merged))) = heap.pop() {
            // Valid only if `a` and `b` are still adjacent live parts holding that pair.
            if next[a] != b || token[a] == u32::MAX || token[b] == u32::MAX {
                continue;
            }
            if self.merges.get(&(token[a], token[b])).is_none_or(|&(_, m)| m != merged) {
                continue;
            }
            token[a] = merged;
            token[b] = u32::MAX;
            next[a] = next[b];
            if next[a] < n {
                prev[next[a]] = a;
            }
            if let Some(p) = prev.get(a).copied().filter(|&p| p < n) {
                if let Some((rank, m)) = pair(&token, p, a) {
                    heap.push(Reverse((rank, p, a, m)));
                }
            }
            if next[a] < n {
                if let Some((rank, m)) = pair(&token, a, next[a]) {
                    heap.push(Reverse((rank, a, next[a], m)));
                }
            }
        }
        token.retain(|&t| t != u32::MAX);
        token
    }

    fn count_with(&self, cache: &mut PieceCache, piece: &[u8]) -> usize {
        if piece.len() <= SHORT {
            let key = pack(piece);
            if let Some(&n) = cache.short.get(&key) {
                return n as usize;
            }
            let n = self.merge(piece).len();
            if cache.short.len() >= CACHE_ENTRIES {
                cache.short.clear();
            }
            cache.short.insert(key, n as u32);
            return n;
        }
        // Longer pieces are merged every time (rare, and their merge dominates the lookup).
        if piece.len() > long_pieces::MAX_LEN {
            return self.merge(piece).len();
        }
        if let Some(n) = cache.long.get(piece) {
            return n;
        }
        let n = self.merge(piece).len();
        cache.long.insert(piece, n, LONG_ENTRIES);
        n
    }

    fn with_cache<R>(&self, f: impl FnOnce(&mut PieceCache) -> R) -> R {
        PIECES.with(|c| {
            let mut cache = c.borrow_mut();
            if cache.owner != self.id {
                *cache = PieceCache { owner: self.id, ..Default::default() };
            }
            f(&mut cache)
        })
    }

    pub fn count(&self, text: &str) -> usize {
        self.with_cache(|cache| {
            let mut n = 0;
            self.for_each_piece(text, |p| n += self.count_with(cache, p.as_bytes()));
            n
        })
    }

    pub fn count_piece(&self, piece: &str) -> usize {
        self.with_cache(|cache| self.count_with(cache, piece.as_bytes()))
    }

    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.for_each_piece(text, |p| out.extend(self.merge(p.as_bytes())));
        out
    }
}

/// `\p{N}{1,3}`, isolated: runs of numbers in threes, and the stretches between them.
fn numbers<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let classes = super::classes::Classes::get();
    let is_number = |c: char| classes.of(c as u32) & super::classes::NUMBER != 0;
    split_runs(text, is_number, 3, &mut f);
}

/// `[一-龥぀-ゟ゠-ヿ]+`, isolated: runs of common CJK ideographs and kana, and the rest.
fn cjk<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    if text.is_ascii() {
        return f(text);
    }
    let is_cjk = |c: char| matches!(c, '\u{4E00}'..='\u{9FA5}' | '\u{3040}'..='\u{309F}' | '\u{30A0}'..='\u{30FF}');
    split_runs(text, is_cjk, usize::MAX, &mut f);
}

/// `text` cut into runs of scalars satisfying `inside` (at most `most` scalars each) and
/// the stretches between them.
fn split_runs<'t>(text: &'t str, inside: impl Fn(char) -> bool, most: usize, f: &mut impl FnMut(&'t str)) {
    let mut start = 0;
    let mut run = 0; // scalars in the current run
    let mut in_run = false;
    for (i, c) in text.char_indices() {
        let here = inside(c);
        if here != in_run || (here && run == most) {
            if i > start {
                f(&text[start..i]);
            }
            start = i;
            run = 0;
        }
        in_run = here;
        run += usize::from(here);
    }
    if start < text.len() {
        f(&text[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        numbers(text, |p| cjk(p, |p| Splitter::new(p, Pattern::DeepSeek).for_each(|x| out.push(x))));
        out
    }

    /// The same three splits by the regex engine, each on the pieces of the one before.
    fn by_regex(text: &str) -> Vec<String> {
        let steps = [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", super::super::split::DEEPSEEK_WORDS]
            .map(|p| fancy_regex::Regex::new(p).unwrap());
        let mut pieces = vec![text.to_string()];
        for re in &steps {
            let mut out = Vec::new();
            for p in &pieces {
                let mut last = 0;
                for m in re.find_iter(p) {
                    let m = m.unwrap();
                    if m.start() > last {
                        out.push(p[last..m.start()].to_string());
                    }
                    out.push(m.as_str().to_string());
                    last = m.end();
                }
                if last < p.len() {
                    out.push(p[last..].to_string());
                }
            }
            pieces = out;
        }
        pieces
    }

    #[test]
    fn split_equals_the_three_regexes() {
        for text in [
            "Hello, World! It's 2024; we've 12345 items.\n\n  Next   line\t\r\n",
            "fn main() {\n    println!(\"hi   there\");\n}\n\n  ",
            "上下文窗口 fits 128K tokens 🙂\n\tdone ひらがなカタカナ゠・",
            "e\u{301}\u{301}x \u{301}ab \u{301}\u{301} .café ,x1 \u{200d}a \u{200d} ²³⁴⁵ Ⅻ",
            "a  b\n \n x\u{3000}y \u{a0}z",
        ] {
            assert_eq!(pieces(text), by_regex(text), "{text:?}");
        }
        let alphabet = " \t\n\r\u{3000}\u{a0}aZé'sx0١Ⅻ².,!/-_$中ひ゠ʰ\u{301}\u{200d}🙂、«";
        for text in super::super::split::tests::random_texts(alphabet, 30, 200) {
            assert_eq!(pieces(&text), by_regex(&text), "{text:?}");
        }
    }

    #[test]
    fn merges_by_merge_rank_not_token_rank() {
        // "ab" has the lower token rank, but "b c" is the first merge; and "abc", although a
        // token, is no merge's result, so it never comes out whole.
        let mut vocab = serde_json::Map::new();
        for (i, c) in byte_chars().iter().enumerate() {
            vocab.insert(c.to_string(), i.into());
        }
        for (t, i) in [("ab", 256), ("bc", 257), ("abc", 258)] {
            vocab.insert(t.into(), i.into());
        }
        let json = serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": serde_json::from_str::<Value>(DEEPSEEK_PRE_TOKENIZER).unwrap(),
            "model": {"type": "BPE", "vocab": vocab, "merges": ["b c", "a b"]},
        });
        let bpe = MergeBpe::from_json(&json).expect("a DeepSeek-shaped tokenizer");
        let (a, x) = (u32::from(b'a'), u32::from(b'x'));
        assert_eq!(bpe.merge(b"abc"), vec![a, 257]);
        assert_eq!(bpe.merge(b"abab"), vec![256, 256]);
        assert_eq!(bpe.merge(b"xbcab"), vec![x, 257, 256]);
        // Pieces "abc" and " abc"; the space byte has no merge.
        assert_eq!(bpe.count("abc abc"), 5);
        assert_eq!(bpe.encode("abc abc"), vec![a, 257, u32::from(b' '), a, 257]);
    }
}
