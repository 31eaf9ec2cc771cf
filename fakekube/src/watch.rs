//! Watches: a bounded history of changes (all kinds, like etcd's compaction window) and the open
//! watchers, each fed through its own bounded queue.
//!
//! Every change is delivered under the server's lock, in resourceVersion order, so a watcher sees
//! exactly the order the store applied. A watcher whose queue is full is closed rather than
//! blocking the writer (the API server's watch cache does the same); its stream ends and the
//! client re-watches.

use std::collections::{BTreeMap, VecDeque};

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{SharedObject, WatchEvent, WatchStream};
use serde_json::{Value, json};
// futures' channel, not tokio's: tokio's receiver takes from the task's cooperative budget and
// reports "not ready" after ~128 receives in one poll even with events queued, which a client
// that drains a watch without waiting (`now_or_never`) would mistake for "caught up".
use futures::channel::mpsc;

use crate::selectors::Filter;
use crate::store::Resource;

/// What a change did to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One change of the store, as kept for watches.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    pub resource_version: u64,
    pub resource: Resource,
    pub change: ChangeType,
    /// The object before a modification (to tell a watcher it left or entered its selector).
    pub old: Option<SharedObject>,
    /// The object after the change; for a deletion, its last state with the deletion's version.
    /// Shared with the store and every watcher: a change is never copied to be delivered.
    pub object: SharedObject,
}

impl Change {
    /// This change as a watcher with `filter` sees it, like the API server's watch cache: an object
    /// that starts matching is `Added`, one that stops matching is `Deleted` (its previous state at
    /// this change's version), one that never matches is not sent.
    fn view(&self, filter: &Filter) -> Option<WatchEvent> {
        let now_matches = filter.matches(&self.object);
        match self.change {
            ChangeType::Added => now_matches.then(|| WatchEvent::Added(self.object.clone())),
            ChangeType::Deleted => now_matches.then(|| WatchEvent::Deleted(self.object.clone())),
            ChangeType::Modified => {
                let old_matched = self.old.as_ref().is_some_and(|old| filter.matches(old));
                match (old_matched, now_matches) {
                    (true, true) => Some(WatchEvent::Modified(self.object.clone())),
                    (false, true) => Some(WatchEvent::Added(self.object.clone())),
                    (true, false) => {
                        let mut last = self.old.as_deref().cloned().unwrap_or(Value::Null);
                        last["metadata"]["resourceVersion"] =
                            json!(self.resource_version.to_string());
                        Some(WatchEvent::Deleted(std::sync::Arc::new(last)))
                    }
                    (false, false) => None,
                }
            }
        }
    }
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WatchStart {
    /// `""` or `"0"`: synthetic `Added` events for every current object, then live changes (what
    /// Kubernetes does for a watch without a version).
    Current,
    /// Changes after this resourceVersion.
    After(u64),
}

impl WatchStart {
    pub fn parse(resource_version: &str) -> Result<Self, KubeError> {
        match resource_version {
            "" | "0" => Ok(WatchStart::Current),
            rv => rv.parse().map(WatchStart::After).map_err(|_| {
                KubeError::Invalid(format!("invalid resource version {rv:?}: not a number"))
            }),
        }
    }
}

type Sender = mpsc::Sender<Result<WatchEvent, KubeError>>;

struct Watcher {
    resource: Resource,
    filter: Filter,
    sender: Sender,
    /// Change events still to deliver before an injected disconnect; `None`: no disconnect.
    remaining_events: Option<u64>,
    last_bookmark: Timestamp,
}

/// The history and the open watchers.
pub(crate) struct WatchHub {
    history: VecDeque<Change>,
    history_max: usize,
    /// The newest version dropped from the history: a watch from an older version cannot be
    /// served (410 Gone).
    compacted_through: u64,
    watchers: BTreeMap<u64, Watcher>,
    next_watcher_id: u64,
}

impl WatchHub {
    pub fn new(history_max: usize) -> Self {
        Self {
            history: VecDeque::new(),
            history_max,
            compacted_through: 0,
            watchers: BTreeMap::new(),
            next_watcher_id: 1,
        }
    }

    /// Keeps `change` in the history and sends it to every watcher that selects it.
    pub fn publish(&mut self, change: Change) {
        let mut closed = Vec::new();
        for (id, watcher) in &mut self.watchers {
            if watcher.resource != change.resource {
                continue;
            }
            let Some(event) = change.view(&watcher.filter) else {
                continue;
            };
            if watcher.sender.try_send(Ok(event)).is_err() {
                // Full (a slow watcher) or closed (the client dropped the stream).
                closed.push(*id);
                continue;
            }
            if let Some(remaining) = &mut watcher.remaining_events {
                *remaining = remaining.saturating_sub(1);
                if *remaining == 0 {
                    closed.push(*id);
                }
            }
        }
        for id in closed {
            self.watchers.remove(&id);
        }
        self.history.push_back(change);
        self.trim();
    }

    /// Sends a bookmark at `resource_version` to every watcher whose last one is `interval` old.
    pub fn send_due_bookmarks(&mut self, now: Timestamp, resource_version: u64, interval_ms: u64) {
        if interval_ms == 0 {
            return;
        }
        let interval = SignedDuration::from_millis(i64::try_from(interval_ms).unwrap_or(i64::MAX));
        let mut closed = Vec::new();
        for (id, watcher) in &mut self.watchers {
            if watcher.sender.is_closed() {
                closed.push(*id);
                continue;
            }
            if now.duration_since(watcher.last_bookmark) < interval {
                continue;
            }
            watcher.last_bookmark = now;
            let bookmark = WatchEvent::Bookmark {
                resource_version: resource_version.to_string(),
            };
            if watcher.sender.try_send(Ok(bookmark)).is_err() {
                closed.push(*id);
            }
        }
        for id in closed {
            self.watchers.remove(&id);
        }
    }

    /// Opens a watch. `current` lists the objects to announce for [`WatchStart::Current`];
    /// `queue_max` bounds the live queue (the backlog of history is handed over whole, since the
    /// history bounds it already).
    pub fn open(&mut self, request: WatchRequest) -> WatchStream {
        let WatchRequest {
            resource,
            filter,
            start,
            current,
            mut remaining_events,
            queue_max,
            now,
        } = request;
        let mut backlog: Vec<WatchEvent> = match start {
            WatchStart::Current => current
                .into_iter()
                .filter(|object| filter.matches(object))
                .map(WatchEvent::Added)
                .collect(),
            WatchStart::After(version) if version < self.compacted_through => {
                let gone = KubeError::Gone(format!(
                    "too old resource version: {version} ({})",
                    self.compacted_through + 1
                ));
                return futures::stream::iter([Err(gone)]).boxed();
            }
            WatchStart::After(version) => self
                .history
                .iter()
                .filter(|c| c.resource == resource && c.resource_version > version)
                .filter_map(|c| c.view(&filter))
                .collect(),
        };
        if let Some(remaining) = &mut remaining_events {
            let delivered = backlog
                .len()
                .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
            backlog.truncate(delivered);
            *remaining -= delivered as u64;
            if *remaining == 0 {
                // The connection drops before any live change: the stream is the backlog only.
                return futures::stream::iter(backlog.into_iter().map(Ok)).boxed();
            }
        }
        // futures' channel holds `buffer + senders` messages: one sender, so `queue_max - 1`.
        let (sender, receiver) = mpsc::channel(queue_max.max(1) - 1);
        let id = self.next_watcher_id;
        self.next_watcher_id += 1;
        self.watchers.insert(
            id,
            Watcher {
                resource,
                filter,
                sender,
                remaining_events,
                last_bookmark: now,
            },
        );
        futures::stream::iter(backlog.into_iter().map(Ok))
            .chain(receiver)
            .boxed()
    }

    /// Shrinks (or grows) the history bound, dropping the oldest changes beyond it.
    pub fn set_history_max(&mut self, history_max: usize) {
        self.history_max = history_max;
        self.trim();
    }

    fn trim(&mut self) {
        while self.history.len() > self.history_max {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted_through = dropped.resource_version;
            }
        }
    }

    /// Watchers still open (dropped streams are pruned first).
    pub fn open_count(&mut self) -> usize {
        self.watchers.retain(|_, w| !w.sender.is_closed());
        self.watchers.len()
    }

    /// Closes every watch: their streams end after what they already queued.
    pub fn close_all(&mut self) {
        self.watchers.clear();
    }
}

/// What [`WatchHub::open`] needs.
pub(crate) struct WatchRequest {
    pub resource: Resource,
    pub filter: Filter,
    pub start: WatchStart,
    pub current: Vec<SharedObject>,
    pub remaining_events: Option<u64>,
    pub queue_max: usize,
    pub now: Timestamp,
}
