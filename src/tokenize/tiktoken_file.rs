//! Any `.tiktoken` vocabulary (base64 token, rank per line) with its pre-tokenizer pattern:
//! Qwen's vocabularies, or an OpenAI file kept locally. Exact to tiktoken's algorithm:
//! the pattern splits the text into pieces and each piece is merged by rank.

use std::path::Path;

use base64::Engine;
use fancy_regex::Regex;
use rustc_hash::FxHashMap;

use super::engine::{Pattern, Splitter};
use super::Backend;
use crate::error::{Error, Result};

pub struct TiktokenFile {
    name: String,
    encoder: FxHashMap<Vec<u8>, u32>,
    decoder: FxHashMap<u32, Vec<u8>>,
    regex: Regex,
    /// The hand-written splitter, when `regex` is a pattern it reproduces.
    fast: Option<Pattern>,
    nfc: bool,
}

impl TiktokenFile {
    /// Load `path` with the pre-tokenizer `pattern` (fancy-regex syntax, as tiktoken uses),
    /// `special_tokens` (text, id) for decoding, and NFC normalization of input when `nfc`
    /// (Qwen's tokenizer normalizes before encoding).
    pub fn load(path: &Path, pattern: &str, special_tokens: &[(String, u32)], nfc: bool) -> Result<Self> {
        let data =
            std::fs::read(path).map_err(|e| Error::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        Self::from_bytes(&name, &data, pattern, special_tokens, nfc).map_err(|e| match e {
            Error::Value(reason) => Error::Vocabulary { path: path.to_path_buf(), reason },
            other => other,
        })
    }

    /// Parse vocabulary `data` already in memory. Errors are `Error::Value` with the line.
    pub fn from_bytes(
        name: &str,
        data: &[u8],
        pattern: &str,
        special_tokens: &[(String, u32)],
        nfc: bool,
    ) -> Result<Self> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut encoder = FxHashMap::default();
        for (lineno, line) in data.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| Error::Value(format!("line {}: {what}", lineno + 1));
            let mut fields = line.split(|&b| b == b' ');
            let (Some(token), Some(rank), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(bad("expected '<base64 token> <rank>'"));
            };
            let token = b64.decode(token).map_err(|_| bad("token is not valid base64"))?;
            let rank: u32 = std::str::from_utf8(rank)
                .ok()
                .and_then(|r| r.parse().ok())
                .ok_or_else(|| bad("rank is not a non-negative integer"))?;
            if encoder.insert(token, rank).is_some() {
                return Err(bad("duplicate token"));
            }
        }
        if encoder.is_empty() {
            return Err(Error::Value("the vocabulary is empty".into()));
        }
        // Byte-level BPE needs every single byte as a token, or merging would index a missing key.
        if let Some(b) = (0..=255u8).find(|b| !encoder.contains_key([*b].as_slice())) {
            return Err(Error::Value(format!(
                "the vocabulary lacks the single byte 0x{b:02x}: not a byte-level BPE vocabulary"
            )));
        }
        let mut decoder: FxHashMap<u32, Vec<u8>> = encoder.iter().map(|(k, v)| (*v, k.clone())).collect();
        if decoder.len() != encoder.len() {
            return Err(Error::Value("two tokens share a rank".into()));
        }
        for (text, id) in special_tokens {
            decoder.insert(*id, text.as_bytes().to_vec());
        }
        let regex = Regex::new(pattern).map_err(|e| Error::Pattern(e.to_string()))?;
        let fast = Pattern::recognize(pattern);
        Ok(Self { name: name.to_string(), encoder, decoder, regex, fast, nfc })
    }

    fn normalized<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.nfc {
            super::nfc::nfc(text)
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }

    /// Visit each piece of `text`'s split. A regex failure (fancy-regex's backtrack limit on
    /// pathological input) falls back to treating the rest as one piece rather than panicking.
    fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
        if let Some(pattern) = self.fast {
            Splitter::new(text, pattern).for_each(f);
            return;
        }
        let mut last = 0;
        for m in self.regex.find_iter(text) {
            match m {
                Ok(m) => {
                    if m.start() > last {
                        f(&text[last..m.start()]);
                    }
                    if !m.as_str().is_empty() {
                        f(m.as_str());
                    }
                    last = m.end();
                }
                Err(_) => break,
            }
        }
        if last < text.len() {
            f(&text[last..]);
        }
    }

    // Pieces are never empty here (zero-width matches are skipped), and single bytes are
    // always in the vocabulary (checked at load), so every part has a rank.
    fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        match self.encoder.get(piece) {
            Some(&id) => out.push(id),
            None if piece.is_empty() => {}
            None => out.extend(self.split(piece).into_iter().filter_map(|part| self.encoder.get(part).copied())),
        }
    }

    fn count_bytes_piece(&self, piece: &[u8]) -> usize {
        if piece.is_empty() {
            0
        } else if self.encoder.contains_key(piece) {
            1
        } else {
            self.split(piece).len()
        }
    }

    /// The BPE parts of a piece of 2+ bytes.
    fn split<'p>(&self, piece: &'p [u8]) -> Vec<&'p [u8]> {
        super::engine::bpe::split(piece, |b| self.encoder.get(b).copied())
    }
}

impl Backend for TiktokenFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_exact(&self) -> bool {
        true
    }

    fn count(&self, text: &str) -> usize {
        let text = self.normalized(text);
        let mut n = 0;
        self.for_each_piece(&text, |p| n += self.count_bytes_piece(p.as_bytes()));
        n
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let text = self.normalized(text);
        let mut out = Vec::with_capacity(text.len() / 3);
        self.for_each_piece(&text, |p| self.encode_piece(p.as_bytes(), &mut out));
        Ok(out)
    }

    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for id in ids {
            out.extend_from_slice(self.decoder.get(id).ok_or(Error::UnknownToken(*id))?);
        }
        Ok(out)
    }

    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        // Pieces must be slices of the caller's text; normalization would change it.
        if self.nfc && super::nfc::needs_normalizing(text) {
            return None;
        }
        let mut pieces = Vec::new();
        self.for_each_piece(text, |p| pieces.push(p));
        Some(Box::new(pieces.into_iter()))
    }

    fn count_piece(&self, piece: &str) -> usize {
        self.count_bytes_piece(piece.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

    fn tiny_vocab(extra: &[&[u8]]) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut out = Vec::new();
        let mut rank = 0;
        for b in 0..=255u8 {
            out.extend(format!("{} {rank}\n", b64.encode([b])).bytes());
            rank += 1;
        }
        for tok in extra {
            out.extend(format!("{} {rank}\n", b64.encode(tok)).bytes());
            rank += 1;
        }
        out
    }

    #[test]
    fn merges_by_rank_and_round_trips() {
        let vocab = tiny_vocab(&[b"he", b"ll", b"hell", b"hello"]);
        let t = TiktokenFile::from_bytes("tiny", &vocab, PAT, &[("<|end|>".into(), 9999)], false).unwrap();
        assert_eq!(t.encode("hello").unwrap(), vec![259]);
        // " hello" is one piece: ' ' stays alone, the rest merges up to "hello".
        assert_eq!(t.encode("hello hello").unwrap(), vec![259, 32, 259]);
        let ids = t.encode("héllo wörld\n\n").unwrap();
        assert_eq!(t.decode_bytes(&ids).unwrap(), "héllo wörld\n\n".as_bytes());
        assert_eq!(t.decode_bytes(&[9999]).unwrap(), b"<|end|>");
        assert!(matches!(t.decode_bytes(&[123456]), Err(Error::UnknownToken(123456))));
    }

    #[test]
    fn corrupt_vocabularies_are_errors() {
        assert!(TiktokenFile::from_bytes("x", b"", PAT, &[], false).is_err());
        assert!(TiktokenFile::from_bytes("x", b"!!! 0\n", PAT, &[], false).is_err());
        assert!(TiktokenFile::from_bytes("x", b"YQ== zero\n", PAT, &[], false).is_err());
        // a vocabulary without all single bytes
        assert!(TiktokenFile::from_bytes("x", b"YQ== 0\n", PAT, &[], false).is_err());
        let missing = TiktokenFile::load(Path::new("/nonexistent/q.tiktoken"), PAT, &[], false);
        assert!(matches!(missing, Err(Error::Vocabulary { .. })));
        assert!(TiktokenFile::from_bytes("x", &tiny_vocab(&[]), "(", &[], false).is_err());
    }

    #[test]
    fn nfc_normalizes_before_counting() {
        let t = TiktokenFile::from_bytes("tiny", &tiny_vocab(&[]), PAT, &[], true).unwrap();
        // "é" decomposed (e + U+0301) counts as composed "é" (2 bytes -> 2 byte tokens)
        assert_eq!(t.count("e\u{301}"), t.count("\u{e9}"));
        assert!(t.pieces("e\u{301}").is_none());
        assert!(t.pieces("plain").is_some());
    }
}
