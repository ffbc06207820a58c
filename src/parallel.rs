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

/// Start this process's pool on a thread of its own, once, and return at once. Called as the
/// first vocabulary loads: the pool's threads are spawned one after another by whoever asks
/// for the pool first, and on a 16-core machine that cost a batch's first call milliseconds
/// if that was the call (RAYON_NUM_THREADS is read then, as for any rayon pool).
pub fn start_pool() {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !STARTED.swap(true, Ordering::Relaxed) {
        // No thread to start it on: the first parallel call starts the pool, as before.
        let _ = std::thread::Builder::new().name("windowfit-pool-start".into()).spawn(threads);
    }
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

/// Run `work` on the calling thread and, at the same time, on `helpers` threads of the pool
/// (those that have this process's threads, as [`install`]), returning once every run has
/// returned; `work` shares out its own items. Called from outside the pool, a parallel
/// iterator hands all its work to the pool and waits for its threads to wake; here the
/// caller starts at once and the helpers join as they wake.
pub fn share<W: Fn() + Sync>(helpers: usize, work: W) {
    claim_home();
    let pid = std::process::id();
    if HOME.load(Ordering::Relaxed) == pid {
        return rayon::in_place_scope(|scope| spread(scope, helpers, &work));
    }
    match child_pool(pid) {
        Some(pool) => pool.in_place_scope(|scope| spread(scope, helpers, &work)),
        None => work(),
    }
}

/// `work` spawned `helpers` times into `scope`, then run here.
fn spread<'scope, W: Fn() + Sync>(scope: &rayon::Scope<'scope>, helpers: usize, work: &'scope W) {
    for _ in 0..helpers {
        scope.spawn(move |_| work());
    }
    work();
}

/// Threads parallel work gets here.
pub fn threads() -> usize {
    install(rayon::current_num_threads)
}

/// Batches smaller than this are mapped on the calling thread by [`map_batch`]: spreading
/// them over the pool costs more than it saves.
pub const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// `f` of every item, in the items' order: a batch of two items or more and
/// [`PARALLEL_MIN_BYTES`] or more (`size` summed) through [`map_largest_first`], a smaller one
/// on the calling thread.
pub fn map_batch<T: Sync, R: Send>(
    items: &[T],
    size: impl Fn(&T) -> usize + Sync,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    let total: usize = items.iter().map(&size).sum();
    if items.len() > 1 && total >= PARALLEL_MIN_BYTES {
        map_largest_first(items, total, size, f)
    } else {
        items.iter().map(f).collect()
    }
}

/// Texts at least this share of a batch's bytes are started first by [`map_largest_first`].
const LARGE_SHARE: usize = 64;

/// Claims a home range of [`map_largest_first`] is handed out in, past its large items: a
/// claim is one atomic add on a line the threads share, and a claim per short text (a dialog
/// turn, a microsecond to count) would cost a tenth of its time.
const CLAIMS_PER_RANGE: usize = 16;

/// `f` of every item on the calling thread and the pool's ([`share`]), in the items' order.
///
/// Each thread has a home range of the items, the same one every time for the same batch:
/// the items are cut into as many contiguous ranges of about equal bytes as threads take
/// part, the caller's first, then one for each pool thread by its index. A thread maps its
/// own range, then helps the others in turn. Each thread keeps its own tables of the pieces
/// it met, so a batch counted again with its texts changed, or with no text cache, finds
/// most of its texts on the thread that learnt their words. Handed out in runs
/// to whichever thread asked first, each text went to another thread on each call: a thread
/// met a text's long pieces anew for several calls (multilingual dialog on two cores, one
/// batch a pass: passes 2 and 3 at 47-81 MB/s, 105-139 from the ninth on; benches/RESULTS.md,
/// 2026-12-07).
///
/// In each range the largest items (each at least a [`LARGE_SHARE`]th of `total`, the
/// items' sizes summed) are started first, largest to smallest, one at a time; the others
/// follow in their order, in runs. Started in the batch's order, a large text picked up last
/// (a 229 KB source file of a 2 MB batch) left one core counting it while the other had
/// nothing left. The caller counts from the start, where a parallel iterator called from
/// outside the pool waited for the pool's threads to wake.
pub fn map_largest_first<T: Sync, R: Send>(
    items: &[T],
    total: usize,
    size: impl Fn(&T) -> usize + Sync,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    let helpers = (threads().max(1) - 1).min(items.len().saturating_sub(1));
    let homes = Homes::new(items, total, &size, helpers + 1);
    let done = std::sync::Mutex::new(Vec::new());
    share(helpers, || {
        let mut mine = Vec::new();
        homes.map_from(home(), |i| mine.push((i, f(&items[i]))));
        done.lock().unwrap_or_else(|p| p.into_inner()).push(mine);
    });
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in done.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().flatten() {
        out[i] = Some(r);
    }
    out.into_iter().map(|r| r.expect("every item mapped once")).collect()
}

/// The calling thread's home range: the caller's (0) outside the pool, else its index in the
/// pool and one. rayon wakes its sleeping threads lowest index first, so the helpers of a
/// batch are the pool's first threads, the same ones every call.
fn home() -> usize {
    rayon::current_thread_index().map_or(0, |i| i + 1)
}

/// A batch's items cut into home ranges ([`map_largest_first`]), and how far each range
/// has been handed out.
struct Homes {
    /// Item indices, range after range; in each, its large items largest first, then the
    /// others in their order.
    order: Vec<usize>,
    ranges: Vec<Range>,
}

/// One home range: `order[start..large_end]` handed out one at a time, then
/// `order[large_end..end]` in runs of `run`.
#[repr(align(64))]
struct Range {
    start: usize,
    large_end: usize,
    end: usize,
    run: usize,
    next_large: std::sync::atomic::AtomicUsize,
    next_run: std::sync::atomic::AtomicUsize,
}

impl Homes {
    /// `items` cut into `threads` ranges of about `total / threads` bytes each, in order.
    fn new<T>(items: &[T], total: usize, size: impl Fn(&T) -> usize, threads: usize) -> Self {
        let threads = threads.max(1);
        let large = |i: usize| size(&items[i]) >= (total / LARGE_SHARE).max(1);
        let mut order = Vec::with_capacity(items.len());
        let mut ranges = Vec::with_capacity(threads);
        let (mut from, mut bytes) = (0, 0);
        for r in 0..threads {
            // the range ends once the bytes so far reach its share of the total (the last takes
            // the rest)
            let mut to = from;
            let share_end = (r + 1) * total / threads;
            while to < items.len() && (r + 1 == threads || bytes < share_end) {
                bytes += size(&items[to]);
                to += 1;
            }
            let start = order.len();
            let mut big: Vec<usize> = (from..to).filter(|&i| large(i)).collect();
            big.sort_by_key(|&i| std::cmp::Reverse(size(&items[i])));
            order.extend(big);
            let large_end = order.len();
            order.extend((from..to).filter(|&i| !large(i)));
            let rest = order.len() - large_end;
            ranges.push(Range {
                start,
                large_end,
                end: order.len(),
                run: rest.div_ceil(CLAIMS_PER_RANGE).max(1),
                next_large: Default::default(),
                next_run: Default::default(),
            });
            from = to;
        }
        Homes { order, ranges }
    }

    /// `visit` every item handed to the thread whose home is `home`: its own range first, then
    /// the others', each from where it has been handed out to, the next range first.
    fn map_from(&self, home: usize, mut visit: impl FnMut(usize)) {
        let n = self.ranges.len();
        for k in 0..n {
            let r = &self.ranges[(home + k) % n];
            while let Some(&i) = self.order[r.start..r.large_end].get(r.next_large.fetch_add(1, Ordering::Relaxed)) {
                visit(i);
            }
            let rest = &self.order[r.large_end..r.end];
            loop {
                let from = r.next_run.fetch_add(r.run, Ordering::Relaxed).min(rest.len());
                let claimed = &rest[from..(from + r.run).min(rest.len())];
                if claimed.is_empty() {
                    break;
                }
                claimed.iter().for_each(|&i| visit(i));
            }
        }
    }
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

    #[test]
    fn share_runs_the_work_here_and_on_each_helper_and_every_item_once() {
        use std::sync::atomic::AtomicUsize;
        claim_home();
        let items: Vec<usize> = (0..1000).collect();
        for helpers in [0, 1, 3] {
            let (next, runs) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let done = std::sync::Mutex::new(Vec::new());
            let caller = std::thread::current().id();
            let here = AtomicUsize::new(0);
            share(helpers, || {
                runs.fetch_add(1, Ordering::Relaxed);
                if std::thread::current().id() == caller {
                    here.fetch_add(1, Ordering::Relaxed);
                }
                while let Some(&i) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    done.lock().unwrap().push(i);
                }
            });
            assert_eq!(runs.into_inner(), helpers + 1, "the caller and each helper");
            assert_eq!(here.into_inner(), 1, "the caller ran it itself");
            let mut done = done.into_inner().unwrap();
            done.sort_unstable();
            assert_eq!(done, items, "every item once");
        }
    }

    /// `map_largest_first` of `items` (each its own size) on a pool of `threads` threads.
    fn largest_first_on<R: Send>(threads: usize, items: &[usize], f: impl Fn(&usize) -> R + Sync + Send) -> Vec<R> {
        let pool = ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| map_largest_first(items, items.iter().sum(), |&n| n, f))
    }

    #[test]
    fn largest_first_on_many_threads_maps_every_item_once_in_the_items_order() {
        // a pool of four threads: the caller and three helpers claim large items and runs
        let items: Vec<usize> = (0..5000).map(|i| if i % 701 == 0 { 50_000 } else { i % 17 }).collect();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let out = largest_first_on(4, &items, |&n| {
            calls.fetch_add(1, Ordering::Relaxed);
            n + 1
        });
        assert_eq!(out, items.iter().map(|n| n + 1).collect::<Vec<_>>());
        assert_eq!(calls.into_inner(), items.len(), "each item mapped once");
    }

    #[test]
    fn largest_first_starts_the_large_items_first_and_keeps_the_items_order() {
        // sizes 0..12 with three large items among them (each over a 64th of the total)
        let items: Vec<usize> = (0..500).map(|i| if i % 97 == 3 { 10_000 + i } else { i % 13 }).collect();
        let started = std::sync::Mutex::new(Vec::new());
        // one thread takes the items in the order they are handed out
        let out = largest_first_on(1, &items, |&n| {
            started.lock().unwrap().push(n);
            n * 2
        });
        assert_eq!(out, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        let started = started.into_inner().unwrap();
        assert_eq!(started.len(), items.len(), "each item mapped once");
        assert_eq!(
            started[..6],
            [10_488, 10_391, 10_294, 10_197, 10_100, 10_003],
            "the large first, largest to smallest"
        );
        let rest: Vec<usize> = items.iter().copied().filter(|&n| n < 10_000).collect();
        assert_eq!(started[6..], rest, "then the others in their order");
        assert!(map_largest_first(&[] as &[usize], 0, |&n| n, |&n| n).is_empty());
    }

    /// The items `Homes::map_from(home)` visits, alone (no other thread takes any).
    fn visited(homes: &Homes, home: usize) -> Vec<usize> {
        let mut seen = Vec::new();
        homes.map_from(home, |i| seen.push(i));
        seen
    }

    #[test]
    fn the_caller_is_home_to_the_first_range_and_each_pool_thread_to_its_own() {
        claim_home();
        assert_eq!(home(), 0, "outside the pool");
        let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let homes: Vec<usize> = pool.broadcast(|_| home());
        assert_eq!(homes, [1, 2, 3], "a pool thread's index and one");
    }

    #[test]
    fn home_ranges_are_contiguous_of_about_equal_bytes_each_large_first() {
        // 1,000 items of 1 to 30 bytes, four of them large (over a 64th of the total)
        let items: Vec<usize> = (0..1000).map(|i| if i % 250 == 17 { 2000 + i } else { 1 + i % 30 }).collect();
        let total: usize = items.iter().sum();
        let homes = Homes::new(&items, total, |&n| n, 4);
        assert_eq!(homes.ranges.len(), 4);
        let (mut next, mut bytes) = (0, 0);
        for (k, r) in homes.ranges.iter().enumerate() {
            let mut range: Vec<usize> = homes.order[r.start..r.end].to_vec();
            // its large items largest first, then the others in their order
            let large = &homes.order[r.start..r.large_end];
            assert!(large.iter().all(|&i| items[i] >= total / LARGE_SHARE));
            assert!(large.windows(2).all(|w| items[w[0]] >= items[w[1]]));
            assert!(homes.order[r.large_end..r.end].windows(2).all(|w| w[0] < w[1]));
            // contiguous, and the ranges in the items' order
            range.sort_unstable();
            assert_eq!(range, (next..next + range.len()).collect::<Vec<_>>());
            next += range.len();
            // it ends with the item that takes the bytes so far to its share of the total
            bytes += range.iter().map(|&i| items[i]).sum::<usize>();
            let share = (k + 1) * total / 4;
            assert!(bytes >= share && bytes - items[next - 1] < share, "{bytes} of {total}");
        }
        assert_eq!(next, items.len(), "every item in one range");
    }

    #[test]
    fn a_thread_maps_its_own_range_first_then_the_next_ones() {
        let items: Vec<usize> = vec![10; 300];
        let homes = |threads| Homes::new(&items, 3000, |&n| n, threads);
        let ranges: Vec<Vec<usize>> = (0..3).map(|k| (k * 100..(k + 1) * 100).collect()).collect();
        assert_eq!(visited(&homes(3), 1), [&ranges[1][..], &ranges[2], &ranges[0]].concat());
        assert_eq!(visited(&homes(3), 0), (0..300).collect::<Vec<_>>());
        // a pool thread beyond the ranges (not among the batch's helpers) only helps
        assert_eq!(visited(&homes(3), 3), (0..300).collect::<Vec<_>>());
        // each item once, whatever the homes that ask
        let shared = homes(3);
        let mut all: Vec<usize> = [2, 0, 1, 5].iter().flat_map(|&h| visited(&shared, h)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..300).collect::<Vec<_>>());
        // empty items (all in the last range) and an empty batch
        let empty: Vec<usize> = vec![0; 5];
        assert_eq!(visited(&Homes::new(&empty, 0, |&n| n, 3), 2), [0, 1, 2, 3, 4]);
        assert!(visited(&Homes::new(&[] as &[usize], 0, |&n| n, 3), 0).is_empty());
    }

    #[test]
    fn small_batches_stay_on_the_calling_thread_and_large_ones_keep_their_order() {
        let caller = std::thread::current().id();
        let on_caller = |n: &usize| (*n, std::thread::current().id() == caller);
        let small: Vec<usize> = vec![1000; PARALLEL_MIN_BYTES / 1000 - 1];
        assert!(map_batch(&small, |&n| n, on_caller).iter().all(|&(_, here)| here));
        assert!(map_batch(&[PARALLEL_MIN_BYTES * 4], |&n| n, on_caller)[0].1, "one item, however large");
        let large: Vec<usize> = (0..3000).map(|i| 40 + i % 50).collect();
        assert!(large.iter().sum::<usize>() >= PARALLEL_MIN_BYTES);
        let out = map_batch(&large, |&n| n, |&n| n * 3);
        assert_eq!(out, large.iter().map(|n| n * 3).collect::<Vec<_>>());
    }
}
