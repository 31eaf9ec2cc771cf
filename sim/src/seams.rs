//! The seams a world hands its controller and its kube-scheduler stand-in: each a stack of seam
//! layers over the API server or fakecloud, composed here and nowhere else.
//!
//! ```text
//! controller kube: Fuse (per process) → Broken → Authorized → Audited → View → ApiServer
//! controller EC2:  Fuse (per process) → Broken → AuditedFleets (per process) → FakeCloud
//! controller SQS:  Fuse (per process) → AuditedQueue (per process) → Broken → FakeCloud
//! scheduler kube:  View (the scheduler's bugs only) → ApiServer
//! ```
//!
//! The controller's Kubernetes seam is always authorized ([`Authorized`]: the chart's RBAC, as
//! the API server enforces it on the controller's ServiceAccount) and audited (also with [`Bug::None`], when [`Broken`]
//! and [`View`] pass every call on): invariants need the [`Audit`] of what the controller removed
//! and created. The fuse is added per process ([`crate::process`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fakecloud::FakeCloud;
use fakekube::ApiServer;
use karpenter_core::seams::layered::Layered;
use karpenter_core::seams::{Clock, Ec2, KubeApi, Sqs};

use crate::audit::{Audit, Audited, AuditedFleets, AuditedQueue};
use crate::bugs::{Broken, Bug, View};
use crate::rbac::Authorized;

/// Builds one controller process's EC2 seam from its identity (the [`AuditedFleets`] layer
/// records its CreateFleets under that name).
pub type Ec2ForProcess = Arc<dyn Fn(&str) -> Arc<dyn Ec2> + Send + Sync>;

/// Builds one controller process's SQS seam from its identity (the [`AuditedQueue`] layer
/// records the spot warnings it deletes under that name).
pub type SqsForProcess = Arc<dyn Fn(&str) -> Arc<dyn Sqs> + Send + Sync>;

/// The seams a world hands its controller and its kube-scheduler stand-in.
pub struct Seams {
    pub audit: Arc<Audit>,
    pub controller_kube: Arc<dyn KubeApi>,
    pub controller_ec2: Ec2ForProcess,
    pub controller_sqs: SqsForProcess,
    pub scheduler_kube: Arc<dyn KubeApi>,
}

/// Worlds built with [`Bug::Nondeterministic`] so far in this process.
static NONDETERMINISTIC_WORLDS: AtomicU64 = AtomicU64::new(0);

impl Seams {
    pub fn new(
        bug: Bug,
        api: Arc<ApiServer>,
        cloud: Arc<FakeCloud>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let audit = Arc::new(Audit::default());
        let fail_first_claim = bug == Bug::Nondeterministic
            && NONDETERMINISTIC_WORLDS.fetch_add(1, Ordering::Relaxed) % 2 == 1;
        let broken = Arc::new(Broken::new(
            bug,
            api.clone(),
            cloud.clone(),
            fail_first_claim,
        ));
        let server: Arc<dyn KubeApi> = api.clone();
        // The scheduler's own bugs leave the controller's view alone.
        let controller_view = match bug {
            Bug::SchedulerIgnoresDisruptedTaint => Bug::None,
            bug => bug,
        };
        let viewed: Arc<dyn KubeApi> =
            Arc::new(Layered::new(View(controller_view), server.clone()));
        let audited: Arc<dyn KubeApi> = Arc::new(Layered::new(
            Audited {
                audit: audit.clone(),
                api,
                clock: clock.clone(),
            },
            viewed,
        ));
        let authorized: Arc<dyn KubeApi> = Arc::new(Layered::new(Authorized, audited));
        let sqs: Arc<dyn Sqs> =
            Arc::new(Layered::new(broken.clone(), cloud.clone() as Arc<dyn Sqs>));
        let controller_sqs: SqsForProcess = {
            let (audit, clock) = (audit.clone(), clock.clone());
            Arc::new(move |process: &str| {
                let queue = AuditedQueue::new(audit.clone(), clock.clone(), process);
                Arc::new(Layered::new(queue, sqs.clone())) as Arc<dyn Sqs>
            })
        };
        let ec2: Arc<dyn Ec2> = cloud.clone();
        let controller_ec2: Ec2ForProcess = {
            let (audit, broken) = (audit.clone(), broken.clone());
            Arc::new(move |process: &str| {
                let fleets = AuditedFleets {
                    audit: audit.clone(),
                    clock: clock.clone(),
                    process: process.to_string(),
                };
                let audited: Arc<dyn Ec2> = Arc::new(Layered::new(fleets, ec2.clone()));
                // The process's own EC2 cache with upstream's TTLs (`Context::with_ec2_cache`, as
                // the binary has), lost with the process as upstream's in-memory caches are. The
                // planted bug sits above it, where a controller bug would: a bug that asks for
                // the wrong SSM parameter is cached under that name, with that name's TTL.
                let cached: Arc<dyn Ec2> = Arc::new(karpenter_core::nodeclass::CachedEc2::new(
                    audited,
                    clock.clone(),
                ));
                Arc::new(Layered::new(broken.clone(), cached))
            })
        };
        let scheduler_kube: Arc<dyn KubeApi> = match bug {
            Bug::SchedulerOvercommit | Bug::SchedulerIgnoresDisruptedTaint => {
                Arc::new(Layered::new(View(bug), server))
            }
            _ => server,
        };
        Self {
            audit,
            controller_kube: Arc::new(Layered::new(broken.clone(), authorized)),
            controller_ec2,
            controller_sqs,
            scheduler_kube,
        }
    }
}
