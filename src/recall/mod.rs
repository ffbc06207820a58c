//! Recall: an incremental lexical index over a history's messages, to bring back the ones a
//! question is about after they left the prompt window.
//!
//! Each message is a document keyed by its content fingerprint (`Message::key`), so a
//! growing history indexes only its new messages, and the same message seen in two calls (or
//! two conversations) is indexed once. Scoring is Okapi BM25 over the terms of
//! [`terms`](self::terms). The index is bounded: past `max_docs` documents, the ones not seen
//! for the longest are forgotten; a document's text is read up to [`MAX_DOC_BYTES`] and a
//! query's up to [`MAX_QUERY_BYTES`], keeping its [`MAX_QUERY_TERMS`] rarest terms.

pub mod asks;
pub mod dates;
pub mod terms;
pub mod units;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::message::Message;

use rustc_hash::{FxHashMap, FxHashSet};
use xxhash_rust::xxh3::xxh3_64;

/// How much of one message is read: a 10 MB tool output is searched by its head.
pub const MAX_DOC_BYTES: usize = 256 * 1024;
/// How much of a query is read.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// The rarest distinct terms of a query that are scored.
pub const MAX_QUERY_TERMS: usize = 256;

/// A query term held by more than this share of the indexed messages (once there are
/// [`COMMON_MIN_DOCS`]) is a common word of this history ("thanks", "help"): it scores nothing.
pub const COMMON_SHARE: f32 = 0.25;
pub const COMMON_MIN_DOCS: usize = 64;
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// What [`RecallIndex::coverage`] found of a query.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    /// Distinct terms of the query.
    pub terms: usize,
    /// Of those, the ones the documents (or the extra text) hold.
    pub held: usize,
    /// A number of the query that is not held.
    pub number_missing: bool,
}

/// One indexed message.
struct Doc {
    key: u128,
    /// Terms emitted (the BM25 document length).
    len: u32,
    /// Distinct term hashes, for unlinking the postings when the document is forgotten.
    terms: Box<[u64]>,
    /// When a caller last asked for it (the eviction order).
    seen: u64,
}

/// A bounded, incremental BM25 index of messages.
pub struct RecallIndex {
    docs: Vec<Option<Doc>>,
    free: Vec<u32>,
    by_key: FxHashMap<u128, u32>,
    /// term hash -> (slot, term frequency)
    postings: FxHashMap<u64, Vec<(u32, u32)>>,
    total_len: u64,
    live: usize,
    max_docs: usize,
    clock: u64,
}

/// What of a message the index reads: its text parts, and the name and arguments of each
/// tool call it makes.
pub fn doc_texts<S: AsRef<str>>(m: &Message<S>) -> Vec<&str> {
    let mut out: Vec<&str> = m.text_parts().collect();
    for call in &m.tool_calls {
        out.push(call.name.as_ref());
        out.push(call.arguments.as_ref());
    }
    out
}

/// One unit [`RecallIndex::cover`] may choose.
#[derive(Clone, Debug, Default)]
pub struct CoverUnit {
    /// The index slots of its messages.
    pub slots: Vec<u32>,
    /// Its tokens, without a stamp.
    pub tokens: u64,
    /// It follows the unit before it with nothing between them, in the same session: chosen
    /// together, they are one stretch under one stamp.
    pub joins_previous: bool,
}

/// A score that sorts (never NaN: weights and costs are finite and positive).
#[derive(Clone, Copy, Debug)]
struct Ordered(f64);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The longest prefix of `s` within `max` bytes that ends on a character boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl RecallIndex {
    /// An empty index that holds at most `max_docs` messages (at least one).
    pub fn new(max_docs: usize) -> Self {
        RecallIndex {
            docs: Vec::new(),
            free: Vec::new(),
            by_key: FxHashMap::default(),
            postings: FxHashMap::default(),
            total_len: 0,
            live: 0,
            max_docs: max_docs.max(1),
            clock: 0,
        }
    }

    /// Messages indexed now.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Distinct terms indexed now.
    pub fn vocabulary(&self) -> usize {
        self.postings.len()
    }

    /// Starts a new request: documents looked up from now on count as seen at this time.
    pub fn tick(&mut self) {
        self.clock += 1;
    }

    /// The slot of the message with this fingerprint, marking it seen; None if not indexed.
    pub fn lookup(&mut self, key: u128) -> Option<u32> {
        let slot = *self.by_key.get(&key)?;
        if let Some(doc) = self.docs[slot as usize].as_mut() {
            doc.seen = self.clock;
        }
        Some(slot)
    }

    /// Marks the message in `slot` seen, if it is still the one with fingerprint `key` (a
    /// caller that remembers where a message went skips the lookup by fingerprint).
    pub fn touch(&mut self, slot: u32, key: u128) -> bool {
        match self.docs.get_mut(slot as usize) {
            Some(Some(doc)) if doc.key == key => {
                doc.seen = self.clock;
                true
            }
            _ => false,
        }
    }

    /// Index a message given its fingerprint and its texts (content parts, tool calls).
    /// Returns its slot; a message already indexed is only marked seen.
    pub fn insert<'a>(&mut self, key: u128, texts: impl IntoIterator<Item = &'a str>) -> u32 {
        if let Some(slot) = self.lookup(key) {
            return slot;
        }
        if self.live >= self.max_docs {
            self.forget_oldest();
        }
        let mut tf: FxHashMap<u64, u32> = FxHashMap::default();
        let mut len = 0u32;
        let mut budget = MAX_DOC_BYTES;
        for text in texts {
            if budget == 0 {
                break;
            }
            let part = head(text, budget);
            budget -= part.len();
            terms::for_each_term(part, |t| {
                *tf.entry(xxh3_64(t.as_bytes())).or_insert(0) += 1;
                len += 1;
            });
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.docs.push(None);
                (self.docs.len() - 1) as u32
            }
        };
        for (&term, &n) in &tf {
            self.postings.entry(term).or_default().push((slot, n));
        }
        self.docs[slot as usize] = Some(Doc { key, len, terms: tf.keys().copied().collect(), seen: self.clock });
        self.by_key.insert(key, slot);
        self.total_len += len as u64;
        self.live += 1;
        slot
    }

    /// Forget the tenth of the documents seen longest ago (at least one).
    fn forget_oldest(&mut self) {
        let mut order: Vec<(u64, u32)> =
            self.docs.iter().enumerate().filter_map(|(i, d)| d.as_ref().map(|d| (d.seen, i as u32))).collect();
        let n = (self.max_docs / 10).max(1).min(order.len());
        order.select_nth_unstable(n.saturating_sub(1));
        let gone: FxHashSet<u32> = order[..n].iter().map(|&(_, s)| s).collect();
        let mut touched: FxHashSet<u64> = FxHashSet::default();
        for &slot in &gone {
            if let Some(doc) = self.docs[slot as usize].take() {
                self.by_key.remove(&doc.key);
                self.total_len -= doc.len as u64;
                self.live -= 1;
                touched.extend(doc.terms.iter().copied());
                self.free.push(slot);
            }
        }
        for term in touched {
            if let Some(list) = self.postings.get_mut(&term) {
                list.retain(|(s, _)| !gone.contains(s));
                if list.is_empty() {
                    self.postings.remove(&term);
                }
            }
        }
    }

    /// The distinct terms of a query worth scoring: read up to [`MAX_QUERY_BYTES`], and only
    /// the [`MAX_QUERY_TERMS`] rarest of those the index knows.
    fn query_terms(&self, query: &str) -> Vec<(u64, usize)> {
        let mut seen: FxHashSet<u64> = FxHashSet::default();
        let mut out: Vec<(u64, usize)> = Vec::new();
        terms::for_each_term(head(query, MAX_QUERY_BYTES), |t| {
            let h = xxh3_64(t.as_bytes());
            if seen.insert(h) {
                if let Some(list) = self.postings.get(&h) {
                    out.push((h, list.len()));
                }
            }
        });
        if out.len() > MAX_QUERY_TERMS {
            out.sort_by_key(|&(h, df)| (df, h));
            out.truncate(MAX_QUERY_TERMS);
        }
        out
    }

    /// How much of `query` the documents in `slots` and the text `extra` already hold: its
    /// distinct terms (read up to [`MAX_QUERY_BYTES`]), how many of them occur there, and
    /// whether a number among them does not. Postings answer it, so its cost follows the
    /// query's terms, not the size of the documents.
    pub fn coverage(&self, query: &str, slots: &FxHashSet<u32>, extra: &str) -> Coverage {
        let in_extra = Self::term_set(extra);
        let mut seen: FxHashSet<u64> = FxHashSet::default();
        let mut c = Coverage::default();
        terms::for_each_term(head(query, MAX_QUERY_BYTES), |t| {
            let h = xxh3_64(t.as_bytes());
            if !seen.insert(h) {
                return;
            }
            c.terms += 1;
            let held = in_extra.contains(&h)
                || self.postings.get(&h).is_some_and(|list| list.iter().any(|(s, _)| slots.contains(s)));
            if held {
                c.held += 1;
            } else if t.chars().all(char::is_numeric) {
                c.number_missing = true;
            }
        });
        c
    }

    /// The distinct terms of `text` (read up to [`MAX_DOC_BYTES`]), as the index hashes them.
    pub fn term_set(text: &str) -> FxHashSet<u64> {
        let mut out: FxHashSet<u64> = FxHashSet::default();
        terms::for_each_term(head(text, MAX_DOC_BYTES), |t| {
            out.insert(xxh3_64(t.as_bytes()));
        });
        out
    }

    /// The share of the distinct terms of the documents in `slots` that `held` holds (a
    /// summary's [`term_set`](Self::term_set)); None when they have no terms.
    pub fn held_share(&self, slots: &[u32], held: &FxHashSet<u64>) -> Option<f64> {
        let mut own: FxHashSet<u64> = FxHashSet::default();
        for &slot in slots {
            if let Some(Some(doc)) = self.docs.get(slot as usize) {
                own.extend(doc.terms.iter().copied());
            }
        }
        if own.is_empty() {
            return None;
        }
        let n = own.iter().filter(|h| held.contains(h)).count();
        Some(n as f64 / own.len() as f64)
    }

    /// How much a term says, for [`cover`](Self::cover): its inverse document frequency,
    /// none for a word common to this history (as in [`score`](Self::score)).
    fn weight(&self, term: u64) -> f64 {
        self.postings.get(&term).and_then(|list| self.idf(list.len())).map_or(0.0, f64::from)
    }

    /// The inverse document frequency of a term held by `df` documents; None for a word
    /// common to this history (held by more than [`COMMON_SHARE`] of its messages).
    fn idf(&self, df: usize) -> Option<f32> {
        let n = self.live as f32;
        if self.live >= COMMON_MIN_DOCS && df as f32 > COMMON_SHARE * n {
            return None;
        }
        Some((1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln())
    }

    /// The units to bring back when nothing in particular is asked (a recap), within `room`
    /// tokens. Units are in conversation order; each costs its tokens, and `stamp` more
    /// unless a chosen neighbour it joins (see [`CoverUnit::joins_previous`]) already opens a
    /// stamped stretch. The choice is greedy by what a unit adds per token: the weights of
    /// its distinct terms that neither `held` (the prompt's own terms) nor a unit chosen
    /// before holds. What a unit adds only shrinks as units are chosen, and its cost only
    /// shrinks when a neighbour is chosen (it is then scored again), so a unit is rescored
    /// only when it reaches the top. Returns the chosen units' indices, best first.
    pub fn cover(&self, units: &[CoverUnit], held: &FxHashSet<u64>, room: u64, stamp: u64) -> Vec<usize> {
        let n = units.len();
        let terms: Vec<FxHashSet<u64>> = units
            .iter()
            .map(|u| {
                let mut out = FxHashSet::default();
                for &slot in &u.slots {
                    if let Some(Some(doc)) = self.docs.get(slot as usize) {
                        out.extend(doc.terms.iter().copied().filter(|t| !held.contains(t)));
                    }
                }
                out
            })
            .collect();
        let mut weights: FxHashMap<u64, f64> = FxHashMap::default();
        let mut covered: FxHashSet<u64> = FxHashSet::default();
        let mut chosen = vec![false; n];
        let cost = |k: usize, chosen: &[bool]| -> u64 {
            let joined = (units[k].joins_previous && k > 0 && chosen[k - 1])
                || (k + 1 < n && units[k + 1].joins_previous && chosen[k + 1]);
            units[k].tokens + if joined { 0 } else { stamp }
        };
        let mut score = |k: usize, covered: &FxHashSet<u64>, chosen: &[bool]| -> f64 {
            let added: f64 = terms[k]
                .iter()
                .filter(|t| !covered.contains(t))
                .map(|&t| *weights.entry(t).or_insert_with(|| self.weight(t)))
                .sum();
            added / cost(k, chosen).max(1) as f64
        };
        // (what it adds per token when last scored, unit), best on top
        let mut heap: BinaryHeap<(Ordered, Reverse<usize>)> =
            (0..n).map(|k| (Ordered(score(k, &covered, &chosen)), Reverse(k))).collect();
        let mut order = Vec::new();
        let mut left = room;
        while let Some((Ordered(last), Reverse(k))) = heap.pop() {
            if last <= 0.0 {
                break;
            }
            if chosen[k] {
                continue;
            }
            let now = score(k, &covered, &chosen);
            if heap.peek().is_some_and(|(Ordered(next), _)| now < *next) {
                heap.push((Ordered(now), Reverse(k)));
                continue;
            }
            if now <= 0.0 {
                break;
            }
            let c = cost(k, &chosen);
            if c > left {
                continue; // a chosen neighbour may make it cheaper: it is pushed again then
            }
            chosen[k] = true;
            covered.extend(terms[k].iter().copied());
            left -= c;
            order.push(k);
            for j in [k.wrapping_sub(1), k + 1] {
                if j < n && !chosen[j] {
                    heap.push((Ordered(score(j, &covered, &chosen)), Reverse(j)));
                }
            }
        }
        order
    }

    /// BM25 scores of the indexed messages for `query`, by slot (only slots with a score).
    pub fn score(&self, query: &str) -> FxHashMap<u32, f32> {
        let mut out: FxHashMap<u32, f32> = FxHashMap::default();
        if self.live == 0 {
            return out;
        }
        let avg = (self.total_len as f32 / self.live as f32).max(1.0);
        for (term, df) in self.query_terms(query) {
            let Some(idf) = self.idf(df) else { continue };
            for &(slot, tf) in &self.postings[&term] {
                let len = self.docs[slot as usize].as_ref().map_or(avg, |d| d.len as f32);
                let tf = tf as f32;
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
                *out.entry(slot).or_insert(0.0) += s;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[&str]) -> (RecallIndex, Vec<u32>) {
        let mut ix = RecallIndex::new(1000);
        let slots = texts.iter().enumerate().map(|(i, t)| ix.insert(i as u128, [*t])).collect();
        (ix, slots)
    }

    /// BM25 by its textbook formula, computed independently over the same terms.
    fn reference(texts: &[&str], query: &str) -> Vec<f32> {
        let docs: Vec<Vec<String>> = texts.iter().map(|t| terms::terms(t)).collect();
        let n = docs.len() as f32;
        let avg = docs.iter().map(|d| d.len()).sum::<usize>() as f32 / n;
        let mut q = terms::terms(query);
        q.sort();
        q.dedup();
        docs.iter()
            .map(|d| {
                q.iter()
                    .map(|t| {
                        let df = docs.iter().filter(|x| x.contains(t)).count() as f32;
                        let tf = d.iter().filter(|x| *x == t).count() as f32;
                        if df == 0.0 || tf == 0.0 {
                            return 0.0;
                        }
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * d.len() as f32 / avg.max(1.0)))
                    })
                    .sum()
            })
            .collect()
    }

    const TEXTS: [&str; 5] = [
        "We finally adopted a parrot and named him Biscuit.",
        "The weather in Lisbon was lovely, we walked for hours.",
        "I cooked ramen on April 30 for my sister.",
        "Thanks, that sounds great!",
        "我最喜欢的科幻电影是《星际穿越》。",
    ];

    #[test]
    fn touch_marks_only_the_message_still_in_its_slot() {
        let mut ix = RecallIndex::new(2);
        let a = ix.insert(1, ["the Kyoto trip is in May"]);
        let b = ix.insert(2, ["parser drops the last column"]);
        assert!(ix.touch(a, 1) && ix.touch(b, 2));
        assert!(!ix.touch(a, 2), "another message's fingerprint");
        assert!(!ix.touch(99, 1), "no such slot");
        // `b` seen last: a third message forgets `a`, and its slot may hold the newcomer
        ix.tick();
        assert!(ix.touch(b, 2));
        let c = ix.insert(3, ["lunch at noon"]);
        assert!(!ix.touch(a, 1), "forgotten");
        assert!(ix.touch(c, 3) && ix.lookup(1).is_none());
    }

    #[test]
    fn coverage_counts_the_query_terms_the_given_documents_hold() {
        let (ix, slots) = index(&["the Kyoto trip is in May", "parser drops the last column", "lunch at noon"]);
        let only = |k: &[usize]| k.iter().map(|&i| slots[i]).collect::<FxHashSet<u32>>();
        let q = "when is the Kyoto trip, number 2?";
        let all = ix.coverage(q, &only(&[0, 1, 2]), "");
        let none = ix.coverage(q, &only(&[1, 2]), "");
        assert_eq!(all.terms, none.terms);
        assert!(all.held > none.held, "{all:?} {none:?}");
        assert!(all.number_missing && none.number_missing, "2 is in no document");
        let extra = ix.coverage(q, &only(&[]), "Kyoto trip number 2");
        assert!(!extra.number_missing && extra.held >= 3, "{extra:?}");
        assert_eq!(ix.coverage("", &only(&[0]), "").terms, 0);
    }

    #[test]
    fn held_share_is_the_share_of_distinct_terms_a_text_holds() {
        let (ix, slots) = index(&TEXTS);
        // "parrot", "named", "Biscuit", "adopted", "finally" (stop words left out)
        let own: std::collections::BTreeSet<String> = terms::terms(TEXTS[0]).into_iter().collect();
        let summary = "- The user adopted a parrot called Biscuit.";
        let held: std::collections::BTreeSet<String> = terms::terms(summary).into_iter().collect();
        let expect = own.intersection(&held).count() as f64 / own.len() as f64;
        let got = ix.held_share(&slots[..1], &RecallIndex::term_set(summary)).unwrap();
        assert!((got - expect).abs() < 1e-9 && got > 0.0 && got < 1.0, "{got} {expect}");
        assert_eq!(ix.held_share(&slots[..2], &RecallIndex::term_set(&TEXTS[..2].join(" "))), Some(1.0));
        assert_eq!(ix.held_share(&slots[1..2], &RecallIndex::term_set("")), Some(0.0));
        assert_eq!(ix.held_share(&[], &RecallIndex::term_set(summary)), None);
        assert_eq!(ix.held_share(&[999], &RecallIndex::term_set(summary)), None);
    }

    #[test]
    fn cover_takes_what_adds_most_per_token_and_skips_what_is_held() {
        let texts = [
            "We adopted a parrot and named him Biscuit.",
            "The parrot Biscuit likes apples.",
            "Our flight to Lisbon leaves on May 3 from gate 12.",
            "it is the",
            "thanks",
            "sure",
        ];
        let (ix, slots) = index(&texts);
        let unit = |k: usize, tokens: u64| CoverUnit { slots: vec![slots[k]], tokens, joins_previous: false };
        let units = vec![unit(0, 10), unit(1, 8), unit(2, 14), unit(3, 2)];
        let none = FxHashSet::default();
        // room for everything: the unit with nothing to add (stop words only) is left out
        let all = ix.cover(&units, &none, 100, 0);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(!all.contains(&3));
        // room for one: the best per token, checked against the weights by hand
        let per_token = |k: usize, stamp: u64| {
            let own: FxHashSet<u64> = RecallIndex::term_set(texts[k]);
            own.iter().map(|&t| ix.weight(t)).sum::<f64>() / (units[k].tokens + stamp) as f64
        };
        let best = |stamp| (0..3).max_by(|&a, &b| per_token(a, stamp).total_cmp(&per_token(b, stamp))).unwrap();
        assert_eq!(ix.cover(&units, &none, 14, 0)[0], best(0));
        assert_eq!(ix.cover(&units, &none, 30, 10)[0], best(10));
        // what the prompt holds adds nothing: with the Lisbon line held, it is not chosen
        let held = RecallIndex::term_set(texts[2]);
        assert!(!ix.cover(&units, &held, 100, 0).contains(&2));
        // a unit adds only what no chosen unit holds: the same message twice is chosen once
        let twice = vec![unit(0, 10), unit(0, 10)];
        assert_eq!(ix.cover(&twice, &none, 100, 0), vec![0]);
        // nothing fits: nothing is chosen
        assert!(ix.cover(&units, &none, 1, 0).is_empty());
        assert!(ix.cover(&units, &none, 12, 5).is_empty(), "the stamp counts");
    }

    #[test]
    fn cover_charges_one_stamp_per_stretch() {
        let texts = ["parrot Biscuit adopted", "Lisbon flight gate", "ramen sister April"];
        let (ix, slots) = index(&texts);
        let none = FxHashSet::default();
        let units: Vec<CoverUnit> =
            (0..3).map(|k| CoverUnit { slots: vec![slots[k]], tokens: 10, joins_previous: k > 0 }).collect();
        // three joined units under one stamp: 30 + 20 tokens
        assert_eq!(ix.cover(&units, &none, 50, 20).len(), 3);
        assert_eq!(ix.cover(&units, &none, 49, 20).len(), 2);
        // apart, each pays its own stamp: two fit in 60, not three
        let apart: Vec<CoverUnit> = units.iter().map(|u| CoverUnit { joins_previous: false, ..u.clone() }).collect();
        assert_eq!(ix.cover(&apart, &none, 89, 20).len(), 2);
        assert_eq!(ix.cover(&apart, &none, 90, 20).len(), 3);
    }

    #[test]
    fn scores_match_the_textbook_formula() {
        let (ix, slots) = index(&TEXTS);
        for query in
            ["What did I cook on April 30?", "what is the parrot called", "推荐过哪部科幻电影", "Lisbon weather"]
        {
            let got = ix.score(query);
            let want = reference(&TEXTS, query);
            for (slot, w) in slots.iter().zip(want) {
                let g = got.get(slot).copied().unwrap_or(0.0);
                assert!((g - w).abs() < 1e-4, "{query}: slot {slot} got {g} want {w}");
            }
        }
    }

    #[test]
    fn the_answer_ranks_first() {
        let (ix, slots) = index(&TEXTS);
        let best = |q: &str| {
            let s = ix.score(q);
            *s.iter().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0
        };
        assert_eq!(best("What did I cook on April 30?"), slots[2]);
        assert_eq!(best("Which parrot did we adopt?"), slots[0]);
        assert_eq!(best("我推荐的科幻电影"), slots[4]);
    }

    #[test]
    fn a_word_common_to_this_history_scores_nothing() {
        // 100 messages: "thanks" in 30 of them (over a quarter), "kyoto" in one
        let texts: Vec<String> = (0..100)
            .map(|i| match i {
                7 => "the Kyoto trip is on May 3, thanks".to_string(),
                i if i % 10 < 3 => format!("thanks, message {i} about lunch"),
                i => format!("message {i} about the weather"),
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (ix, slots) = index(&refs);
        assert!(ix.score("thanks!").is_empty(), "a common word alone matches nothing");
        let kyoto = ix.score("thanks, when is the Kyoto trip?");
        assert_eq!(kyoto.keys().collect::<Vec<_>>(), [&slots[7]], "not the 30 thanks: {kyoto:?}");
        // under COMMON_MIN_DOCS messages every term scores (textbook BM25)
        let (small, _) = index(&refs[..40]);
        assert!(!small.score("thanks!").is_empty());
    }

    #[test]
    fn incremental_only_new_messages_are_indexed() {
        let mut ix = RecallIndex::new(100);
        let a = ix.insert(1, ["alpha beta"]);
        let vocab = ix.vocabulary();
        assert_eq!(ix.insert(1, ["something else entirely"]), a, "same fingerprint, same doc");
        assert_eq!(ix.vocabulary(), vocab, "the text of a known message is not read again");
        assert_eq!(ix.len(), 1);
        ix.insert(2, ["gamma"]);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn bounded_forgets_least_recently_seen() {
        let mut ix = RecallIndex::new(10);
        for k in 0..10u128 {
            ix.insert(k, [format!("word{k} common").as_str()]);
        }
        ix.tick();
        for k in 1..10u128 {
            ix.lookup(k); // all but message 0 are in the current history
        }
        ix.insert(99, ["fresh"]);
        assert_eq!(ix.len(), 10);
        assert!(ix.lookup(0).is_none(), "the one not seen lately goes");
        assert!(ix.lookup(5).is_some());
        assert!(ix.score("word0").is_empty(), "its postings go with it");
        // its slot is reused without stale postings
        let s = ix.insert(100, ["word0 again"]);
        assert_eq!(ix.score("word0").keys().copied().collect::<Vec<_>>(), vec![s]);
        for _ in 0..100u128 {
            ix.tick();
        }
        for k in 200..400u128 {
            ix.insert(k, ["x y z"]);
            assert!(ix.len() <= 10);
        }
    }

    #[test]
    fn huge_inputs_are_read_up_to_their_caps() {
        let mut ix = RecallIndex::new(10);
        let big = "needle ".repeat(1_000_000) + "tailword";
        ix.insert(1, [big.as_str(), "second part"]);
        assert!(ix.score("tailword").is_empty(), "past MAX_DOC_BYTES nothing is read");
        assert!(!ix.score("needle").is_empty());
        let query = "needle ".repeat(100_000) + &(0..10_000).map(|i| format!("w{i} ")).collect::<String>();
        assert!(!ix.score(&query).is_empty());
        assert!(ix.score("").is_empty());
        assert!(RecallIndex::new(0).score("needle").is_empty());
        let cut = head("日本語", 4);
        assert_eq!(cut, "日");
    }

    #[test]
    fn query_keeps_the_rarest_terms() {
        let mut ix = RecallIndex::new(10_000);
        for k in 0..500u128 {
            ix.insert(k, [format!("common t{k}").as_str()]);
        }
        let mut q: String = (0..500).map(|k| format!("t{k} ")).collect();
        q.push_str("common");
        let terms = ix.query_terms(&q);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert!(terms.iter().all(|&(_, df)| df == 1), "the common term is the one left out");
    }
}
