//! Tests of fakecloud through the `Ec2` and `Sqs` seams, plus the fake's own knobs and inspection
//! methods. One test binary; each behaviour has its own module.

#[path = "fakecloud/amis.rs"]
mod amis;
#[path = "fakecloud/boot.rs"]
mod boot;
#[path = "fakecloud/bootstrap.rs"]
mod bootstrap;
#[path = "fakecloud/cost.rs"]
mod cost;
#[path = "fakecloud/determinism.rs"]
mod determinism;
#[path = "fakecloud/events.rs"]
mod events;
#[path = "fakecloud/faults.rs"]
mod faults;
#[path = "fakecloud/fleet.rs"]
mod fleet;
#[path = "fakecloud/instances.rs"]
mod instances;
#[path = "fakecloud/network.rs"]
mod network;
#[cfg(not(madsim))]
#[path = "fakecloud/paused_time.rs"]
mod paused_time;
#[path = "fakecloud/reservations.rs"]
mod reservations;
#[path = "fakecloud/sqs.rs"]
mod sqs;
#[path = "fakecloud/support.rs"]
mod support;
