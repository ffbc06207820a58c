//! Budget-fitting window selection: which messages of a long history to send.
//!
//! The bindings reduce each message to a [`MessageInfo`] (role, token count, tool-call ids);
//! everything here is integer work over those facts, linear in messages plus ids.
//!
//! Two passes:
//! 1. **Pairing** (also [`repair`] alone). The results of a call message are the result
//!    messages that immediately follow it, consecutively (OpenAI's rule; Anthropic
//!    `tool_use`/`tool_result` blocks are paired the same way). A call message and its matching
//!    results form a *unit*; every other valid message is a unit of its own. Results that do not
//!    match the call block right before them are orphans and always dropped. Call ids without
//!    a result make the call *unanswered*: [`Unanswered::Drop`] drops the whole unit,
//!    [`Unanswered::Strip`] keeps the message without those call entries.
//! 2. **Window** ([`fit`]). Pins (system/developer, the latest user turn, explicit indices) are
//!    kept first; then whole units are added from the newest backwards while they fit, stopping
//!    at the first one that does not. Older than the latest user turn, with
//!    [`FitOptions::start_on_user`], the window grows by whole rounds (a user turn and what
//!    follows it up to the next one), so it always starts on a user turn.
//!
//! Token sums are done in `u128` so no input can overflow them.

use crate::error::{Error, Result};
pub use crate::message::{MessageInfo, Role};
pub use units::{round_start, tool_units, Block, BlockKind, Problem, UnitReport};
pub use window::{count_for_window, CountOnDemand, UNCOUNTED};

mod units;
mod window;

use units::{Analysis, Verdict};

/// What to do with a tool call message some of whose calls have no result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unanswered {
    /// Drop the call message and its partial results.
    #[default]
    Drop,
    /// Keep the message without its unanswered call entries (dropped if nothing is left).
    Strip,
}

/// Options of [`fit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitOptions {
    /// Pin every system/developer message, in place.
    pub keep_system: bool,
    /// Pin the latest user turn.
    pub keep_last_user: bool,
    /// Older than the latest user turn, grow the window by whole rounds so it starts on a user
    /// turn. When false, grow by units all the way.
    pub start_on_user: bool,
    /// Indices to pin; pinning any message of a unit pins the whole unit.
    pub pinned: Vec<usize>,
    pub unanswered: Unanswered,
    /// Tokens the request costs besides its messages (`count_messages(ms) - sum(count_message)`).
    pub reply_priming: u64,
    /// At most this many messages are kept (pins included); the window stops at the first
    /// unit or round that would pass it, so a call is never kept without its results.
    pub max_messages: Option<usize>,
    /// At most this many user turns are kept (pins included), counted like `max_messages`.
    pub max_turns: Option<usize>,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            keep_system: true,
            keep_last_user: true,
            start_on_user: true,
            pinned: Vec::new(),
            unanswered: Unanswered::Drop,
            reply_priming: 0,
            max_messages: None,
            max_turns: None,
        }
    }
}

/// Why the window stopped growing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StopReason {
    /// Every valid message is kept.
    #[default]
    AllFit,
    /// The next older unit (or round) did not fit in what was left of the budget.
    Budget,
    /// Everything from the first user turn on fit; older messages are left out so the window
    /// starts on a user turn.
    StartOnUser,
    /// The next older unit (or round) would pass `max_messages`.
    MaxMessages,
    /// The next older round would pass `max_turns`.
    MaxTurns,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::AllFit => "all_fit",
            StopReason::Budget => "budget",
            StopReason::StartOnUser => "start_on_user",
            StopReason::MaxMessages => "max_messages",
            StopReason::MaxTurns => "max_turns",
        }
    }
}

/// Numbers describing a plan. Token figures exclude reply priming unless said otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FitStats {
    /// Tokens of the pinned messages (after stripping).
    pub pins_tokens: u64,
    /// Tokens of the kept messages (after stripping); `FitPlan::tokens` adds reply priming.
    pub tokens_kept: u64,
    /// Original tokens of the dropped messages.
    pub tokens_dropped: u64,
    pub messages_kept: usize,
    pub messages_dropped: usize,
    /// Result messages dropped because they do not answer the call block right before them.
    pub orphans_removed: usize,
    /// Messages dropped because of unanswered calls: with `Drop` the call message and its
    /// partial results; with `Strip` call messages left with no calls and no content.
    pub unanswered_removed: usize,
    /// Call entries removed from kept messages (`Strip`).
    pub calls_stripped: usize,
    /// Kept messages whose tool results answer nothing, sent without them for the text of
    /// their own they carry (a user's new words next to an orphan `tool_result` block).
    pub results_stripped: usize,
    pub stop_reason: StopReason,
}

/// The outcome of [`fit`] or [`repair`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitPlan {
    /// Indices of the messages to send, increasing.
    pub kept: Vec<usize>,
    /// The other indices, increasing; `kept` and `dropped` partition `0..n`.
    pub dropped: Vec<usize>,
    /// Kept messages to send without some entries, by index: the unanswered call ids of a
    /// stripped call message, all the result ids of a message kept for its own content, or
    /// none for a message whose only change is losing an empty `tool_calls` list.
    pub stripped: Vec<(usize, Vec<String>)>,
    /// Tokens of the kept messages (after stripping) plus reply priming.
    pub tokens: u64,
    pub stats: FitStats,
    /// The round in progress starts here: the message after the latest user turn (0 without one).
    pub round_start: usize,
    /// Sendable messages of that round left out (by the budget or a cap, not by their pairing).
    pub round_lost: Vec<usize>,
}

/// Cleans a history without a budget: drops orphan results and unanswered calls (or strips
/// them), keeps everything else. `recount(i, ids)` gives message `i`'s tokens without the call
/// entries `ids`; it is only called for messages being stripped.
pub fn repair(
    msgs: &[MessageInfo],
    unanswered: Unanswered,
    reply_priming: u64,
    recount: &dyn Fn(usize, &[String]) -> u64,
) -> FitPlan {
    let (salvaged, kept_text) = salvage(msgs, unanswered, recount);
    let mut a = Analysis::new(&salvaged, unanswered);
    let keep = vec![true; a.units.len()];
    let mut plan = a.assemble(&keep, reply_priming, 0, StopReason::AllFit, recount);
    plan.strip_results(kept_text, msgs, &salvaged);
    plan
}

/// Messages sent without entries, each with the ids removed (see [`FitPlan::stripped`]).
type Removed = Vec<(usize, Vec<String>)>;

/// `msgs` with each message that carries tool results answering nothing (or dropped with an
/// unanswered call) but also content of its own turned into that content alone: its
/// results are removed, its tokens recounted (`recount(i, result_ids)`), and it pairs as
/// the plain message it now is. Returns the new infos and `(index, result ids)` removed.
/// Removing results can leave later ones without their call, so it repeats until stable
/// (each message at most once).
fn salvage<'a>(
    msgs: &'a [MessageInfo],
    mode: Unanswered,
    recount: &dyn Fn(usize, &[String]) -> u64,
) -> (std::borrow::Cow<'a, [MessageInfo]>, Removed) {
    let mut cur = std::borrow::Cow::Borrowed(msgs);
    let mut removed = Vec::new();
    let candidate = |m: &MessageInfo| {
        m.own_content
            && m.call_ids.is_empty()
            && !m.result_ids.is_empty()
            && !matches!(m.role, Role::Tool | Role::Function)
    };
    if !msgs.iter().any(candidate) {
        return (cur, removed);
    }
    loop {
        let verdict = Analysis::new(&cur, mode).verdict;
        let found: Vec<usize> =
            (0..cur.len()).filter(|&i| verdict[i] != units::Verdict::Valid && candidate(&cur[i])).collect();
        if found.is_empty() {
            break;
        }
        let infos = cur.to_mut();
        for i in found {
            let ids = infos[i].result_ids.to_vec();
            let m = &mut infos[i];
            m.tokens = recount(i, &ids);
            m.result_ids = Default::default();
            (m.has_content, m.own_content) = (true, false);
            removed.push((i, ids));
        }
    }
    (cur, removed)
}

impl FitPlan {
    /// Records the messages `salvage` kept without their results, where they are kept; a
    /// dropped one counts its `original` tokens among the dropped, as every dropped message.
    fn strip_results(
        &mut self,
        removed: Vec<(usize, Vec<String>)>,
        original: &[MessageInfo],
        salvaged: &[MessageInfo],
    ) {
        if removed.is_empty() {
            return;
        }
        let before = self.stripped.len();
        for (i, ids) in removed {
            if self.kept.binary_search(&i).is_ok() {
                self.stripped.push((i, ids));
            } else {
                let dropped = u128::from(self.stats.tokens_dropped).saturating_sub(u128::from(salvaged[i].tokens));
                let sum = dropped + u128::from(original[i].tokens);
                self.stats.tokens_dropped = u64::try_from(sum).unwrap_or(u64::MAX);
            }
        }
        self.stats.results_stripped = self.stripped.len() - before;
        self.stripped.sort_by_key(|(i, _)| *i);
    }
}

/// Picks the messages of `msgs` to send within `budget` tokens (reply priming included).
///
/// Errors: [`Error::Value`] when `opts.pinned` names an index out of range or a message that
/// cannot be sent (an orphan, or a dropped unanswered call); [`Error::Budget`] when the pins
/// plus reply priming alone exceed `budget`. `recount` is as for [`repair`].
pub fn fit(
    msgs: &[MessageInfo],
    budget: u64,
    opts: &FitOptions,
    recount: &dyn Fn(usize, &[String]) -> u64,
) -> Result<FitPlan> {
    let (salvaged, kept_text) = salvage(msgs, opts.unanswered, recount);
    let mut plan = select(&salvaged, budget, opts, recount)?;
    plan.strip_results(kept_text, msgs, &salvaged);
    Ok(plan)
}

/// The window of [`fit`] over messages whose pairing needs no salvage.
fn select(
    msgs: &[MessageInfo],
    budget: u64,
    opts: &FitOptions,
    recount: &dyn Fn(usize, &[String]) -> u64,
) -> Result<FitPlan> {
    let mut a = Analysis::new(msgs, opts.unanswered);
    let nu = a.units.len();
    let mut slot = vec![Slot::Out; nu];
    let latest_user = a.units.iter().rposition(|u| u.user_turn);

    // The first reason a unit is pinned decides where its tokens go in the error breakdown.
    let pin = |slot: &mut [Slot], u: usize, why: Pin| {
        if let Some(s @ Slot::Out) = slot.get_mut(u) {
            *s = Slot::Pinned(why);
        }
    };
    if opts.keep_system {
        for (i, m) in msgs.iter().enumerate() {
            // A system message that cannot be sent (tool ids that do not pair) has no unit: skipped.
            if m.role.is_system() {
                pin(&mut slot, a.unit_of[i], Pin::System);
            }
        }
    }
    if opts.keep_last_user {
        if let Some(l) = latest_user {
            pin(&mut slot, l, Pin::LastUser);
        }
    }
    for &p in &opts.pinned {
        match a.verdict.get(p) {
            None => {
                return Err(Error::Value(format!(
                    "pinned: index {p} is out of range for a history of {} messages",
                    msgs.len()
                )))
            }
            Some(Verdict::Orphan) => {
                return Err(Error::Value(format!(
                    "pinned: message {p} is an orphan tool result (it does not answer the \
                     tool call right before it) and cannot be sent"
                )))
            }
            Some(Verdict::Unanswered) => {
                return Err(Error::Value(match opts.unanswered {
                    Unanswered::Drop => format!(
                        "pinned: message {p} belongs to a tool call with unanswered call ids, \
                         which unanswered=\"drop\" removes, so it cannot be sent"
                    ),
                    Unanswered::Strip => format!(
                        "pinned: message {p} is a tool call with only unanswered call ids and \
                         no other content, so nothing of it can be sent"
                    ),
                }))
            }
            Some(Verdict::Valid) => pin(&mut slot, a.unit_of[p], Pin::Explicit),
        }
    }

    let mut by_pin = [0u128; 3];
    for (u, s) in slot.iter().enumerate() {
        if let Slot::Pinned(why) = *s {
            by_pin[why as usize] += a.cost(u, recount);
        }
    }
    let pins: u128 = by_pin.iter().sum();
    let pinned_any = slot.iter().any(|s| matches!(s, Slot::Pinned(_)));
    if !pinned_any && u128::from(opts.reply_priming) > u128::from(budget) {
        // Nothing must be sent and nothing can be: the empty window, which primes no reply.
        let stop = if nu == 0 { StopReason::AllFit } else { StopReason::Budget };
        return Ok(a.assemble(&vec![false; nu], opts.reply_priming, 0, stop, recount));
    }
    let need = pins + u128::from(opts.reply_priming);
    if need > u128::from(budget) {
        return Err(Error::Budget(format!(
            "the pinned messages alone exceed the budget: {pins} tokens (system/developer {}, \
             latest user message {}, pinned indices {}) + {} reply priming = {need} > budget {budget}",
            by_pin[Pin::System as usize],
            by_pin[Pin::LastUser as usize],
            by_pin[Pin::Explicit as usize],
            opts.reply_priming,
        )));
    }
    let mut room = u128::from(budget) - need;
    let mut caps = Caps::new(opts);
    for (u, s) in slot.iter().enumerate() {
        if *s != Slot::Out {
            caps.take(a.units[u].len(), usize::from(a.units[u].user_turn));
        }
    }

    // Units from `floor` on grow one at a time; older ones by rounds (start_on_user). Without
    // a user turn there is no round to start on, so everything grows by units.
    let floor = match latest_user {
        Some(l) if opts.start_on_user => l,
        _ => 0,
    };
    let mut stopped = None;
    for u in (floor..nu).rev() {
        if slot[u] != Slot::Out {
            continue;
        }
        let c = a.cost(u, recount);
        let (len, turns) = (a.units[u].len(), usize::from(a.units[u].user_turn));
        if let Some(why) = caps.refuse(c, room, len, turns) {
            stopped = Some(why);
            break;
        }
        room -= c;
        caps.take(len, turns);
        slot[u] = Slot::Window;
    }
    let mut before_first_user = false;
    if stopped.is_none() && floor > 0 {
        // Rounds [k, end): k is a user turn, end the next one (or the latest user turn).
        let mut end = floor;
        for k in (0..floor).rev() {
            if !a.units[k].user_turn {
                continue;
            }
            let (mut c, mut len, mut turns) = (0u128, 0usize, 0usize);
            for (u, s) in slot.iter().enumerate().take(end).skip(k) {
                if *s == Slot::Out {
                    c += a.cost(u, recount);
                    len += a.units[u].len();
                    turns += usize::from(a.units[u].user_turn);
                }
            }
            if let Some(why) = caps.refuse(c, room, len, turns) {
                stopped = Some(why);
                break;
            }
            room -= c;
            caps.take(len, turns);
            for s in &mut slot[k..end] {
                if *s == Slot::Out {
                    *s = Slot::Window;
                }
            }
            end = k;
        }
        // Units before the first user turn are never in a window that must start on one.
        before_first_user = stopped.is_none() && slot[..end].contains(&Slot::Out);
    }
    let stop = match stopped {
        Some(why) => why,
        None if before_first_user => StopReason::StartOnUser,
        None => StopReason::AllFit,
    };

    let keep: Vec<bool> = slot.iter().map(|s| *s != Slot::Out).collect();
    Ok(a.assemble(&keep, opts.reply_priming, pins, stop, recount))
}

/// What is left of the message and turn caps while the window grows.
struct Caps {
    messages: Option<usize>,
    turns: Option<usize>,
}

impl Caps {
    fn new(opts: &FitOptions) -> Self {
        Caps { messages: opts.max_messages, turns: opts.max_turns }
    }

    /// Counts kept messages and user turns against the caps; pins may overdraw them (to 0).
    fn take(&mut self, messages: usize, turns: usize) {
        self.messages = self.messages.map(|m| m.saturating_sub(messages));
        self.turns = self.turns.map(|t| t.saturating_sub(turns));
    }

    /// Why a block of `cost` tokens, `messages` messages and `turns` user turns cannot be
    /// added with `room` tokens left: the budget is named first when several limits refuse.
    fn refuse(&self, cost: u128, room: u128, messages: usize, turns: usize) -> Option<StopReason> {
        if cost > room {
            Some(StopReason::Budget)
        } else if self.messages.is_some_and(|m| messages > m) {
            Some(StopReason::MaxMessages)
        } else if self.turns.is_some_and(|t| turns > t) {
            Some(StopReason::MaxTurns)
        } else {
            None
        }
    }
}

/// Where a unit stands in the selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Out,
    Pinned(Pin),
    Window,
}

/// Why a unit is pinned; the discriminant indexes the error breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pin {
    System = 0,
    LastUser = 1,
    Explicit = 2,
}

#[cfg(test)]
mod tests;
