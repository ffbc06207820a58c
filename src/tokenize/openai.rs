//! OpenAI's cl100k_base and o200k_base, embedded in the binary (no download, ever).
//!
//! The vocabularies ship deflated (about 1.5 MB for both) and are expanded on first use;
//! pieces come from the engine's hand-written splitter and merge as tiktoken merges them,
//! so counts and ids equal tiktoken's `encode_ordinary`.

use std::sync::LazyLock;

use super::engine::{Engine, Pattern, Vocab};
use super::Backend;
use crate::error::{Error, Result};

static CL100K: LazyLock<Vocab> = LazyLock::new(|| Vocab::unpack(include_bytes!("data/cl100k_base.bin.z")));
static O200K: LazyLock<Vocab> = LazyLock::new(|| Vocab::unpack(include_bytes!("data/o200k_base.bin.z")));

pub struct OpenAiEncoding {
    name: &'static str,
    engine: Engine,
    specials: &'static [(u32, &'static str)],
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
    /// The encoding `name`, or `None` if it is not embedded. The vocabulary is expanded on
    /// first use (tens of milliseconds, see benches/RESULTS.md) and shared process-wide.
    pub fn get(name: &str) -> Option<Self> {
        let (name, pattern, vocab, slot, specials): (_, _, &'static LazyLock<Vocab>, _, &'static [(u32, &str)]) =
            match name {
                "cl100k_base" => ("cl100k_base", Pattern::Cl100k, &CL100K, 0, &CL100K_SPECIALS),
                "o200k_base" => ("o200k_base", Pattern::O200k, &O200K, 1, &O200K_SPECIALS),
                _ => return None,
            };
        let vocab: &'static Vocab = vocab;
        Some(Self { name, engine: Engine { pattern, vocab, slot }, specials })
    }

    /// The engine behind the encoding, for the engine's own tests.
    #[cfg(test)]
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
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
        self.engine.count(text)
    }

    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        self.engine.count_until(text, limit)
    }

    fn counts_in_parallel(&self) -> bool {
        true
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.engine.encode(text))
    }

    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match self.engine.vocab.bytes(id) {
                Some(b) => out.extend_from_slice(b),
                None => {
                    let special = self.specials.iter().find(|(s, _)| *s == id).ok_or(Error::UnknownToken(id))?;
                    out.extend_from_slice(special.1.as_bytes());
                }
            }
        }
        Ok(out)
    }

    fn special_tokens(&self) -> Vec<(String, u32)> {
        self.specials.iter().map(|(id, s)| (s.to_string(), *id)).collect()
    }

    fn max_token_value(&self) -> Option<u32> {
        let ordinary = self.engine.vocab.len().checked_sub(1).map(|r| r as u32);
        self.specials.iter().map(|(id, _)| *id).chain(ordinary).max()
    }

    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        Some(Box::new(self.engine.pieces(text)))
    }

    fn count_piece(&self, piece: &str) -> usize {
        self.engine.count_piece(piece)
    }

    fn longest_token(&self) -> Option<usize> {
        Some(self.engine.vocab.longest())
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
    fn vocabulary_sizes_match_tiktoken() {
        // tiktoken: max_token_value 100276 / 200018 (n_vocab one more)
        assert_eq!(OpenAiEncoding::get("cl100k_base").unwrap().max_token_value(), Some(100276));
        assert_eq!(OpenAiEncoding::get("o200k_base").unwrap().max_token_value(), Some(200018));
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
