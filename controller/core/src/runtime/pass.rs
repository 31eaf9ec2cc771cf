//! Passes over many objects that one object's failure does not stop.
//!
//! Upstream reconciles each object on its own: a conflict on one NodeClaim requeues that
//! NodeClaim and nothing else. Our singleton passes walk every object in turn, so an error that
//! ended the pass at the first object that failed would starve every object after it, for as
//! long as that one keeps failing (a NodeClaim written by three controllers conflicts often; an
//! object deleted since the cache saw it answers 404 until the watch catches up). A pass
//! therefore goes on past a failed object and reports the first error at its end, so its loop
//! retries soon.

use crate::seams::kube::KubeError;

/// The first error of a pass that goes on past failed objects, and how many failed.
#[derive(Debug)]
pub struct PassErrors<E> {
    first: Option<E>,
    failed: usize,
}

impl<E> Default for PassErrors<E> {
    fn default() -> Self {
        Self {
            first: None,
            failed: 0,
        }
    }
}

impl<E> PassErrors<E> {
    /// The value of `result`, or `None` after keeping its error (the first one is returned at the
    /// end of the pass; later ones are counted).
    pub fn keep<T>(&mut self, result: Result<T, E>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                self.failed += 1;
                self.first.get_or_insert(err);
                None
            }
        }
    }

    /// How many objects failed so far.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// `Ok(value)` when nothing failed, else the first error.
    pub fn finish<T>(self, value: T) -> Result<T, E> {
        match self.first {
            None => Ok(value),
            Some(err) => Err(err),
        }
    }
}

/// `result` with a 404 read as "the object is gone, nothing to write": a pass over a cached
/// list may reach an object deleted since (the watch says so shortly).
pub fn gone_is_done<T: Default>(result: Result<T, KubeError>) -> Result<T, KubeError> {
    match result {
        Err(KubeError::NotFound(_)) => Ok(T::default()),
        other => other,
    }
}
