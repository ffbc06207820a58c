//! Encoding with special tokens, as tiktoken's `Encoding.encode` does it.
//!
//! Text that spells a special token (`<|endoftext|>`) is either that one token (when the
//! caller allows it), plain text, or an error: by default every special token is disallowed,
//! so text from users cannot smuggle control tokens into a prompt unnoticed.

use aho_corasick::{AhoCorasick, MatchKind};

use super::Backend;
use crate::error::{Error, Result};

/// A choice of special tokens: all of the encoding's, or the texts named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Specials {
    All,
    These(Vec<String>),
}

/// Token ids of `text` with the special tokens in `allowed` encoded as themselves and the
/// rest as plain text; `Error::DisallowedSpecial` when `text` contains a text in `disallowed`
/// (`All` there means every special token not allowed). Texts in `allowed` that are not
/// special tokens of the encoding are ignored; those in `disallowed` are searched as given.
pub fn encode_with_specials(
    backend: &dyn Backend,
    text: &str,
    allowed: &Specials,
    disallowed: &Specials,
) -> Result<Vec<u32>> {
    let specials = backend.special_tokens();
    let allowed: Vec<(String, u32)> = match allowed {
        Specials::All => specials.clone(),
        Specials::These(names) => specials.iter().filter(|(s, _)| names.contains(s)).cloned().collect(),
    };
    let disallowed: Vec<&str> = match disallowed {
        Specials::All => {
            specials.iter().map(|(s, _)| s.as_str()).filter(|s| !allowed.iter().any(|(a, _)| a == s)).collect()
        }
        Specials::These(names) => names.iter().map(String::as_str).collect(),
    };
    if let Some(token) = first_of(text, &disallowed) {
        return Err(Error::DisallowedSpecial(token.to_string()));
    }
    if allowed.is_empty() {
        return backend.encode(text);
    }
    let finder = searcher(allowed.iter().map(|(s, _)| s.as_str()))?;
    let mut ids = Vec::new();
    let mut start = 0;
    for m in finder.find_iter(text) {
        ids.extend(backend.encode(&text[start..m.start()])?);
        ids.push(allowed[m.pattern().as_usize()].1);
        start = m.end();
    }
    ids.extend(backend.encode(&text[start..])?);
    Ok(ids)
}

/// Token ids of each text, in the texts' order: [`encode_with_specials`] with `specials`
/// (allowed, disallowed), or the backend's ordinary `encode` where `specials` is `None`. A
/// large batch is spread over the cores as `count_many`'s is ([`crate::parallel::map_batch`]);
/// the error returned is the first in the texts' order.
pub fn encode_many<S: AsRef<str> + Sync>(
    backend: &dyn Backend,
    texts: &[S],
    specials: Option<(&Specials, &Specials)>,
) -> Result<Vec<Vec<u32>>> {
    let one = |t: &S| match specials {
        Some((allowed, disallowed)) => encode_with_specials(backend, t.as_ref(), allowed, disallowed),
        None => backend.encode(t.as_ref()),
    };
    crate::parallel::map_batch(texts, |t| t.as_ref().len(), one).into_iter().collect()
}

/// The first of `tokens` found in `text` (leftmost; the longest where several start there).
fn first_of<'t>(text: &str, tokens: &[&'t str]) -> Option<&'t str> {
    if tokens.is_empty() {
        return None;
    }
    let finder = searcher(tokens.iter().copied()).ok()?;
    finder.find(text).map(|m| tokens[m.pattern().as_usize()])
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

    #[test]
    fn disallowed_by_default() {
        let enc = OpenAiEncoding::get("cl100k_base").unwrap();
        let err = encode_with_specials(&enc, "a <|endoftext|> b", &these(&[]), &Specials::All).unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|endoftext|>"));
        // text without special tokens encodes as encode_ordinary does
        assert_eq!(encode_with_specials(&enc, "hello world", &these(&[]), &Specials::All).unwrap(), vec![15339, 1917]);
    }

    #[test]
    fn allowed_tokens_become_their_ids() {
        let enc = OpenAiEncoding::get("cl100k_base").unwrap();
        let ids = encode_with_specials(&enc, "hello<|endoftext|>world<|fim_prefix|>", &Specials::All, &Specials::All)
            .unwrap();
        let mut want = enc.encode("hello").unwrap();
        want.push(100257);
        want.extend(enc.encode("world").unwrap());
        want.push(100258);
        assert_eq!(ids, want);
        // one allowed, another disallowed by default
        let err = encode_with_specials(&enc, "<|endoftext|><|fim_prefix|>", &these(&["<|endoftext|>"]), &Specials::All)
            .unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|fim_prefix|>"));
    }

    #[test]
    fn batches_encode_as_single_texts_in_order() {
        let enc = OpenAiEncoding::get("cl100k_base").unwrap();
        // Enough text to be spread over the pool, one large text among short ones.
        let mut texts: Vec<String> = (0..2000).map(|i| format!("turn {i}: {}", "fn x() {}\n".repeat(i % 30))).collect();
        texts[1234] = "a large text ".repeat(20_000);
        assert!(texts.iter().map(String::len).sum::<usize>() >= crate::parallel::PARALLEL_MIN_BYTES);
        let single: Vec<Vec<u32>> = texts.iter().map(|t| enc.encode(t).unwrap()).collect();
        assert_eq!(encode_many(&enc, &texts, None).unwrap(), single);
        assert_eq!(encode_many(&enc, &texts, Some((&Specials::All, &Specials::All))).unwrap(), single);
        // Special-token text: an error for the first text that has one, in the texts' order.
        texts[1500] = "x <|fim_prefix|> y".into();
        texts[1700] = "x <|endoftext|> y".into();
        let err = encode_many(&enc, &texts, Some((&these(&[]), &Specials::All))).unwrap_err();
        assert!(matches!(err, Error::DisallowedSpecial(ref t) if t == "<|fim_prefix|>"), "{err:?}");
        // Ordinary: plain text.
        assert_eq!(encode_many(&enc, &texts[1500..1501], None).unwrap()[0], enc.encode("x <|fim_prefix|> y").unwrap());
    }

    #[test]
    fn check_off_encodes_plain_text() {
        let enc = OpenAiEncoding::get("o200k_base").unwrap();
        let text = "x <|endoftext|> y";
        assert_eq!(encode_with_specials(&enc, text, &these(&[]), &these(&[])).unwrap(), enc.encode(text).unwrap());
        // a name that is not a special token is not made one
        assert_eq!(
            encode_with_specials(&enc, "<|nope|>", &these(&["<|nope|>"]), &these(&[])).unwrap(),
            enc.encode("<|nope|>").unwrap()
        );
    }
}
