//! Drift detection: marks a launched NodeClaim `Drifted=True` (with the reason) when it no
//! longer matches what its NodePool and EC2NodeClass would launch now, and clears the condition
//! when it matches again. The disruption engine replaces drifted claims (budgets, replacement
//! first); this controller only decides.
//!
//! Rules, in upstream's order (the first that applies is the reason):
//! - `AMIDrift`: the claim's image is not among the class's `status.amis` (only while the class
//!   has resolved AMIs, so a failed resolution never rolls the fleet);
//! - `NodeClassDrift`: the class's static hash differs from the one stamped on the claim;
//! - `NodePoolDrifted`: the pool's static hash differs from the one stamped on the claim.
//!
//! A hash is compared only when the claim's hash version equals the current one. When the
//! version differs (the hashing rules changed with a controller upgrade) or the claim carries no
//! hash, the claim is re-stamped with the current hash instead: no mass drift after an upgrade.
//! Requirements drift is decided from node labels by the disruption view; subnet and
//! security-group drift need the instance's network placement and are not checked yet.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_core::ResourceExt;
use serde_json::json;

use crate::api::conditions::{self, nodeclaim as claim_conditions};
use crate::api::hash::{
    EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, ec2nodeclass_hash, nodepool_hash,
};
use crate::api::labels::{
    EC2NODECLASS_HASH_ANNOTATION, EC2NODECLASS_HASH_VERSION_ANNOTATION, NODEPOOL_HASH_ANNOTATION,
    NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_LABEL,
};
use crate::api::{ConditionStatus, EC2NodeClass, NodeClaim, NodePool};
use crate::context::Context;
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// What detection concluded for one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drifted, with upstream's reason (`AMIDrift`, `NodeClassDrift`, `NodePoolDrifted`).
    Drifted(&'static str, String),
    /// Matches its pool and class.
    Current,
}

/// The annotations a claim should carry but does not (missing, or of another hash version).
pub fn restamp(
    claim: &NodeClaim,
    pool: Option<&NodePool>,
    class: Option<&EC2NodeClass>,
) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    let annotations = claim.annotations();
    let stale = |version_key: &str, version: &str| {
        annotations.get(version_key).map(String::as_str) != Some(version)
    };
    if let Some(pool) = pool
        && stale(NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_HASH_VERSION)
    {
        out.insert(NODEPOOL_HASH_ANNOTATION, nodepool_hash(pool));
        out.insert(
            NODEPOOL_HASH_VERSION_ANNOTATION,
            NODEPOOL_HASH_VERSION.into(),
        );
    }
    if let Some(class) = class
        && stale(
            EC2NODECLASS_HASH_VERSION_ANNOTATION,
            EC2NODECLASS_HASH_VERSION,
        )
    {
        out.insert(EC2NODECLASS_HASH_ANNOTATION, ec2nodeclass_hash(class));
        out.insert(
            EC2NODECLASS_HASH_VERSION_ANNOTATION,
            EC2NODECLASS_HASH_VERSION.into(),
        );
    }
    out
}

/// Whether `claim` drifted from `pool` and `class` (hashes compared only at equal versions).
pub fn detect(claim: &NodeClaim, pool: Option<&NodePool>, class: Option<&EC2NodeClass>) -> Verdict {
    let annotations = claim.annotations();
    let same = |key: &str, version_key: &str, version: &str, current: String| {
        annotations.get(version_key).map(String::as_str) == Some(version)
            && annotations.get(key).is_some_and(|h| *h != current)
    };
    if let Some(class) = class {
        let amis = class.status.as_ref().map(|s| &s.amis);
        let image = claim.status.as_ref().and_then(|s| s.image_id.as_ref());
        if let (Some(amis), Some(image)) = (amis, image)
            && !amis.is_empty()
            && !amis.iter().any(|a| &a.id == image)
        {
            return Verdict::Drifted(
                "AMIDrift",
                format!("image {image} is no longer among the EC2NodeClass's AMIs"),
            );
        }
        if same(
            EC2NODECLASS_HASH_ANNOTATION,
            EC2NODECLASS_HASH_VERSION_ANNOTATION,
            EC2NODECLASS_HASH_VERSION,
            ec2nodeclass_hash(class),
        ) {
            return Verdict::Drifted(
                "NodeClassDrift",
                "EC2NodeClass static fields changed".into(),
            );
        }
    }
    if let Some(pool) = pool
        && same(
            NODEPOOL_HASH_ANNOTATION,
            NODEPOOL_HASH_VERSION_ANNOTATION,
            NODEPOOL_HASH_VERSION,
            nodepool_hash(pool),
        )
    {
        return Verdict::Drifted("NodePoolDrifted", "NodePool template changed".into());
    }
    Verdict::Current
}

/// The drift detection controller.
pub struct DriftDetection {
    ctx: Arc<Context>,
}

impl DriftDetection {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// One pass over every launched claim not being deleted; returns how many claims changed.
    pub async fn pass(&self) -> Result<usize, KubeError> {
        let (pools, classes, claims) = {
            let mut state = self.ctx.state.lock().await;
            let kube = self.ctx.kube.as_ref();
            state.pools.sync(kube).await?;
            state.node_classes.sync(kube).await?;
            state.claims.sync(kube).await?;
            let pools: BTreeMap<String, Arc<NodePool>> = state
                .pools
                .to_vec()
                .into_iter()
                .map(|p| (p.name_any(), p))
                .collect();
            let classes: BTreeMap<String, Arc<EC2NodeClass>> = state
                .node_classes
                .to_vec()
                .into_iter()
                .map(|c| (c.name_any(), c))
                .collect();
            (pools, classes, state.claims.to_vec())
        };
        let mut changed = 0;
        for claim in claims {
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let pool = claim
                .labels()
                .get(NODEPOOL_LABEL)
                .and_then(|p| pools.get(p))
                .map(|p| &**p);
            let class = classes.get(&claim.spec.node_class_ref.name).map(|c| &**c);
            changed += usize::from(self.reconcile(&claim, pool, class).await?);
        }
        Ok(changed)
    }

    async fn reconcile(
        &self,
        claim: &NodeClaim,
        pool: Option<&NodePool>,
        class: Option<&EC2NodeClass>,
    ) -> Result<bool, KubeError> {
        let key = ObjectKey::cluster(claim.name_any());
        let stamps = restamp(claim, pool, class);
        if !stamps.is_empty() {
            let patch = json!({"metadata": {"annotations": stamps}});
            self.ctx
                .kube
                .patch(&ResourceKind::NODE_CLAIM, &key, &Patch::Merge(patch))
                .await?;
            return Ok(true); // compared on the next pass, against the stamped hashes
        }
        let launched = claim
            .status
            .as_ref()
            .is_some_and(|s| conditions::is_true(&s.conditions, claim_conditions::LAUNCHED));
        if !launched {
            return Ok(false);
        }
        let mut conds = claim
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let now = self.ctx.clock.now();
        let changed = match detect(claim, pool, class) {
            Verdict::Drifted(reason, message) => conditions::set(
                &mut conds,
                claim_conditions::DRIFTED,
                ConditionStatus::True,
                reason,
                &message,
                claim.metadata.generation,
                now,
            ),
            Verdict::Current => {
                let before = conds.len();
                conds.retain(|c| c.type_ != claim_conditions::DRIFTED);
                conds.len() != before
            }
        };
        if changed {
            // The list is written whole: conditional on the version it was computed from.
            let patch = json!({
                "metadata": {"resourceVersion": claim.metadata.resource_version},
                "status": {"conditions": conds},
            });
            self.ctx
                .kube
                .patch_status(&ResourceKind::NODE_CLAIM, &key, &Patch::Merge(patch))
                .await?;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ec2nodeclass::AmiStatus;

    fn pool() -> NodePool {
        serde_yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
        )
        .expect("pool parses")
    }

    fn class(amis: &[&str]) -> EC2NodeClass {
        let mut class: EC2NodeClass = serde_yaml::from_str(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"#,
        )
        .expect("class parses");
        let status = crate::api::EC2NodeClassStatus {
            amis: amis
                .iter()
                .map(|id| AmiStatus {
                    id: id.to_string(),
                    name: None,
                    deprecated: None,
                    requirements: vec![],
                })
                .collect(),
            ..Default::default()
        };
        class.status = Some(status);
        class
    }

    fn claim(pool: &NodePool, class: &EC2NodeClass, image: &str) -> NodeClaim {
        let mut claim: NodeClaim = serde_yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: c, labels: {karpenter.sh/nodepool: default}}
spec:
  requirements: []
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
        )
        .expect("claim parses");
        let stamps = restamp(&claim, Some(pool), Some(class));
        claim.metadata.annotations = Some(
            stamps
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        claim.status = Some(crate::api::NodeClaimStatus {
            image_id: Some(image.into()),
            ..Default::default()
        });
        claim
    }

    #[test]
    fn a_claim_on_one_of_the_class_amis_has_not_drifted() {
        let (p, c) = (pool(), class(&["ami-old", "ami-arm"]));
        assert_eq!(
            detect(&claim(&p, &c, "ami-old"), Some(&p), Some(&c)),
            Verdict::Current
        );
    }

    #[test]
    fn a_claim_whose_image_left_the_class_amis_drifted_with_ami_drift() {
        let p = pool();
        let claim = claim(&p, &class(&["ami-old"]), "ami-old");
        let released = class(&["ami-new"]);
        assert!(matches!(
            detect(&claim, Some(&p), Some(&released)),
            Verdict::Drifted("AMIDrift", _)
        ));
    }

    #[test]
    fn a_class_with_no_resolved_amis_never_drifts_a_claim_on_its_image() {
        let p = pool();
        let claim = claim(&p, &class(&["ami-old"]), "ami-old");
        assert_eq!(
            detect(&claim, Some(&p), Some(&class(&[]))),
            Verdict::Current
        );
    }

    #[test]
    fn a_template_label_change_drifts_with_nodepool_drifted() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = p.clone();
        changed
            .spec
            .template
            .metadata
            .as_mut()
            .expect("metadata")
            .labels
            .insert("team".into(), "b".into());
        assert!(matches!(
            detect(&claim, Some(&changed), Some(&c)),
            Verdict::Drifted("NodePoolDrifted", _)
        ));
    }

    #[test]
    fn a_weight_change_does_not_drift() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = p.clone();
        changed.spec.weight = Some(50);
        assert_eq!(detect(&claim, Some(&changed), Some(&c)), Verdict::Current);
    }

    #[test]
    fn a_class_tag_change_drifts_with_node_class_drift() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = c.clone();
        changed.spec.tags.insert("team".into(), "b".into());
        assert!(matches!(
            detect(&claim, Some(&p), Some(&changed)),
            Verdict::Drifted("NodeClassDrift", _)
        ));
    }

    #[test]
    fn a_claim_of_an_older_hash_version_is_restamped_not_drifted() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let mut claim = claim(&p, &c, "ami-old");
        let annotations = claim.metadata.annotations.as_mut().expect("stamped");
        annotations.insert(NODEPOOL_HASH_ANNOTATION.into(), "12345".into());
        annotations.insert(NODEPOOL_HASH_VERSION_ANNOTATION.into(), "v2".into());
        assert_eq!(detect(&claim, Some(&p), Some(&c)), Verdict::Current);
        let stamps = restamp(&claim, Some(&p), Some(&c));
        assert_eq!(
            stamps.get(NODEPOOL_HASH_ANNOTATION),
            Some(&nodepool_hash(&p))
        );
        assert_eq!(
            stamps
                .get(NODEPOOL_HASH_VERSION_ANNOTATION)
                .map(String::as_str),
            Some(NODEPOOL_HASH_VERSION)
        );
    }
}
