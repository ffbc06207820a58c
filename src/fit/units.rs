//! The pairing pass: which messages can be sent, and the units they form.

use super::{FitPlan, FitStats, MessageInfo, StopReason, Unanswered};
use crate::message::CallTable;

/// Whether a message can be sent at all, whatever the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Valid,
    Orphan,
    Unanswered,
}

/// A call message with its matching results, or a single plain message.
#[derive(Debug)]
pub(super) struct Unit {
    /// Its message indices are `members[start..start + len]`, increasing, head first.
    start: usize,
    len: usize,
    pub(super) user_turn: bool,
    /// Index into `Analysis::strips` when the head loses unanswered call entries.
    strip: Option<usize>,
    /// Tokens, once computed: a strip costs a `recount` call, made at most once.
    cost: Option<u128>,
}

#[derive(Debug)]
struct Strip {
    index: usize,
    ids: Vec<String>,
}

/// Marks a message index that belongs to no unit.
pub(super) const NO_UNIT: usize = usize::MAX;

/// The pairing pass: verdict and unit of every message.
pub(super) struct Analysis<'a> {
    msgs: &'a [MessageInfo],
    pub(super) verdict: Vec<Verdict>,
    /// Per message: its unit, or `NO_UNIT` when not valid.
    pub(super) unit_of: Vec<usize>,
    pub(super) units: Vec<Unit>,
    members: Vec<usize>,
    strips: Vec<Strip>,
    orphans: usize,
    unanswered: usize,
    /// Filled only for [`tool_units`]: a fit needs the verdicts, not the reasons.
    report: Option<UnitReport>,
}

/// How a history splits into tool rounds, and what in it a chat API would reject.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitReport {
    /// Contiguous spans covering every message once, in order.
    pub blocks: Vec<Block>,
    /// By message index (a call block's own problem before those of its results).
    pub problems: Vec<Problem>,
}

/// A span `start..end` of messages that a fold or a cut must keep together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub start: usize,
    pub end: usize,
    pub kind: BlockKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A message with neither calls nor results.
    Message,
    /// A call message and the run of result messages right after it (matching or not).
    ToolRound,
    /// A result message with no call message before its run.
    Orphan,
}

impl BlockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::Message => "message",
            BlockKind::ToolRound => "tool_round",
            BlockKind::Orphan => "orphan",
        }
    }
}

/// Why a message could not be sent as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The result message at `index` answers no open call of the call block before it.
    Orphan { index: usize, ids: Vec<String> },
    /// The call message at `index` leaves these ids without a result.
    Unanswered { index: usize, ids: Vec<String> },
}

impl Problem {
    pub fn index(&self) -> usize {
        match self {
            Problem::Orphan { index, .. } | Problem::Unanswered { index, .. } => *index,
        }
    }
}

/// The tool rounds and pairing problems of a history: the rule [`Analysis`] applies when
/// fitting, reported instead of applied (so checkers and folds never re-implement it).
pub fn tool_units(msgs: &[MessageInfo]) -> UnitReport {
    let mut report = Analysis::build(msgs, Unanswered::Drop, true).report.unwrap_or_default();
    // A run's orphans are found before its call's open ids are known: order by message.
    report.problems.sort_by_key(Problem::index);
    report
}

impl Unit {
    /// How many messages the unit sends.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl<'a> Analysis<'a> {
    pub(super) fn new(msgs: &'a [MessageInfo], mode: Unanswered) -> Self {
        Self::build(msgs, mode, false)
    }

    fn build(msgs: &'a [MessageInfo], mode: Unanswered, report: bool) -> Self {
        let n = msgs.len();
        let mut a = Analysis {
            msgs,
            verdict: vec![Verdict::Valid; n],
            unit_of: vec![NO_UNIT; n],
            units: Vec::new(),
            members: Vec::with_capacity(n),
            strips: Vec::new(),
            orphans: 0,
            unanswered: 0,
            report: report.then(UnitReport::default),
        };
        let mut table = CallTable::default();
        let mut matched: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < n {
            let m = &msgs[i];
            if !m.result_ids.is_empty() {
                // A result with no call block right before it. A message both calling and
                // answering is malformed in every format, so it is treated the same way.
                a.drop_as(i, Verdict::Orphan);
                a.block(i, i + 1, BlockKind::Orphan);
                i += 1;
                continue;
            }
            if m.call_ids.is_empty() {
                a.push_unit(i, &[], None);
                a.block(i, i + 1, BlockKind::Message);
                i += 1;
                continue;
            }
            // A call block: the run of pure result messages right after the call.
            let mut end = i + 1;
            while end < n && !msgs[end].result_ids.is_empty() && msgs[end].call_ids.is_empty() {
                end += 1;
            }
            table.reset(&m.call_ids);
            matched.clear();
            for (j, r) in msgs.iter().enumerate().take(end).skip(i + 1) {
                if table.answer(&r.result_ids) {
                    matched.push(j);
                } else {
                    a.drop_as(j, Verdict::Orphan);
                }
            }
            let open: Vec<String> = table.open().map(str::to_owned).collect();
            a.block(i, end, BlockKind::ToolRound);
            if let (Some(r), false) = (a.report.as_mut(), open.is_empty()) {
                r.problems.push(Problem::Unanswered { index: i, ids: open.clone() });
            }
            if open.is_empty() {
                a.push_unit(i, &matched, None);
            } else if mode == Unanswered::Strip && (table.answered() > 0 || m.has_content) {
                a.strips.push(Strip { index: i, ids: open });
                let s = a.strips.len() - 1;
                a.push_unit(i, &matched, Some(s));
            } else {
                // Drop mode, or a strip would leave an empty message. With nothing answered
                // `matched` is empty, so this only drops partial results in Drop mode.
                a.drop_as(i, Verdict::Unanswered);
                for &j in &matched {
                    a.drop_as(j, Verdict::Unanswered);
                }
            }
            i = end;
        }
        a
    }

    fn block(&mut self, start: usize, end: usize, kind: BlockKind) {
        if let Some(r) = self.report.as_mut() {
            r.blocks.push(Block { start, end, kind });
        }
    }

    fn drop_as(&mut self, i: usize, v: Verdict) {
        if let Some(slot) = self.verdict.get_mut(i) {
            *slot = v;
        }
        if let (Some(r), Verdict::Orphan) = (self.report.as_mut(), v) {
            let ids = self.msgs.get(i).map(|m| m.result_ids.to_vec()).unwrap_or_default();
            r.problems.push(Problem::Orphan { index: i, ids });
        }
        match v {
            Verdict::Orphan => self.orphans += 1,
            Verdict::Unanswered => self.unanswered += 1,
            Verdict::Valid => {}
        }
    }

    fn push_unit(&mut self, head: usize, results: &[usize], strip: Option<usize>) {
        let u = self.units.len();
        let start = self.members.len();
        for &i in std::iter::once(&head).chain(results) {
            self.members.push(i);
            if let Some(slot) = self.unit_of.get_mut(i) {
                *slot = u;
            }
        }
        let user_turn = self.msgs.get(head).is_some_and(MessageInfo::is_user_turn);
        self.units.push(Unit { start, len: 1 + results.len(), user_turn, strip, cost: None });
    }

    /// Tokens of unit `u` as it would be sent (stripped head recounted).
    pub(super) fn cost(&mut self, u: usize, recount: &dyn Fn(usize, &[String]) -> u64) -> u128 {
        let Some(unit) = self.units.get(u) else {
            return 0;
        };
        if let Some(c) = unit.cost {
            return c;
        }
        let tokens = |i: usize| self.msgs.get(i).map_or(0, |m| u128::from(m.tokens));
        let members = self.members.get(unit.start..unit.start + unit.len).unwrap_or(&[]);
        let mut c: u128 = members.iter().map(|&i| tokens(i)).sum();
        if let Some(s) = unit.strip.and_then(|s| self.strips.get(s)) {
            c = c.saturating_sub(tokens(s.index)) + u128::from(recount(s.index, &s.ids));
        }
        if let Some(unit) = self.units.get_mut(u) {
            unit.cost = Some(c);
        }
        c
    }

    /// Builds the plan keeping the units flagged in `keep`.
    pub(super) fn assemble(
        &mut self,
        keep: &[bool],
        priming: u64,
        pins: u128,
        stop: StopReason,
        recount: &dyn Fn(usize, &[String]) -> u64,
    ) -> FitPlan {
        let mut kept = Vec::with_capacity(self.msgs.len());
        let mut dropped = Vec::new();
        let mut tokens_dropped = 0u128;
        let round_start = round_start(self.msgs);
        let mut round_lost = Vec::new();
        for (i, m) in self.msgs.iter().enumerate() {
            let unit = self.unit_of.get(i).copied().unwrap_or(NO_UNIT);
            if keep.get(unit).copied().unwrap_or(false) {
                kept.push(i);
            } else {
                dropped.push(i);
                tokens_dropped += u128::from(m.tokens);
                // a message with no unit cannot be sent at all: its pairing dropped it
                if i >= round_start && unit != NO_UNIT {
                    round_lost.push(i);
                }
            }
        }
        let mut tokens_kept = 0u128;
        let mut stripped = Vec::new();
        for u in 0..self.units.len() {
            if !keep.get(u).copied().unwrap_or(false) {
                continue;
            }
            tokens_kept += self.cost(u, recount);
            if let Some(s) = self.units[u].strip.and_then(|s| self.strips.get(s)) {
                stripped.push((s.index, s.ids.clone()));
            }
        }
        let calls_stripped = stripped.iter().map(|(_, ids): &(usize, Vec<String>)| ids.len()).sum();
        self.drop_empty_call_lists(&kept, &mut stripped);
        let sat = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        let stats = FitStats {
            pins_tokens: sat(pins),
            tokens_kept: sat(tokens_kept),
            tokens_dropped: sat(tokens_dropped),
            messages_kept: kept.len(),
            messages_dropped: dropped.len(),
            orphans_removed: self.orphans,
            unanswered_removed: self.unanswered,
            calls_stripped,
            results_stripped: 0,
            stop_reason: stop,
        };
        // An empty prompt is never sent, so it primes no reply.
        let primed = if kept.is_empty() { 0 } else { u128::from(priming) };
        FitPlan { kept, dropped, stripped, tokens: sat(tokens_kept + primed), stats, round_start, round_lost }
    }
}

impl Analysis<'_> {
    /// Adds each kept message with an empty `tool_calls` list (which providers reject) to
    /// `stripped` with no ids, so it is sent without the list, unless it is stripped anyway.
    fn drop_empty_call_lists(&self, kept: &[usize], stripped: &mut Vec<(usize, Vec<String>)>) {
        let before = stripped.len();
        for &i in kept {
            if self.msgs[i].empty_calls && !stripped[..before].iter().any(|(s, _)| *s == i) {
                stripped.push((i, Vec::new()));
            }
        }
        if stripped.len() > before {
            stripped.sort_by_key(|(i, _)| *i);
        }
    }
}

/// Where the round in progress starts: right after the latest user turn (a user message
/// carrying tool results is none), or 0 when there is no user turn. An agent that loses this
/// round's tool results calls the tools again, so a fit reports what of it was left out.
pub fn round_start(msgs: &[MessageInfo]) -> usize {
    msgs.iter().rposition(MessageInfo::is_user_turn).map_or(0, |i| i + 1)
}

/// Per message, whether it can be sent at all (pairs correctly), whatever the budget and
/// the token counts: the window search bounds itself with it before anything is counted.
pub(super) fn sendable(msgs: &[MessageInfo]) -> Vec<bool> {
    Analysis::new(msgs, Unanswered::Drop).verdict.iter().map(|v| *v == Verdict::Valid).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn strs(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }
    fn text(role: Role) -> MessageInfo {
        MessageInfo { role, tokens: 1, has_content: true, ..Default::default() }
    }
    fn call(ids: &[&str]) -> MessageInfo {
        MessageInfo { call_ids: strs(ids).into(), ..text(Role::Assistant) }
    }
    fn answer(role: Role, ids: &[&str]) -> MessageInfo {
        MessageInfo { result_ids: strs(ids).into(), ..text(role) }
    }
    fn spans(r: &UnitReport) -> Vec<(usize, usize, &'static str)> {
        r.blocks.iter().map(|b| (b.start, b.end, b.kind.as_str())).collect()
    }

    #[test]
    fn a_valid_history_is_blocks_without_problems() {
        // OpenAI tool messages, then an Anthropic-style user message answering two blocks.
        let h = [
            text(Role::User),
            call(&["a", "b"]),
            answer(Role::Tool, &["a"]),
            answer(Role::Tool, &["b"]),
            call(&["c", "d"]),
            answer(Role::User, &["d", "c"]),
            text(Role::Assistant),
        ];
        let r = tool_units(&h);
        assert_eq!(spans(&r), [(0, 1, "message"), (1, 4, "tool_round"), (4, 6, "tool_round"), (6, 7, "message")]);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    #[test]
    fn orphans_and_unanswered_calls_are_reported_in_message_order() {
        let h = [
            answer(Role::Tool, &["x"]), // no call before it
            call(&["a", "b", "b"]),     // b is duplicated: unanswerable
            answer(Role::Tool, &["z"]), // answers nothing of message 1
            answer(Role::User, &["a"]), // fine
            answer(Role::Tool, &["b"]), // the duplicate cannot be answered
            text(Role::User),
            answer(Role::Tool, &["a"]), // late: the user turn closed the round
        ];
        let r = tool_units(&h);
        assert_eq!(spans(&r), [(0, 1, "orphan"), (1, 5, "tool_round"), (5, 6, "message"), (6, 7, "orphan")]);
        assert_eq!(
            r.problems,
            [
                Problem::Orphan { index: 0, ids: strs(&["x"]) },
                Problem::Unanswered { index: 1, ids: strs(&["b"]) },
                Problem::Orphan { index: 2, ids: strs(&["z"]) },
                Problem::Orphan { index: 4, ids: strs(&["b"]) },
                Problem::Orphan { index: 6, ids: strs(&["a"]) },
            ]
        );
    }

    #[test]
    fn the_round_in_progress_starts_after_the_latest_user_turn() {
        let h = [text(Role::User), call(&["a"]), answer(Role::User, &["a"]), text(Role::Assistant)];
        assert_eq!(round_start(&h), 1, "a user message carrying results is no turn");
        assert_eq!(round_start(&h[1..]), 0, "no user turn: the whole history is the round");
        assert_eq!(round_start(&h[..1]), 1, "the latest message is the user turn: nothing after it");
    }

    #[test]
    fn round_lost_is_what_the_budget_left_out_of_the_round_not_what_pairing_dropped() {
        let h = [
            text(Role::System),
            text(Role::User),
            call(&["a"]),
            answer(Role::Tool, &["a"]),
            answer(Role::Tool, &["x"]), // orphan: no budget would send it
            call(&["b"]),               // unanswered: dropped by its pairing
            text(Role::Assistant),
        ];
        let a = Analysis::new(&h, Unanswered::Drop);
        let nu = a.units.len();
        let none = |_: usize, _: &[String]| 0u64;
        // keep only the pins (system, user): the round's sendable messages are lost
        let mut keep = vec![false; nu];
        keep[a.unit_of[0]] = true;
        keep[a.unit_of[1]] = true;
        let mut a = a;
        let plan = a.assemble(&keep, 3, 0, StopReason::Budget, &none);
        assert_eq!(plan.round_start, 2);
        assert_eq!(plan.round_lost, [2, 3, 6]);
        // everything sendable kept: nothing is lost, whatever pairing dropped
        let plan = a.assemble(&vec![true; nu], 3, 0, StopReason::AllFit, &none);
        assert_eq!(plan.dropped, [4, 5]);
        assert!(plan.round_lost.is_empty());
    }

    #[test]
    fn the_report_agrees_with_the_verdicts_a_fit_uses() {
        let h = [call(&["a"]), text(Role::User), answer(Role::Tool, &["a"]), call(&["b"]), answer(Role::Tool, &["b"])];
        let a = Analysis::new(&h, Unanswered::Drop);
        let r = tool_units(&h);
        let bad: Vec<usize> = (0..h.len()).filter(|&i| a.verdict[i] != Verdict::Valid).collect();
        let reported: Vec<usize> = r.problems.iter().map(Problem::index).collect();
        assert_eq!(bad, reported, "here every dropped message is itself a problem");
        assert_eq!(a.report, None, "a fit does not pay for the report");
    }
}
