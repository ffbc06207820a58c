//! Tokenizer backends. Each turns text into token ids (or just a count) exactly as the
//! reference implementation does; the heuristic backend only estimates.

pub mod engine;
mod heuristic;
mod hf;
pub mod nfc;
mod openai;
pub mod special;
mod tiktoken_file;

pub use heuristic::Heuristic;
pub use hf::HfTokenizer;
pub use openai::{OpenAiEncoding, OPENAI_ENCODINGS};
pub use tiktoken_file::TiktokenFile;

use crate::error::Result;

/// What every backend offers. `count` must equal `encode(text).len()` for exact backends.
pub trait Backend: Send + Sync {
    /// A stable name: the encoding name or the file it was loaded from.
    fn name(&self) -> &str;
    /// False for estimates (no vocabulary): counts are approximate and `encode` is unsupported.
    fn is_exact(&self) -> bool;
    /// Number of tokens of `text`.
    fn count(&self, text: &str) -> usize;
    /// Token ids of `text`, ordinary (special-token text is plain text).
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// The bytes the ids stand for (may be invalid UTF-8 when a character is split).
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>>;
    /// The pre-tokenizer's pieces of `text`, in order, covering it exactly; tokens never
    /// cross a piece boundary, so a piece can be encoded alone. `None` when the backend has
    /// no usable pre-tokenizer (truncation then encodes the whole text).
    fn pieces<'a>(&'a self, _text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        None
    }
    /// `count(text)` if it is at most `limit`, else `None`. Backends that count piece by
    /// piece stop reading once the limit is passed, so the cost follows `limit`, not `text`.
    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        let n = self.count(text);
        (n <= limit).then_some(n)
    }
    /// Whether `count` already spreads a long text over all cores (so a caller should not
    /// split it again through `pieces`).
    fn counts_in_parallel(&self) -> bool {
        false
    }
    /// The special tokens (text, id) of the vocabulary: ordinary encoding never yields them.
    fn special_tokens(&self) -> Vec<(String, u32)> {
        Vec::new()
    }
    /// The highest token id, special tokens included; `None` when the backend has no ids.
    fn max_token_value(&self) -> Option<u32> {
        None
    }
    /// Tokens of one pre-tokenizer piece (no further splitting). Defaults to `count`.
    fn count_piece(&self, piece: &str) -> usize {
        self.count(piece)
    }
    /// Bytes of the longest token, when known: a piece of `n` bytes is then at least
    /// `n / longest` tokens, a bound that spares encoding a huge piece a cut only enters.
    fn longest_token(&self) -> Option<usize> {
        None
    }
}
