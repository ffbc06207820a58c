//! Any Hugging Face `tokenizer.json` (DeepSeek, Llama 3, ...), through the `tokenizers` crate
//! itself, so counts equal `Tokenizer.encode(text, add_special_tokens=False)`.

use std::path::Path;

use super::Backend;
use crate::error::{Error, Result};

pub struct HfTokenizer {
    name: String,
    inner: tokenizers::Tokenizer,
}

impl HfTokenizer {
    pub fn load(path: &Path) -> Result<Self> {
        let data = std::fs::read(path).map_err(|e| Error::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        Self::from_bytes(&path.display().to_string(), &data).map_err(|e| Error::Vocabulary {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    pub fn from_bytes(name: &str, data: &[u8]) -> Result<Self> {
        let mut inner = tokenizers::Tokenizer::from_bytes(data)
            .map_err(|e| Error::Value(format!("not a valid tokenizer.json: {e}")))?;
        // A counter must see every token: padding and truncation settings saved in the file
        // would change the count, so they are switched off.
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| Error::Value(format!("cannot disable truncation: {e}")))?;
        Ok(Self { name: name.to_string(), inner })
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
        // `encode_fast` skips offset tracking, which counting does not need.
        // Encoding only fails on configuration errors, which `from_bytes` rules out; should it
        // ever fail, one token per byte is an overcount, never an undercount.
        self.inner.encode_fast(text, false).map_or(text.len(), |e| e.len())
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
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
}
