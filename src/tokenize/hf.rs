//! Any Hugging Face `tokenizer.json` (DeepSeek, Llama 3, ...), so counts equal
//! `Tokenizer.encode(text, add_special_tokens=False)`: through the engine's fast path when
//! the file is a byte-level BPE with a pre-tokenizer it knows ([`MergeBpe`]), else (and for
//! texts holding an added token's text) through the `tokenizers` crate itself.

use std::path::Path;

use aho_corasick::AhoCorasick;

use super::engine::merges::MergeBpe;
use super::Backend;
use crate::error::{Error, Result};

pub struct HfTokenizer {
    name: String,
    inner: tokenizers::Tokenizer,
    /// The fast path and a matcher of the added tokens' texts it leaves to `inner`.
    fast: Option<(MergeBpe, AhoCorasick)>,
}

impl HfTokenizer {
    pub fn load(path: &Path) -> Result<Self> {
        let data =
            std::fs::read(path).map_err(|e| Error::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        Self::from_bytes(&path.display().to_string(), &data)
            .map_err(|e| Error::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })
    }

    pub fn from_bytes(name: &str, data: &[u8]) -> Result<Self> {
        let mut inner = tokenizers::Tokenizer::from_bytes(data)
            .map_err(|e| Error::Value(format!("not a valid tokenizer.json: {e}")))?;
        // A counter must see every token: padding and truncation settings saved in the file
        // would change the count, so they are switched off.
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| Error::Value(format!("cannot disable truncation: {e}")))?;
        let fast = serde_json::from_slice(data).ok().and_then(|json| MergeBpe::from_json(&json)).and_then(|bpe| {
            let added: Vec<String> = inner.get_added_tokens_decoder().values().map(|t| t.content.clone()).collect();
            AhoCorasick::new(added.iter().filter(|t| !t.is_empty())).ok().map(|m| (bpe, m))
        });
        Ok(Self { name: name.to_string(), inner, fast })
    }

    /// The fast path, when it applies to `text`.
    fn fast_for(&self, text: &str) -> Option<&MergeBpe> {
        self.fast.as_ref().filter(|(_, added)| !added.is_match(text)).map(|(bpe, _)| bpe)
    }

    /// True when counting goes through the engine's fast path (texts holding an added
    /// token's text aside).
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    fn slow_count(&self, text: &str) -> usize {
        // `encode_fast` skips offset tracking, which counting does not need.
        // Encoding only fails on configuration errors, which `from_bytes` rules out; should it
        // ever fail, one token per byte is an overcount, never an undercount.
        self.inner.encode_fast(text, false).map_or(text.len(), |e| e.len())
    }
}

impl Backend for HfTokenizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_exact(&self) -> bool {
        true
    }

    fn count(&self, text: &str) -> usize {
        match self.fast_for(text) {
            Some(bpe) => bpe.count(text),
            None => self.slow_count(text),
        }
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        if let Some(bpe) = self.fast_for(text) {
            return Ok(bpe.encode(text));
        }
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Value(format!("tokenizer failed: {e}")))
    }

    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let size = self.inner.get_vocab_size(true) as u32;
        if let Some(&bad) = ids.iter().find(|&&id| id >= size && self.inner.id_to_token(id).is_none()) {
            return Err(Error::UnknownToken(bad));
        }
        self.inner
            .decode(ids, false)
            .map(String::into_bytes)
            .map_err(|e| Error::Value(format!("tokenizer failed to decode: {e}")))
    }

    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        let bpe = self.fast_for(text)?;
        let mut pieces = Vec::new();
        bpe.for_each_piece(text, |p| pieces.push(p));
        Some(Box::new(pieces.into_iter()))
    }

    fn count_piece(&self, piece: &str) -> usize {
        match self.fast_for(piece) {
            Some(bpe) => bpe.count_piece(piece),
            None => self.slow_count(piece),
        }
    }
}
