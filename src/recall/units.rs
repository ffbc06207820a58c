//! Recall's units: the exchange a scored message belongs to, what that exchange scores, and
//! the exchange before a follow-up that leans on it.
//!
//! A recalled block never splits a pair: a message is recalled with the pairing unit that
//! holds it (the core's rule, [`fit::tool_units`]), a user turn with the reply it got and a
//! reply with the user turn before it. A user turn that cannot stand alone ("and the second
//! one?", or too few terms to mean anything) brings the exchange before it, scored at
//! [`NEIGHBOUR_SHARE`] of its own.

use rustc_hash::FxHashMap;

use super::terms;
use crate::fit::{self, BlockKind, MessageInfo, Role};

/// What a neighbouring exchange scores, as a share of the one it gives context to.
pub const NEIGHBOUR_SHARE: f64 = 0.35;
/// A user turn with fewer terms than this (in its first [`FOLLOW_UP_CHARS`] characters) is a
/// follow-up: it does not say what it is about.
pub const FOLLOW_UP_TERMS: usize = 4;
pub const FOLLOW_UP_CHARS: usize = 400;

/// Openings that point back at what was said before (read case-blind, as whole words).
const POINTING_BACK: &[&str] = &[
    "and",
    "also",
    "what about",
    "how about",
    "it",
    "its",
    "they",
    "them",
    "that",
    "this",
    "those",
    "these",
    "he",
    "she",
    "his",
    "her",
    "their",
    "there",
    "then",
    "so",
    "but",
];
/// Chinese characters that open a follow-up ("it", "this", "that", "also").
const POINTING_BACK_CJK: &str = "他她它这那其还也";

/// Whether `text` opens with a word that points back.
fn opens_pointing_back(text: &str) -> bool {
    let text = text.trim_start();
    if text.chars().next().is_some_and(|c| POINTING_BACK_CJK.contains(c)) {
        return true;
    }
    POINTING_BACK.iter().any(|w| {
        text.get(..w.len()).is_some_and(|head| head.eq_ignore_ascii_case(w))
            && !text[w.len()..].chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Whether a user turn leans on the exchange before it: it opens with a word that points
/// back ("and", "what about", "it", 那) or has too few terms to be about anything itself.
pub fn follows_up(text: &str) -> bool {
    if opens_pointing_back(text) {
        return true;
    }
    let head = match text.char_indices().nth(FOLLOW_UP_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    };
    let mut n = 0usize;
    terms::for_each_term(head, |_| n += 1);
    n < FOLLOW_UP_TERMS
}

/// The messages recall reads units from, read on demand (a caller holding a long history
/// reads only the stretches around the hits).
pub trait Turns {
    /// Messages in the history.
    fn count(&self) -> usize;
    /// What pairing needs of message `i`.
    fn info(&mut self, i: usize) -> MessageInfo;
    /// The text of message `i` (asked only of user turns).
    fn text(&mut self, i: usize) -> String;
}

/// A unit that may be recalled: `start..end`, its score, and the message it gives context
/// to when it was added as a follow-up's neighbour.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub start: usize,
    pub end: usize,
    pub score: f64,
    pub context_of: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Unit(usize, usize, BlockKind),
    /// A call left unanswered or a result without its call: cannot be sent on its own.
    Broken,
}

/// A result message that may belong to the call block before it (the pairing rule's test).
fn in_run(info: &MessageInfo) -> bool {
    !info.result_ids.is_empty() && info.call_ids.is_empty()
}

/// The pairing unit holding message `i`. The rule is applied to the stretch from the message
/// before `i`'s run of results (its call, if it has one) to the run's end: the stretch the
/// whole history's analysis gives the same block, however long the run.
fn span_at<T: Turns>(turns: &mut T, i: usize) -> Span {
    let info = turns.info(i);
    if info.call_ids.is_empty() && info.result_ids.is_empty() {
        // neither calls nor results: a block of its own, by the rule's definition
        // (`BlockKind::Message`), without building the stretch
        return Span::Unit(i, i + 1, BlockKind::Message);
    }
    let mut lo = i;
    if in_run(&info) {
        while lo > 0 && in_run(&turns.info(lo - 1)) {
            lo -= 1;
        }
        lo = lo.saturating_sub(1);
    }
    let mut hi = i + 1;
    while hi < turns.count() && in_run(&turns.info(hi)) {
        hi += 1;
    }
    let infos: Vec<MessageInfo> = (lo..hi).map(|k| turns.info(k)).collect();
    let report = fit::tool_units(&infos);
    let Some(block) = report.blocks.iter().find(|b| b.start <= i - lo && i - lo < b.end) else {
        return Span::Broken;
    };
    let broken = report.problems.iter().any(|p| (block.start..block.end).contains(&p.index()));
    if broken || block.kind == BlockKind::Orphan {
        return Span::Broken;
    }
    Span::Unit(lo + block.start, lo + block.end, block.kind)
}

/// The exchange around message `i`: a user turn with the reply right after it, or a reply
/// with the user turn right before it; a tool round alone. None for what cannot be recalled
/// (instructions, broken pairs, messages outside `allowed`).
pub fn exchange<T: Turns>(turns: &mut T, i: usize, allowed: &impl Fn(usize) -> bool) -> Option<(usize, usize)> {
    if turns.info(i).role.is_system() {
        return None;
    }
    let Span::Unit(mut start, mut end, kind) = span_at(turns, i) else {
        return None;
    };
    if kind == BlockKind::Message {
        let head = turns.info(start);
        if head.is_user_turn() {
            if end < turns.count() && allowed(end) && turns.info(end).role == Role::Assistant {
                if let Span::Unit(_, reply_end, _) = span_at(turns, end) {
                    if (end..reply_end).all(allowed) {
                        end = reply_end;
                    }
                }
            }
        } else if head.role == Role::Assistant
            && start > 0
            && allowed(start - 1)
            && turns.info(start - 1).is_user_turn()
        {
            start -= 1;
        }
    }
    (start..end).all(allowed).then_some((start, end))
}

/// The exchanges around `hits` (message, score), each scored by the sum of its messages'
/// scores, first seen first; then the exchange before each follow-up among them.
pub fn candidates<T: Turns>(turns: &mut T, hits: &[(usize, f64)], allowed: &impl Fn(usize) -> bool) -> Vec<Candidate> {
    let scores: FxHashMap<usize, f64> = hits.iter().copied().collect();
    let mut out: Vec<Candidate> = Vec::new();
    let mut by_span: FxHashMap<(usize, usize), usize> = FxHashMap::default();
    for &(i, _) in hits {
        if i >= turns.count() {
            continue;
        }
        let Some((start, end)) = exchange(turns, i, allowed) else { continue };
        if by_span.contains_key(&(start, end)) {
            continue;
        }
        let score = (start..end).filter_map(|k| scores.get(&k)).sum();
        by_span.insert((start, end), out.len());
        out.push(Candidate { start, end, score, context_of: None });
    }
    for k in 0..out.len() {
        let c = out[k].clone();
        if c.start == 0 || !turns.info(c.start).is_user_turn() || !follows_up(&turns.text(c.start)) {
            continue;
        }
        let Some(prev) = exchange(turns, c.start - 1, allowed) else { continue };
        let score = NEIGHBOUR_SHARE * c.score;
        match by_span.get(&prev) {
            None => {
                by_span.insert(prev, out.len());
                out.push(Candidate { start: prev.0, end: prev.1, score, context_of: Some(c.start) });
            }
            Some(&j) if out[j].score < score => out[j].score = score,
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message: role, call ids, result ids, text.
    type Row = (Role, Vec<String>, Vec<String>, String);

    struct Script(Vec<Row>);

    impl Turns for Script {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn info(&mut self, i: usize) -> MessageInfo {
            let (role, calls, results, text) = &self.0[i];
            MessageInfo {
                role: *role,
                call_ids: calls.iter().map(String::as_str).collect(),
                result_ids: results.iter().map(String::as_str).collect(),
                has_content: !text.is_empty(),
                ..MessageInfo::default()
            }
        }
        fn text(&mut self, i: usize) -> String {
            self.0[i].3.clone()
        }
    }

    fn row(role: Role, calls: &[&str], results: &[&str], text: &str) -> Row {
        let own = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect();
        (role, own(calls), own(results), text.to_string())
    }
    fn user(text: &str) -> Row {
        row(Role::User, &[], &[], text)
    }
    fn reply(text: &str) -> Row {
        row(Role::Assistant, &[], &[], text)
    }

    fn chat() -> Script {
        Script(vec![
            row(Role::System, &[], &[], "be brief"),
            user("We booked the hotel in Kyoto for the spring trip"),
            reply("Lovely, Kyoto in spring is beautiful."),
            user("and the second one?"),
            reply("The second hotel is in Osaka."),
            row(Role::Assistant, &["c1"], &[], ""),
            row(Role::Tool, &[], &["c1"], "weather: sunny"),
            row(Role::Tool, &[], &["zz"], "a result nobody asked for"),
            user("Thanks a lot for all the careful planning today"),
        ])
    }

    fn all(_: usize) -> bool {
        true
    }

    #[test]
    fn a_user_turn_comes_with_its_reply_and_a_reply_with_its_turn() {
        let mut h = chat();
        assert_eq!(exchange(&mut h, 1, &all), Some((1, 3)));
        assert_eq!(exchange(&mut h, 2, &all), Some((1, 3)));
        assert_eq!(exchange(&mut h, 8, &all), Some((8, 9)));
        // the reply is left behind when it may not be recalled
        assert_eq!(exchange(&mut h, 1, &|k| k != 2), Some((1, 2)));
        // and a reply whose turn may not be recalled stands alone
        assert_eq!(exchange(&mut h, 2, &|k| k != 1), Some((2, 3)));
    }

    #[test]
    fn instructions_and_broken_pairs_are_never_recalled() {
        let mut h = chat();
        assert_eq!(exchange(&mut h, 0, &all), None);
        // the stray result in the call's run breaks the round
        assert_eq!(exchange(&mut h, 5, &all), None);
        assert_eq!(exchange(&mut h, 7, &all), None);
        let mut whole = Script(chat().0[..7].to_vec());
        assert_eq!(exchange(&mut whole, 6, &all), Some((5, 7)));
        assert_eq!(exchange(&mut whole, 5, &all), Some((5, 7)));
        assert_eq!(exchange(&mut whole, 5, &|k| k != 6), None);
    }

    #[test]
    fn a_long_tool_round_is_found_whole() {
        let ids: Vec<String> = (0..60).map(|k| format!("id{k}")).collect();
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut rows = vec![user("look these up"), row(Role::Assistant, &id_refs, &[], "")];
        rows.extend(id_refs.iter().map(|id| row(Role::Tool, &[], &[id], "x")));
        rows.push(user("done with the search for the flight numbers"));
        let mut h = Script(rows.clone());
        assert_eq!(exchange(&mut h, 45, &all), Some((1, 62)));
        assert_eq!(exchange(&mut h, 1, &all), Some((1, 62)));
        // one result missing: the call is left unanswered, and the round cannot be sent
        rows.remove(40);
        let mut h = Script(rows);
        assert_eq!(exchange(&mut h, 45, &all), None);
    }

    #[test]
    fn hits_become_scored_exchanges_and_follow_ups_bring_their_context() {
        let mut h = chat();
        let out = candidates(&mut h, &[(4, 2.0), (3, 1.0), (8, 0.5), (0, 9.0), (99, 1.0)], &all);
        assert_eq!(
            out,
            vec![
                Candidate { start: 3, end: 5, score: 3.0, context_of: None },
                Candidate { start: 8, end: 9, score: 0.5, context_of: None },
                Candidate { start: 1, end: 3, score: NEIGHBOUR_SHARE * 3.0, context_of: Some(3) },
            ]
        );
        // a neighbour that is a hit of its own keeps the higher score
        let out = candidates(&mut h, &[(3, 1.0), (1, 0.1)], &all);
        assert_eq!(out[1], Candidate { start: 1, end: 3, score: NEIGHBOUR_SHARE, context_of: None });
        // a user turn that says what it is about brings no context
        assert_eq!(candidates(&mut h, &[(1, 1.0)], &all).len(), 1);
        // nor does a follow-up whose neighbour may not be recalled
        assert_eq!(candidates(&mut h, &[(3, 1.0)], &|k| k != 2).len(), 1);
    }

    #[test]
    fn what_a_follow_up_is() {
        for text in [
            "and the second one?",
            "What about Osaka",
            "它多少钱",
            "thanks!",
            "  it was late",
            "IT'S the one in Kyoto we booked in spring",
        ] {
            assert!(follows_up(text), "{text:?}");
        }
        for text in [
            "Which hotel did we book in Kyoto for the trip?",
            "我们在京都订了哪家酒店",
            "Andrew booked the hotel in Kyoto for us",
            "Items we packed for the Kyoto trip last spring",
        ] {
            assert!(!follows_up(text), "{text:?}");
        }
        // the head is read by characters, not bytes
        assert!(!follows_up(&"京都酒店".repeat(200)));
    }
}
