//! The lazy window search: count only the messages a fit's window can reach.
//!
//! A cold fit of a long history should cost the window, not the history. The window grows
//! newest-first and contiguously, so once the sendable, non-pin messages of a suffix `[b, n)`
//! together with the pins exceed the budget, no message before `b` can be kept: those stay
//! uncounted (their tokens set to [`UNCOUNTED`], larger than any budget, so a unit holding one
//! never fits). The caller supplies counting on demand through [`CountOnDemand`]. Messages the
//! window may reach are counted with the budget as a cap: one that passes it can never be kept,
//! so the counter may stop reading it there and give it [`UNCOUNTED`] too.

use super::units::sendable;
use super::{FitOptions, MessageInfo, Unanswered};

/// Token count given to messages the search never needed to count: larger than any budget.
pub const UNCOUNTED: u64 = u64::MAX >> 4;

/// Counts messages when the search asks for them (the bindings read and count Python
/// messages; tests count from a table).
pub trait CountOnDemand {
    type Error;
    /// How many messages are still uncounted.
    fn pending(&self) -> usize;
    /// Whether message `i` is still uncounted.
    fn is_pending(&self, i: usize) -> bool;
    /// Count the uncounted messages among `indices`, storing their tokens in `infos`. With a
    /// `cap`, a message of more than `cap` tokens may get [`UNCOUNTED`] instead of its count.
    fn count(&mut self, infos: &mut [MessageInfo], indices: &[usize], cap: Option<u64>) -> Result<(), Self::Error>;
}

/// The first window step, in messages; each later step doubles, so a cut deep in the
/// history costs a logarithmic number of batches, and each batch can count in parallel.
const FIRST_STEP: usize = 256;

/// Counts what a fit of `infos` within `budget` can reach; returns whether every message is
/// now counted (if not, the uncounted ones hold [`UNCOUNTED`] and `tokens_dropped` of the
/// plan is not exact). Pins are always counted; `strip` mode and explicit pins count
/// everything (recounted units and arbitrary pins make the bound unsafe).
pub fn count_for_window<C: CountOnDemand>(
    infos: &mut [MessageInfo],
    counter: &mut C,
    budget: u64,
    opts: &FitOptions,
) -> Result<bool, C::Error> {
    let n = infos.len();
    if counter.pending() == 0 {
        return Ok(true);
    }
    if matches!(opts.unanswered, Unanswered::Strip) || !opts.pinned.is_empty() {
        let all: Vec<usize> = (0..n).collect();
        counter.count(infos, &all, None)?;
        return Ok(true);
    }
    // Pairing reads ids and roles only: it needs no token counts.
    let valid = sendable(infos);
    // Possible pins, counted up front: system/developer messages and the latest user turn.
    let last_user = infos.iter().rposition(MessageInfo::is_user_turn);
    let pins: Vec<bool> = infos.iter().enumerate().map(|(i, m)| m.role.is_system() || Some(i) == last_user).collect();
    let pin_indices: Vec<usize> = (0..n).filter(|&i| pins[i]).collect();
    counter.count(infos, &pin_indices, None)?;
    let pins_tokens: u128 = infos.iter().zip(&pins).filter(|(_, p)| **p).map(|(m, _)| u128::from(m.tokens)).sum();
    let limit = u128::from(budget);
    let mut b = n;
    let mut step = FIRST_STEP;
    let mut window: u128 = 0;
    let mut batch = Vec::new();
    while b > 0 {
        let nb = b.saturating_sub(step);
        batch.clear();
        batch.extend(nb..b);
        counter.count(infos, &batch, Some(budget))?;
        window += (nb..b).filter(|&i| valid[i] && !pins[i]).map(|i| u128::from(infos[i].tokens)).sum::<u128>();
        b = nb;
        if window + pins_tokens + u128::from(opts.reply_priming) > limit {
            break;
        }
        step = step.saturating_mul(2);
    }
    let complete = counter.pending() == 0 && infos.iter().all(|m| m.tokens != UNCOUNTED);
    for (i, info) in infos.iter_mut().enumerate() {
        if counter.is_pending(i) {
            info.tokens = UNCOUNTED;
        }
    }
    Ok(complete)
}

#[cfg(test)]
mod tests {
    use super::super::{fit, Role};
    use super::*;

    /// Counts from a table, recording what it was asked to count; with a cap it stops at it
    /// as the bindings do for long messages (here: every message).
    struct Table {
        tokens: Vec<u64>,
        counted: Vec<bool>,
    }

    impl CountOnDemand for Table {
        type Error = ();
        fn pending(&self) -> usize {
            self.counted.iter().filter(|c| !**c).count()
        }
        fn is_pending(&self, i: usize) -> bool {
            !self.counted[i]
        }
        fn count(&mut self, infos: &mut [MessageInfo], indices: &[usize], cap: Option<u64>) -> Result<(), ()> {
            for &i in indices {
                if !self.counted[i] {
                    self.counted[i] = true;
                    let n = self.tokens[i];
                    infos[i].tokens = if cap.is_some_and(|c| n > c) { UNCOUNTED } else { n };
                }
            }
            Ok(())
        }
    }

    fn history(n: usize) -> (Vec<MessageInfo>, Vec<u64>) {
        let mut infos = vec![MessageInfo { role: Role::System, has_content: true, ..Default::default() }];
        let mut tokens = vec![50];
        for i in 1..n {
            let role = if i % 2 == 1 { Role::User } else { Role::Assistant };
            infos.push(MessageInfo { role, has_content: true, ..Default::default() });
            tokens.push(10 + (i as u64 * 7) % 40);
        }
        (infos, tokens)
    }

    fn no_recount(_: usize, _: &[String]) -> u64 {
        0
    }

    #[test]
    fn a_small_budget_leaves_old_messages_uncounted_and_fits_the_same() {
        let (infos, tokens) = history(5000);
        let exact: Vec<MessageInfo> =
            infos.iter().zip(&tokens).map(|(m, t)| MessageInfo { tokens: *t, ..m.clone() }).collect();
        let opts = FitOptions::default();
        for budget in [100u64, 2_000, 20_000] {
            let mut lazy = infos.clone();
            let mut table = Table { tokens: tokens.clone(), counted: vec![false; tokens.len()] };
            let complete = count_for_window(&mut lazy, &mut table, budget, &opts).unwrap();
            assert!(!complete, "budget {budget} cannot reach the start of 5000 messages");
            assert!(table.counted[0], "the system pin is counted");
            assert!(table.pending() > 1000, "budget {budget}: most of the history stays uncounted");
            let want = fit(&exact, budget, &opts, &no_recount).unwrap();
            let got = fit(&lazy, budget, &opts, &no_recount).unwrap();
            assert_eq!(got.kept, want.kept, "budget {budget}");
            assert_eq!(got.tokens, want.tokens);
            assert!(got.dropped.iter().any(|&i| lazy[i].tokens == UNCOUNTED));
        }
    }

    #[test]
    fn a_budget_that_holds_everything_counts_everything() {
        let (mut infos, tokens) = history(600);
        let mut table = Table { tokens: tokens.clone(), counted: vec![false; tokens.len()] };
        assert!(count_for_window(&mut infos, &mut table, u64::MAX >> 8, &FitOptions::default()).unwrap());
        assert_eq!(infos.iter().map(|m| m.tokens).collect::<Vec<_>>(), tokens);
    }

    #[test]
    fn strip_mode_and_explicit_pins_count_everything_up_front() {
        for opts in [
            FitOptions { unanswered: Unanswered::Strip, ..Default::default() },
            FitOptions { pinned: vec![3], ..Default::default() },
        ] {
            let (mut infos, tokens) = history(3000);
            let mut table = Table { tokens: tokens.clone(), counted: vec![false; tokens.len()] };
            assert!(count_for_window(&mut infos, &mut table, 100, &opts).unwrap());
            assert_eq!(table.pending(), 0);
        }
    }

    #[test]
    fn a_message_past_the_budget_is_read_only_to_the_cap_and_fits_the_same() {
        let (exact, mut tokens) = history(600);
        let budget = 2_000;
        // A huge tool output in the window's reach, and a system pin over the budget alone.
        tokens[590] = 5_000_000;
        for pin_tokens in [50, 3_000] {
            tokens[0] = pin_tokens;
            let mut want = exact.clone();
            for (m, &t) in want.iter_mut().zip(&tokens) {
                m.tokens = t;
            }
            let mut lazy = exact.clone();
            let mut table = Table { tokens: tokens.clone(), counted: vec![false; tokens.len()] };
            let complete = count_for_window(&mut lazy, &mut table, budget, &FitOptions::default()).unwrap();
            assert!(!complete, "the capped message's count is unknown");
            assert_eq!(lazy[590].tokens, UNCOUNTED);
            assert_eq!(lazy[0].tokens, pin_tokens, "pins are counted in full, never capped");
            let (got, wanted) = (
                fit(&lazy, budget, &FitOptions::default(), &no_recount),
                fit(&want, budget, &FitOptions::default(), &no_recount),
            );
            match (got, wanted) {
                (Ok(g), Ok(w)) => {
                    assert_eq!((g.kept, g.tokens), (w.kept, w.tokens));
                    assert!(g.dropped.contains(&590));
                }
                (Err(g), Err(w)) => {
                    assert_eq!(g.to_string(), w.to_string(), "the same error, with the pins' real count")
                }
                (g, w) => panic!("capped {g:?} vs exact {w:?}"),
            }
        }
    }

    #[test]
    fn counting_errors_reach_the_caller() {
        struct Failing;
        impl CountOnDemand for Failing {
            type Error = &'static str;
            fn pending(&self) -> usize {
                1
            }
            fn is_pending(&self, _: usize) -> bool {
                true
            }
            fn count(&mut self, _: &mut [MessageInfo], _: &[usize], _: Option<u64>) -> Result<(), &'static str> {
                Err("bad message 0")
            }
        }
        let (mut infos, _) = history(10);
        assert_eq!(count_for_window(&mut infos, &mut Failing, 100, &FitOptions::default()), Err("bad message 0"));
    }
}
