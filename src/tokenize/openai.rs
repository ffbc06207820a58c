//! OpenAI's cl100k_base and o200k_base, embedded in the binary (no download, ever).
//!
//! bpe-openai carries both vocabularies serialized at build time and pre-tokenizes with a
//! DFA regex that emulates tiktoken's look-ahead, so counts equal tiktoken's
//! `encode_ordinary` while running several times faster.

use std::sync::LazyLock;

use rustc_hash::FxHashSet;

use super::Backend;
use crate::error::{Error, Result};

/// Every token's bytes, per encoding. Most pre-tokenizer pieces (a word with its leading
/// space) are one token: a hash probe answers them without running the BPE encoder.
fn whole_tokens(tokenizer: &'static bpe_openai::Tokenizer) -> FxHashSet<&'static [u8]> {
    let bpe = &tokenizer.bpe;
    (0..bpe.num_tokens() as u32).map(|id| bpe.token_bytes(id)).collect()
}

static CL100K_TOKENS: LazyLock<FxHashSet<&'static [u8]>> = LazyLock::new(|| whole_tokens(bpe_openai::cl100k_base()));
static O200K_TOKENS: LazyLock<FxHashSet<&'static [u8]>> = LazyLock::new(|| whole_tokens(bpe_openai::o200k_base()));

pub struct OpenAiEncoding {
    name: &'static str,
    tokenizer: &'static bpe_openai::Tokenizer,
    specials: &'static [(u32, &'static str)],
    tokens: &'static LazyLock<FxHashSet<&'static [u8]>>,
}

// Special tokens as tiktoken defines them: never produced by ordinary encoding, but ids a
// caller may hold and want decoded.
const CL100K_SPECIALS: [(u32, &str); 5] = [
    (100257, "<|endoftext|>"),
    (100258, "<|fim_prefix|>"),
    (100259, "<|fim_middle|>"),
    (100260, "<|fim_suffix|>"),
    (100276, "<|endofprompt|>"),
];
const O200K_SPECIALS: [(u32, &str); 2] = [(199999, "<|endoftext|>"), (200018, "<|endofprompt|>")];

/// The embedded encodings, by name.
pub const OPENAI_ENCODINGS: [&str; 2] = ["cl100k_base", "o200k_base"];

impl OpenAiEncoding {
    /// The encoding `name`, or `None` if it is not embedded. The vocabulary is
    /// deserialized on first use (a few tens of milliseconds) and shared process-wide.
    pub fn get(name: &str) -> Option<Self> {
        let (name, tokenizer, specials, tokens): (_, _, &'static [(u32, &str)], _) = match name {
            "cl100k_base" => ("cl100k_base", bpe_openai::cl100k_base(), &CL100K_SPECIALS, &CL100K_TOKENS),
            "o200k_base" => ("o200k_base", bpe_openai::o200k_base(), &O200K_SPECIALS, &O200K_TOKENS),
            _ => return None,
        };
        Some(Self { name, tokenizer, specials, tokens })
    }

    fn vocab_size(&self) -> usize {
        self.tokenizer.bpe.num_tokens()
    }
}

impl Backend for OpenAiEncoding {
    fn name(&self) -> &str {
        self.name
    }

    fn is_exact(&self) -> bool {
        true
    }

    fn count(&self, text: &str) -> usize {
        self.tokenizer.split(text).map(|piece| self.count_piece(piece)).sum()
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.tokenizer.encode(text))
    }

    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let n = self.vocab_size();
        let special = |id: u32| self.specials.iter().find(|(s, _)| *s == id).map(|(_, t)| *t);
        if !ids.iter().any(|&id| id as usize >= n) {
            return Ok(self.tokenizer.bpe.decode_tokens(ids));
        }
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if (id as usize) < n {
                out.extend_from_slice(self.tokenizer.bpe.token_bytes(id));
            } else {
                out.extend_from_slice(special(id).ok_or(Error::UnknownToken(id))?.as_bytes());
            }
        }
        Ok(out)
    }

    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        Some(Box::new(self.tokenizer.split(text)))
    }

    fn count_piece(&self, piece: &str) -> usize {
        let bytes = piece.as_bytes();
        // No token is longer than 128 bytes; longer pieces skip the probe.
        if bytes.len() <= 128 && self.tokens.contains(bytes) {
            1
        } else {
            self.tokenizer.bpe.count(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_counts() {
        let enc = OpenAiEncoding::get("cl100k_base").unwrap();
        // Values from tiktoken's cl100k_base.
        assert_eq!(enc.encode("hello world").unwrap(), vec![15339, 1917]);
        assert_eq!(enc.count("hello world"), 2);
        assert_eq!(enc.count(""), 0);
        // Special-token text is plain text for encode_ordinary.
        assert!(enc.count("<|endoftext|>") > 1);
        let o = OpenAiEncoding::get("o200k_base").unwrap();
        assert_eq!(o.encode("hello world").unwrap(), vec![24912, 2375]);
    }

    #[test]
    fn decode_round_trip_and_unknown_id() {
        let enc = OpenAiEncoding::get("o200k_base").unwrap();
        let text = "上下文窗口 fits 128K tokens 🙂\n\tdone";
        let ids = enc.encode(text).unwrap();
        assert_eq!(enc.decode_bytes(&ids).unwrap(), text.as_bytes());
        assert!(matches!(enc.decode_bytes(&[u32::MAX]), Err(Error::UnknownToken(_))));
        assert_eq!(enc.decode_bytes(&[24912, 199999]).unwrap(), b"hello<|endoftext|>");
    }

    #[test]
    fn pieces_cover_the_text() {
        let enc = OpenAiEncoding::get("cl100k_base").unwrap();
        let text = "fn main() {\n    println!(\"hi   there\");\n}\n\n  ";
        let joined: String = enc.pieces(text).unwrap().collect();
        assert_eq!(joined, text);
        let sum: usize = enc.pieces(text).unwrap().map(|p| enc.count_piece(p)).sum();
        assert_eq!(sum, enc.count(text));
    }
}
