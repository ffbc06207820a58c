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
}

impl<'a> Analysis<'a> {
    pub(super) fn new(msgs: &'a [MessageInfo], mode: Unanswered) -> Self {
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
                i += 1;
                continue;
            }
            if m.call_ids.is_empty() {
                a.push_unit(i, &[], None);
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

    fn drop_as(&mut self, i: usize, v: Verdict) {
        if let Some(slot) = self.verdict.get_mut(i) {
            *slot = v;
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
        for (i, m) in self.msgs.iter().enumerate() {
            let unit = self.unit_of.get(i).copied().unwrap_or(NO_UNIT);
            if keep.get(unit).copied().unwrap_or(false) {
                kept.push(i);
            } else {
                dropped.push(i);
                tokens_dropped += u128::from(m.tokens);
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
        let sat = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        let stats = FitStats {
            pins_tokens: sat(pins),
            tokens_kept: sat(tokens_kept),
            tokens_dropped: sat(tokens_dropped),
            messages_kept: kept.len(),
            messages_dropped: dropped.len(),
            orphans_removed: self.orphans,
            unanswered_removed: self.unanswered,
            calls_stripped: stripped.iter().map(|(_, ids): &(usize, Vec<String>)| ids.len()).sum(),
            stop_reason: stop,
        };
        // An empty prompt is never sent, so it primes no reply.
        let primed = if kept.is_empty() { 0 } else { u128::from(priming) };
        FitPlan { kept, dropped, stripped, tokens: sat(tokens_kept + primed), stats }
    }
}

/// Per message, whether it can be sent at all (pairs correctly), whatever the budget and
/// the token counts: the window search bounds itself with it before anything is counted.
pub(super) fn sendable(msgs: &[MessageInfo]) -> Vec<bool> {
    Analysis::new(msgs, Unanswered::Drop).verdict.iter().map(|v| *v == Verdict::Valid).collect()
}
