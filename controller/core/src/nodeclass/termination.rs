//! The EC2NodeClass finalizer, `karpenter.k8s.aws/termination` (upstream's EC2NodeClass
//! controller): every class carries it, so deleting a class does not strand what Karpenter made
//! for it. A class being deleted stays while any NodeClaim references it (event
//! `WaitingOnNodeClaimTermination` naming them: its nodes still run with its launch templates and
//! profile); once none does, the instance profile Karpenter manages for its `role` and every
//! launch template made for it are deleted, then the finalizer is removed. A profile given as
//! `instanceProfile:` is the user's and is never deleted.
//!
//! Deliberate difference: upstream lists every managed profile under a path per class UID; here
//! managed profiles live under one path per cluster, named by a hash of the class and its role
//! (`instanceprofile::profile_name`), so the class's current profile is deleted by name. A
//! profile left behind by an earlier role of the class is not found this way.

use std::sync::Arc;

use kube_core::ResourceExt;
use serde_json::json;

use crate::api::labels::AWS_TERMINATION_FINALIZER;
use crate::api::{EC2NodeClass, NodeClaim};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::seams::iam::IamError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};
use crate::seams::{Ec2Error, KubeError};

use super::garbagecollection::delete_class_templates;
use super::instanceprofile::profile_name;

/// The event a deleting class publishes while NodeClaims still use it (upstream's reason).
pub const WAITING_ON_NODECLAIMS_REASON: &str = "WaitingOnNodeClaimTermination";
/// NodeClaims the waiting event names at most (the rest are counted).
pub const WAITING_NAMES_MAX: usize = 5;

/// Why a class's finalization stopped; retried on the next pass.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FinalizeError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("deleting the class's launch templates: {0}")]
    Ec2(#[from] Ec2Error),
    #[error("deleting the class's instance profile: {0}")]
    Iam(#[from] IamError),
}

/// Where a deleting class is after one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finalized {
    /// Not ours to finish (no finalizer of ours on it).
    NotOurs,
    /// NodeClaims still reference it (how many).
    Waiting(usize),
    /// Its profile and templates (how many) are deleted and the finalizer removed.
    Done { templates: usize },
}

/// Whether `claim` launches from `class`.
pub fn references(claim: &NodeClaim, class: &str) -> bool {
    let reference = &claim.spec.node_class_ref;
    reference.name == class
        && reference.kind == "EC2NodeClass"
        && reference.group == "karpenter.k8s.aws"
}

/// Adds the finalizer to a class that lacks it and is not being deleted; returns the version
/// written (later writes of the pass are conditional on it), `None` if nothing was written.
/// The finalizer list is written whole, conditional on the version read.
pub async fn ensure_finalizer(
    ctx: &Context,
    class: &EC2NodeClass,
) -> Result<Option<Option<String>>, KubeError> {
    if class.metadata.deletion_timestamp.is_some()
        || class
            .finalizers()
            .iter()
            .any(|f| f == AWS_TERMINATION_FINALIZER)
    {
        return Ok(None);
    }
    let mut with = class.finalizers().to_vec();
    with.push(AWS_TERMINATION_FINALIZER.to_string());
    let written = ctx
        .kube
        .patch(
            &ResourceKind::EC2_NODE_CLASS,
            &ObjectKey::cluster(class.name_any()),
            &Patch::Merge(json!({"metadata": {
                "finalizers": with,
                "resourceVersion": class.metadata.resource_version,
            }})),
        )
        .await?;
    Ok(Some(
        written["metadata"]["resourceVersion"]
            .as_str()
            .map(String::from),
    ))
}

/// One pass over a class being deleted (`claims`: every NodeClaim, from the state).
pub async fn finalize(
    ctx: &Context,
    class: &EC2NodeClass,
    claims: &[Arc<NodeClaim>],
) -> Result<Finalized, FinalizeError> {
    if !class
        .finalizers()
        .iter()
        .any(|f| f == AWS_TERMINATION_FINALIZER)
    {
        return Ok(Finalized::NotOurs);
    }
    let name = class.name_any();
    let using: Vec<&str> = claims
        .iter()
        .filter(|c| references(c, &name))
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    if !using.is_empty() {
        let mut listed = using[..using.len().min(WAITING_NAMES_MAX)].join(", ");
        if using.len() > WAITING_NAMES_MAX {
            listed.push_str(&format!(" and {} more", using.len() - WAITING_NAMES_MAX));
        }
        ctx.recorder
            .publish(
                reference(class),
                EventType::Normal,
                WAITING_ON_NODECLAIMS_REASON,
                format!("Waiting on NodeClaim termination for {listed}"),
            )
            .await;
        return Ok(Finalized::Waiting(using.len()));
    }
    delete_managed_profile(ctx, class).await?;
    let templates = delete_class_templates(ctx, &name).await?;
    let without: Vec<&String> = class
        .finalizers()
        .iter()
        .filter(|f| *f != AWS_TERMINATION_FINALIZER)
        .collect();
    let removed = ctx
        .kube
        .patch(
            &ResourceKind::EC2_NODE_CLASS,
            &ObjectKey::cluster(name.clone()),
            &Patch::Merge(json!({"metadata": {
                "finalizers": without,
                "resourceVersion": class.metadata.resource_version,
            }})),
        )
        .await;
    match removed {
        Ok(_) | Err(KubeError::NotFound(_)) => Ok(Finalized::Done { templates }),
        Err(err) => Err(err.into()),
    }
}

/// Deletes the profile Karpenter manages for the class's `role` (its roles removed first, as
/// IAM requires); a class naming `instanceProfile:` has none. Without an IAM seam, nothing.
async fn delete_managed_profile(ctx: &Context, class: &EC2NodeClass) -> Result<(), IamError> {
    let Some(iam) = &ctx.iam else {
        return Ok(());
    };
    if class.spec.instance_profile.is_some() || class.spec.role.is_none() {
        return Ok(());
    }
    let name = profile_name(class, &ctx.options.lifecycle.cluster_name);
    let Some(profile) = iam.get_instance_profile(&name).await? else {
        ctx.profiles.forget(&name);
        return Ok(());
    };
    for role in &profile.roles {
        iam.remove_role_from_instance_profile(&name, role).await?;
    }
    iam.delete_instance_profile(&name).await?;
    ctx.profiles.forget(&name);
    Ok(())
}

fn reference(class: &EC2NodeClass) -> Reference {
    Reference {
        kind: ResourceKind::EC2_NODE_CLASS,
        key: ObjectKey::cluster(class.name_any()),
        uid: class.uid(),
    }
}
