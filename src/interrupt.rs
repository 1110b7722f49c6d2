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
//!
//! Re-entrant: the checker may run code that starts another long operation
//! on the same thread (a Python signal handler that saves a map while a
//! save checks for signals). The checker is taken out of the thread's slot
//! while it runs, so the nested operation finds the slot empty, sets its
//! own checker and puts the empty slot back; a `check` of the nested
//! operation never calls the outer checker again.

use std::cell::Cell;

use crate::error::{Error, Result};

/// How much data a long operation handles between two checks.
pub const PIECE: usize = 64 << 20;

type Checker = Box<dyn FnMut() -> bool>;

thread_local! {
    static CHECKER: Cell<Option<Checker>> = const { Cell::new(None) };
}

/// Run `work` with `checker` as this thread's checker: it returns true
/// when the operation must stop. The previous checker (of an operation
/// this one runs inside, or none) is back in place afterwards.
pub fn with_checker<R>(checker: impl FnMut() -> bool + 'static, work: impl FnOnce() -> R) -> R {
    struct Reset(Option<Checker>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            CHECKER.with(|cell| cell.set(previous));
        }
    }
    let previous = CHECKER.with(|cell| cell.replace(Some(Box::new(checker))));
    let _reset = Reset(previous);
    work()
}

/// `Err(Error::Interrupted)` when this thread's checker says to stop.
pub fn check() -> Result<()> {
    // taken out while it runs (see the module docs): nothing is borrowed
    // across the call, so whatever it runs may check or set checkers
    let Some(mut checker) = CHECKER.with(Cell::take) else {
        return Ok(());
    };
    let stop = checker();
    CHECKER.with(|cell| {
        // the slot is empty again unless something left a checker there,
        // which cannot outlive its own `with_checker`: keep ours
        cell.set(Some(checker));
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

    #[test]
    fn a_checker_may_run_operations_that_check() {
        // as a signal handler that saves a map while a save checks
        let inner_checks = Rc::new(Cell::new(0));
        let counted = Rc::clone(&inner_checks);
        let result = with_checker(
            move || {
                let nested_counted = Rc::clone(&counted);
                let nested = with_checker(
                    move || {
                        nested_counted.set(nested_counted.get() + 1);
                        false
                    },
                    || {
                        check()?;
                        check()
                    },
                );
                // a check inside the checker itself: no checker to ask
                nested.is_ok() && check().is_ok()
            },
            || check().and_then(|()| check()),
        );
        assert!(matches!(result, Err(Error::Interrupted)));
        assert_eq!(inner_checks.get(), 2);
        assert!(check().is_ok());
    }
}
