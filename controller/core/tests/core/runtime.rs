//! The controller runtime on tokio's paused clock: the work queue's guarantees (one worker per
//! key, requeue of a key changed while processed, delays, holds after failures), the keyed runner's
//! bound on parallel reconciles and its retry backoff, and the virtual clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::runtime::controller::retry_backoff;
use karpenter_core::runtime::{Reconciler, Requeue, WorkQueue, run_keyed};
use karpenter_core::seams::{Clock, VirtualClock};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_key_added_twice_while_waiting_is_handed_out_once_in_the_order_keys_arrived() {
    let queue = WorkQueue::new();
    queue.add("b");
    queue.add("a");
    queue.add("b");
    assert_eq!(queue.next().await, Some("b"));
    assert_eq!(queue.next().await, Some("a"));
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_key_added_while_a_worker_holds_it_comes_back_only_after_done() {
    let queue = Arc::new(WorkQueue::new());
    queue.add("claim");
    let held = queue.next().await;
    assert_eq!(held, Some("claim"));
    queue.add("claim");
    let second = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!second.is_finished(), "not handed to a second worker");
    queue.done(&"claim");
    assert_eq!(second.await.expect("joined"), Some("claim"));
}

#[tokio::test(start_paused = true)]
async fn a_delayed_key_is_handed_out_when_its_delay_has_passed_and_an_earlier_add_wins() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("late", Duration::from_secs(30));
    queue.add_after("soon", Duration::from_secs(5));
    queue.add_after("late", Duration::from_secs(60));
    assert_eq!(queue.next().await, Some("soon"));
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(queue.next().await, Some("late"));
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn adds_of_a_key_held_after_a_failure_wait_for_the_hold_to_end() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add("claim");
    let key = queue.next().await.expect("key");
    queue.add_rate_limited(key, Duration::from_secs(4));
    queue.add("claim");
    queue.done(&"claim");
    queue.add("claim");
    assert_eq!(queue.next().await, Some("claim"));
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(4),
        "held despite the adds"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_queue_hands_out_nothing_more() {
    let queue = WorkQueue::<&str>::new();
    queue.shut_down();
    assert_eq!(queue.next().await, None);
}

/// Sleeps `work` per reconcile, counting how many run at once; fails each key's first
/// `failures` reconciles.
struct Slow {
    work: Duration,
    running: AtomicUsize,
    most: AtomicUsize,
    failures: usize,
    seen: Mutex<BTreeMap<u32, Vec<Duration>>>,
    start: Instant,
}

impl Slow {
    fn new(work: Duration, failures: usize) -> Self {
        Self {
            work,
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            failures,
            seen: Mutex::new(BTreeMap::new()),
            start: Instant::now(),
        }
    }
}

#[async_trait]
impl Reconciler for Slow {
    type Key = u32;
    type Error = String;

    fn name(&self) -> &'static str {
        "slow"
    }

    async fn reconcile(&self, key: &u32) -> Result<Requeue, String> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.work).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        let mut seen = self.seen.lock().unwrap();
        let attempts = seen.entry(*key).or_default();
        attempts.push(self.start.elapsed());
        if attempts.len() <= self.failures {
            return Err(format!("attempt {} failed", attempts.len()));
        }
        Ok(Requeue::Never)
    }
}

#[tokio::test(start_paused = true)]
async fn the_keyed_runner_reconciles_at_most_workers_max_keys_at_once_and_a_slow_key_holds_up_no_other()
 {
    let slow = Arc::new(Slow::new(Duration::from_secs(2), 0));
    let queue = Arc::new(WorkQueue::new());
    for key in 0..10 {
        queue.add(key);
    }
    let runner = tokio::spawn(run_keyed(slow.clone(), queue.clone(), 4));
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(slow.most.load(Ordering::SeqCst), 4);
    let seen = slow.seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        10,
        "all ten done in three rounds of two seconds"
    );
    assert!(seen.values().all(|t| t[0] <= Duration::from_secs(6)));
    runner.abort();
}

#[tokio::test(start_paused = true)]
async fn a_failed_reconcile_is_retried_after_a_doubling_backoff() {
    let slow = Arc::new(Slow::new(Duration::ZERO, 3));
    let queue = Arc::new(WorkQueue::new());
    queue.add(7);
    let runner = tokio::spawn(run_keyed(slow.clone(), queue, 10));
    tokio::time::sleep(Duration::from_secs(60)).await;
    let attempts = slow.seen.lock().unwrap()[&7].clone();
    let secs: Vec<u64> = attempts.iter().map(Duration::as_secs).collect();
    assert_eq!(
        secs,
        [0, 1, 3, 7],
        "1 s, then 2 s, then 4 s after each failure"
    );
    assert_eq!(
        retry_backoff(30),
        Duration::from_secs(300),
        "capped at five minutes"
    );
    runner.abort();
}

#[tokio::test(start_paused = true)]
async fn the_virtual_clock_moves_exactly_as_tokio_time_does() {
    let epoch: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
    let clock = VirtualClock::new(epoch);
    assert_eq!(clock.now(), epoch);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        clock.now(),
        "2026-01-01T00:00:02.5Z"
            .parse::<jiff::Timestamp>()
            .expect("timestamp")
    );
}

mod caches {
    //! The EC2 cache layer over fakecloud: one call per TTL, errors never cached.

    use std::sync::Arc;
    use std::time::Duration;

    use fakecloud::{Fake, Fault, Operation};
    use karpenter_core::nodeclass::CachedEc2;
    use karpenter_core::seams::Ec2;
    use karpenter_core::seams::ec2::{Filter, LaunchTemplateRequest};

    use super::super::support;

    fn template(name: &str) -> LaunchTemplateRequest {
        LaunchTemplateRequest {
            name: name.into(),
            image_id: "ami-1".into(),
            user_data: String::new(),
            security_group_ids: vec![],
            instance_profile: "profile".into(),
            tags: Default::default(),
            extra: Default::default(),
        }
    }

    #[test]
    fn subnets_are_described_once_a_minute_and_a_failed_describe_is_not_remembered() {
        let clock = support::clock();
        let cloud = support::cloud(&clock);
        let cached = CachedEc2::new(cloud.clone(), clock.clone());
        let filters = [Filter::new("tag:karpenter.sh/discovery", &["sim"])];
        cloud.script_faults(Operation::DescribeSubnets, [Fault::InternalError]);
        let describe = || futures::executor::block_on(cached.describe_subnets(&filters));
        assert!(describe().is_err());
        let first = describe().expect("subnets");
        assert!(!first.is_empty());
        assert_eq!(describe().expect("cached"), first);
        assert_eq!(cloud.calls_of(Operation::DescribeSubnets).len(), 2);
        clock.advance(Duration::from_secs(61));
        describe().expect("subnets");
        assert_eq!(cloud.calls_of(Operation::DescribeSubnets).len(), 3);
    }

    #[test]
    fn a_launch_template_is_created_once_and_a_moving_ssm_release_is_read_again_after_five_minutes()
    {
        let clock = support::clock();
        let cloud = support::cloud(&clock);
        let cached: Arc<dyn Ec2> = Arc::new(CachedEc2::new(cloud.clone(), clock.clone()));
        for _ in 0..3 {
            futures::executor::block_on(cached.create_launch_template(&template("lt-a")))
                .expect("created");
        }
        assert_eq!(cloud.calls_of(Operation::CreateLaunchTemplate).len(), 1);
        let parameter = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";
        let read = || futures::executor::block_on(cached.get_parameter(parameter)).expect("read");
        assert!(read().is_some());
        read();
        clock.advance(Duration::from_secs(4 * 60));
        read();
        assert_eq!(cloud.calls_of(Operation::GetParameter).len(), 1);
        clock.advance(Duration::from_secs(61));
        read();
        assert_eq!(cloud.calls_of(Operation::GetParameter).len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_launches_that_miss_the_cache_wait_for_one_describe_and_one_create() {
        let clock = support::clock();
        let cloud = Arc::new(fakecloud::FakeCloud::new(
            clock.clone(),
            karpenter_core::catalog::Catalog::builtin(),
            fakecloud::Config {
                latency: fakecloud::LatencyProfile::realistic(),
                ..fakecloud::Config::default()
            },
        ));
        let cached = CachedEc2::new(cloud.clone(), clock.clone());
        let filters = [Filter::new("tag:karpenter.sh/discovery", &["sim"])];
        let launches = (0..20).map(|_| async {
            let subnets = cached.describe_subnets(&filters).await.expect("subnets");
            cached
                .create_launch_template(&template("lt-a"))
                .await
                .expect("created");
            subnets
        });
        let answers = futures::future::join_all(launches).await;
        assert!(answers.iter().all(|a| *a == answers[0] && !a.is_empty()));
        assert_eq!(cloud.calls_of(Operation::DescribeSubnets).len(), 1);
        assert_eq!(cloud.calls_of(Operation::CreateLaunchTemplate).len(), 1);
    }
}

mod batches {
    //! TerminateInstances batched across concurrent callers.

    use std::sync::Arc;
    use std::time::Duration;

    use fakecloud::{Config, Fake, FakeCloud, Operation};
    use karpenter_core::catalog::CapacityType;
    use karpenter_core::catalog::Catalog;
    use karpenter_core::seams::Ec2;
    use karpenter_core::seams::VirtualClock;
    use karpenter_core::seams::batch::BatchedEc2;
    use karpenter_core::seams::ec2::{CreateFleetRequest, FleetOverride, LaunchTemplateRequest};

    use super::super::support;

    async fn launch(cloud: &FakeCloud) -> String {
        let subnet = cloud.describe_subnets(&[]).await.expect("subnets")[0].clone();
        let image_id = cloud
            .get_parameter(
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
            )
            .await
            .expect("parameter")
            .expect("al2023 image");
        let template = LaunchTemplateRequest {
            name: "batch-test-template".into(),
            image_id,
            user_data: String::new(),
            security_group_ids: vec![],
            instance_profile: "profile".into(),
            tags: Default::default(),
            extra: Default::default(),
        };
        if cloud.instances().is_empty() {
            cloud
                .create_launch_template(&template)
                .await
                .expect("template");
        }
        let request = CreateFleetRequest {
            capacity_block: false,
            capacity_type: CapacityType::OnDemand,
            launch_template_name: "batch-test-template".into(),
            overrides: vec![FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: subnet.subnet_id.clone(),
                zone: subnet.zone.clone(),
                price: None,
            }],
            tags: Default::default(),
            client_token: format!("token-{}", cloud.instances().len()),
            context: None,
        };
        let response = cloud.create_fleet(&request).await.expect("launched");
        assert!(response.errors.is_empty(), "{:?}", response.errors);
        response.instances[0].instance_id.clone()
    }

    #[tokio::test(start_paused = true)]
    async fn terminations_of_concurrent_callers_go_to_ec2_in_one_call_and_each_caller_gets_its_own_ids()
     {
        let clock = Arc::new(VirtualClock::new(support::start()));
        let cloud = Arc::new(FakeCloud::new(clock, Catalog::builtin(), Config::default()));
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(launch(&cloud).await);
        }
        let batched = Arc::new(BatchedEc2::new(cloud.clone()));
        let mut callers = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let batched = batched.clone();
            let id = id.clone();
            callers.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50 * i as u64)).await;
                batched.terminate_instances(std::slice::from_ref(&id)).await
            }));
        }
        for (caller, id) in callers.into_iter().zip(&ids) {
            let terminated = caller.await.expect("joined").expect("terminated");
            assert_eq!(terminated, std::slice::from_ref(id));
        }
        assert_eq!(cloud.calls_of(Operation::TerminateInstances).len(), 1);
    }

    /// Issue 15 (H2): the batch is observed as upstream's `terminate_instances` batcher: one
    /// window, from the first call (t=0) to the close 100 ms after the last (t=100 ms), and its
    /// size in calls.
    #[tokio::test(start_paused = true)]
    async fn a_batch_is_observed_as_upstreams_terminate_instances_batcher_with_its_window_and_calls()
     {
        let clock = Arc::new(VirtualClock::new(support::start()));
        let cloud = Arc::new(FakeCloud::new(clock, Catalog::builtin(), Config::default()));
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(launch(&cloud).await);
        }
        let metrics = Arc::new(karpenter_core::metrics::Metrics::new());
        let batched = Arc::new(BatchedEc2::new(cloud.clone()).with_metrics(metrics.clone()));
        let mut callers = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let batched = batched.clone();
            let id = id.clone();
            callers.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50 * i as u64)).await;
                batched.terminate_instances(std::slice::from_ref(&id)).await
            }));
        }
        for caller in callers {
            caller.await.expect("joined").expect("terminated");
        }
        let text = metrics.encode();
        let value = |series: &str| {
            text.lines()
                .find(|l| l.starts_with(series))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
        };
        let labels = "{batcher=\"terminate_instances\"}";
        let size = format!("karpenter_cloudprovider_batcher_batch_size_sum{labels}");
        let windows = format!("karpenter_cloudprovider_batcher_batch_time_seconds_count{labels}");
        let window = format!("karpenter_cloudprovider_batcher_batch_time_seconds_sum{labels}");
        assert_eq!(value(&size), Some(3.0), "{text}");
        assert_eq!(value(&windows), Some(1.0), "{text}");
        assert_eq!(value(&window), Some(0.2), "{text}");
    }
}
