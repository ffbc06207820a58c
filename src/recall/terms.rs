//! The text rules of recall: which terms a message or a query is made of.
//!
//! - Latin-script words and numbers, lowercased, with light English stemming (plurals, -ing,
//!   -ed, a final e or y) so "cooked", "cooking" and "cooks" meet "cook";
//! - identifiers and paths (`snake_case`, `CamelCase`, `src/lib.rs`, `3.5`) kept whole *and*
//!   split into their parts, so a question may name the whole or a piece;
//! - CJK (Han, kana, Hangul), which has no spaces: every character and every pair of
//!   neighbouring characters (pairs approximate words, characters catch one-character words).
//!
//! Very common function words are left out; they only add noise to a lexical score.

/// Characters that join the parts of an identifier or path (`a_b`, `a/b`, `a.b`, `a-b`).
fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '/' | '\\' | '.' | '-' | ':' | '#' | '@')
}

/// CJK scripts: Han (with extensions and compatibility forms), kana, Hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // Han extension A
        | 0x4E00..=0x9FFF    // Han
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // Han compatibility
        | 0x20000..=0x2FA1F) // Han extensions B..
}

const STOPWORDS: &[&str] = &[
    "a", "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "just", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so", "some",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "us",
    "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// CJK characters too common to mean anything alone (they still form pairs).
const CJK_STOP: &str = "的了是我你他她它们在有和就不也都这那吗呢吧啊个一上着很没要会说好";

fn is_stopword(w: &str) -> bool {
    STOPWORDS.binary_search(&w).is_ok()
}

/// Light suffix stripping for lowercase ASCII words (not a full stemmer: it only has to make
/// the common inflections of one word meet).
pub fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = word.to_string();
    if w.ends_with("sses") || w.ends_with("ies") {
        w.truncate(w.len() - 2); // "glasses" -> "glass", "cities" -> "citi"
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.pop();
    }
    let mut stripped = false;
    for suffix in ["ing", "ed"] {
        if w.ends_with(suffix) && w.len() - suffix.len() >= 3 {
            w.truncate(w.len() - suffix.len());
            stripped = true;
            break;
        }
    }
    let b = w.as_bytes();
    if stripped && b.len() >= 4 {
        let (x, y) = (b[b.len() - 2], b[b.len() - 1]);
        if x == y && !b"aeioulsz".contains(&y) {
            w.pop(); // "running" -> "runn" -> "run"
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    } else if w.len() > 2 && w.ends_with('y') {
        w.pop();
        w.push('i');
    }
    w
}

/// Calls `emit` with every term of `text`, in order (a term may repeat).
pub fn for_each_term(text: &str, mut emit: impl FnMut(&str)) {
    let mut chars = text.char_indices().peekable();
    let mut prev_cjk: Option<char> = None;
    let mut buf = [0u8; 8];
    while let Some(&(start, c)) = chars.peek() {
        if is_cjk(c) {
            chars.next();
            if !CJK_STOP.contains(c) {
                emit(c.encode_utf8(&mut buf));
            }
            if let Some(p) = prev_cjk {
                let mut pair = String::with_capacity(8);
                pair.push(p);
                pair.push(c);
                emit(&pair);
            }
            prev_cjk = Some(c);
            continue;
        }
        prev_cjk = None;
        if !c.is_alphanumeric() {
            chars.next();
            continue;
        }
        // a run of letters, digits and joiners (stopping at CJK)
        let mut end = start;
        while let Some(&(i, d)) = chars.peek() {
            if is_cjk(d) || !(d.is_alphanumeric() || is_joiner(d)) {
                break;
            }
            end = i + d.len_utf8();
            chars.next();
        }
        latin_run(&text[start..end], &mut emit);
    }
}

/// The terms of one run of letters, digits and joiners.
fn latin_run(run: &str, emit: &mut impl FnMut(&str)) {
    let run = run.trim_end_matches(is_joiner);
    if run.is_empty() {
        return;
    }
    let joined = run.chars().any(|c| matches!(c, '_' | '/' | '\\' | '.'));
    let camel = run.as_bytes().windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    if (joined || camel) && run.chars().count() >= 3 {
        emit(&run.to_lowercase());
    }
    for piece in run.split(is_joiner).filter(|p| !p.is_empty()) {
        for part in camel_parts(piece) {
            word(part, emit);
        }
    }
}

/// `fooBarBaz` -> `foo`, `Bar`, `Baz` (an all-caps or plain word is one part).
fn camel_parts(piece: &str) -> Vec<&str> {
    let b = piece.as_bytes();
    let mut out = Vec::new();
    let mut lo = 0;
    for i in 1..b.len() {
        if b[i - 1].is_ascii_lowercase() && b[i].is_ascii_uppercase() {
            out.push(&piece[lo..i]);
            lo = i;
        }
    }
    out.push(&piece[lo..]);
    out
}

fn word(w: &str, emit: &mut impl FnMut(&str)) {
    let lower = w.to_lowercase();
    if lower.chars().all(|c| c.is_ascii_digit()) {
        emit(&lower);
        return;
    }
    if lower.chars().count() < 2 || is_stopword(&lower) {
        return;
    }
    emit(&stem(&lower));
}

/// The terms of `text`, in order.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn inflections_meet() {
        for group in [
            &["cook", "cooks", "cooked", "cooking"][..],
            &["movie", "movies"],
            &["city", "cities"],
            &["run", "running", "runs"],
            &["recommend", "recommended", "recommends"],
            &["love", "loved", "loving", "loves"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            assert!(stems.iter().all(|s| s == &stems[0]), "{group:?} -> {stems:?}");
        }
        assert_ne!(stem("bus"), stem("bu"));
        assert_eq!(stem("glass"), "glass");
    }

    #[test]
    fn latin_words_numbers_and_stopwords() {
        assert_eq!(terms("What did I cook on April 30?"), ["cook", "april", "30"]);
        assert_eq!(terms("The Kyoto trip, 2023-05-06."), ["kyoto", "trip", "2023", "05", "06"]);
    }

    #[test]
    fn identifiers_and_paths_stay_whole_and_split() {
        let t = terms("see src/recall/mod.rs and parse_args() in MyParser");
        for want in
            ["src/recall/mod.rs", "src", "recall", "mod", "rs", "parse_args", "pars", "arg", "myparser", "parser"]
        {
            assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
        }
        assert!(terms("version 3.5").contains(&"3.5".to_string()));
    }

    #[test]
    fn cjk_characters_and_pairs() {
        let t = terms("我推荐了科幻电影");
        for want in ["推", "荐", "推荐", "科幻", "电影", "影"] {
            assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
        }
        assert!(!t.iter().any(|x| x == "我"), "a stop character alone: {t:?}");
        assert!(t.iter().any(|x| x == "我推"), "pairs keep it: {t:?}");
        // a Latin word beside CJK is its own term, and pairs do not cross it
        assert_eq!(terms("用Python写"), ["用", "python", "写"]);
        assert_eq!(terms("ひらがな"), ["ひ", "ら", "ひら", "が", "らが", "な", "がな"]);
    }

    #[test]
    fn nothing_to_index() {
        assert!(terms("").is_empty());
        assert!(terms("... !!! ??? --- ///").is_empty());
        assert!(terms("a I of the").is_empty());
    }
}
