//! Long polls and injected latency, which sleep: run on tokio's paused clock, which a test clock
//! reads, so sleeping moves the fake's time. Only in the normal build: under `--cfg madsim` the
//! simulation drives time itself.

use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Config, Fake, FakeCloud, Fault, FaultRates, Operation};
use jiff::{SignedDuration, Timestamp};
use karpenter_core::seams::Clock;
use karpenter_core::seams::ec2::Ec2;
use karpenter_core::seams::sqs::Sqs;

use super::support::{catalog, config, start};

/// A clock that reads tokio's (paused, auto-advancing) time, so a long poll moves it.
struct TokioClock {
    start: Timestamp,
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.origin.elapsed()).expect("elapsed");
        self.start + elapsed
    }
}

fn tokio_cloud(config: Config) -> (Arc<TokioClock>, FakeCloud) {
    let clock = Arc::new(TokioClock {
        start: start(),
        origin: tokio::time::Instant::now(),
    });
    let cloud = FakeCloud::new(clock.clone(), catalog(), config);
    (clock, cloud)
}

#[tokio::test(start_paused = true)]
async fn a_long_poll_returns_as_soon_as_a_message_becomes_visible() {
    let (clock, cloud) = tokio_cloud(Config {
        visibility_timeout_s: 5,
        ..config()
    });
    cloud.inject_message("m");
    let first = cloud
        .receive_messages(10, Duration::from_secs(20))
        .await
        .expect("receive");
    assert_eq!(first.len(), 1);
    assert_eq!(clock.now(), start(), "no wait when a message is there");

    let again = cloud
        .receive_messages(10, Duration::from_secs(20))
        .await
        .expect("receive");
    assert_eq!(again.len(), 1, "redelivered within the poll");
    assert_eq!(
        clock.now().duration_since(start()),
        SignedDuration::from_secs(5)
    );
}

#[tokio::test(start_paused = true)]
async fn an_empty_long_poll_waits_the_whole_wait_and_returns_nothing() {
    let (clock, cloud) = tokio_cloud(config());
    let messages = cloud
        .receive_messages(10, Duration::from_secs(20))
        .await
        .expect("receive");
    assert!(messages.is_empty());
    assert_eq!(
        clock.now().duration_since(start()),
        SignedDuration::from_secs(20)
    );
}

#[tokio::test(start_paused = true)]
async fn injected_latency_delays_the_call_and_the_call_happens_after_it() {
    let (clock, cloud) = tokio_cloud(config());
    cloud.script_faults(Operation::DescribeSubnets, [Fault::LatencyMs(1_500)]);
    cloud.set_fault_rates(
        Operation::DescribeSecurityGroups,
        FaultRates {
            latency_ms_min: 200,
            latency_ms_max: 400,
            ..FaultRates::default()
        },
    );
    cloud.describe_subnets(&[]).await.expect("subnets");
    assert_eq!(
        clock.now().duration_since(start()),
        SignedDuration::from_millis(1_500)
    );
    cloud.describe_security_groups(&[]).await.expect("groups");
    let elapsed = clock.now().duration_since(start()) - SignedDuration::from_millis(1_500);
    assert!(
        elapsed >= SignedDuration::from_millis(200) && elapsed <= SignedDuration::from_millis(400),
        "{elapsed:?}"
    );
    let log = cloud.calls();
    assert_eq!(log[0].time, start() + SignedDuration::from_millis(1_500));
}

#[tokio::test(start_paused = true)]
async fn a_long_poll_returns_when_a_message_is_sent_while_it_waits() {
    let (clock, cloud) = tokio_cloud(config());
    let cloud = Arc::new(cloud);
    let sender = {
        let cloud = cloud.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            cloud.inject_message("late");
        })
    };
    let received = cloud
        .receive_messages(10, Duration::from_secs(20))
        .await
        .expect("receive");
    assert_eq!(received.len(), 1);
    assert_eq!(
        clock.now().duration_since(start()),
        SignedDuration::from_secs(3),
        "returned when the message arrived, not at the end of the wait"
    );
    sender.await.expect("joined");
}

#[tokio::test(start_paused = true)]
async fn every_call_takes_its_actions_latency_from_the_profile_and_a_seed_draws_its_own_ranges() {
    let profile = fakecloud::LatencyProfile::drawn(7);
    assert_eq!(
        profile,
        fakecloud::LatencyProfile::drawn(7),
        "same seed, same ranges"
    );
    assert_ne!(profile, fakecloud::LatencyProfile::drawn(8));
    for (op, low, high) in fakecloud::REALISTIC_MS {
        let (a, b) = profile.ranges_ms[&op];
        assert!(
            low <= a && a <= b && b <= high,
            "{op}: {a}..{b} within {low}..{high}"
        );
    }
    let (clock, cloud) = tokio_cloud(Config {
        latency: fakecloud::LatencyProfile::realistic(),
        ..config()
    });
    cloud.describe_subnets(&[]).await.expect("subnets");
    let took = clock.now().duration_since(start());
    assert!(
        took >= SignedDuration::from_millis(100) && took <= SignedDuration::from_millis(500),
        "DescribeSubnets took {took}"
    );
}
