//! The capacity every world holds that Karpenter does not own: an EKS managed node group of two
//! on-demand instances (in the first two zones), tagged as EKS tags a node group's instances,
//! registering Nodes with EKS's node-group labels and a `CriticalAddonsOnly` taint, and running
//! the cluster's system pods (a CoreDNS Deployment pinned to the group). Karpenter must leave all
//! of it alone: `foreign-instances-untouched` checks it never terminates, tags or adopts them.
//! The account also holds what a neighbour cluster's Karpenter launched: one of its launch
//! templates ([`neighbour_launch_template`]), which `foreign-templates-untouched` checks is never
//! deleted, and one of its instances ([`neighbour_instance`], tagged as upstream Karpenter tags
//! its instances but for that cluster, in a subnet of its own, joining its own cluster), which
//! `foreign-instances-untouched` checks is never terminated, tagged or adopted: garbage
//! collection scoped by the Karpenter tags alone, not by this cluster's name, would take it for
//! a leak.

use std::collections::BTreeMap;

use fakecloud::{ForeignInstance, Taint};
use karpenter_core::seams::ec2::LaunchTemplateRequest;
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::json;

use super::{CLUSTER, World, WorldError};
use crate::workloads::Deployment;

/// The node group's name (`eks:nodegroup-name`, `eks.amazonaws.com/nodegroup`).
pub const NODE_GROUP: &str = "system";
/// Its instance type, and how many instances it runs.
const NODE_GROUP_INSTANCE_TYPE: &str = "m5.large";
const NODE_GROUP_SIZE: usize = 2;
/// The SSM parameter of the AMI EKS gives the group.
const NODE_GROUP_AMI_PARAMETER: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";

/// The cluster whose Karpenter shares the account with this one: the world holds one of its
/// launch templates and one of its instances, which this cluster's Karpenter must never touch.
pub const NEIGHBOUR_CLUSTER: &str = "sim-neighbour";

/// The neighbour's instance: an on-demand type (spot would be reclaimed by EC2, which is no
/// fault of ours), of its NodePool `default`, for its NodeClaim of this name.
const NEIGHBOUR_INSTANCE_TYPE: &str = "m5.large";
const NEIGHBOUR_NODECLAIM: &str = "default-m2v9x";

/// A launch template the neighbour cluster's Karpenter made: tagged as Karpenter tags its
/// templates (`eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass`, `karpenter.sh/nodepool`),
/// for its own cluster.
pub fn neighbour_launch_template(image_id: &str) -> LaunchTemplateRequest {
    LaunchTemplateRequest {
        name: format!("karpenter.k8s.aws/{NEIGHBOUR_CLUSTER}-default-0001"),
        image_id: image_id.to_string(),
        user_data: String::new(),
        security_group_ids: Vec::new(),
        instance_profile: String::new(),
        tags: BTreeMap::from([
            (
                "eks:eks-cluster-name".to_string(),
                NEIGHBOUR_CLUSTER.to_string(),
            ),
            (
                "karpenter.k8s.aws/ec2nodeclass".to_string(),
                "default".to_string(),
            ),
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
        ]),
        extra: BTreeMap::new(),
    }
}

/// An instance the neighbour cluster's Karpenter launched in `zone`: tagged as upstream
/// Karpenter tags its instances (`kubernetes.io/cluster/NAME=owned`, `eks:eks-cluster-name`,
/// `karpenter.sh/nodepool`, `karpenter.k8s.aws/ec2nodeclass`, `karpenter.sh/nodeclaim`), for
/// [`NEIGHBOUR_CLUSTER`]. It joins that cluster, so it has no labels or taints here.
pub fn neighbour_instance(zone: &str, image_id: &str) -> ForeignInstance {
    let tag = |k: &str, v: &str| (k.to_string(), v.to_string());
    ForeignInstance {
        instance_type: NEIGHBOUR_INSTANCE_TYPE.to_string(),
        zone: zone.to_string(),
        image_id: image_id.to_string(),
        tags: BTreeMap::from([
            tag(
                &format!("kubernetes.io/cluster/{NEIGHBOUR_CLUSTER}"),
                "owned",
            ),
            tag("eks:eks-cluster-name", NEIGHBOUR_CLUSTER),
            tag("karpenter.sh/nodepool", "default"),
            tag("karpenter.k8s.aws/ec2nodeclass", "default"),
            tag("karpenter.sh/nodeclaim", NEIGHBOUR_NODECLAIM),
        ]),
        labels: BTreeMap::new(),
        taints: Vec::new(),
    }
}

/// The tags of the neighbour's subnet: its own discovery tag, so no selector of ours finds it.
fn neighbour_subnet_tags(zone: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "karpenter.sh/discovery".to_string(),
            NEIGHBOUR_CLUSTER.to_string(),
        ),
        (
            "Name".to_string(),
            format!("{NEIGHBOUR_CLUSTER}-private-{zone}"),
        ),
    ])
}

/// The instance EKS starts for the group in `zone`.
pub fn node_group_instance(zone: &str, image_id: &str) -> ForeignInstance {
    let tags = BTreeMap::from([
        (
            format!("kubernetes.io/cluster/{CLUSTER}"),
            "owned".to_string(),
        ),
        ("eks:cluster-name".to_string(), CLUSTER.to_string()),
        ("eks:nodegroup-name".to_string(), NODE_GROUP.to_string()),
        (
            "aws:autoscaling:groupName".to_string(),
            format!("eks-{NODE_GROUP}-0c8e1f2a"),
        ),
    ]);
    let labels = BTreeMap::from([
        (
            "eks.amazonaws.com/nodegroup".to_string(),
            NODE_GROUP.to_string(),
        ),
        (
            "eks.amazonaws.com/capacityType".to_string(),
            "ON_DEMAND".to_string(),
        ),
        (
            "eks.amazonaws.com/nodegroup-image".to_string(),
            image_id.to_string(),
        ),
    ]);
    ForeignInstance {
        instance_type: NODE_GROUP_INSTANCE_TYPE.to_string(),
        zone: zone.to_string(),
        image_id: image_id.to_string(),
        tags,
        labels,
        taints: vec![Taint {
            key: "CriticalAddonsOnly".into(),
            value: "true".into(),
            effect: "NoSchedule".into(),
        }],
    }
}

/// The system pods every world runs on the node group (CoreDNS's replicas), counted in the
/// report's pods beside the scenario's.
pub const SYSTEM_PODS: usize = 2;

/// CoreDNS, as EKS installs it, pinned to the node group.
fn coredns() -> Deployment {
    let mut deployment = Deployment::with_requests("coredns", SYSTEM_PODS, "100m", Some("70Mi"));
    deployment.namespace = "kube-system".into();
    deployment.merge_pod_spec(&json!({
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": { "eks.amazonaws.com/nodegroup": NODE_GROUP },
        "tolerations": [{ "key": "CriticalAddonsOnly", "operator": "Exists" }],
    }));
    deployment
}

impl World {
    /// Starts the node group's instances and its system pods. An instance the world cannot start
    /// (a scenario that emptied its pool) is left out: the group is best effort, like its ASG.
    pub(super) async fn start_node_group(&mut self) -> Result<(), WorldError> {
        let image_id = self
            .cloud
            .parameters()
            .get(NODE_GROUP_AMI_PARAMETER)
            .cloned()
            .unwrap_or_default();
        let zones: Vec<String> = self
            .cloud
            .subnet_zones()
            .into_iter()
            .take(NODE_GROUP_SIZE)
            .collect();
        for zone in &zones {
            if let Ok(id) = self
                .cloud
                .run_foreign_instance(&node_group_instance(zone, &image_id))
            {
                self.foreign_instances.push(id);
            }
        }
        // Best effort like the group: a template that cannot be created is left out.
        let _ = self
            .cloud
            .create_foreign_launch_template(&neighbour_launch_template(&image_id));
        // Last, and from streams of its own: every draw above and after stays as it was.
        if let Some(zone) = zones.first()
            && let Ok(id) = self.cloud.run_neighbour_instance(
                &neighbour_instance(zone, &image_id),
                NEIGHBOUR_CLUSTER,
                neighbour_subnet_tags(zone),
            )
        {
            self.foreign_instances.push(id);
        }
        ensure_namespace(self.api.as_ref(), "kube-system").await?;
        self.workloads.add_deployment(coredns());
        Ok(())
    }

    /// The instances the world started for owners other than this cluster's Karpenter (the node
    /// group's, then the neighbour cluster's), in the order started.
    pub fn foreign_instances(&self) -> &[String] {
        &self.foreign_instances
    }
}

async fn ensure_namespace(api: &dyn KubeApi, name: &str) -> Result<(), KubeError> {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    match api.create(&ResourceKind::NAMESPACE, namespace).await {
        Ok(_) | Err(KubeError::AlreadyExists(_)) => Ok(()),
        Err(e) => Err(e),
    }
}
