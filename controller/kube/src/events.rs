//! Events as `events.k8s.io/v1` objects, deduplicated into series the way client-go's new event
//! recorder does: the first occurrence is created (named `{object}.{unix nanos, hex}`), a repeat
//! of the same (object, type, reason, message) within [`EVENT_SERIES_WINDOW`] patches that
//! event's `series` (`count`, `lastObservedTime`) instead of creating another object. A repeat
//! whose event has meanwhile gone (the API server's event TTL) starts a new one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::seams::kube::{EventRecord, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use serde_json::{Value, json};

use crate::client::KubeClient;

/// The `events.k8s.io/v1` Event (the seam's `ResourceKind::EVENT` is the core/v1 kind readers
/// list; the recorder writes the newer API, which the chart's RBAC grants).
pub const EVENTS_V1: ResourceKind = ResourceKind {
    group: "events.k8s.io",
    version: "v1",
    kind: "Event",
    plural: "events",
    namespaced: true,
};

/// A repeat within this long of the last occurrence extends the series (client-go: 6 minutes).
pub const EVENT_SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Series remembered at most; past it the least recently seen are forgotten (their next
/// occurrence simply creates a new event).
pub const EVENT_SERIES_MAX: usize = 4_096;
/// Longest `note` the API server accepts (events.k8s.io validation: 1 kB).
pub const EVENT_NOTE_BYTES_MAX: usize = 1_024;
/// Who writes the events (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "karpenter";
/// Events of cluster-scoped objects (nodes, NodeClaims) live here, as client-go puts them.
pub const CLUSTER_SCOPED_EVENTS_NAMESPACE: &str = "default";

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    namespace: String,
    kind: &'static str,
    name: String,
    type_: &'static str,
    reason: String,
    message: String,
}

#[derive(Clone, Debug)]
struct Series {
    event_name: String,
    count: i64,
    last: Timestamp,
}

/// The series this replica has written.
pub(crate) struct EventSeries {
    clock: Arc<dyn Clock>,
    reporting_instance: String,
    series: Mutex<BTreeMap<SeriesKey, Series>>,
}

/// `MicroTime`'s wire format.
fn micro_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncated(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl EventSeries {
    pub(crate) fn new(clock: Arc<dyn Clock>, reporting_instance: String) -> Self {
        Self {
            clock,
            reporting_instance,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SeriesKey, Series>> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) async fn record(
        &self,
        client: &KubeClient,
        event: &EventRecord,
    ) -> Result<(), KubeError> {
        let now = self.clock.now();
        let namespace = event
            .key
            .namespace
            .clone()
            .unwrap_or_else(|| CLUSTER_SCOPED_EVENTS_NAMESPACE.to_string());
        let key = SeriesKey {
            namespace: namespace.clone(),
            kind: event.involved.kind,
            name: event.key.name.clone(),
            type_: event.type_.as_str(),
            reason: event.reason.clone(),
            message: event.message.clone(),
        };
        let repeat = self.lock().get(&key).cloned().filter(|s| {
            now < s
                .last
                .saturating_add(EVENT_SERIES_WINDOW)
                .unwrap_or(Timestamp::MAX)
        });
        if let Some(series) = repeat {
            let count = series.count + 1;
            let patch = json!({"series": {"count": count, "lastObservedTime": micro_time(now)}});
            let target = ObjectKey::namespaced(namespace.clone(), series.event_name.clone());
            match client
                .patch(&EVENTS_V1, &target, &Patch::Merge(patch))
                .await
            {
                Ok(_) => {
                    self.remember(key, series.event_name, count, now);
                    return Ok(());
                }
                // The event expired (or was deleted): start a new one.
                Err(KubeError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let name = format!(
            "{}.{:x}",
            event.key.name,
            now.as_nanosecond().max(0).unsigned_abs()
        );
        client
            .create(&EVENTS_V1, self.event_object(event, &namespace, &name, now))
            .await?;
        self.remember(key, name, 1, now);
        Ok(())
    }

    fn event_object(
        &self,
        event: &EventRecord,
        namespace: &str,
        name: &str,
        now: Timestamp,
    ) -> Value {
        let mut regarding = json!({
            "apiVersion": event.involved.api_version(),
            "kind": event.involved.kind,
            "name": event.key.name,
        });
        if let Some(ns) = &event.key.namespace {
            regarding["namespace"] = json!(ns);
        }
        if let Some(uid) = &event.uid {
            regarding["uid"] = json!(uid);
        }
        json!({
            "apiVersion": EVENTS_V1.api_version(),
            "kind": EVENTS_V1.kind,
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.reporting_instance,
            "action": event.reason,
            "reason": event.reason,
            "type": event.type_.as_str(),
            "note": truncated(&event.message, EVENT_NOTE_BYTES_MAX),
            "regarding": regarding,
        })
    }

    fn remember(&self, key: SeriesKey, event_name: String, count: i64, now: Timestamp) {
        let mut series = self.lock();
        if !series.contains_key(&key) && series.len() >= EVENT_SERIES_MAX {
            let oldest = series
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                series.remove(&oldest);
            }
        }
        series.insert(
            key,
            Series {
                event_name,
                count,
                last: now,
            },
        );
    }
}
