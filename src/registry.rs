//! The process-wide tokenizer registry: each tokenizer source is loaded once, and every
//! counter over it shares one backend and one count cache (so many counters for one model
//! cost one vocabulary in memory and see each other's warm counts).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use crate::cache::{CountCache, DEFAULT_ENTRIES};
use crate::error::{Error, Result};
use crate::tokenize::{Backend, Heuristic, HfTokenizer, OpenAiEncoding, TiktokenFile};

/// Where a tokenizer comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An embedded OpenAI encoding, by name (`cl100k_base`, `o200k_base`).
    OpenAi(String),
    /// A `.tiktoken` vocabulary with its pre-tokenizer pattern and special tokens.
    Tiktoken { path: PathBuf, pattern: String, special_tokens: Vec<(String, u32)>, nfc: bool },
    /// A Hugging Face `tokenizer.json`.
    TokenizerJson(PathBuf),
    /// The calibrated estimate for models without a public tokenizer.
    Heuristic,
}

impl Source {
    /// The registry key: two sources with the same key load the same tokenizer.
    fn key(&self) -> String {
        match self {
            Source::OpenAi(name) => format!("openai:{name}"),
            Source::Tiktoken { path, pattern, special_tokens, nfc } => {
                let mut special = special_tokens.clone();
                special.sort();
                format!("tiktoken:{}:{pattern}:{nfc}:{special:?}", path.display())
            }
            Source::TokenizerJson(path) => format!("hf:{}", path.display()),
            Source::Heuristic => "heuristic".into(),
        }
    }

    fn load(&self) -> Result<Arc<dyn Backend>> {
        Ok(match self {
            Source::OpenAi(name) => {
                Arc::new(OpenAiEncoding::get(name).ok_or_else(|| Error::UnknownEncoding(name.clone()))?)
            }
            Source::Tiktoken { path, pattern, special_tokens, nfc } => {
                let mut special = special_tokens.clone();
                special.sort();
                Arc::new(TiktokenFile::load(path, pattern, &special, *nfc)?)
            }
            Source::TokenizerJson(path) => Arc::new(HfTokenizer::load(path)?),
            Source::Heuristic => Arc::new(Heuristic),
        })
    }
}

/// A loaded tokenizer and the count cache every counter over it shares.
pub type Shared = (Arc<dyn Backend>, Arc<CountCache>);

static BACKENDS: LazyLock<Mutex<HashMap<String, Shared>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The shared backend and cache of `source`, loading it on first use. Loading happens
/// outside the lock (a vocabulary takes a while); if two threads race, the first stored wins.
pub fn shared(source: &Source) -> Result<Shared> {
    let key = source.key();
    if let Some(found) = BACKENDS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    crate::parallel::start_pool(); // while the vocabulary loads
    let entry = (source.load()?, Arc::new(CountCache::new(DEFAULT_ENTRIES)));
    let mut map = BACKENDS.lock().unwrap_or_else(|p| p.into_inner());
    Ok(map.entry(key).or_insert(entry).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_source_loads_once_and_shares_its_cache() {
        let (b1, c1) = shared(&Source::OpenAi("cl100k_base".into())).unwrap();
        let (b2, c2) = shared(&Source::OpenAi("cl100k_base".into())).unwrap();
        assert!(Arc::ptr_eq(&b1, &b2) && Arc::ptr_eq(&c1, &c2));
        let (b3, c3) = shared(&Source::OpenAi("o200k_base".into())).unwrap();
        assert!(!Arc::ptr_eq(&b1, &b3) && !Arc::ptr_eq(&c1, &c3));
        assert_eq!(b1.name(), "cl100k_base");
        assert_eq!(b3.name(), "o200k_base");
    }

    #[test]
    fn unknown_encoding_is_its_own_error_kind() {
        let err = shared(&Source::OpenAi("p50k_base".into())).err().unwrap();
        assert!(matches!(err, Error::UnknownEncoding(ref n) if n == "p50k_base"), "{err}");
    }

    #[test]
    fn special_token_order_does_not_change_the_key() {
        let a = Source::Tiktoken {
            path: "v.tiktoken".into(),
            pattern: "p".into(),
            special_tokens: vec![("<a>".into(), 1), ("<b>".into(), 2)],
            nfc: false,
        };
        let b = Source::Tiktoken {
            path: "v.tiktoken".into(),
            pattern: "p".into(),
            special_tokens: vec![("<b>".into(), 2), ("<a>".into(), 1)],
            nfc: false,
        };
        assert_eq!(a.key(), b.key());
        assert_ne!(a.key(), Source::TokenizerJson("v.tiktoken".into()).key());
    }

    #[test]
    fn a_missing_file_is_a_vocabulary_error_naming_the_path() {
        let err = shared(&Source::TokenizerJson("/nonexistent/tokenizer.json".into())).err().unwrap();
        assert!(matches!(err, Error::Vocabulary { ref path, .. } if !path.exists()), "{err}");
    }
}
