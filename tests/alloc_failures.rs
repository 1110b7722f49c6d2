//! Out of memory, SQLite-style: for every N, the N-th large allocation of
//! an operation fails, and the operation must return an error (of the
//! out-of-memory kind) or succeed, never abort the process. Large means at
//! least [`LARGE`] bytes: every allocation whose size comes from the data
//! (arrays, labels, tables, archives) is that large in these tests, while
//! the small fixed ones (error messages, names) are left alone. The maps
//! have one block, so that the archive writer's and reader's bookkeeping
//! (an entry's name and a few dozen bytes, fallible too) stays below
//! [`LARGE`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use blockmap::buffer::FixedWriter;
use blockmap::io;
use blockmap::{
    fixtures, Array, DType, Data, DataRef, Error, Kind, Labels, TensorBlock, TensorMap,
};

const LARGE: usize = 4096;

struct FailingAllocator;

thread_local! {
    /// Armed on the thread running the operation only: other threads (the
    /// test harness, other tests) allocate as usual.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Large allocations made while armed; the one numbered `FAIL_AT` fails.
static LARGE_SEEN: AtomicUsize = AtomicUsize::new(0);
static FAIL_AT: AtomicUsize = AtomicUsize::new(usize::MAX);

// SAFETY: every call forwards to the system allocator, except that a large
// allocation may be refused (a null pointer), which callers must handle.
unsafe impl GlobalAlloc for FailingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && Self::refuse(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

impl FailingAllocator {
    fn refuse(size: usize) -> bool {
        if size < LARGE || !ARMED.with(Cell::get) {
            return false;
        }
        LARGE_SEEN.fetch_add(1, Ordering::Relaxed) == FAIL_AT.load(Ordering::Relaxed)
    }
}

#[global_allocator]
static ALLOCATOR: FailingAllocator = FailingAllocator;

/// One test at a time arms the allocator.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run `operation` with the N-th large allocation failing, for every N;
/// returns how many large allocations it made when none failed.
fn fail_each_large_allocation<T>(name: &str, operation: impl Fn() -> blockmap::Result<T>) -> usize {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    FAIL_AT.store(usize::MAX, Ordering::Relaxed);
    LARGE_SEEN.store(0, Ordering::Relaxed);
    ARMED.with(|armed| armed.set(true));
    let works = operation();
    ARMED.with(|armed| armed.set(false));
    assert!(works.is_ok(), "{name} fails without any failure injected");
    drop(works);
    let total = LARGE_SEEN.load(Ordering::Relaxed);
    for n in 0..total {
        FAIL_AT.store(n, Ordering::Relaxed);
        LARGE_SEEN.store(0, Ordering::Relaxed);
        ARMED.with(|armed| armed.set(true));
        let result = operation();
        ARMED.with(|armed| armed.set(false));
        match result {
            Ok(_) | Err(Error::OutOfMemory(_)) => {}
            Err(other) => panic!("{name}, large allocation {n} failing: {other:?}"),
        }
    }
    total
}

/// A map whose arrays and labels are all large: a block of 2000 samples
/// with a gradient, and a large info.
fn large_map() -> TensorMap {
    let block = |seed: i32| {
        let n = 2000;
        let values: Vec<f64> = (0..n * 4).map(f64::from).collect();
        let mut block = TensorBlock::new(
            Array::from_slice(vec![2000, 4], &values).unwrap(),
            // unsorted: the uniqueness check builds a hash table
            fixtures::labels(
                &["s"],
                &(0..n).map(|i| (i * 7919 + seed) % n).collect::<Vec<_>>(),
            ),
            vec![],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        let gradient = TensorBlock::new(
            Array::zeros(DType::F8, vec![2000, 3, 4]).unwrap(),
            fixtures::labels(
                &["sample", "xyz"],
                &(0..n).flat_map(|i| [i, 0]).collect::<Vec<_>>(),
            ),
            vec![Labels::range("d", 3).unwrap()],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        block.add_gradient("positions", gradient).unwrap();
        block
    };
    let mut map = TensorMap::new(Labels::range("k", 1).unwrap(), vec![block(1)]).unwrap();
    map.set_info("origin".into(), "x".repeat(5000)).unwrap();
    map
}

#[test]
fn readers_fail_cleanly_at_each_large_allocation() {
    let map = large_map();
    let archive = io::save_buffer(DataRef::Tensor(&map)).unwrap();
    let bytes = archive.to_vec().unwrap();
    let count = fail_each_large_allocation("load_buffer", || {
        io::load_buffer(blockmap::Buffer::copy_from(&bytes)?, Kind::Tensor)
    });
    assert!(count > 5, "{count}");
    fail_each_large_allocation("load from a reader", || {
        io::load(Cursor::new(&bytes), Kind::Tensor)
    });
    let (header, buffers) = blockmap::pickle::dump(DataRef::Tensor(&map)).unwrap();
    fail_each_large_allocation("pickle load", || {
        blockmap::pickle::load(&header, buffers.clone())
    });
    let labels = io::save_buffer(DataRef::Labels(map.blocks()[0].samples())).unwrap();
    let labels = labels.to_vec().unwrap();
    fail_each_large_allocation("labels from npy", || {
        io::load(Cursor::new(&labels), Kind::Labels)
    });
}

#[test]
fn writers_and_copies_fail_cleanly_at_each_large_allocation() {
    let map = large_map();
    fail_each_large_allocation("save_buffer", || io::save_buffer(DataRef::Tensor(&map)));
    // the writer's memory is the caller's: allocated up front
    let memory = std::cell::RefCell::new(vec![0u8; io::save_size_bound(DataRef::Tensor(&map))]);
    fail_each_large_allocation("save to a writer", || {
        let mut memory = memory.borrow_mut();
        io::save(FixedWriter::over_bytes(&mut memory), DataRef::Tensor(&map)).map(|w| w.len())
    });
    fail_each_large_allocation("deep copy", || map.deep_copy());
    fail_each_large_allocation("share", || blockmap::shm::share(DataRef::Tensor(&map)));
    let shared = match blockmap::shm::share(DataRef::Tensor(&map)).unwrap() {
        Some(Data::Tensor(shared)) => shared,
        other => panic!("{other:?}"),
    };
    fail_each_large_allocation("shared parts", || {
        blockmap::shm::parts(DataRef::Tensor(&shared))
    });
}

#[test]
fn labels_fail_cleanly_at_each_large_allocation() {
    let unsorted: Vec<i32> = (0..5000).map(|i| (i * 7919) % 5000).collect();
    fail_each_large_allocation("unsorted labels", || Labels::new(vec!["a"], &unsorted));
    fail_each_large_allocation("range", || Labels::range("n", 100_000));
    let sorted = Labels::range("n", 5000).unwrap();
    fail_each_large_allocation("position (builds the index)", || {
        let copy = Labels::new(vec!["n"], sorted.raw())?;
        copy.position(&[17])
    });
}
