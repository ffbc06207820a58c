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
//! A never-seen text is told apart before anything that waits on memory. Its fingerprint's
//! middle and last words are most often lines of the text the core has not read yet, and
//! its set of fingerprints is not in the core's caches either: asked before counting, the
//! two cost a new text two misses in a row, which the count waited on (the default counter
//! counted new multilingual dialog 8-13% slower than one without a cache; benches/RESULTS.md,
//! 2026-12-06). So a text's head (its length and first 64 bytes, which the count reads first
//! anyway) picks a bit in a small table that stays in the caches, and its set of
//! fingerprints, which is fetched meanwhile. A clear bit means not seen: the text is counted,
//! and only then noted among the fingerprints. A set bit (a text seen, or one of the same
//! head, or a bit's collision) has the fingerprint asked at once. The bits are emptied when
//! about a quarter of them are set (some 32,000 new texts; counted from a sample, so that no
//! word is written by every core for every text): a text seen before that is counted once
//! more, found among the fingerprints and its count kept.
//!
//! Long texts too: their hash was taken to be small beside their count, but xxh3 reads a
//! never-seen source file at about 8 GB/s where the engine counts it at 600 MB/s, and a
//! counter that took long texts in at once counted new source code 8-10% slower than one
//! without a cache (benches/RESULTS.md, 2026-11-27). A long text that comes back is counted
//! twice before its count is kept.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Sets of fingerprints the process remembers, of [`WAYS`] each: a text is known while its
/// tag is anywhere in its set. A set is one `u64` of four 16-bit tags, so the table is
/// 128 KiB for 65,536 texts (with 64-bit fingerprints, 512 KiB, its probe missed the core's
/// caches more often; benches/RESULTS.md, 2026-11-27). The set comes from the head, the tag
/// from the fingerprint: together 29 bits, so a new text whose head's bit is set finds its
/// tag in a full set, and is taken in early, about once in 8,000.
const SETS: usize = 1 << 14;
const WAYS: usize = 4;

/// Bits of the table of heads (16 KiB, in the core's caches between counts).
const HEAD_BITS: usize = 1 << 17;

/// One new bit in this many is counted towards the emptying of the heads (see
/// [`Tables::head_set`]): the count is one word every core of a batch would otherwise write
/// for every new text. Heads are mixed, so the sample is one by chance; the table is emptied
/// after about a quarter of its bits, within a few percent (some 500 sampled bits).
const HEAD_SAMPLE: u64 = 64;

/// The tables of one process. One for the process, not one per thread: a batch spreads its
/// texts over the worker threads differently each time, so a per-thread table saw a text's
/// second count on another thread and never admitted it. Relaxed atomics: a lost write only
/// admits a text one sight later.
struct Tables {
    /// Sets of fingerprints' tags.
    seen: Box<[AtomicU64]>,
    /// Bits of heads seen since the table was last emptied.
    heads: Box<[AtomicU64]>,
    /// Bits set in `heads` since then, of those sampled ([`HEAD_SAMPLE`]).
    heads_set: AtomicUsize,
}

static TABLES: OnceLock<Tables> = OnceLock::new();

fn tables() -> &'static Tables {
    TABLES.get_or_init(|| Tables::new(SETS, HEAD_BITS))
}

impl Tables {
    fn new(sets: usize, head_bits: usize) -> Self {
        let words = |n: usize| super::populated(n, || AtomicU64::new(0)).into_boxed_slice();
        Self { seen: words(sets), heads: words(head_bits / 64), heads_set: AtomicUsize::new(0) }
    }

    /// See [`admission`].
    #[inline]
    fn admission(&self, text: &str, stamp: u64) -> Admission<'_> {
        let b = text.as_bytes();
        let head = head(b, stamp);
        let set = (head >> (64 - self.seen.len().trailing_zeros())) as usize;
        crate::memory::prefetch(&self.seen[set]);
        // The bit from the middle of the head (the low bits of a product mix least; the set
        // took the top ones).
        let (at, bit) = ((head >> 38) as usize & (self.heads.len() - 1), 1u64 << (head >> 32 & 63));
        let bits = self.heads[at].load(Ordering::Relaxed);
        if bits & bit == 0 {
            self.heads[at].store(bits | bit, Ordering::Relaxed);
            // Bits 20-25 of the head: neither the set, nor the bit, nor its word.
            if (head >> 20).is_multiple_of(HEAD_SAMPLE) {
                self.head_set();
            }
            return Admission::Count(Pending { tables: self, set: Some(set), stamp });
        }
        if self.note(set, fingerprint(b, stamp)) {
            Admission::Through
        } else {
            Admission::Count(Pending { tables: self, set: None, stamp })
        }
    }

    /// One more sampled bit set in the table of heads. It is emptied when about a quarter of
    /// its bits were set, so that it answers "maybe seen" for about a quarter of new texts at
    /// most. A text seen before that is counted, found among the fingerprints afterwards and
    /// its count kept: the cache answers it one sight later, and nothing is lost.
    ///
    /// Only a sample of new bits is counted: the count is one word of the process, and
    /// counted on every new text it was the one line that every core of a batch wrote for
    /// every text, handed from core to core write after write (36-41 ns a hand-over between
    /// this host's two cores; benches/RESULTS.md, 2026-12-07). The heads' and fingerprints'
    /// own words are spread over some 2,300 lines.
    #[inline]
    fn head_set(&self) {
        let set = self.heads_set.load(Ordering::Relaxed) + 1;
        if set < self.heads.len() * 64 / 4 / HEAD_SAMPLE as usize {
            self.heads_set.store(set, Ordering::Relaxed);
            return;
        }
        self.heads_set.store(0, Ordering::Relaxed);
        for w in &self.heads {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Whether `fingerprint` is in set `set`; noted there if not.
    ///
    /// A new fingerprint takes an empty way of its set, else a way drawn from the set's
    /// contents, which change with every insertion: with one slot per set (or any fixed
    /// choice), two texts sharing it in a loop overwrote each other forever and neither was
    /// ever admitted (a warm loop over 7,644 dialog texts counted a third of them from
    /// scratch on every pass).
    #[inline]
    fn note(&self, set: usize, fingerprint: u64) -> bool {
        let set = &self.seen[set];
        // 0 marks an empty way.
        let tag = (fingerprint >> 48) as u16 | 1;
        let ways = set.load(Ordering::Relaxed);
        let tag_of = |k: usize| (ways >> (16 * k)) as u16;
        if (0..WAYS).any(|k| tag_of(k) == tag) {
            return true;
        }
        let drawn = || (ways.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - WAYS.trailing_zeros())) as usize;
        let way = (0..WAYS).find(|&k| tag_of(k) == 0).unwrap_or_else(drawn);
        let shift = 16 * way;
        set.store((ways & !(0xFFFF << shift)) | (u64::from(tag) << shift), Ordering::Relaxed);
        false
    }
}

/// Length and the first 64 bytes of `b` with the cache's `stamp`, mixed: what a text shows
/// in the lines its count reads first. Texts of one head share a set of fingerprints: more
/// than [`WAYS`] of them (of one length, alike in their first 64 bytes) taking turns are not
/// all remembered, and those not are counted as without a cache.
#[inline]
fn head(b: &[u8], stamp: u64) -> u64 {
    let n = b.len();
    let shown = &b[..n.min(64)];
    let mut words = shown.chunks_exact(8);
    let mut mixed = stamp.wrapping_mul(0xD6E8_FEB8_6659_FD93).wrapping_add(n as u64);
    for (k, w) in (&mut words).enumerate() {
        mixed ^= u64::from_le_bytes(w.try_into().expect("8 bytes")).rotate_left(7 * k as u32);
    }
    mixed ^= short_word(words.remainder()).rotate_left(61);
    (mixed ^ (mixed >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Length and the first, middle and last 8 bytes of `b` with the cache's `stamp`, mixed:
/// three loads.
#[inline]
fn fingerprint(b: &[u8], stamp: u64) -> u64 {
    let n = b.len();
    let (first, middle, last) =
        if n >= 8 { (word(b, 0), word(b, (n - 8) / 2), word(b, n - 8)) } else { (short_word(b), 0, 0) };
    let mixed = (first ^ middle.rotate_left(21) ^ last.rotate_left(42)).wrapping_add(n as u64);
    (mixed ^ (mixed >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stamp.wrapping_mul(0xD6E8_FEB8_6659_FD93) << 1
}

#[inline]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The little-endian word of fewer than 8 bytes (a byte loop: a copy of a length the
/// compiler cannot bound calls `memcpy`).
#[inline]
fn short_word(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |w, &c| w << 8 | u64::from(c))
}

/// Whether a text goes through the cache, told before it is counted ([`admission`]).
pub enum Admission<'t> {
    /// (Probably) seen by that cache before, on any thread: through the cache.
    Through,
    /// Count it, then ask [`Pending::seen_after_all`].
    Count(Pending<'t>),
}

/// A text counted without the cache, to be noted among the fingerprints once counted (its
/// lines are then in the core's caches, and its set has arrived).
#[must_use = "a text never noted is never admitted"]
pub struct Pending<'t> {
    tables: &'t Tables,
    /// Its set of fingerprints; `None` when it was noted already.
    set: Option<usize>,
    stamp: u64,
}

impl Pending<'_> {
    /// Note the text (the one [`admission`] was given) as seen; whether it had been already
    /// (before the table of heads was last emptied), so that its count is worth keeping.
    #[inline]
    pub fn seen_after_all(self, text: &str) -> bool {
        self.set.is_some_and(|set| self.tables.note(set, fingerprint(text.as_bytes(), self.stamp)))
    }
}

/// Whether `text` goes through the cache whose contents `stamp` names: through it if seen
/// before by that cache, on any thread; else counted, then noted ([`Pending`]). The stamp is
/// part of both prints, so each cache (and each cache after a clear) admits a text on its
/// own second sight.
#[inline]
pub fn admission(text: &str, stamp: u64) -> Admission<'static> {
    tables().admission(text, stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` goes through the cache, or has its count kept after it was counted.
    fn admit(text: &str, stamp: u64) -> bool {
        admit_in(tables(), text, stamp)
    }

    fn admit_in(tables: &Tables, text: &str, stamp: u64) -> bool {
        match tables.admission(text, stamp) {
            Admission::Through => true,
            Admission::Count(pending) => pending.seen_after_all(text),
        }
    }

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
        // (in tables of their own: 20,000 texts would empty the process's heads under the
        // other tests)
        let tables = Tables::new(SETS, HEAD_BITS);
        let texts: Vec<String> = (0..20_000).map(|i| format!("loop text {i}")).collect();
        for _ in 0..3 {
            for t in &texts {
                admit_in(&tables, t, 7);
            }
        }
        let admitted = texts.iter().filter(|t| admit_in(&tables, t, 7)).count();
        assert!(admitted * 100 >= texts.len() * 95, "{admitted} of {}", texts.len());
    }

    /// Bits set in the table of heads.
    fn heads_bits(tables: &Tables) -> u32 {
        tables.heads.iter().map(|w| w.load(Ordering::Relaxed).count_ones()).sum()
    }

    #[test]
    fn a_text_seen_before_the_heads_were_emptied_is_kept_on_its_next_sight() {
        // tables of their own: 65,536 bits of heads, emptied after some 16,384 bits set; sets
        // of fingerprints enough that the others leave its own in place
        let tables = Tables::new(1 << 16, 1 << 16);
        let text = "a text seen once, then many others, then again";
        assert!(!admit_in(&tables, text, 9));
        assert_eq!(heads_bits(&tables), 1);
        let mut others = 0;
        while heads_bits(&tables) != 0 {
            admit_in(&tables, &format!("one of the many others in between, number {others}"), 9);
            others += 1;
        }
        // a quarter of the bits, and the new texts whose bit another had set (an eighth of
        // them on average), give or take the sample's spread
        assert!((14_000..24_000).contains(&others), "emptied after {others} others");
        // its bit is gone: it is counted, found among the fingerprints, and its count kept
        let Admission::Count(pending) = tables.admission(text, 9) else { panic!("its head's bit was emptied") };
        assert!(pending.seen_after_all(text));
        assert!(matches!(tables.admission(text, 9), Admission::Through));
    }

    #[test]
    fn new_bits_are_counted_by_a_sample() {
        let tables = Tables::new(1 << 10, 1 << 20);
        for i in 0..32_000 {
            admit_in(&tables, &format!("a new text, number {i}"), 4);
        }
        let (bits, counted) = (heads_bits(&tables), tables.heads_set.load(Ordering::Relaxed) as u32);
        assert!(bits > 31_000, "{bits} bits");
        // 500 expected, a standard deviation of 22
        assert!((400..600).contains(&counted), "{counted} of {bits} counted");
    }

    #[test]
    fn a_new_text_is_noted_only_once_counted() {
        let tables = Tables::new(1 << 10, 1 << 16);
        let text = "a text the tables have never seen";
        let Admission::Count(pending) = tables.admission(text, 5) else { panic!("a new text goes through") };
        let noted = |t: &Tables| t.seen.iter().filter(|s| s.load(Ordering::Relaxed) != 0).count();
        assert_eq!(noted(&tables), 0, "nothing noted before the count");
        assert!(!pending.seen_after_all(text));
        assert_eq!(noted(&tables), 1);
        assert!(matches!(tables.admission(text, 5), Admission::Through));
    }

    #[test]
    fn texts_of_one_head_are_told_apart_by_the_rest() {
        // same length, same first 64 bytes: one set of fingerprints and one bit of the
        // heads, but the fingerprint's last word differs
        let opening = "a shared opening, long enough to fill the whole of a text's head: ";
        let (a, b) = (format!("{opening}then A"), format!("{opening}then B"));
        let (a, b) = (a.as_str(), b.as_str());
        assert_eq!(head(a.as_bytes(), 11), head(b.as_bytes(), 11));
        assert!(!admit(a, 11));
        assert!(!admit(b, 11), "a text of a seen one's head is not taken for it");
        assert!(admit(a, 11) && admit(b, 11));
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
        let prints: std::collections::HashSet<u64> = texts.iter().map(|t| fingerprint(t.as_bytes(), 1)).collect();
        assert_eq!(prints.len(), texts.len());
    }
}
