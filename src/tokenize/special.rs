//! Encoding with special tokens, as tiktoken's `Encoding.encode` does it.
//!
//! Text that spells a special token (`<|endoftext|>`) is either that one token (when the
//! caller allows it), plain text, or an error: by default every special token is disallowed,
//! so text from users cannot smuggle control tokens into a prompt unnoticed.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, MatchKind};

use super::Backend;
use crate::error::{Error, Result};
use crate::stored_text::AsUtf8;

/// A choice of special tokens: all of the encoding's, or the texts named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Specials {
    All,
    These(Vec<String>),
}

/// An encoding's `encode` with special tokens. The rules of the two usual choices, tiktoken's
/// default (every special token refused) and "all allowed", are built on first use and kept:
/// building their two searchers took 27 µs, seven times a short turn's whole `encode`
/// (benches/RESULTS.md, 2026-11-27).
pub struct SpecialEncoder {
    backend: Arc<dyn Backend>,
    refuse_all: OnceLock<SpecialRules>,
    allow_all: OnceLock<SpecialRules>,
}

impl SpecialEncoder {
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend, refuse_all: OnceLock::new(), allow_all: OnceLock::new() }
    }

    /// Token ids of `text` with the special tokens in `allowed` encoded as themselves and the
    /// rest as plain text; `Error::DisallowedSpecial` when `text` contains a text in
    /// `disallowed` (`All` there means every special token not allowed). Texts in `allowed`
    /// that are not special tokens of the encoding are ignored; those in `disallowed` are
    /// searched as given.
    pub fn encode(&self, text: &str, allowed: &Specials, disallowed: &Specials) -> Result<Vec<u32>> {
        self.rules(allowed, disallowed)?.encode(self.backend.as_ref(), text)
    }

    /// Token ids of each text, in the texts' order: [`Self::encode`] with `specials`
    /// (allowed, disallowed), or the backend's ordinary `encode` where `specials` is `None`. A
    /// large batch is spread over the cores as `count_many`'s is
    /// ([`crate::parallel::map_batch`]); the error returned is the first in the texts' order.
    pub fn encode_many<S: AsUtf8 + Sync>(
        &self,
        texts: &[S],
        specials: Option<(&Specials, &Specials)>,
    ) -> Result<Vec<Vec<u32>>> {
        let backend = self.backend.as_ref();
        let rules = specials.map(|(allowed, disallowed)| self.rules(allowed, disallowed)).transpose()?;
        let one = |t: &str| match &rules {
            Some(rules) => rules.encode(backend, t),
            None => backend.encode(t),
        };
        crate::parallel::map_batch(texts, S::size_hint, |t| t.with_utf8(one)).into_iter().collect()
    }

    /// The rules of this choice: the kept ones for the two usual choices (built on first
    /// use), new ones for any other.
    fn rules(&self, allowed: &Specials, disallowed: &Specials) -> Result<Cow<'_, SpecialRules>> {
        let kept = match (allowed, disallowed) {
            (Specials::These(names), Specials::All) if names.is_empty() => &self.refuse_all,
            (Specials::All, Specials::All) => &self.allow_all,
            _ => return SpecialRules::new(self.backend.as_ref(), allowed, disallowed).map(Cow::Owned),
        };
        if let Some(rules) = kept.get() {
            return Ok(Cow::Borrowed(rules));
        }
        let rules = SpecialRules::new(self.backend.as_ref(), allowed, disallowed)?;
        Ok(Cow::Borrowed(kept.get_or_init(|| rules)))
    }
}

/// One call's choice of special tokens, resolved against the encoding with its searchers
/// built: once per batch, not once per text (two automata per text were most of a batch's
/// time, benches/RESULTS.md, 2026-11-27).
#[derive(Clone)]
struct SpecialRules {
    allowed: Vec<(String, u32)>,
    allowed_finder: Option<AhoCorasick>,
    disallowed: Vec<String>,
    disallowed_finder: Option<AhoCorasick>,
}

impl SpecialRules {
    fn new(backend: &dyn Backend, allowed: &Specials, disallowed: &Specials) -> Result<Self> {
        let specials = backend.special_tokens();
        let allowed: Vec<(String, u32)> = match allowed {
            Specials::All => specials.clone(),
            Specials::These(names) => specials.iter().filter(|(s, _)| names.contains(s)).cloned().collect(),
        };
        let disallowed: Vec<String> = match disallowed {
            Specials::All => {
                specials.into_iter().map(|(s, _)| s).filter(|s| !allowed.iter().any(|(a, _)| a == s)).collect()
            }
            Specials::These(names) => names.clone(),
        };
        let allowed_finder =
            if allowed.is_empty() { None } else { Some(searcher(allowed.iter().map(|(s, _)| s.as_str()))?) };
        // As before: texts that cannot be searched for are not checked.
        let disallowed_finder =
            if disallowed.is_empty() { None } else { searcher(disallowed.iter().map(String::as_str)).ok() };
        Ok(Self { allowed, allowed_finder, disallowed, disallowed_finder })
    }

    fn encode(&self, backend: &dyn Backend, text: &str) -> Result<Vec<u32>> {
        if let Some(m) = self.disallowed_finder.as_ref().and_then(|f| f.find(text)) {
            return Err(Error::DisallowedSpecial(self.disallowed[m.pattern().as_usize()].clone()));
        }
        let Some(finder) = &self.allowed_finder else {
            return backend.encode(text);
        };
        let mut ids = Vec::new();
        let mut start = 0;
        for m in finder.find_iter(text) {
            ids.extend(backend.encode(&text[start..m.start()])?);
            ids.push(self.allowed[m.pattern().as_usize()].1);
            start = m.end();
        }
        ids.extend(backend.encode(&text[start..])?);
        Ok(ids)
    }
}

fn searcher<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Result<AhoCorasick> {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(tokens)
        .map_err(|e| Error::Value(format!("cannot search for the special tokens: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::OpenAiEncoding;

    fn these(names: &[&str]) -> Specials {
        Specials::These(names.iter().map(|s| s.to_string()).collect())
    }

    fn encoder(name: &str) -> (OpenAiEncoding, SpecialEncoder) {
        let enc = OpenAiEncoding::get(name).unwrap();
        (enc, SpecialEncoder::new(Arc::new(OpenAiEncoding::get(name).unwrap())))
    }

    #[test]
    fn disallowed_by_default() {
        let (_, specials) = encoder("cl100k_base");
        let err = specials.encode("a <|endoftext|> b", &these(&[]), &Specials::All).unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|endoftext|>"));
        // text without special tokens encodes as encode_ordinary does
        assert_eq!(specials.encode("hello world", &these(&[]), &Specials::All).unwrap(), vec![15339, 1917]);
    }

    #[test]
    fn allowed_tokens_become_their_ids() {
        let (enc, specials) = encoder("cl100k_base");
        let ids = specials.encode("hello<|endoftext|>world<|fim_prefix|>", &Specials::All, &Specials::All).unwrap();
        let mut want = enc.encode("hello").unwrap();
        want.push(100257);
        want.extend(enc.encode("world").unwrap());
        want.push(100258);
        assert_eq!(ids, want);
        // one allowed, another disallowed by default
        let err =
            specials.encode("<|endoftext|><|fim_prefix|>", &these(&["<|endoftext|>"]), &Specials::All).unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|fim_prefix|>"));
    }

    #[test]
    fn kept_rules_answer_as_new_ones() {
        let (_, specials) = encoder("o200k_base");
        let text = "a<|endoftext|>b";
        let fresh = |allowed: &Specials, disallowed: &Specials| {
            SpecialRules::new(specials.backend.as_ref(), allowed, disallowed)
                .unwrap()
                .encode(specials.backend.as_ref(), text)
        };
        // The two usual choices are kept after first use, the others are not; each call, kept
        // or not, answers as rules built for it alone, whatever was asked before.
        let choices = [
            (these(&[]), Specials::All),
            (Specials::All, Specials::All),
            (these(&["<|endoftext|>"]), Specials::All),
            (these(&[]), these(&[])),
            (Specials::All, these(&["a"])),
        ];
        for _ in 0..2 {
            for (allowed, disallowed) in &choices {
                let got = specials.encode(text, allowed, disallowed);
                assert_eq!(
                    format!("{got:?}"),
                    format!("{:?}", fresh(allowed, disallowed)),
                    "{allowed:?} {disallowed:?}"
                );
            }
        }
        assert!(specials.refuse_all.get().is_some() && specials.allow_all.get().is_some());
        assert!(specials.encode(text, &these(&[]), &Specials::All).is_err());
        assert_eq!(specials.encode(text, &Specials::All, &Specials::All).unwrap().len(), 3);
    }

    #[test]
    fn batches_encode_as_single_texts_in_order() {
        let (enc, specials) = encoder("cl100k_base");
        // Enough text to be spread over the pool, one large text among short ones.
        let mut texts: Vec<String> = (0..2000).map(|i| format!("turn {i}: {}", "fn x() {}\n".repeat(i % 30))).collect();
        texts[1234] = "a large text ".repeat(20_000);
        assert!(texts.iter().map(String::len).sum::<usize>() >= crate::parallel::PARALLEL_MIN_BYTES);
        let single: Vec<Vec<u32>> = texts.iter().map(|t| enc.encode(t).unwrap()).collect();
        assert_eq!(specials.encode_many(&texts, None).unwrap(), single);
        assert_eq!(specials.encode_many(&texts, Some((&Specials::All, &Specials::All))).unwrap(), single);
        // Special-token text: an error for the first text that has one, in the texts' order.
        texts[1500] = "x <|fim_prefix|> y".into();
        texts[1700] = "x <|endoftext|> y".into();
        let err = specials.encode_many(&texts, Some((&these(&[]), &Specials::All))).unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|fim_prefix|>"), "{err:?}");
        // Ordinary: plain text.
        assert_eq!(
            specials.encode_many(&texts[1500..1501], None).unwrap()[0],
            enc.encode("x <|fim_prefix|> y").unwrap()
        );
    }

    #[test]
    fn check_off_encodes_plain_text() {
        let (enc, specials) = encoder("o200k_base");
        let text = "x <|endoftext|> y";
        assert_eq!(specials.encode(text, &these(&[]), &these(&[])).unwrap(), enc.encode(text).unwrap());
        // a name that is not a special token is not made one
        assert_eq!(
            specials.encode("<|nope|>", &these(&["<|nope|>"]), &these(&[])).unwrap(),
            enc.encode("<|nope|>").unwrap()
        );
    }
}
