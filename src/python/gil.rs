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
/// stops it and is raised here.
pub fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T> + Send) -> PyResult<T> {
    let result = if on_main_thread() {
        py.detach(|| interrupt::with_checker(signal_raised, work))
    } else {
        py.detach(work)
    };
    result.map_err(|error| match error {
        Error::Interrupted => PENDING
            .with(|pending| pending.borrow_mut().take())
            .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted")),
        other => other.into(),
    })
}

/// Run Python's signal handlers; true when one raised (kept for `detached`).
fn signal_raised() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(error) => {
            PENDING.with(|pending| *pending.borrow_mut() = Some(error));
            true
        }
    })
}
