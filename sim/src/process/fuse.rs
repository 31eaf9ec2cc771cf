//! The life of one controller process, as a seam layer: calls pass while it lives; once the fuse
//! has blown, every later call of that process fails with `Unavailable` and does nothing. The
//! same [`Fuse`] sits over the process's Kubernetes, EC2 and SQS seams, so a crash can land in
//! the middle of a step (after a launch, after an eviction, at any call), exactly where a real
//! process can die.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::seams::layered::{
    Ec2Call, Ec2Layer, Ec2Reply, KubeCall, KubeLayer, KubeReply, SqsCall, SqsLayer, SqsReply,
};
use karpenter_core::seams::{Ec2, Ec2Error, KubeApi, KubeError, Sqs, SqsError};

/// What the seams of a dead process answer.
const DEAD: &str = "the controller process is dead";

/// When a process's fuse blows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// After this many more seam calls (at the end of the step if it makes fewer).
    AfterCalls(u64),
    /// Right after the next `CreateFleet` that launched an instance.
    AfterLaunch,
    /// Right after the next successful eviction.
    AfterEviction,
}

/// What a seam call did that a crash trigger can wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Plain,
    /// A `CreateFleet` that launched an instance.
    Launched,
    /// An eviction that went through.
    Evicted,
}

#[derive(Debug, Default)]
struct FuseState {
    blown: bool,
    armed: Option<Trigger>,
    /// How long the process stays dead once the armed trigger fires.
    downtime: Duration,
    /// What the process was doing when it died (for the event log).
    cause: Option<String>,
}

/// The life of one process.
#[derive(Debug, Default)]
pub struct Fuse {
    state: Mutex<FuseState>,
}

impl Fuse {
    fn lock(&self) -> MutexGuard<'_, FuseState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The process dies at `trigger` and stays dead for `downtime`.
    pub fn arm(&self, trigger: Trigger, downtime: Duration) {
        let mut state = self.lock();
        state.armed = Some(trigger);
        state.downtime = downtime;
    }

    /// Whether a crash is armed to strike after a number of calls (such a crash strikes at the
    /// end of the step at the latest).
    pub fn armed_by_calls(&self) -> bool {
        matches!(self.lock().armed, Some(Trigger::AfterCalls(_)))
    }

    pub fn downtime(&self) -> Duration {
        self.lock().downtime
    }

    /// The process dies now, for `downtime`.
    pub fn die(&self, cause: &str, downtime: Duration) {
        let mut state = self.lock();
        state.armed = None;
        state.downtime = downtime;
        drop(state);
        self.blow(cause);
    }

    pub fn blow(&self, cause: &str) {
        let mut state = self.lock();
        if !state.blown {
            state.blown = true;
            state.cause = Some(cause.to_string());
        }
    }

    pub fn is_blown(&self) -> bool {
        self.lock().blown
    }

    pub fn cause(&self) -> Option<String> {
        self.lock().cause.clone()
    }

    /// After a call that happened (`verb` on `object`): counts it towards an armed trigger.
    fn called(&self, verb: &'static str, object: &'static str, effect: Effect) {
        let mut state = self.lock();
        let fire = match &mut state.armed {
            Some(Trigger::AfterCalls(left)) => {
                *left = left.saturating_sub(1);
                *left == 0
            }
            Some(Trigger::AfterLaunch) => effect == Effect::Launched,
            Some(Trigger::AfterEviction) => effect == Effect::Evicted,
            None => false,
        };
        if fire && !state.blown {
            state.blown = true;
            state.armed = None;
            state.cause = Some(if object.is_empty() {
                format!("after {verb}")
            } else {
                format!("after {verb} {object}")
            });
        }
    }
}

#[async_trait]
impl KubeLayer for Fuse {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        if self.is_blown() {
            return call.fail(KubeError::Unavailable(DEAD.into()));
        }
        let verb = call.verb();
        // Writes name the kind they wrote in the cause of a death they trigger.
        let object = match &call {
            KubeCall::Create { kind, .. }
            | KubeCall::Patch { kind, .. }
            | KubeCall::PatchStatus { kind, .. }
            | KubeCall::Delete { kind, .. } => kind.plural,
            _ => "",
        };
        let reply = call.send(next).await;
        let effect = match &reply {
            KubeReply::Evict(Ok(())) => Effect::Evicted,
            _ => Effect::Plain,
        };
        self.called(verb, object, effect);
        reply
    }
}

#[async_trait]
impl Ec2Layer for Fuse {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        if self.is_blown() {
            return call.fail(Ec2Error::Unavailable(DEAD.into()));
        }
        let action = call.action();
        let reply = call.send(next).await;
        let effect = match &reply {
            Ec2Reply::CreateFleet(Ok(response)) if !response.instances.is_empty() => {
                Effect::Launched
            }
            _ => Effect::Plain,
        };
        self.called(action, "", effect);
        reply
    }
}

#[async_trait]
impl SqsLayer for Fuse {
    async fn call(&self, call: SqsCall<'_>, next: &dyn Sqs) -> SqsReply {
        if self.is_blown() {
            return call.fail(SqsError::Unavailable(DEAD.into()));
        }
        let action = call.action();
        let reply = call.send(next).await;
        self.called(action, "", Effect::Plain);
        reply
    }
}
