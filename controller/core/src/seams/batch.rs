//! TerminateInstances batched across concurrent callers, as upstream's batcher does: the ids of
//! calls made within a window go to EC2 in one call, and each caller gets back its own ids.
//!
//! A batch opens with its first caller and closes when no id was added for
//! [`BATCH_IDLE_MS`], when it is [`BATCH_MAX_MS`] old, or when it holds [`BATCH_IDS_MAX`] ids
//! (upstream: 100 ms idle, 1 s max, 500 ids). The batch is one shared future every caller awaits,
//! so it completes even if the caller that opened it is cancelled. Time is `tokio::time`; ids are
//! kept in ordered sets, so a seed replays.
//!
//! Each batch is observed as upstream's `terminate_instances` batcher is: its window (first
//! request to close) in `karpenter_cloudprovider_batcher_batch_time_seconds` and its requests
//! (callers, not ids) in `karpenter_cloudprovider_batcher_batch_size`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::metrics::cloudprovider::BatcherLabels;
use crate::seams::ec2::{
    CapacityReservation, CreateFleetRequest, CreateFleetResponse, Ec2, Ec2Error, Filter, Image,
    ImageQuery, Instance, InstanceStatus, LaunchTemplate, LaunchTemplateRequest, SecurityGroup,
    Subnet,
};

/// A batch closes this long after its last id arrived.
pub const BATCH_IDLE_MS: u64 = 100;
/// A batch closes at the latest this long after it opened.
pub const BATCH_MAX_MS: u64 = 1_000;
/// A batch closes once it holds this many ids.
pub const BATCH_IDS_MAX: usize = 500;
/// The `batcher` label of the TerminateInstances batch (upstream's batcher name).
pub const TERMINATE_BATCHER: &str = "terminate_instances";

type Terminated = Result<Vec<String>, Ec2Error>;

/// The ids of the open batch and when they came.
struct Open {
    ids: BTreeSet<String>,
    /// Calls that joined (upstream's batch size counts requests).
    callers: usize,
    first: Instant,
    last: Instant,
    closed: bool,
}

struct Batch {
    open: Arc<Mutex<Open>>,
    done: Shared<BoxFuture<'static, Terminated>>,
}

/// The batching layer over an `Ec2`: TerminateInstances batched, every other call straight
/// through.
pub struct BatchedEc2 {
    inner: Arc<dyn Ec2>,
    current: Mutex<Option<Batch>>,
    /// Where each batch's window and size are observed (`None`: not observed).
    metrics: Option<Arc<Metrics>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl BatchedEc2 {
    pub fn new(inner: Arc<dyn Ec2>) -> Self {
        Self {
            inner,
            current: Mutex::new(None),
            metrics: None,
        }
    }

    /// Observes every batch's window and size in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Adds `ids` to the open batch (opening one if needed) and returns the batch's future.
    fn join(&self, ids: &[String]) -> Shared<BoxFuture<'static, Terminated>> {
        let now = Instant::now();
        let mut current = lock(&self.current);
        if let Some(batch) = current.as_ref() {
            let mut open = lock(&batch.open);
            if !open.closed && open.ids.len() < BATCH_IDS_MAX {
                open.ids.extend(ids.iter().cloned());
                open.callers += 1;
                open.last = now;
                return batch.done.clone();
            }
        }
        let open = Arc::new(Mutex::new(Open {
            ids: ids.iter().cloned().collect(),
            callers: 1,
            first: now,
            last: now,
            closed: false,
        }));
        let done = run(self.inner.clone(), open.clone(), self.metrics.clone())
            .boxed()
            .shared();
        *current = Some(Batch {
            open,
            done: done.clone(),
        });
        done
    }
}

/// Waits for the batch to close, then makes its one call.
async fn run(
    inner: Arc<dyn Ec2>,
    open: Arc<Mutex<Open>>,
    metrics: Option<Arc<Metrics>>,
) -> Terminated {
    let ids: Vec<String> = loop {
        let wait = {
            let mut batch = lock(&open);
            let now = Instant::now();
            let idle_at = batch.last + Duration::from_millis(BATCH_IDLE_MS);
            let max_at = batch.first + Duration::from_millis(BATCH_MAX_MS);
            let due = idle_at.min(max_at);
            if batch.ids.len() >= BATCH_IDS_MAX || now >= due {
                batch.closed = true;
                if let Some(metrics) = &metrics {
                    observe(metrics, now - batch.first, batch.callers);
                }
                break batch.ids.iter().cloned().collect();
            }
            due
        };
        tokio::time::sleep_until(wait).await;
    };
    inner.terminate_instances(&ids).await
}

/// One closed batch: its window and how many calls joined it.
fn observe(metrics: &Metrics, window: Duration, callers: usize) {
    let labels = BatcherLabels {
        batcher: TERMINATE_BATCHER.to_string(),
    };
    let cloud = &metrics.cloud;
    cloud
        .batch_time
        .get_or_create(&labels)
        .observe(window.as_secs_f64());
    // Callers fit an f64 exactly (at most `BATCH_IDS_MAX` ids, so as many callers).
    cloud
        .batch_size
        .get_or_create(&labels)
        .observe(callers as f64);
}

#[async_trait]
impl Ec2 for BatchedEc2 {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        self.inner.create_fleet(request).await
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        self.inner.describe_instances(instance_ids, filters).await
    }

    /// Joins the open batch; returns those of `instance_ids` the batch's call reported.
    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        if instance_ids.is_empty() {
            return Ok(Vec::new());
        }
        let terminated = self.join(instance_ids).await?;
        let mine: BTreeMap<&str, ()> = instance_ids.iter().map(|id| (id.as_str(), ())).collect();
        Ok(terminated
            .into_iter()
            .filter(|id| mine.contains_key(id.as_str()))
            .collect())
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        self.inner.create_tags(resource_ids, tags).await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        self.inner.describe_subnets(filters).await
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        self.inner.describe_security_groups(filters).await
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        self.inner.describe_images(query).await
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        self.inner.get_parameter(name).await
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        self.inner.create_launch_template(request).await
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        self.inner.describe_launch_templates(filters).await
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        self.inner.delete_launch_template(name).await
    }

    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        self.inner.describe_instance_status(filters).await
    }

    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        self.inner
            .describe_capacity_reservations(ids, filters)
            .await
    }
}
