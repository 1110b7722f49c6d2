//! Long operations that can be interrupted.
//!
//! Loading, verifying, saving, copying and sharing gigabytes take seconds;
//! a user who presses Ctrl-C expects them to stop. The core knows nothing
//! of Python's signals, so whoever runs a long operation (the binding) may
//! set a *checker* for the current thread with [`with_checker`]: the
//! operation calls [`check`] between pieces of its work (every
//! [`PIECE`] bytes) and after a system call interrupted by a signal
//! (`EINTR`, never retried blindly), and stops with [`Error::Interrupted`]
//! when the checker says so.

use std::cell::RefCell;

use crate::error::{Error, Result};

/// How much data a long operation handles between two checks.
pub const PIECE: usize = 64 << 20;

type Checker = Box<dyn FnMut() -> bool>;

thread_local! {
    static CHECKER: RefCell<Option<Checker>> = const { RefCell::new(None) };
}

/// Run `work` with `checker` as this thread's checker: it returns true
/// when the operation must stop.
pub fn with_checker<R>(checker: impl FnMut() -> bool + 'static, work: impl FnOnce() -> R) -> R {
    struct Reset(Option<Checker>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            CHECKER.with(|cell| *cell.borrow_mut() = previous);
        }
    }
    let previous = CHECKER.with(|cell| cell.borrow_mut().replace(Box::new(checker)));
    let _reset = Reset(previous);
    work()
}

/// `Err(Error::Interrupted)` when this thread's checker says to stop.
pub fn check() -> Result<()> {
    let stop = CHECKER.with(|cell| {
        // a checker that calls `check` itself finds the cell borrowed: it
        // is already being asked
        cell.try_borrow_mut()
            .ok()
            .and_then(|mut checker| checker.as_mut().map(|checker| checker()))
            .unwrap_or(false)
    });
    if stop {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn checks_ask_the_checker_of_this_thread() {
        assert!(check().is_ok(), "no checker: never interrupted");
        let calls = Rc::new(Cell::new(0));
        let counted = Rc::clone(&calls);
        let result = with_checker(
            move || {
                counted.set(counted.get() + 1);
                counted.get() >= 3
            },
            || -> Result<()> {
                for _ in 0..10 {
                    check()?;
                }
                Ok(())
            },
        );
        assert!(matches!(result, Err(Error::Interrupted)));
        assert_eq!(calls.get(), 3);
        assert!(check().is_ok(), "the checker is gone afterwards");
        let other = std::thread::spawn(check).join().unwrap();
        assert!(other.is_ok());
    }
}
