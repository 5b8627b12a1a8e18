//! A small thread team for the native engine's own kernels: `for_each` splits a range into chunks
//! that the calling thread and the helpers claim from a shared cursor.
//!
//! Unlike a barrier (Candle's pool waits for every worker at the end of every call), the caller
//! never waits for a helper that has not joined the call: a helper that is asleep or
//! descheduled when the call starts simply misses it, and the caller does the work. Idle helpers
//! spin only briefly, then yield the CPU for a while, then park. On a machine whose cores are busy
//! with other processes this keeps a decode step from stalling a scheduler time slice per matmul
//! and keeps waiting helpers from taking a core the caller needs; on an idle machine the helpers
//! join each call at once.

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

const OPEN: u64 = 1 << 31;
const JOINED: u64 = OPEN - 1;
/// Busy spins of an idle helper before it starts yielding (a microsecond or so).
const SPINS: u32 = 256;
/// Yields of an idle helper before it parks (on an idle machine each returns at once, so this is
/// about a millisecond; on a busy one the other threads run meanwhile).
const YIELDS: u32 = 1_000;

#[derive(Clone, Copy)]
struct Job {
    run: unsafe fn(*const (), Range<usize>),
    data: *const (),
    n: usize,
    chunk: usize,
}

struct Inner {
    /// Epoch (bits 32..), open flag (bit 31), helpers joined (bits 0..31).
    gate: AtomicU64,
    /// Helpers of the current epoch that are done.
    left: AtomicU32,
    cursor: AtomicUsize,
    job: UnsafeCell<Job>,
    sleeping: Vec<AtomicBool>,
    panicked: AtomicBool,
}

// SAFETY: `job` is written only by the caller holding `Team::call`, before the gate opens, and
// read by helpers only after they joined the open gate; the caller waits for every joined helper
// before it writes `job` again.
unsafe impl Sync for Inner {}
unsafe impl Send for Inner {}

/// The team: helper threads and the state of the current call.
pub(crate) struct Team {
    inner: Arc<Inner>,
    threads: Vec<Thread>,
    call: Mutex<()>,
}

unsafe fn trampoline<F: Fn(Range<usize>) + Sync>(data: *const (), range: Range<usize>) {
    // SAFETY: `data` is the `&F` given to `for_each`, alive until every helper is done.
    let f = unsafe { &*(data as *const F) };
    f(range);
}

impl Team {
    fn new(helpers: usize) -> Team {
        let inner = Arc::new(Inner {
            gate: AtomicU64::new(0),
            left: AtomicU32::new(0),
            cursor: AtomicUsize::new(0),
            job: UnsafeCell::new(Job {
                run: |_, _| {},
                data: std::ptr::null(),
                n: 0,
                chunk: 1,
            }),
            sleeping: (0..helpers).map(|_| AtomicBool::new(false)).collect(),
            panicked: AtomicBool::new(false),
        });
        let mut threads = Vec::with_capacity(helpers);
        for i in 0..helpers {
            let inner = inner.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("contract-native-{i}"))
                .spawn(move || helper(&inner, i));
            match spawned {
                Ok(h) => threads.push(h.thread().clone()),
                Err(_) => break,
            }
        }
        Team {
            inner,
            threads,
            call: Mutex::new(()),
        }
    }

    /// The process-wide team ([`Team::global_with`] with no size given).
    pub(crate) fn global() -> &'static Team {
        Team::global_with(None)
    }

    /// The process-wide team, started on first use with `threads` in all (the caller
    /// included), else `CANDLE_NUM_THREADS` when the environment sets it, else the available
    /// parallelism. The first call sizes it: a later `threads` does not resize it.
    pub(crate) fn global_with(threads: Option<usize>) -> &'static Team {
        static TEAM: OnceLock<Team> = OnceLock::new();
        TEAM.get_or_init(|| {
            let n = threads
                .filter(|&n| n > 0)
                .or_else(|| {
                    std::env::var("CANDLE_NUM_THREADS")
                        .ok()
                        .and_then(|v| v.parse::<usize>().ok())
                        .filter(|&n| n > 0)
                })
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            Team::new(n.saturating_sub(1))
        })
    }

    /// Threads that can work on a call (the caller included).
    pub(crate) fn size(&self) -> usize {
        self.threads.len() + 1
    }

    /// Runs `f` over `0..n` in chunks of `chunk`, on this thread and on the helpers that join.
    pub(crate) fn for_each<F: Fn(Range<usize>) + Sync>(&self, n: usize, chunk: usize, f: F) {
        let chunk = chunk.max(1);
        if n == 0 {
            return;
        }
        // Alone, or another thread is using the team: run here.
        let guard = match self.call.try_lock() {
            Ok(g) if !self.threads.is_empty() && n > chunk => g,
            _ => {
                f(0..n);
                return;
            }
        };
        let inner = &*self.inner;
        // SAFETY: no helper reads `job` now: the gate is closed and every helper that joined
        // the last call is done (checked before that call returned).
        unsafe {
            *inner.job.get() = Job {
                run: trampoline::<F>,
                data: &f as *const F as *const (),
                n,
                chunk,
            };
        }
        inner.cursor.store(0, Ordering::Relaxed);
        inner.left.store(0, Ordering::Relaxed);
        let epoch = (inner.gate.load(Ordering::Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff;
        inner.gate.store(epoch << 32 | OPEN, Ordering::SeqCst);
        for (t, sleeping) in self.threads.iter().zip(&inner.sleeping) {
            if sleeping.load(Ordering::SeqCst) {
                t.unpark();
            }
        }
        run_chunks(inner, &f);
        // Close the gate; wait only for the helpers that joined.
        let joined = (inner.gate.fetch_and(!OPEN, Ordering::AcqRel) & JOINED) as u32;
        let mut spins = 0u32;
        while inner.left.load(Ordering::Acquire) != joined {
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        drop(guard);
        if inner.panicked.swap(false, Ordering::Relaxed) {
            panic!("a helper thread of the native engine panicked");
        }
    }
}

fn run_chunks<F: Fn(Range<usize>)>(inner: &Inner, f: &F) {
    // SAFETY: read after the gate opened (caller) or after joining it (helpers).
    let job = unsafe { *inner.job.get() };
    loop {
        let start = inner.cursor.fetch_add(job.chunk, Ordering::Relaxed);
        if start >= job.n {
            break;
        }
        f(start..job.n.min(start + job.chunk));
    }
}

fn helper(inner: &Inner, i: usize) {
    let mut seen = 0u64;
    loop {
        // Wait for a new epoch: spin, then park.
        let mut spins = 0u32;
        let gate = loop {
            let g = inner.gate.load(Ordering::Acquire);
            if g >> 32 != seen {
                break g;
            }
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
                continue;
            }
            if spins < SPINS + YIELDS {
                std::thread::yield_now();
                continue;
            }
            inner.sleeping[i].store(true, Ordering::SeqCst);
            if inner.gate.load(Ordering::SeqCst) >> 32 == seen {
                std::thread::park();
            }
            inner.sleeping[i].store(false, Ordering::SeqCst);
            spins = 0;
        };
        seen = gate >> 32;
        // Join if still open.
        let mut g = gate;
        let joined = loop {
            if g & OPEN == 0 || g >> 32 != seen {
                break false;
            }
            match inner
                .gate
                .compare_exchange_weak(g, g + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break true,
                Err(now) => g = now,
            }
        };
        if !joined {
            continue;
        }
        // SAFETY: joined an open gate: the job is valid until `left` counts this helper.
        let job = unsafe { *inner.job.get() };
        let work = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_chunks(inner, &|r: Range<usize>| unsafe { (job.run)(job.data, r) })
        }));
        if work.is_err() {
            inner.panicked.store(true, Ordering::Relaxed);
        }
        inner.left.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_item_runs_once() {
        let team = Team::new(3);
        for n in [1usize, 7, 100, 1000] {
            for _ in 0..50 {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                team.for_each(n, 3, |r| {
                    for i in r {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
        assert_eq!(team.size(), 4);
    }
}
