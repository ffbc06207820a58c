//! Tests of pairing and window selection.

use super::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

// ---------- builders ----------

fn msg(role: Role, tokens: u64) -> MessageInfo {
    MessageInfo { role, tokens, has_content: true, ..Default::default() }
}
fn sys(t: u64) -> MessageInfo {
    msg(Role::System, t)
}
fn user(t: u64) -> MessageInfo {
    msg(Role::User, t)
}
fn asst(t: u64) -> MessageInfo {
    msg(Role::Assistant, t)
}
fn strs(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}
/// An assistant message made only of tool calls.
fn call(t: u64, ids: &[&str]) -> MessageInfo {
    MessageInfo { call_ids: strs(ids).into(), has_content: false, ..msg(Role::Assistant, t) }
}
/// An OpenAI tool message.
fn tool(t: u64, id: &str) -> MessageInfo {
    MessageInfo { result_ids: strs(&[id]).into(), ..msg(Role::Tool, t) }
}
/// An Anthropic-style user message carrying tool_result blocks.
fn results(t: u64, ids: &[&str]) -> MessageInfo {
    MessageInfo { result_ids: strs(ids).into(), ..msg(Role::User, t) }
}

/// The tests' recount: each removed call entry saves 2 tokens.
fn recount_for(msgs: &[MessageInfo]) -> impl Fn(usize, &[String]) -> u64 + '_ {
    move |i, ids| msgs[i].tokens.saturating_sub(2 * ids.len() as u64)
}
fn no_recount(_: usize, _: &[String]) -> u64 {
    panic!("recount must not be called here")
}
fn run(msgs: &[MessageInfo], budget: u64, opts: &FitOptions) -> Result<FitPlan> {
    fit(msgs, budget, opts, &recount_for(msgs))
}
fn kept(msgs: &[MessageInfo], budget: u64, opts: &FitOptions) -> Vec<usize> {
    run(msgs, budget, opts).expect("fit").kept
}
fn units_only() -> FitOptions {
    FitOptions { start_on_user: false, ..FitOptions::default() }
}

// ---------- hand-written cases ----------

#[test]
fn empty_history() {
    let p = fit(&[], 10, &FitOptions::default(), &no_recount).unwrap();
    assert!(p.kept.is_empty() && p.dropped.is_empty() && p.stripped.is_empty());
    assert_eq!((p.tokens, p.stats.stop_reason), (0, StopReason::AllFit));
    // An empty prompt is never sent, so it primes no reply and fits any budget.
    let primed = FitOptions { reply_priming: 3, ..FitOptions::default() };
    for budget in [0, 2, 3] {
        let p = fit(&[], budget, &primed, &no_recount).unwrap();
        assert_eq!((p.tokens, p.kept.len()), (0, 0));
    }
    let r = repair(&[], Unanswered::Strip, 0, &no_recount);
    assert!(r.kept.is_empty() && r.dropped.is_empty());
}

#[test]
fn nothing_pinned_and_no_room_for_priming_is_an_empty_window() {
    // Without pins a budget below the priming leaves nothing to send: an empty window, not a
    // BudgetError (the error is for pins that cannot be sent).
    let h = [sys(4), user(5), asst(6)];
    let opts = FitOptions { keep_system: false, keep_last_user: false, reply_priming: 3, ..FitOptions::default() };
    for budget in [0, 2] {
        let p = run(&h, budget, &opts).unwrap();
        assert!(p.kept.is_empty() && p.tokens == 0);
        assert_eq!(p.dropped, vec![0, 1, 2]);
        assert_eq!(p.stats.stop_reason, StopReason::Budget);
    }
    // With a pin the same budget is still an error naming the priming.
    let pinned = FitOptions { reply_priming: 3, ..FitOptions::default() };
    assert!(matches!(run(&h, 2, &pinned), Err(Error::Budget(_))));
}

#[test]
fn everything_fits_exactly() {
    let h = [sys(10), user(5), asst(7)];
    let p = fit(&h, 22, &FitOptions::default(), &no_recount).unwrap();
    assert_eq!(p.kept, vec![0, 1, 2]);
    assert_eq!(p.tokens, 22);
    assert_eq!(p.stats.stop_reason, StopReason::AllFit);
    assert_eq!(p.stats.stop_reason.as_str(), "all_fit");
    assert_eq!((p.stats.messages_kept, p.stats.messages_dropped), (3, 0));
    assert_eq!((p.stats.pins_tokens, p.stats.tokens_kept, p.stats.tokens_dropped), (15, 22, 0));

    let p = fit(&h, 21, &FitOptions::default(), &no_recount).unwrap();
    assert_eq!((p.kept, p.dropped), (vec![0, 1], vec![2]));
    assert_eq!(p.stats.stop_reason.as_str(), "budget");
    assert_eq!(p.stats.tokens_dropped, 7);
}

#[test]
fn priming_counts_once() {
    let h = [user(5), asst(5)];
    let o = FitOptions { reply_priming: 3, ..FitOptions::default() };
    assert_eq!(run(&h, 13, &o).unwrap().tokens, 13);
    assert_eq!(kept(&h, 13, &o), vec![0, 1]);
    assert_eq!(kept(&h, 12, &o), vec![0]);
    assert_eq!(run(&h, 12, &o).unwrap().tokens, 8);
}

#[test]
fn window_stops_at_first_unit_that_does_not_fit() {
    // a3 is too big: the older small messages must not be picked instead.
    let h = [user(1), asst(1), user(1), asst(100), user(1), asst(1), user(1)];
    for o in [units_only(), FitOptions::default()] {
        let p = run(&h, 5, &o).unwrap();
        assert_eq!(p.kept, vec![4, 5, 6]);
        assert_eq!(p.stats.stop_reason, StopReason::Budget);
    }
}

#[test]
fn rounds_are_all_or_nothing() {
    let h = [user(3), asst(3), user(3), asst(3), user(3)];
    let o = FitOptions::default();
    // Round [2, 3] costs exactly the room left after the pinned latest user turn.
    assert_eq!(kept(&h, 9, &o), vec![2, 3, 4]);
    assert_eq!(kept(&h, 8, &o), vec![4]);
    assert_eq!(kept(&h, 15, &o), vec![0, 1, 2, 3, 4]);
    assert_eq!(kept(&h, 14, &o), vec![2, 3, 4]);
    // By units, the assistant message alone fits.
    assert_eq!(kept(&h, 8, &units_only()), vec![3, 4]);
}

#[test]
fn messages_after_latest_user_grow_by_units() {
    let h = [user(2), asst(2), user(2), call(3, &["c1"]), tool(3, "c1"), asst(4)];
    let o = FitOptions::default();
    assert_eq!(kept(&h, 12, &o), vec![2, 3, 4, 5]);
    assert_eq!(kept(&h, 11, &o), vec![2, 5]);
    assert_eq!(kept(&h, 16, &o), vec![0, 1, 2, 3, 4, 5]);
    // Unpinned, the latest user turn is just the next unit: the window stops before it.
    let free = FitOptions { keep_last_user: false, ..FitOptions::default() };
    assert_eq!(kept(&h, 10, &free), vec![3, 4, 5]);
    assert_eq!(kept(&h, 12, &free), vec![2, 3, 4, 5]);
    assert_eq!(run(&h, 10, &free).unwrap().stats.stop_reason, StopReason::Budget);
}

#[test]
fn huge_tool_output_after_latest_user() {
    let h = [sys(5), user(5), asst(5), user(5), call(5, &["a"]), tool(100_000, "a"), asst(5)];
    let p = run(&h, 40, &FitOptions::default()).unwrap();
    // The pins and the final answer; the oversized unit stops the window.
    assert_eq!(p.kept, vec![0, 3, 6]);
    assert_eq!(p.stats.stop_reason, StopReason::Budget);
}

#[test]
fn tool_unit_is_never_split() {
    let h = [user(1), call(5, &["a", "b"]), tool(5, "a"), tool(5, "b"), user(1)];
    assert_eq!(kept(&h, 15, &units_only()), vec![4]);
    assert_eq!(kept(&h, 16, &units_only()), vec![1, 2, 3, 4]);
    assert_eq!(kept(&h, 17, &units_only()), vec![0, 1, 2, 3, 4]);
}

#[test]
fn parallel_results_in_any_order() {
    let h = [user(1), call(1, &["a", "b", "c"]), tool(1, "c"), tool(1, "a"), tool(1, "b"), user(1)];
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!(r.kept, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!((r.stats.orphans_removed, r.stats.unanswered_removed), (0, 0));
}

#[test]
fn unanswered_drop_removes_the_unit() {
    let h = [user(1), call(5, &["a", "b"]), tool(3, "a"), user(1)];
    let p = run(&h, 100, &FitOptions::default()).unwrap();
    assert_eq!((p.kept, p.dropped), (vec![0, 3], vec![1, 2]));
    assert_eq!(p.stats.unanswered_removed, 2);
    assert_eq!(p.stats.tokens_dropped, 8);
    assert_eq!(p.stats.stop_reason, StopReason::AllFit);
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!(r.kept, vec![0, 3]);
}

#[test]
fn unanswered_strip_keeps_the_message_without_the_calls() {
    let h = [user(1), call(5, &["a", "b"]), tool(3, "a"), user(1)];
    let calls = RefCell::new(Vec::new());
    let rc = |i: usize, ids: &[String]| {
        calls.borrow_mut().push((i, ids.to_vec()));
        2
    };
    let o = FitOptions { unanswered: Unanswered::Strip, ..FitOptions::default() };
    let p = fit(&h, 100, &o, &rc).unwrap();
    assert_eq!(p.kept, vec![0, 1, 2, 3]);
    assert_eq!(p.stripped, vec![(1, strs(&["b"]))]);
    assert_eq!(p.tokens, 1 + 2 + 3 + 1);
    assert_eq!(p.stats.calls_stripped, 1);
    assert_eq!(*calls.borrow(), vec![(1, strs(&["b"]))]);
    // The recounted size decides fitting: 7 is enough, 6 is not.
    assert_eq!(fit(&h, 7, &o, &rc).unwrap().kept, vec![0, 1, 2, 3]);
    assert_eq!(fit(&h, 6, &o, &rc).unwrap().kept, vec![3]);
    let r = repair(&h, Unanswered::Strip, 0, &rc);
    assert_eq!((r.kept.len(), r.stripped.len(), r.tokens), (4, 1, 7));
}

#[test]
fn strip_that_leaves_nothing_drops_the_message() {
    let h = [user(1), call(5, &["a", "b"]), user(1)];
    let o = FitOptions { unanswered: Unanswered::Strip, ..FitOptions::default() };
    let p = fit(&h, 100, &o, &no_recount).unwrap();
    assert_eq!((p.kept, p.stats.unanswered_removed), (vec![0, 2], 1));
    // With text of its own it stays, as a plain assistant message.
    let mut h2 = h.clone();
    h2[1].has_content = true;
    let p = run(&h2, 100, &o).unwrap();
    assert_eq!(p.kept, vec![0, 1, 2]);
    assert_eq!(p.stripped, vec![(1, strs(&["a", "b"]))]);
    assert_eq!(p.tokens, 1 + 1 + 1);
}

#[test]
fn recount_is_lazy() {
    // The stripped message is older than where the window stops: never recounted.
    let mut c = call(50, &["a"]);
    c.has_content = true;
    let h = [user(1), c, user(100), asst(1), user(1)];
    let o = FitOptions { unanswered: Unanswered::Strip, ..FitOptions::default() };
    assert_eq!(fit(&h, 5, &o, &no_recount).unwrap().kept, vec![4]);
    let n = RefCell::new(0);
    let rc = |_: usize, _: &[String]| {
        *n.borrow_mut() += 1;
        10
    };
    let p = fit(&h, 1000, &o, &rc).unwrap();
    assert_eq!((p.kept.len(), p.tokens, *n.borrow()), (5, 113, 1));
}

#[test]
fn orphans_are_dropped() {
    let h = [
        user(1),
        tool(1, "x"), // no call before it
        call(1, &["a"]),
        tool(1, "a"),
        tool(1, "a"), // answers a again
        tool(1, "z"), // unknown id
        user(1),
    ];
    let p = run(&h, 100, &FitOptions::default()).unwrap();
    assert_eq!((p.kept, p.dropped), (vec![0, 2, 3, 6], vec![1, 4, 5]));
    assert_eq!(p.stats.orphans_removed, 3);
}

#[test]
fn system_between_call_and_result_breaks_the_pair() {
    let h = [user(1), call(4, &["a"]), sys(2), tool(3, "a"), user(1)];
    let p = run(&h, 100, &FitOptions::default()).unwrap();
    assert_eq!(p.kept, vec![0, 2, 4]);
    assert_eq!((p.stats.orphans_removed, p.stats.unanswered_removed), (1, 1));
}

#[test]
fn duplicate_call_ids_are_never_answered() {
    let h = [user(1), call(4, &["a", "a"]), tool(3, "a"), user(1)];
    let p = run(&h, 100, &FitOptions::default()).unwrap();
    assert_eq!(p.kept, vec![0, 3]);
    assert_eq!((p.stats.orphans_removed, p.stats.unanswered_removed), (1, 1));
    let strip = FitOptions { unanswered: Unanswered::Strip, ..FitOptions::default() };
    assert_eq!(kept(&h, 100, &strip), vec![0, 3]);
    let h = [user(1), call(6, &["a", "b", "a"]), tool(3, "a"), tool(3, "b"), user(1)];
    let p = run(&h, 100, &strip).unwrap();
    assert_eq!(p.kept, vec![0, 1, 3, 4]);
    assert_eq!(p.stripped, vec![(1, strs(&["a"]))]);
}

#[test]
fn result_for_an_earlier_call_is_an_orphan() {
    let h = [call(1, &["a"]), tool(1, "a"), call(1, &["b"]), tool(1, "a"), tool(1, "b")];
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!((r.kept, r.dropped), (vec![0, 1, 2, 4], vec![3]));
}

#[test]
fn anthropic_tool_results() {
    let h = [user(1), call(1, &["a", "b"]), results(2, &["b", "a"]), user(1)];
    let p = run(&h, 100, &FitOptions::default()).unwrap();
    assert_eq!(p.kept, vec![0, 1, 2, 3]);
    // The result-carrying user message is not a user turn: the latest turn is 3.
    assert_eq!(kept(&h, 1, &FitOptions::default()), vec![3]);
    // Results split over two user messages.
    let h2 = [user(1), call(1, &["a", "b"]), results(1, &["a"]), results(1, &["b"]), user(1)];
    assert_eq!(repair(&h2, Unanswered::Drop, 0, &no_recount).kept.len(), 5);
    // One unknown id spoils the whole message; one repeated id too.
    for bad in [results(2, &["a", "z"]), results(2, &["a", "a"])] {
        let h3 = [user(1), call(1, &["a"]), bad, user(1)];
        let r = repair(&h3, Unanswered::Drop, 0, &no_recount);
        assert_eq!(r.kept, vec![0, 3]);
        assert_eq!((r.stats.orphans_removed, r.stats.unanswered_removed), (1, 1));
    }
    // The window treats a user turn answering results as part of the tool unit.
    let h4 = [user(1), asst(1), call(1, &["a"]), results(1, &["a"]), user(1)];
    assert_eq!(kept(&h4, 3, &FitOptions::default()), vec![4]);
    assert_eq!(kept(&h4, 3, &units_only()), vec![2, 3, 4]);
}

#[test]
fn calling_and_answering_at_once_is_malformed() {
    let mut odd = call(1, &["b"]);
    odd.result_ids = strs(&["a"]).into();
    let h = [call(1, &["a"]), odd, tool(1, "b"), user(1)];
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!(r.kept, vec![3]);
    assert_eq!((r.stats.orphans_removed, r.stats.unanswered_removed), (2, 1));
}

#[test]
fn system_in_the_middle_is_pinned_once() {
    let h = [user(1), asst(1), sys(10), user(1), asst(1), user(1)];
    let o = FitOptions::default();
    let p = run(&h, 15, &o).unwrap();
    assert_eq!((p.kept.len(), p.tokens, p.stats.stop_reason), (6, 15, StopReason::AllFit));
    let p = run(&h, 14, &o).unwrap();
    assert_eq!((p.kept, p.tokens), (vec![2, 3, 4, 5], 13));
    assert_eq!(p.stats.pins_tokens, 11);
    // Not pinned, it is an ordinary message of the round it sits in.
    let free = FitOptions { keep_system: false, ..o };
    assert_eq!(kept(&h, 14, &free), vec![3, 4, 5]);
    assert_eq!(kept(&h, 15, &free), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn start_on_user_leaves_out_what_precedes_the_first_user_turn() {
    let h = [sys(1), asst(1), user(1), asst(1)];
    let free = FitOptions { keep_system: false, ..FitOptions::default() };
    let p = run(&h, 100, &free).unwrap();
    assert_eq!((p.kept, p.stats.stop_reason), (vec![2, 3], StopReason::StartOnUser));
    assert_eq!(p.stats.stop_reason.as_str(), "start_on_user");
    assert_eq!(kept(&h, 100, &FitOptions::default()), vec![0, 2, 3]);
    let units = FitOptions { start_on_user: false, ..free };
    let p = run(&h, 100, &units).unwrap();
    assert_eq!((p.kept.len(), p.stats.stop_reason), (4, StopReason::AllFit));
}

#[test]
fn no_user_turn_grows_by_units() {
    let h = [sys(1), asst(1), call(1, &["a"]), tool(1, "a"), asst(1)];
    let o = FitOptions::default();
    assert_eq!(kept(&h, 100, &o), vec![0, 1, 2, 3, 4]);
    assert_eq!(kept(&h, 3, &o), vec![0, 4]);
    assert_eq!(kept(&h, 4, &o), vec![0, 2, 3, 4]);
}

#[test]
fn explicit_pins() {
    let h = [user(1), call(5, &["a"]), tool(5, "a"), user(1), asst(50), user(1)];
    let o = FitOptions { pinned: vec![2], ..FitOptions::default() };
    let p = run(&h, 12, &o).unwrap();
    assert_eq!(p.kept, vec![1, 2, 5]);
    assert_eq!(p.stats.pins_tokens, 11);
    // A pinned old user turn still bounds rounds; pinning twice is harmless.
    let o = FitOptions { pinned: vec![0, 0], keep_last_user: false, ..FitOptions::default() };
    assert_eq!(kept(&h, 2, &o), vec![0, 5]);
}

#[test]
fn bad_pins_are_value_errors() {
    let h = [user(1), tool(1, "x"), call(1, &["a"]), user(1)];
    for (p, word) in [(4, "out of range"), (1000, "out of range"), (1, "orphan"), (2, "unanswered")] {
        let o = FitOptions { pinned: vec![p], ..FitOptions::default() };
        match run(&h, 100, &o) {
            Err(Error::Value(m)) => {
                assert!(m.contains(&p.to_string()) && m.contains(word), "{m}")
            }
            other => panic!("pinned {p}: {other:?}"),
        }
    }
    // Strip keeps a contentful call, so pinning it is fine then.
    let mut h2 = h.clone();
    h2[2].has_content = true;
    let o = FitOptions { pinned: vec![2], unanswered: Unanswered::Strip, ..FitOptions::default() };
    assert_eq!(kept(&h2, 100, &o), vec![0, 2, 3]);
    // Value errors come first even when the budget is hopeless too.
    let o = FitOptions { pinned: vec![9], ..FitOptions::default() };
    assert!(matches!(run(&h, 0, &o), Err(Error::Value(_))));
}

#[test]
fn budget_error_gives_the_breakdown() {
    let h = [sys(10), user(3), asst(2), user(5)];
    let o = FitOptions { pinned: vec![2], reply_priming: 1, ..FitOptions::default() };
    match run(&h, 17, &o) {
        Err(Error::Budget(m)) => {
            for part in [
                "17 tokens",
                "system/developer 10",
                "latest user message 5",
                "pinned indices 2",
                "1 reply priming",
                "18 > budget 17",
            ] {
                assert!(m.contains(part), "{part:?} missing in {m}");
            }
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(run(&h, 18, &o).unwrap().kept, vec![0, 2, 3]);
}

#[test]
fn huge_counts_do_not_overflow() {
    let max = u64::MAX;
    let h = [user(max), asst(max), user(1)];
    let p = run(&h, max, &FitOptions::default()).unwrap();
    assert_eq!((p.kept, p.tokens), (vec![2], 1));
    assert_eq!(p.stats.tokens_dropped, max);
    let p = run(&h, max, &units_only()).unwrap();
    assert_eq!(p.kept, vec![2]);
    let r = repair(&h, Unanswered::Drop, max, &no_recount);
    assert_eq!(r.tokens, max);
    let o = FitOptions { reply_priming: 1, ..FitOptions::default() };
    assert!(matches!(run(&[user(max)], max, &o), Err(Error::Budget(_))));
    assert!(matches!(run(&[sys(max), user(max)], max, &FitOptions::default()), Err(Error::Budget(_))));
}

#[test]
fn big_blocks_then_small_ones() {
    // One call with many ids (hash-indexed pairing), then ordinary small blocks.
    let ids: Vec<String> = (0..5000).map(|i| format!("id{i}")).collect();
    let mut h = vec![user(1), MessageInfo { call_ids: ids.clone().into(), ..asst(1) }];
    h.extend(ids.iter().rev().map(|id| tool(1, id)));
    for i in 0..5000 {
        let id = format!("s{i}");
        h.push(call(1, &[&id]));
        h.push(tool(1, &id));
    }
    h.push(user(1));
    let t = Instant::now();
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!(r.kept.len(), h.len());
    assert!(t.elapsed().as_millis() < 500, "{:?}", t.elapsed());
    // The same big call with one id unanswered: dropped whole.
    h.remove(2);
    let r = repair(&h, Unanswered::Drop, 0, &no_recount);
    assert_eq!(r.stats.unanswered_removed, 5000);
}

#[test]
fn hundred_thousand_messages() {
    let mut h = Vec::with_capacity(100_000);
    let mut k = 0u64;
    while h.len() < 100_000 {
        k += 1;
        let (a, b) = (format!("a{k}"), format!("b{k}"));
        h.push(user(40 + k % 17));
        h.push(call(30, &[&a, &b]));
        h.push(tool(800 + k % 500, &b));
        h.push(tool(1200, &a));
        h.push(asst(150 + k % 40));
    }
    h.truncate(100_000);
    h.insert(0, sys(500));
    let total: u64 = h.iter().map(|m| m.tokens).sum();
    let o = FitOptions::default();
    let rc = recount_for(&h);
    for budget in [total / 2, total, 10_000] {
        let t = Instant::now();
        let p = fit(&h, budget, &o, &rc).unwrap();
        let took = t.elapsed();
        eprintln!("fit of {} messages, budget {budget}: {took:?}", h.len());
        assert!(took.as_millis() < 1000, "{took:?}");
        assert!(p.tokens <= budget);
        assert_eq!(p.kept.len() + p.dropped.len(), h.len());
        assert_valid_request(&h, &p);
    }
}

// ---------- LangChain parity ----------

/// LangChain `trim_messages(strategy="last", include_system=True, start_on="human",
/// allow_partial=False)` transcribed from langchain-core 1.x (`_last_max_tokens` and
/// `_first_max_tokens`), with `token_counter(ms) = sum + priming`.
fn langchain_trim(msgs: &[MessageInfo], budget: u64, priming: u64) -> Vec<usize> {
    if msgs.is_empty() {
        return vec![];
    }
    let count =
        |ix: &[usize]| -> i128 { ix.iter().map(|&i| i128::from(msgs[i].tokens)).sum::<i128>() + i128::from(priming) };
    let human = |i: usize| msgs[i].role == Role::User;
    let has_sys = msgs[0].role == Role::System;
    let rev: Vec<usize> = (usize::from(has_sys)..msgs.len()).rev().collect();
    let mut max_tokens = i128::from(budget);
    if has_sys {
        max_tokens = (max_tokens - count(&[0])).max(0);
    }
    let mut out: Vec<usize> = if rev.is_empty() {
        vec![]
    } else if count(&rev) <= max_tokens {
        let mut all = rev.clone();
        while all.last().is_some_and(|&i| !human(i)) {
            all.pop();
        }
        all
    } else {
        let (mut left, mut right) = (0usize, rev.len());
        for _ in 0..(usize::BITS - rev.len().leading_zeros()) {
            if left >= right {
                break;
            }
            let mid = (left + right).div_ceil(2);
            if count(&rev[..mid]) <= max_tokens {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        let mut idx = left;
        while idx > 0 && !human(rev[idx - 1]) {
            idx -= 1;
        }
        rev[..idx].to_vec()
    };
    out.reverse();
    if has_sys {
        out.insert(0, 0);
    }
    out
}

#[test]
fn langchain_parity_by_hand() {
    let h = [
        sys(10),
        user(5),
        asst(5),
        call(3, &["a"]),
        tool(4, "a"),
        user(5),
        asst(6),
        user(2),
        call(1, &["b"]),
        tool(9, "b"),
        asst(3),
    ];
    let total: u64 = h.iter().map(|m| m.tokens).sum();
    let latest_round = 10 + 2 + 1 + 9 + 3;
    for budget in [latest_round, latest_round + 10, latest_round + 11, latest_round + 12, total - 1, total, total + 1] {
        for keep_last_user in [true, false] {
            let o = FitOptions { keep_last_user, ..FitOptions::default() };
            assert_eq!(kept(&h, budget, &o), langchain_trim(&h, budget, 0), "budget {budget}");
        }
    }
    assert_eq!(kept(&h, latest_round + 11, &FitOptions::default()), vec![0, 5, 6, 7, 8, 9, 10]);
    assert_eq!(kept(&h, latest_round + 10, &FitOptions::default()), vec![0, 7, 8, 9, 10]);
}

/// A valid OpenAI history: optional system first, then turns and complete tool units.
fn gen_valid(rng: &mut Rng, max_len: u64) -> Vec<MessageInfo> {
    let target = rng.below(max_len + 1) as usize;
    let mut h = Vec::new();
    if rng.pct(60) {
        h.push(sys(gen_tokens(rng)));
    }
    let mut next = 0;
    while h.len() < target {
        match rng.below(10) {
            0..=3 => h.push(user(gen_tokens(rng))),
            4..=5 => h.push(asst(gen_tokens(rng))),
            _ => {
                let ids: Vec<String> = (0..1 + rng.below(3))
                    .map(|_| {
                        next += 1;
                        format!("c{next}")
                    })
                    .collect();
                h.push(MessageInfo { call_ids: ids.clone().into(), ..call(gen_tokens(rng), &[]) });
                for id in ids {
                    h.push(tool(gen_tokens(rng), &id));
                }
            }
        }
    }
    h
}

#[test]
fn langchain_parity_generated() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compared = 0;
    for _ in 0..4000 {
        let h = gen_valid(&mut rng, 30);
        let has_sys = h.first().is_some_and(|m| m.role == Role::System);
        // LangChain charges priming twice when it keeps a system message apart.
        let priming = if has_sys || rng.pct(50) { 0 } else { rng.below(5) };
        let total: u64 = h.iter().map(|m| m.tokens).sum::<u64>() + priming;
        let Some(l) = h.iter().rposition(MessageInfo::is_user_turn) else {
            continue;
        };
        let need: u64 = h[l..].iter().map(|m| m.tokens).sum::<u64>() + if has_sys { h[0].tokens } else { 0 } + priming;
        let budget = need + rng.below(total - need + 5);
        let o = FitOptions { keep_last_user: rng.pct(50), reply_priming: priming, ..FitOptions::default() };
        assert_eq!(kept(&h, budget, &o), langchain_trim(&h, budget, priming), "{h:?} budget {budget}");
        compared += 1;
    }
    assert!(compared > 2500, "{compared}");
}

// ---------- property tests ----------

/// xorshift64: tiny, deterministic, good enough to explore histories.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

fn gen_tokens(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=2 => 0,
        3..=7 => 500 + rng.below(5000),
        _ => 1 + rng.below(40),
    }
}

/// Histories with every kind of damage the pairing rules must survive.
fn gen_history(rng: &mut Rng, max_len: u64) -> Vec<MessageInfo> {
    let target = rng.below(max_len + 1) as usize;
    let mut h: Vec<MessageInfo> = Vec::new();
    let mut next = 0u64;
    let mut fresh = move || {
        next += 1;
        format!("id{next}")
    };
    let mut old: Vec<String> = Vec::new();
    if rng.pct(50) {
        h.push(sys(gen_tokens(rng)));
    }
    while h.len() < target {
        let t = gen_tokens(rng);
        match rng.below(100) {
            0..=3 => h.push(msg(if rng.pct(50) { Role::System } else { Role::Developer }, t)),
            4..=27 => h.push(user(t)),
            28..=40 => h.push(MessageInfo { has_content: rng.pct(90), ..asst(t) }),
            41..=87 => {
                let mut ids: Vec<String> = (0..1 + rng.below(3)).map(|_| fresh()).collect();
                if rng.pct(5) {
                    ids.push(ids[0].clone());
                }
                if rng.pct(4) && !old.is_empty() {
                    ids.push(old[rng.below(old.len() as u64) as usize].clone());
                }
                h.push(MessageInfo { call_ids: ids.clone().into(), has_content: rng.pct(40), ..asst(t) });
                let mut res: Vec<String> = Vec::new();
                for id in &ids {
                    if !res.contains(id) {
                        res.push(id.clone());
                    }
                }
                rng.shuffle(&mut res);
                if rng.pct(12) {
                    res.remove(rng.below(res.len() as u64) as usize);
                }
                if rng.pct(5) && !res.is_empty() {
                    res.push(res[0].clone());
                }
                if rng.pct(4) {
                    res.push(fresh());
                }
                if rng.pct(4) {
                    h.push(sys(gen_tokens(rng)));
                }
                let cut = if rng.pct(4) { rng.below(res.len() as u64 + 1) as usize } else { usize::MAX };
                let anthropic = rng.pct(35);
                let mut k = 0;
                while k < res.len() {
                    if k == cut {
                        h.push(user(gen_tokens(rng)));
                    }
                    // Anthropic style packs one or more results per user message.
                    let take = if anthropic { 1 + rng.below(res.len() as u64) as usize } else { 1 };
                    let ids: Vec<String> = res.iter().skip(k).take(take).cloned().collect();
                    k += ids.len();
                    let role = if anthropic { Role::User } else { Role::Tool };
                    h.push(MessageInfo { result_ids: ids.into(), ..msg(role, gen_tokens(rng)) });
                }
                old.extend(ids);
            }
            88..=92 => {
                let id = if !old.is_empty() && rng.pct(50) {
                    old[rng.below(old.len() as u64) as usize].clone()
                } else {
                    fresh()
                };
                let role = if rng.pct(50) { Role::Tool } else { Role::User };
                h.push(MessageInfo { result_ids: vec![id].into(), ..msg(role, t) });
            }
            93..=96 => {
                let role = [Role::Function, Role::Other, Role::Tool][rng.below(3) as usize];
                h.push(msg(role, t));
            }
            _ => h.push(MessageInfo { call_ids: vec![fresh()].into(), result_ids: vec![fresh()].into(), ..asst(t) }),
        }
    }
    h
}

fn gen_opts(rng: &mut Rng, n: usize) -> FitOptions {
    let pinned =
        if rng.pct(25) { (0..1 + rng.below(2)).map(|_| rng.below(n as u64 + 2) as usize).collect() } else { vec![] };
    FitOptions {
        keep_system: rng.pct(80),
        keep_last_user: rng.pct(75),
        start_on_user: rng.pct(75),
        pinned,
        unanswered: if rng.pct(50) { Unanswered::Drop } else { Unanswered::Strip },
        reply_priming: if rng.pct(50) { 0 } else { rng.below(6) },
        max_messages: None,
        max_turns: None,
    }
}

fn gen_budget(rng: &mut Rng, total: u64) -> u64 {
    match rng.below(7) {
        0 => 0,
        1 => rng.below(20),
        2 => total,
        3 => total + rng.below(10),
        4 => rng.below(total + 1),
        5 => rng.below(total / 3 + 1),
        _ => total.saturating_sub(rng.below(30)),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    Ok,
    Orphan,
    Unanswered,
}

/// The pairing rules, written the slow obvious way.
struct Reference {
    verdict: Vec<V>,
    unit_of: Vec<Option<usize>>,
    units: Vec<Vec<usize>>,
    strip: Vec<(usize, Vec<String>)>,
    /// Tokens as sent (stripped messages recounted).
    eff: Vec<u64>,
}

fn reference(msgs: &[MessageInfo], mode: Unanswered, rc: &dyn Fn(usize, &[String]) -> u64) -> Reference {
    let n = msgs.len();
    let mut r = Reference {
        verdict: vec![V::Ok; n],
        unit_of: vec![None; n],
        units: vec![],
        strip: vec![],
        eff: msgs.iter().map(|m| m.tokens).collect(),
    };
    let mut i = 0;
    while i < n {
        let m = &msgs[i];
        if !m.result_ids.is_empty() {
            r.verdict[i] = V::Orphan;
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while !m.call_ids.is_empty() && end < n && !msgs[end].result_ids.is_empty() && msgs[end].call_ids.is_empty() {
            end += 1;
        }
        let m_calls = m.call_ids.to_vec();
        let once = |id: &String| m_calls.iter().filter(|c| *c == id).count() == 1;
        let mut answered: Vec<String> = vec![];
        let mut members = vec![i];
        for (j, next) in msgs.iter().enumerate().take(end).skip(i + 1) {
            let ids = &next.result_ids.to_vec();
            let distinct = (0..ids.len()).all(|k| !ids[..k].contains(&ids[k]));
            if distinct && ids.iter().all(|id| once(id) && !answered.contains(id)) {
                answered.extend(ids.iter().cloned());
                members.push(j);
            } else {
                r.verdict[j] = V::Orphan;
            }
        }
        let mut open: Vec<String> = vec![];
        for id in &m_calls {
            if !answered.contains(id) && !open.contains(id) {
                open.push(id.clone());
            }
        }
        let keep = open.is_empty() || (mode == Unanswered::Strip && (!answered.is_empty() || m.has_content));
        if keep {
            if !open.is_empty() {
                r.eff[i] = rc(i, &open);
                r.strip.push((i, open));
            }
            for &k in &members {
                r.unit_of[k] = Some(r.units.len());
            }
            r.units.push(members);
        } else {
            for &k in &members {
                r.verdict[k] = V::Unanswered;
            }
        }
        i = end;
    }
    r
}

/// Which units are pinned (None: a bad explicit pin).
fn reference_pins(msgs: &[MessageInfo], r: &Reference, o: &FitOptions) -> Option<Vec<bool>> {
    let mut pinned = vec![false; r.units.len()];
    for &p in &o.pinned {
        pinned[r.unit_of.get(p).copied().flatten()?] = true;
    }
    for (i, m) in msgs.iter().enumerate() {
        if o.keep_system && m.role.is_system() {
            if let Some(u) = r.unit_of[i] {
                pinned[u] = true;
            }
        }
    }
    if o.keep_last_user {
        if let Some(u) = (0..r.units.len()).rev().find(|&u| msgs[r.units[u][0]].is_user_turn()) {
            pinned[u] = true;
        }
    }
    Some(pinned)
}

/// The selection rules, written the slow obvious way: list the growth steps (units, then
/// rounds) newest first and re-sum everything for each one.
fn reference_fit(
    msgs: &[MessageInfo],
    budget: u64,
    o: &FitOptions,
    rc: &dyn Fn(usize, &[String]) -> u64,
) -> std::result::Result<(Vec<usize>, StopReason), &'static str> {
    let r = reference(msgs, o.unanswered, rc);
    let pinned = reference_pins(msgs, &r, o).ok_or("value")?;
    let nu = r.units.len();
    let cost =
        |us: &[usize]| -> u128 { us.iter().flat_map(|&u| r.units[u].iter()).map(|&i| u128::from(r.eff[i])).sum() };
    let pins: Vec<usize> = (0..nu).filter(|&u| pinned[u]).collect();
    // An empty prompt primes no reply, so it fits any budget.
    let fits = |us: &[usize]| us.is_empty() || cost(us) + u128::from(o.reply_priming) <= u128::from(budget);
    if !fits(&pins) {
        return Err("budget");
    }
    let is_user = |u: usize| msgs[r.units[u][0]].is_user_turn();
    let last = (0..nu).rev().find(|&u| is_user(u));
    let floor = match last {
        Some(l) if o.start_on_user => l,
        _ => 0,
    };
    let mut steps: Vec<Vec<usize>> = (floor..nu).rev().filter(|&u| !pinned[u]).map(|u| vec![u]).collect();
    let mut end = floor;
    for k in (0..floor).rev().filter(|&k| is_user(k)) {
        steps.push((k..end).filter(|&u| !pinned[u]).collect());
        end = k;
    }
    let mut chosen = pins.clone();
    let mut stopped = false;
    for s in steps {
        let mut with = chosen.clone();
        with.extend(&s);
        if fits(&with) {
            chosen = with;
        } else {
            stopped = true;
            break;
        }
    }
    let stop = if stopped {
        StopReason::Budget
    } else if chosen.len() < nu {
        StopReason::StartOnUser
    } else {
        StopReason::AllFit
    };
    let mut kept: Vec<usize> = chosen.iter().flat_map(|&u| r.units[u].iter().copied()).collect();
    kept.sort_unstable();
    Ok((kept, stop))
}

/// The kept sequence is a valid request: every call answered right after it, exactly once,
/// every result right after its call.
fn assert_valid_request(msgs: &[MessageInfo], p: &FitPlan) {
    let strip: HashMap<usize, &Vec<String>> = p.stripped.iter().map(|(i, ids)| (*i, ids)).collect();
    let mut k = 0;
    while k < p.kept.len() {
        let i = p.kept[k];
        let m = &msgs[i];
        assert!(m.result_ids.is_empty(), "kept result {i} does not follow its call");
        let calls: Vec<&str> =
            m.call_ids.iter().filter(|id| strip.get(&i).is_none_or(|s| !s.iter().any(|x| x == id))).collect();
        k += 1;
        if calls.is_empty() {
            assert!(m.call_ids.is_empty() || m.has_content, "message {i} kept empty");
            continue;
        }
        let mut open: HashSet<&str> = HashSet::new();
        for id in calls {
            assert!(open.insert(id), "message {i} keeps duplicate call id {id}");
        }
        while k < p.kept.len() && !msgs[p.kept[k]].result_ids.is_empty() {
            for id in &msgs[p.kept[k]].result_ids {
                assert!(open.remove(id), "result {} answers {id} not open in call {i}", p.kept[k]);
            }
            k += 1;
        }
        assert!(open.is_empty(), "call {i} kept with unanswered {open:?}");
    }
    for (i, ids) in &p.stripped {
        assert!(p.kept.binary_search(i).is_ok() && !ids.is_empty());
        assert!(ids.iter().all(|id| msgs[*i].call_ids.contains(id)));
    }
}

/// Checks the window invariants of a fit result against the reference pairing.
fn check_invariants(
    msgs: &[MessageInfo],
    budget: u64,
    o: &FitOptions,
    res: &Result<FitPlan>,
    rc: &dyn Fn(usize, &[String]) -> u64,
) {
    let n = msgs.len();
    let r = reference(msgs, o.unanswered, rc);
    let Some(pin_units) = reference_pins(msgs, &r, o) else {
        assert!(matches!(res, Err(Error::Value(_))), "{res:?}");
        return;
    };
    let valid = |i: usize| r.verdict[i] == V::Ok;
    let pinned = |i: usize| r.unit_of[i].is_some_and(|u| pin_units[u]);
    let pins: u128 = (0..n).filter(|&i| pinned(i)).map(|i| u128::from(r.eff[i])).sum();
    let priming = u128::from(o.reply_priming);
    // (1) nothing pinned and no room for the priming: the empty window (it primes nothing)
    if !pin_units.iter().any(|&p| p) && priming > u128::from(budget) {
        let p = res.as_ref().expect("nothing pinned, so fit must succeed");
        assert!(p.kept.is_empty() && p.tokens == 0, "{p:?}");
        return;
    }
    // the error exactly when the pins do not fit
    if pins + priming > u128::from(budget) {
        assert!(matches!(res, Err(Error::Budget(_))), "{res:?}");
        return;
    }
    let p = res.as_ref().expect("pins fit, so fit must succeed");
    let sent: u128 = p.kept.iter().map(|&i| u128::from(r.eff[i])).sum();
    assert_eq!(u128::from(p.tokens), sent + if p.kept.is_empty() { 0 } else { priming });
    assert!(p.tokens <= budget);
    assert_eq!(u128::from(p.stats.pins_tokens), pins);
    // (2) partition, both increasing
    assert!(p.kept.windows(2).all(|w| w[0] < w[1]) && p.dropped.windows(2).all(|w| w[0] < w[1]));
    let mut all: Vec<usize> = p.kept.iter().chain(&p.dropped).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..n).collect::<Vec<_>>());
    assert_eq!((p.stats.messages_kept, p.stats.messages_dropped), (p.kept.len(), p.dropped.len()));
    let mut is_kept = vec![false; n];
    for &i in &p.kept {
        is_kept[i] = true;
        assert!(valid(i), "kept invalid message {i}");
    }
    // (3) pins kept
    for i in 0..n {
        if pinned(i) || (o.keep_system && msgs[i].role.is_system() && valid(i)) {
            assert!(is_kept[i], "pin {i} dropped");
        }
    }
    let last_user = (0..n).rev().find(|&i| valid(i) && msgs[i].is_user_turn());
    if o.keep_last_user {
        assert!(last_user.is_none_or(|l| is_kept[l]));
    }
    // (4) a valid request, with exactly the reference's strips
    assert_valid_request(msgs, p);
    let strips: Vec<(usize, Vec<String>)> = r.strip.iter().filter(|(i, _)| is_kept[*i]).cloned().collect();
    assert_eq!(p.stripped, strips);
    // (5) contiguous window, starting on a user turn when it reaches before the latest one
    let w = p.kept.iter().copied().find(|&i| !pinned(i)).unwrap_or(n);
    for (i, &k) in is_kept.iter().enumerate().skip(w) {
        assert!(!valid(i) || k, "window has a hole at {i}");
    }
    if let (true, Some(l)) = (o.start_on_user, last_user) {
        if w < l {
            let u = (0..=w).rev().find(|&i| valid(i) && msgs[i].is_user_turn()).expect("round start");
            assert!((u..w).all(|i| !valid(i) || pinned(i)), "window starts mid-round at {w}");
        }
    }
    // (6) maximal
    // adding to an empty window also pays the priming
    let unpaid = if p.kept.is_empty() { priming } else { 0 };
    let room = u128::from(budget - p.tokens).saturating_sub(unpaid);
    let next = (0..w).rev().find(|&i| valid(i) && !pinned(i));
    match next {
        None => assert_eq!(p.stats.stop_reason, StopReason::AllFit),
        Some(c) if o.start_on_user && last_user.is_some_and(|l| c < l) => {
            match (0..=c).rev().find(|&i| valid(i) && msgs[i].is_user_turn()) {
                None => assert_eq!(p.stats.stop_reason, StopReason::StartOnUser),
                Some(u) => {
                    let cost: u128 = (u..w).filter(|&i| valid(i) && !pinned(i)).map(|i| u128::from(r.eff[i])).sum();
                    assert!(cost > room, "round at {u} ({cost}) fits in {room}");
                    assert_eq!(p.stats.stop_reason, StopReason::Budget);
                }
            }
        }
        Some(c) => {
            let unit = &r.units[r.unit_of[c].expect("valid")];
            let cost: u128 = unit.iter().map(|&i| u128::from(r.eff[i])).sum();
            assert!(cost > room, "unit {unit:?} ({cost}) fits in {room}");
            assert_eq!(p.stats.stop_reason, StopReason::Budget);
        }
    }
    // stats
    let dropped: u128 = p.dropped.iter().map(|&i| u128::from(msgs[i].tokens)).sum();
    assert_eq!(u128::from(p.stats.tokens_dropped), dropped);
    assert_eq!(u128::from(p.stats.tokens_kept), sent);
    assert_eq!(p.stats.orphans_removed, r.verdict.iter().filter(|v| **v == V::Orphan).count());
    assert_eq!(p.stats.unanswered_removed, r.verdict.iter().filter(|v| **v == V::Unanswered).count());
}

#[test]
fn property_invariants_hold() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    for round in 0..6000 {
        let h = gen_history(&mut rng, if round % 10 == 0 { 80 } else { 25 });
        let rc = recount_for(&h);
        let o = gen_opts(&mut rng, h.len());
        let total = h.iter().map(|m| m.tokens).sum::<u64>() + o.reply_priming;
        for _ in 0..3 {
            let budget = gen_budget(&mut rng, total);
            let res = fit(&h, budget, &o, &rc);
            // (7) deterministic
            assert_eq!(format!("{res:?}"), format!("{:?}", fit(&h, budget, &o, &rc)));
            check_invariants(&h, budget, &o, &res, &rc);
            let expect = reference_fit(&h, budget, &o, &rc);
            let kind = match (&res, &expect) {
                (Ok(p), Ok((k, stop))) => {
                    assert_eq!((&p.kept, p.stats.stop_reason), (k, *stop), "{h:?} {o:?} budget {budget}");
                    p.stats.stop_reason.as_str()
                }
                (Err(Error::Value(_)), Err("value")) => "value",
                (Err(Error::Budget(_)), Err("budget")) => "budget_error",
                other => panic!("{other:?}\n{h:?} {o:?} budget {budget}"),
            };
            *seen.entry(kind).or_default() += 1;
            if p_has_damage(&h) {
                *seen.entry("damaged").or_default() += 1;
            }
        }
    }
    eprintln!("{seen:?}");
    for kind in ["all_fit", "budget", "start_on_user", "value", "budget_error", "damaged"] {
        assert!(seen.get(kind).copied().unwrap_or(0) > 300, "too few {kind}: {seen:?}");
    }
}

fn p_has_damage(h: &[MessageInfo]) -> bool {
    let r = repair(h, Unanswered::Drop, 0, &no_recount);
    r.stats.orphans_removed + r.stats.unanswered_removed > 0
}

#[test]
fn property_repair_matches_reference() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for _ in 0..4000 {
        let h = gen_history(&mut rng, 30);
        let rc = recount_for(&h);
        for mode in [Unanswered::Drop, Unanswered::Strip] {
            let p = repair(&h, mode, 3, &rc);
            let r = reference(&h, mode, &rc);
            let valid: Vec<usize> = (0..h.len()).filter(|&i| r.verdict[i] == V::Ok).collect();
            assert_eq!(p.kept, valid, "{h:?}");
            assert_eq!(p.stripped, r.strip);
            let primed = if valid.is_empty() { 0 } else { 3 };
            assert_eq!(p.tokens, valid.iter().map(|&i| r.eff[i]).sum::<u64>() + primed);
            assert_valid_request(&h, &p);
            // Repairing a repaired history changes nothing.
            let again: Vec<MessageInfo> = p
                .kept
                .iter()
                .map(|&i| {
                    let mut m = h[i].clone();
                    if let Some((_, ids)) = p.stripped.iter().find(|(k, _)| *k == i) {
                        m.call_ids = m.call_ids.iter().filter(|id| !ids.iter().any(|x| x == id)).collect();
                    }
                    m
                })
                .collect();
            let q = repair(&again, mode, 0, &no_recount);
            assert_eq!(q.kept.len(), again.len());
        }
    }
}

// ---------- message and turn caps ----------

fn capped(max_messages: Option<usize>, max_turns: Option<usize>) -> FitOptions {
    FitOptions { max_messages, max_turns, ..FitOptions::default() }
}

#[test]
fn max_messages_keeps_whole_rounds_and_names_the_cap() {
    // sys | u a | u call tool tool | u   -> rounds of 2 and 4 messages before the last user
    let h = [sys(1), user(1), asst(1), user(1), call(1, &["a", "b"]), tool(1, "a"), tool(1, "b"), user(1)];
    let p = run(&h, 1000, &capped(Some(6), None)).unwrap();
    // pins: sys + last user = 2; the newest round (4 messages) fits, the older (2) would make 8
    assert_eq!(p.kept, vec![0, 3, 4, 5, 6, 7]);
    assert_eq!(p.stats.stop_reason, StopReason::MaxMessages);
    // one message short of the round: the round is not split, so it is left out whole
    let p = run(&h, 1000, &capped(Some(5), None)).unwrap();
    assert_eq!(p.kept, vec![0, 7]);
    assert_eq!(p.stats.stop_reason, StopReason::MaxMessages);
    // the budget is named when it refuses too
    assert_eq!(run(&h, 4, &capped(Some(5), None)).unwrap().stats.stop_reason, StopReason::Budget);
}

#[test]
fn max_messages_never_splits_a_call_from_its_results_by_units() {
    let h = [user(1), call(1, &["a", "b"]), tool(1, "a"), tool(1, "b"), asst(1)];
    let o = FitOptions { max_messages: Some(4), ..units_only() };
    // last user (pinned) + the answer fit; the 3-message call unit would make 5
    assert_eq!(kept(&h, 1000, &o), vec![0, 4]);
}

#[test]
fn max_turns_counts_user_turns_with_the_pinned_one() {
    let h = [user(1), asst(1), user(1), asst(1), user(1), asst(1), user(1)];
    let p = run(&h, 1000, &capped(None, Some(2))).unwrap();
    assert_eq!(p.kept, vec![4, 5, 6]);
    assert_eq!(p.stats.stop_reason, StopReason::MaxTurns);
    let p = run(&h, 1000, &capped(None, Some(4))).unwrap();
    assert_eq!((p.kept.len(), p.stats.stop_reason), (7, StopReason::AllFit));
}

#[test]
fn pins_over_a_cap_are_kept_and_nothing_else() {
    let h = [sys(1), sys(1), user(1), asst(1), user(1)];
    let p = run(&h, 1000, &capped(Some(1), Some(0))).unwrap();
    assert_eq!(p.kept, vec![0, 1, 4]);
    assert_eq!(p.stats.stop_reason, StopReason::MaxMessages);
}

#[test]
fn no_caps_is_the_uncapped_fit() {
    let h = [sys(3), user(2), call(4, &["a"]), tool(5, "a"), asst(2), user(3), asst(1), user(2)];
    for b in 0..30 {
        let a = run(&h, b, &FitOptions::default());
        let c = run(&h, b, &capped(Some(h.len()), Some(h.len())));
        assert_eq!(a.map(|p| p.kept).ok(), c.map(|p| p.kept).ok(), "budget {b}");
    }
}

// ---------- results that answer nothing, beside text of their own ----------

/// A user message carrying tool_result blocks for `ids` and new text of its own.
fn results_and_text(t: u64, ids: &[&str]) -> MessageInfo {
    MessageInfo { own_content: true, ..results(t, ids) }
}

#[test]
fn an_orphan_result_beside_new_text_keeps_the_text() {
    // the tool_use went (a cut, a compaction): its result is an orphan, the words are not
    let h = [sys(5), results_and_text(40, &["gone"])];
    let recount = |i: usize, ids: &[String]| {
        assert_eq!((i, ids), (1, &strs(&["gone"])[..]), "recounted without its results");
        12
    };
    let primed = FitOptions { reply_priming: 3, ..FitOptions::default() };
    for plan in [fit(&h, u64::MAX >> 8, &primed, &recount).unwrap(), repair(&h, Unanswered::Drop, 3, &recount)] {
        assert_eq!(plan.kept, [0, 1], "the user's words are sent");
        assert_eq!(plan.stripped, [(1, strs(&["gone"]))], "without the orphan block");
        assert_eq!(plan.tokens, 5 + 12 + 3, "counted as sent");
        assert_eq!((plan.stats.results_stripped, plan.stats.orphans_removed), (1, 0));
    }
    // it is now the latest user turn: pinned, so the round after it is what the budget trims
    let plan = fit(&h, 20, &FitOptions::default(), &recount).unwrap();
    assert_eq!(plan.kept, [0, 1]);
    let only_results = [sys(5), results(40, &["gone"])];
    assert_eq!(repair(&only_results, Unanswered::Drop, 3, &no_recount).kept, [0], "nothing of its own: dropped");
}

#[test]
fn a_result_with_text_inside_a_run_ends_the_run_when_it_answers_nothing() {
    // call(a), [result(x) + text], tool(a): sent as is, tool(a) would no longer follow its
    // call; with the text kept as a plain message, a is unanswered and tool(a) an orphan
    let h = [user(1), call(2, &["a"]), results_and_text(9, &["x"]), tool(3, "a"), asst(4)];
    let plan = repair(&h, Unanswered::Drop, 0, &|_, _| 5);
    assert_eq!(plan.kept, [0, 2, 4]);
    assert_eq!(plan.stripped, [(2, strs(&["x"]))]);
    assert_eq!(plan.stats.results_stripped, 1);
    // a matching result with text is a result, kept whole with its call
    let ok = [user(1), call(2, &["a"]), results_and_text(9, &["a"]), asst(4)];
    let plan = repair(&ok, Unanswered::Drop, 0, &no_recount);
    assert_eq!((plan.kept, plan.stripped), (vec![0, 1, 2, 3], vec![]));
}

#[test]
fn results_dropped_with_an_unanswered_call_keep_their_text() {
    // b is never answered: the call and its partial results go, the user's text stays
    let h = [user(1), call(2, &["a", "b"]), results_and_text(9, &["a"]), asst(4)];
    let plan = repair(&h, Unanswered::Drop, 0, &|_, _| 5);
    assert_eq!(plan.kept, [0, 2, 3]);
    assert_eq!(plan.stripped, [(2, strs(&["a"]))]);
}

#[test]
fn an_empty_call_list_is_left_out_of_what_is_sent() {
    let empty = MessageInfo { empty_calls: true, ..asst(3) };
    let h = [user(1), empty.clone(), user(2), call(2, &["a"]), tool(1, "a")];
    let h = [&h[..], &[MessageInfo { empty_calls: true, ..call(2, &["b"]) }, tool(1, "b")]].concat();
    for plan in
        [repair(&h, Unanswered::Drop, 0, &no_recount), fit(&h, 1000, &FitOptions::default(), &no_recount).unwrap()]
    {
        assert_eq!(plan.kept, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(plan.stripped, [(1, vec![]), (5, vec![])], "each sent without the empty list");
        assert_eq!(plan.stats.calls_stripped, 0, "no call entry was removed");
    }
    // dropped by the budget: nothing to strip
    let plan = fit(&h, 5, &units_only(), &no_recount).unwrap();
    assert!(plan.stripped.iter().all(|(i, _)| plan.kept.contains(i)));
}

#[test]
fn a_dropped_message_counts_its_original_tokens_even_when_it_would_keep_its_text() {
    let h = [user(1), asst(1), results_and_text(40, &["gone"]), asst(2)];
    let opts = FitOptions { keep_last_user: false, ..FitOptions::default() };
    let plan = fit(&h, 3, &opts, &|_, _| 12).unwrap();
    assert_eq!(plan.kept, [3]);
    assert_eq!(plan.stats.tokens_dropped, 1 + 1 + 40, "as the caller's messages count");
    assert!(plan.stripped.is_empty() && plan.stats.results_stripped == 0);
}
