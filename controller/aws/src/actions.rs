//! The AWS API actions the controller calls, as data, with the scoping the shipped IAM policy puts
//! on each (`deploy/iam/controller-policy.json`, `deploy/iam/controller-iam-policy.json`, embedded
//! in `deploy/cloudformation.yaml`).
//!
//! One row per method of the AWS seams (`karpenter_core::seams`: `Ec2`, `Sqs`, `InstanceProfiles`,
//! `Eks`, `CatalogSource`), plus what the adapter needs around them: the queue URL (GetQueueUrl)
//! and passing the node role to EC2.
//!
//! `tests/iam_policy.rs` fails when the policy allows an action not listed here, misses one listed
//! here, scopes one more loosely than its row says, or when a seam method has no row;
//! `tests/against_fakecloud.rs` fails when the adapter calls an action not listed here, or when a
//! listed one is never called through the seams.

/// How the policy limits an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoping {
    /// A read of any resource, in the cluster's region only (`aws:RequestedRegion`).
    Region,
    /// A read of a global service (Pricing, IAM listing) that has no resource-level permissions.
    Global,
    /// Only these resources (ARNs with CloudFormation `${...}` variables).
    Resources(&'static [&'static str]),
    /// Only resources tagged as this cluster's (`kubernetes.io/cluster/${ClusterName}: owned`, as
    /// request tags when created, resource tags otherwise) and carrying `owner_tag`; `inputs` are
    /// resource types a launch only uses (images, subnets, ...), which need no tags.
    ClusterOwned {
        owner_tag: &'static str,
        inputs: &'static [&'static str],
    },
}

/// One IAM action the controller calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    /// `service:Action` as IAM spells it.
    pub action: &'static str,
    /// The seam method (`Ec2::create_fleet`) or adapter need behind the call.
    pub called_by: &'static str,
    pub scoping: Scoping,
}

/// The tag that marks Karpenter's EC2 resources (launched for a NodePool).
pub const NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
/// The tag that marks instance profiles Karpenter made for an EC2NodeClass.
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Resource types a launch reads but does not create: AMIs and their snapshots, subnets,
/// security groups.
/// What a launch reads: an AMI, its snapshots, security groups, subnets, and the capacity
/// reservation a reserved launch targets.
const LAUNCH_INPUTS: &[&str] = &[
    "capacity-reservation",
    "image",
    "snapshot",
    "security-group",
    "subnet",
];

const fn owned_ec2(action: &'static str, called_by: &'static str) -> Action {
    Action {
        action,
        called_by,
        scoping: Scoping::ClusterOwned {
            owner_tag: NODEPOOL_TAG,
            inputs: &[],
        },
    }
}

const fn owned_profile(action: &'static str, called_by: &'static str) -> Action {
    Action {
        action,
        called_by,
        scoping: Scoping::ClusterOwned {
            owner_tag: NODECLASS_TAG,
            inputs: &[],
        },
    }
}

const fn regional(action: &'static str, called_by: &'static str) -> Action {
    Action {
        action,
        called_by,
        scoping: Scoping::Region,
    }
}

const fn only(
    action: &'static str,
    called_by: &'static str,
    resources: &'static [&'static str],
) -> Action {
    Action {
        action,
        called_by,
        scoping: Scoping::Resources(resources),
    }
}

const QUEUE: &[&str] = &["${KarpenterInterruptionQueue.Arn}"];
const INSTANCE_PROFILES: &[&str] =
    &["arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"];

/// Every action the controller calls, sorted by name.
pub const ACTIONS: &[Action] = &[
    Action {
        action: "ec2:CreateFleet",
        called_by: "Ec2::create_fleet",
        scoping: Scoping::ClusterOwned {
            owner_tag: NODEPOOL_TAG,
            inputs: LAUNCH_INPUTS,
        },
    },
    owned_ec2("ec2:CreateLaunchTemplate", "Ec2::create_launch_template"),
    owned_ec2(
        "ec2:CreateTags",
        "Ec2::create_tags; Ec2::create_fleet and Ec2::create_launch_template tag what they create",
    ),
    owned_ec2("ec2:DeleteLaunchTemplate", "Ec2::delete_launch_template"),
    regional(
        "ec2:DescribeAvailabilityZones",
        "CatalogSource::zone_ids: zone ids for topology.k8s.aws/zone-id",
    ),
    regional(
        "ec2:DescribeCapacityReservations",
        "Ec2::describe_capacity_reservations: the EC2NodeClass status and capacity-reservation controllers",
    ),
    regional("ec2:DescribeImages", "Ec2::describe_images"),
    regional(
        "ec2:DescribeInstanceStatus",
        "Ec2::describe_instance_status: the instance-status health controller",
    ),
    regional(
        "ec2:DescribeInstanceTypeOfferings",
        "CatalogSource::zone_offerings: types offered per zone",
    ),
    regional(
        "ec2:DescribeInstanceTypes",
        "CatalogSource::instance_types: capacity, ENI limits, architecture",
    ),
    regional("ec2:DescribeInstances", "Ec2::describe_instances"),
    regional(
        "ec2:DescribeLaunchTemplates",
        "Ec2::describe_launch_templates",
    ),
    regional(
        "ec2:DescribeSecurityGroups",
        "Ec2::describe_security_groups",
    ),
    regional("ec2:DescribeSpotPriceHistory", "CatalogSource::spot_prices"),
    regional("ec2:DescribeSubnets", "Ec2::describe_subnets"),
    Action {
        action: "ec2:RunInstances",
        called_by: "Ec2::create_fleet (EC2 authorizes an instant fleet's launches as RunInstances); AwsEc2::dry_run_run_instances",
        scoping: Scoping::ClusterOwned {
            owner_tag: NODEPOOL_TAG,
            inputs: LAUNCH_INPUTS,
        },
    },
    owned_ec2("ec2:TerminateInstances", "Ec2::terminate_instances"),
    only(
        "eks:DescribeCluster",
        "Eks::describe_cluster: endpoint and CA discovery when settings leave them empty",
        &["arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}"],
    ),
    owned_profile(
        "iam:AddRoleToInstanceProfile",
        "InstanceProfiles::add_role_to_instance_profile",
    ),
    owned_profile(
        "iam:CreateInstanceProfile",
        "InstanceProfiles::create_instance_profile for an EC2NodeClass `role`",
    ),
    owned_profile(
        "iam:DeleteInstanceProfile",
        "InstanceProfiles::delete_instance_profile of a deleted EC2NodeClass",
    ),
    only(
        "iam:GetInstanceProfile",
        "InstanceProfiles::get_instance_profile",
        INSTANCE_PROFILES,
    ),
    only(
        "iam:GetRole",
        "InstanceProfiles::get_role: the EC2NodeClass `role` exists before a profile is made for it",
        &["${KarpenterNodeRole.Arn}"],
    ),
    Action {
        action: "iam:ListInstanceProfiles",
        called_by: "InstanceProfiles::list_instance_profiles: garbage collection of unused profiles",
        scoping: Scoping::Global,
    },
    only(
        "iam:PassRole",
        "launches pass the node role to EC2 through the instance profile",
        &["${KarpenterNodeRole.Arn}"],
    ),
    owned_profile(
        "iam:RemoveRoleFromInstanceProfile",
        "InstanceProfiles::remove_role_from_instance_profile when the `role` changed",
    ),
    owned_profile(
        "iam:TagInstanceProfile",
        "InstanceProfiles::tag_instance_profile",
    ),
    Action {
        action: "pricing:GetProducts",
        called_by: "CatalogSource::on_demand_prices (not called with settings.isolatedVPC)",
        scoping: Scoping::Global,
    },
    only("sqs:DeleteMessage", "Sqs::delete_message", QUEUE),
    only(
        "sqs:GetQueueUrl",
        "the interruption queue's URL from settings.interruptionQueue",
        QUEUE,
    ),
    only("sqs:ReceiveMessage", "Sqs::receive_messages", QUEUE),
    only(
        "ssm:GetParameter",
        "Ec2::get_parameter (AMI aliases)",
        &["arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*"],
    ),
];
