//! Memory a table asks for at once.

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
