//! Which texts the count cache takes in: a text on its second sight.
//!
//! Caching a text costs more than counting it would save if it never comes back: hashing it
//! (the caller's hash for the front table of short texts, xxh3 of every byte for the shared
//! map), a lookup and an insert in the shared map, a copy into the front table, a reference
//! held. An agent's history re-counts the same texts every turn, but most texts a process
//! counts once are never seen again. So the first count of a text only notes a cheap
//! fingerprint of it (length and three 8-byte words, no pass over the text) in a small table
//! of the process; a text whose fingerprint is there goes through the cache. A fingerprint
//! shared by two texts only sends the second one through the cache early: counts never
//! depend on it.
//!
//! Long texts too: their hash was taken to be small beside their count, but xxh3 reads a
//! never-seen source file at about 8 GB/s where the engine counts it at 600 MB/s, and a
//! counter that took long texts in at once counted new source code 8-10% slower than one
//! without a cache (benches/RESULTS.md, 2026-11-27). A long text that comes back is counted
//! twice before its count is kept.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Fingerprints the process remembers, in sets of [`WAYS`]: a text is known while its tag is
/// anywhere in its set. A set is one `u64` of four 16-bit tags, so the table is 128 KiB
/// (allocated on first use): it is asked once per new text, between counts that sweep the
/// vocabulary's megabytes, and with 64-bit fingerprints (512 KiB) that probe missed the
/// core's caches: the default counter counted a fresh process's first pass over multilingual
/// dialog 4% slower than one without a cache, 2% with this table (benches/RESULTS.md,
/// 2026-11-27). Set and tag together keep 29 bits of the fingerprint: a new text finds its
/// tag in a full set, and is taken in early, about once in 8,000.
const SEEN_SLOTS: usize = 1 << 16;
const WAYS: usize = 4;
const SETS: usize = SEEN_SLOTS / WAYS;

/// One table for the process: a batch spreads its texts over the worker threads differently
/// each time, so a per-thread table saw a text's second count on another thread and never
/// admitted it. Relaxed atomics: a lost write only admits a text one sight later.
static SEEN: OnceLock<Box<[AtomicU64]>> = OnceLock::new();

thread_local! {
    /// Insertions so far on this thread: which way a full set gives up varies with it.
    static TICK: Cell<usize> = const { Cell::new(0) };
}

/// Length and the first, middle and last 8 bytes of `b`, mixed.
#[inline]
fn fingerprint(b: &[u8]) -> u64 {
    let n = b.len();
    let word = |at: usize| -> u64 {
        let mut w = [0u8; 8];
        let end = (at + 8).min(n);
        w[..end - at].copy_from_slice(&b[at..end]);
        u64::from_le_bytes(w)
    };
    let (first, middle, last) = if n >= 8 { (word(0), word((n - 8) / 2), word(n - 8)) } else { (word(0), 0, 0) };
    let mixed = (first ^ middle.rotate_left(21) ^ last.rotate_left(42)).wrapping_add(n as u64);
    (mixed ^ (mixed >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Whether `text` goes through the cache whose contents `stamp` names: (probably) seen by that
/// cache before, on any thread. A text seen for the first time is noted and answered no. The
/// stamp is part of the fingerprint, so each cache (and each cache after a clear) admits a
/// text on its own second sight.
///
/// A new fingerprint takes an empty way of its set, else a way that changes from one insertion
/// to the next: with one slot per set (or any fixed choice), two texts sharing it in a loop
/// overwrote each other forever and neither was ever admitted (a warm loop over 7,644 dialog
/// texts counted a third of them from scratch on every pass).
#[inline]
pub fn admit(text: &str, stamp: u64) -> bool {
    let fp = fingerprint(text.as_bytes()) ^ stamp.wrapping_mul(0xD6E8_FEB8_6659_FD93) << 1;
    let seen = SEEN.get_or_init(|| super::populated(SETS, || AtomicU64::new(0)).into_boxed_slice());
    let set = &seen[(fp >> (64 - SETS.trailing_zeros())) as usize];
    // The tag is taken from the bits below the set's; 0 marks an empty way.
    let tag = (fp >> 8) as u16 | 1;
    let ways = set.load(Ordering::Relaxed);
    let tag_of = |k: usize| (ways >> (16 * k)) as u16;
    if (0..WAYS).any(|k| tag_of(k) == tag) {
        return true;
    }
    let way = (0..WAYS).find(|&k| tag_of(k) == 0).unwrap_or_else(|| {
        TICK.with(|t| {
            t.set(t.get().wrapping_add(1));
            t.get() % WAYS
        })
    });
    let shift = 16 * way;
    set.store((ways & !(0xFFFF << shift)) | (u64::from(tag) << shift), Ordering::Relaxed);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_admitted_on_its_second_sight() {
        let text = "a short text, never seen by this test before";
        assert!(!admit(text, 1));
        assert!(admit(text, 1));
        assert!(admit(text, 1));
        let other = "another short text of the same kind";
        assert!(!admit(other, 1));
        assert!(admit(other, 1));
        // another cache (or this one after a clear) has not seen it
        assert!(!admit(text, 2));
        assert!(admit(text, 2));
    }

    #[test]
    fn texts_sharing_a_set_in_a_loop_are_all_admitted() {
        // more texts than one set holds, counted round and round: each is admitted by its
        // second or a later pass, never starved by the others
        let texts: Vec<String> = (0..20_000).map(|i| format!("loop text {i}")).collect();
        for _ in 0..3 {
            for t in &texts {
                admit(t, 7);
            }
        }
        let admitted = texts.iter().filter(|t| admit(t, 7)).count();
        assert!(admitted * 100 >= texts.len() * 95, "{admitted} of {}", texts.len());
    }

    #[test]
    fn a_long_text_is_admitted_on_its_second_sight_too() {
        let text = format!("{}{}", "a long text, ", "x".repeat(1 << 20));
        assert!(!admit(&text, 3));
        assert!(admit(&text, 3));
        assert!(!admit(&text[1..], 3));
    }

    #[test]
    fn fingerprints_tell_texts_apart_by_length_and_ends() {
        let texts = ["", "a", "ab", "abcdefgh", "abcdefghi", "xbcdefgh", "abcdefgx", "hello world and more"];
        let prints: std::collections::HashSet<u64> = texts.iter().map(|t| fingerprint(t.as_bytes())).collect();
        assert_eq!(prints.len(), texts.len());
    }
}
