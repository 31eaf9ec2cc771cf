//! The replacement-first protocol: an interrupted node's pods get new capacity before they are
//! evicted. Three controllers take part, and talk only through four NodeClaim annotations, all
//! read and written here:
//!
//! 1. interruption marks the claim it deletes ([`mark_interrupted`]: `karpenter.sh/interruption`,
//!    the message kind, and `karpenter.sh/interruption-eviction-deadline`, when eviction starts
//!    regardless);
//! 2. provisioning plans capacity for the pods of deleting claims, writes the old claims' names on
//!    the claims that take them (`karpenter.sh/replaces`, [`set_replaces`] on a new claim,
//!    [`record_replaces`] on one in flight) and then marks the interrupted claim
//!    ([`mark_planned`]: `karpenter.sh/replacement-planned`);
//! 3. termination holds the interrupted claim's eviction until planning happened and every claim
//!    that replaces it is initialized, at most until the deadline ([`eviction_deadline`],
//!    [`is_replacement_planned`], [`replaces_claim`]); when every claim planned to replace it
//!    is deleted before it initialized, termination undoes the mark ([`unmark_planned`]) and
//!    provisioning plans again.
//!
//! Everything lives in the API server, so a restarted controller resumes the protocol where it
//! was. (Upstream's disruption orchestration queue owns replacement-before-delete in memory.)

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use kube_core::ResourceExt;
use serde_json::json;

use crate::api::NodeClaim;
use crate::api::labels::{
    INTERRUPTION_ANNOTATION, INTERRUPTION_EVICTION_DEADLINE_ANNOTATION,
    REPLACEMENT_PLANNED_ANNOTATION, REPLACES_ANNOTATION,
};
use crate::seams::KubeApi;
use crate::seams::kube::{KubeError, ObjectKey, Patch, ResourceKind, SharedObject};

/// What the interruption controller records on a claim it deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interruption {
    /// The message kind (`spot_interrupted`, `scheduled_change`, ...).
    pub kind: &'static str,
    /// When eviction starts even without a replacement; `None`: eviction is not held.
    pub eviction_deadline: Option<Timestamp>,
}

/// `time` in RFC 3339 with whole seconds, as the protocol's timestamps are written.
pub fn rfc3339(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(time)
        .to_string()
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim.annotations().get(key).map(String::as_str)
}

/// Sets metadata annotations on a NodeClaim (metadata only: its spec is immutable).
async fn annotate(
    kube: &dyn KubeApi,
    claim: &str,
    annotations: BTreeMap<&str, String>,
) -> Result<(), KubeError> {
    kube.patch(
        &ResourceKind::NODE_CLAIM,
        &ObjectKey::cluster(claim),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .map(|_| ())
}

/// Step 1: marks `claim` interrupted (before the interruption controller deletes it).
pub async fn mark_interrupted(
    kube: &dyn KubeApi,
    claim: &str,
    interruption: &Interruption,
) -> Result<(), KubeError> {
    let mut annotations =
        BTreeMap::from([(INTERRUPTION_ANNOTATION, interruption.kind.to_string())]);
    if let Some(deadline) = interruption.eviction_deadline {
        annotations.insert(INTERRUPTION_EVICTION_DEADLINE_ANNOTATION, rfc3339(deadline));
    }
    annotate(kube, claim, annotations).await
}

/// Whether the interruption controller marked `claim`.
pub fn is_interrupted(claim: &NodeClaim) -> bool {
    annotation(claim, INTERRUPTION_ANNOTATION).is_some()
}

/// When eviction of an interrupted claim starts at the latest (`None`: not held, or unreadable).
pub fn eviction_deadline(claim: &NodeClaim) -> Option<Timestamp> {
    annotation(claim, INTERRUPTION_EVICTION_DEADLINE_ANNOTATION)?
        .parse()
        .ok()
}

/// Step 2: `claim` (new, not yet created) replaces `replaced`.
pub fn set_replaces(claim: &mut NodeClaim, replaced: &BTreeSet<String>) {
    if replaced.is_empty() {
        return;
    }
    claim.annotations_mut().insert(
        REPLACES_ANNOTATION.to_string(),
        replaced.iter().cloned().collect::<Vec<_>>().join(","),
    );
}

/// Step 2: the in-flight `claim` replaces `replaced` (the whole list, sorted).
pub async fn record_replaces(
    kube: &dyn KubeApi,
    claim: &str,
    replaced: &BTreeSet<String>,
) -> Result<(), KubeError> {
    let list = replaced.iter().cloned().collect::<Vec<_>>().join(",");
    annotate(kube, claim, BTreeMap::from([(REPLACES_ANNOTATION, list)])).await
}

/// The claims `claim` replaces.
pub fn replaces(claim: &NodeClaim) -> BTreeSet<String> {
    annotation(claim, REPLACES_ANNOTATION)
        .map(|list| {
            list.split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `candidate` replaces the claim named `name`.
pub fn replaces_claim(candidate: &NodeClaim, name: &str) -> bool {
    annotation(candidate, REPLACES_ANNOTATION)
        .is_some_and(|list| list.split(',').any(|n| n == name))
}

/// Step 2, last: a provisioning pass planned capacity for the interrupted `claim`'s pods.
pub async fn mark_planned(kube: &dyn KubeApi, claim: &str) -> Result<(), KubeError> {
    annotate(
        kube,
        claim,
        BTreeMap::from([(REPLACEMENT_PLANNED_ANNOTATION, "true".to_string())]),
    )
    .await
}

/// Undoes step 2's mark: every claim planned to replace the interrupted `claim` went away
/// before it initialized (its own interruption, a registration timeout, a failed launch), so
/// the next provisioning pass plans its pods again and termination holds for that plan.
/// The claim as written is returned (its new resourceVersion is the caller's next precondition).
pub async fn unmark_planned(kube: &dyn KubeApi, claim: &str) -> Result<SharedObject, KubeError> {
    kube.patch(
        &ResourceKind::NODE_CLAIM,
        &ObjectKey::cluster(claim),
        &Patch::Merge(json!({"metadata": {"annotations": {REPLACEMENT_PLANNED_ANNOTATION: null}}})),
    )
    .await
}

/// Whether a provisioning pass planned capacity for the interrupted `claim`'s pods.
pub fn is_replacement_planned(claim: &NodeClaim) -> bool {
    annotation(claim, REPLACEMENT_PLANNED_ANNOTATION).is_some()
}
