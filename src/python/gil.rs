//! Core work with the GIL released, interruptible by Ctrl-C.
//!
//! Long operations (saving, loading, verifying, copying, sharing) run
//! without the GIL so that other Python threads go on. On the main thread
//! they also check Python's signals between pieces of their work (see
//! `crate::interrupt`): a `KeyboardInterrupt` (or whatever a signal handler
//! raises) stops them, and is raised once they have cleaned up after
//! themselves.

use std::cell::RefCell;

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::error::{Error, Result};
use crate::interrupt;

thread_local! {
    /// The exception a signal handler raised while core work ran.
    static PENDING: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Whether this is the process's main thread, the only one Python runs
/// signal handlers on.
fn on_main_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpid and gettid only read the caller's ids.
        unsafe { libc::getpid() == libc::gettid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Run `work` with the GIL released; on the main thread, Python's signal
/// handlers run between its pieces, and an exception one of them raises
/// stops it and is raised here: always, even when `work` went on or failed
/// otherwise (every pending signal surfaces). Re-entrant: a signal handler
/// may call blockmap again while `work` checks (its exceptions are its own).
pub fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T> + Send) -> PyResult<T> {
    if !on_main_thread() {
        return py.detach(work).map_err(PyErr::from);
    }
    // the exception of an operation this one runs inside (from a signal
    // handler) is kept aside, and put back afterwards
    let outer = PENDING.with(RefCell::take);
    let result = py.detach(|| interrupt::with_checker(signal_raised, work));
    let raised = PENDING.with(|pending| pending.replace(outer));
    match (result, raised) {
        // a handler raised: that is the outcome, whatever `work` made of it
        (_, Some(error)) => Err(error),
        (Ok(value), None) => Ok(value),
        (Err(Error::Interrupted), None) => Err(PyKeyboardInterrupt::new_err("interrupted")),
        (Err(other), None) => Err(other.into()),
    }
}

/// Run Python's signal handlers; true when one raised (kept for `detached`).
fn signal_raised() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(error) => {
            PENDING.with(|pending| {
                // the first exception is the one raised; a later one (a
                // handler that ran again because `work` went on) is dropped
                let mut pending = pending.borrow_mut();
                if pending.is_none() {
                    *pending = Some(error);
                }
            });
            true
        }
    })
}
