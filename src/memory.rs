//! Memory a table asks for at once, and the bytes tables report.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `n` values made by `fill`, their memory mapped in one request before it is written.
///
/// The tables a counter fills on first use (the admission table, a thread's held and front
/// tables: 2 MiB between them) were written value by value, each of their 512 pages faulting
/// on its first write; in a virtual machine a fault costs microseconds, and a fresh process's
/// first pass over short texts counted half as fast as with the cache off. A table read
/// before it is written (a piece table's hot table) faults twice a page: the read maps the
/// shared zero page, and the write that follows copies it, which in a process with threads
/// on other cores also flushes their TLBs, one interrupt each. Asking for all the pages at
/// once (`MADV_POPULATE_WRITE`, Linux 5.14 on) maps them writable without a fault each;
/// where the request is refused the pages fault as before.
pub fn populated<T>(n: usize, fill: impl FnMut() -> T) -> Vec<T> {
    let mut values: Vec<T> = Vec::with_capacity(n);
    populate(values.as_mut_ptr().cast::<u8>(), n * std::mem::size_of::<T>());
    values.extend(std::iter::repeat_with(fill).take(n));
    values
}

/// Map the whole pages of `at..at + len` writable now (see [`populated`]). The range must
/// lie inside one live allocation of the caller's, its contents not yet relied on: mapping
/// changes none, and a refusal is harmless.
#[cfg(target_os = "linux")]
pub fn populate(at: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    // whole pages inside the allocation only
    let start = (at as usize).next_multiple_of(PAGE);
    let end = (at as usize + len) / PAGE * PAGE;
    if end > start {
        // SAFETY: whole pages of a live allocation of ours, not yet written; populating changes
        // no contents (they are still to be written) and a refusal is harmless.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
    }
}

#[cfg(not(target_os = "linux"))]
pub fn populate(_at: *mut u8, _len: usize) {}

/// Ask memory for the line of `at` ahead of its use: a hint that reads nothing back and
/// never faults.
#[inline(always)]
pub fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch never faults, and the address is a live reference's
        unsafe { _mm_prefetch::<_MM_HINT_T0>((at as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// A table's bytes as a process-wide total counts them (for `cache_info()`), kept within
/// [`Reported::STEP`] of the table's own figure: the total is written once the figure has
/// moved that far, and when the table is emptied or dropped. Written on every insert from
/// every thread that counts a batch's first pass, one counter's cache line would go back and
/// forth between the cores.
pub struct Reported {
    total: &'static AtomicUsize,
    published: usize,
}

impl Reported {
    /// How far a table's figure may drift from the total before it is written.
    pub const STEP: usize = 16 << 10;

    /// A table of no bytes yet, counted in `total`.
    pub const fn to(total: &'static AtomicUsize) -> Self {
        Reported { total, published: 0 }
    }

    /// The table holds `bytes` now: written to the total if it moved [`Self::STEP`].
    #[inline]
    pub fn update(&mut self, bytes: usize) {
        if bytes.abs_diff(self.published) >= Self::STEP {
            self.publish(bytes);
        }
    }

    /// The table holds `bytes` now: written to the total at once.
    pub fn publish(&mut self, bytes: usize) {
        // unchanged, nothing is written: a table kept empty writes no shared line
        if bytes > self.published {
            self.total.fetch_add(bytes - self.published, Ordering::Relaxed);
        } else if bytes < self.published {
            self.total.fetch_sub(self.published - bytes, Ordering::Relaxed);
        }
        self.published = bytes;
    }

    /// The bytes the total counts for this table.
    pub fn published(&self) -> usize {
        self.published
    }
}

impl Drop for Reported {
    fn drop(&mut self) {
        self.total.fetch_sub(self.published, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_counted_within_a_step_and_given_back() {
        static TOTAL: AtomicUsize = AtomicUsize::new(0);
        let mut a = Reported::to(&TOTAL);
        let mut b = Reported::to(&TOTAL);
        a.update(Reported::STEP - 1);
        assert_eq!(TOTAL.load(Ordering::Relaxed), 0);
        a.update(Reported::STEP + 10);
        b.publish(100);
        assert_eq!(TOTAL.load(Ordering::Relaxed), Reported::STEP + 110);
        a.publish(0);
        assert_eq!(TOTAL.load(Ordering::Relaxed), 100);
        drop(b);
        a.update(3 * Reported::STEP);
        drop(a);
        assert_eq!(TOTAL.load(Ordering::Relaxed), 0);
    }
}
