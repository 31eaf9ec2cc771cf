//! A work queue of object keys, with controller-runtime's guarantees: a key waiting in the queue
//! is held once however often it is added; a key is handed to one worker at a time; a key added
//! while a worker processes it is handed out again once that worker is `done` with it (the
//! dirty/processing sets of client-go's workqueue); delayed adds wait on timers.
//!
//! Deterministic: keys are handed out in the order they became ready (enqueue sequence), timers
//! fire in (deadline, sequence) order, and every collection is ordered. Time is `tokio::time`
//! (virtual under madsim and in a paused runtime).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Most keys one queue holds (ready, delayed, processing and dirty together). A controller's keys
/// are its objects, so this bounds a queue at well above any cluster's object count (upstream
/// sizes nothing: a workqueue grows with the cluster); past it, adds are dropped and counted, and
/// the controller's periodic resync brings the keys back.
pub const QUEUE_KEYS_MAX: usize = 100_000;

struct Inner<K> {
    /// Keys ready to be handed out, oldest first.
    ready: VecDeque<K>,
    /// The keys in `ready`.
    queued: BTreeSet<K>,
    /// Keys a worker holds.
    processing: BTreeSet<K>,
    /// Keys added while being processed: ready again at `done`.
    dirty: BTreeSet<K>,
    /// Delayed adds, by (deadline, sequence).
    timers: BTreeMap<(Instant, u64), K>,
    /// Each delayed key's timer (the earliest wins).
    waiting: BTreeMap<K, (Instant, u64)>,
    /// Keys whose adds wait until the instant (rate limited after a failure).
    held: BTreeMap<K, Instant>,
    sequence: u64,
    dropped: u64,
    shut_down: bool,
}

impl<K: Ord + Clone> Inner<K> {
    fn len(&self) -> usize {
        self.queued.len() + self.processing.len() + self.waiting.len()
    }

    fn make_ready(&mut self, key: K) {
        if self.queued.contains(&key) {
            return;
        }
        if self.processing.contains(&key) {
            self.dirty.insert(key);
            return;
        }
        if self.len() >= QUEUE_KEYS_MAX {
            self.dropped += 1;
            return;
        }
        if let Some(timer) = self.waiting.remove(&key) {
            self.timers.remove(&timer);
        }
        self.queued.insert(key.clone());
        self.ready.push_back(key);
    }

    fn schedule(&mut self, key: K, at: Instant) {
        if self.queued.contains(&key) {
            return;
        }
        if let Some(&(existing, _)) = self.waiting.get(&key) {
            if existing <= at {
                return;
            }
            if let Some(timer) = self.waiting.remove(&key) {
                self.timers.remove(&timer);
            }
        }
        if self.len() >= QUEUE_KEYS_MAX {
            self.dropped += 1;
            return;
        }
        self.sequence += 1;
        let timer = (at, self.sequence);
        self.timers.insert(timer, key.clone());
        self.waiting.insert(key, timer);
    }

    /// Moves the timers due at `now` to the ready list, in deadline order.
    fn fire(&mut self, now: Instant) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.waiting.remove(&key);
            self.held.remove(&key);
            self.make_ready(key);
        }
        self.held.retain(|_, until| *until > now);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.timers.first_key_value().map(|((at, _), _)| *at)
    }
}

/// A deduplicating, delaying work queue of keys (see the module docs).
pub struct WorkQueue<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
}

impl<K: Ord + Clone> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Clone> WorkQueue<K> {
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                ready: VecDeque::new(),
                queued: BTreeSet::new(),
                processing: BTreeSet::new(),
                dirty: BTreeSet::new(),
                timers: BTreeMap::new(),
                waiting: BTreeMap::new(),
                held: BTreeMap::new(),
                sequence: 0,
                dropped: 0,
                shut_down: false,
            }),
            notify: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds `key` now (a change to its object). A key held after a failure waits out its hold.
    pub fn add(&self, key: K) {
        let now = Instant::now();
        {
            let mut inner = self.lock();
            match inner.held.get(&key).copied() {
                Some(until) if until > now => inner.schedule(key, until),
                _ => inner.make_ready(key),
            }
        }
        self.notify.notify_waiters();
    }

    /// Adds `key` once `delay` has passed (a requeue); an earlier pending add of it wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = Instant::now() + delay;
        self.lock().schedule(key, at);
        self.notify.notify_waiters();
    }

    /// Adds `key` after `delay` and holds every other add of it until then: the requeue after a
    /// failure, which the failed reconcile's own writes (watch events) must not cut short.
    pub fn add_rate_limited(&self, key: K, delay: Duration) {
        let at = Instant::now() + delay;
        {
            let mut inner = self.lock();
            inner.held.insert(key.clone(), at);
            inner.schedule(key, at);
        }
        self.notify.notify_waiters();
    }

    /// The next ready key, waiting for one; `None` once the queue is shut down. The caller owns
    /// the key until it calls [`WorkQueue::done`].
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let mut inner = self.lock();
                if inner.shut_down {
                    return None;
                }
                inner.fire(Instant::now());
                if let Some(key) = inner.ready.pop_front() {
                    inner.queued.remove(&key);
                    inner.processing.insert(key.clone());
                    return Some(key);
                }
                inner.next_deadline()
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        biased;
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The worker is finished with `key`: if it was added meanwhile, it is ready again.
    pub fn done(&self, key: &K) {
        let requeued = {
            let mut inner = self.lock();
            inner.processing.remove(key);
            if !inner.dirty.remove(key) {
                false
            } else {
                // A hold after a failure outlasts the adds made while the key was processed.
                match inner.held.get(key).copied() {
                    Some(until) if until > Instant::now() => inner.schedule(key.clone(), until),
                    _ => inner.make_ready(key.clone()),
                }
                true
            }
        };
        if requeued {
            self.notify.notify_waiters();
        }
    }

    /// Wakes every waiting worker with `None`: the controller is stopping.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Keys ready or delayed (not those being processed).
    pub fn len(&self) -> usize {
        let inner = self.lock();
        inner.queued.len() + inner.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds dropped because the queue held [`QUEUE_KEYS_MAX`] keys.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}
