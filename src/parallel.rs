//! The thread pool parallel work runs on, one that exists in this process.
//!
//! rayon's global pool is made once per address space. After `fork` the child inherits the
//! pool's bookkeeping but none of its threads, and the first parallel call waits forever for
//! workers that are not there. So work started in a process other than the one that loaded
//! the library (a forked child: `multiprocessing`'s fork start method, a pre-forking server)
//! runs on a pool of its own, built on first use in that process.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use rayon::{ThreadPool, ThreadPoolBuilder};

/// The process whose global pool is safe to use: the first that asked (0 before anyone did).
static HOME: AtomicU32 = AtomicU32::new(0);

/// The pool of a forked child, with the process id it was built in.
static CHILD: AtomicPtr<(u32, ThreadPool)> = AtomicPtr::new(std::ptr::null_mut());

/// Record the calling process as the one whose global pool parallel work may use. Called
/// when the library loads, before any parallel work.
pub fn claim_home() {
    let _ = HOME.compare_exchange(0, std::process::id(), Ordering::Relaxed, Ordering::Relaxed);
}

/// Run `f` (which may use rayon's parallel iterators) on a pool that has threads in this
/// process: the global pool at home, otherwise this process's own.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    claim_home();
    let pid = std::process::id();
    if HOME.load(Ordering::Relaxed) == pid {
        return f();
    }
    match child_pool(pid) {
        Some(pool) => pool.install(f),
        None => f(), // no threads could be started: the parallel iterators run inline
    }
}

/// Threads parallel work gets here.
pub fn threads() -> usize {
    install(rayon::current_num_threads)
}

fn child_pool(pid: u32) -> Option<&'static ThreadPool> {
    let current = CHILD.load(Ordering::Acquire);
    // SAFETY: a non-null pointer was leaked below and is never freed.
    if let Some((owner, pool)) = unsafe { current.as_ref() } {
        if *owner == pid {
            return Some(pool);
        }
    }
    let pool = ThreadPoolBuilder::new().build().ok()?;
    let fresh = Box::into_raw(Box::new((pid, pool)));
    // A pool of a parent process (or a racing thread's) is replaced; the old one is leaked,
    // as its threads (if any) belong to another process.
    CHILD.store(fresh, Ordering::Release);
    // SAFETY: just leaked, never freed.
    Some(unsafe { &(*fresh).1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_at_home_and_counts_threads() {
        use rayon::prelude::*;
        claim_home();
        let sum: u64 = install(|| (0..1000u64).into_par_iter().sum());
        assert_eq!(sum, 499_500);
        assert!(threads() >= 1);
    }
}
