//! `EC2NodeClass` (`karpenter.k8s.aws/v1`): how nodes are launched on EC2 (AMI, subnets, security
//! groups, instance profile, user data, block devices, kubelet settings).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::cel::rule;
use super::common::{Condition, QUANTITY_PATTERN, conditions_schema};
use super::labels::{EC2NODECLASS_TAG, NODECLAIM_TAG, NODEPOOL_LABEL};

/// AMI families an alias may name (`family@version`).
pub const ALIAS_FAMILIES: [&str; 6] = [
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];
/// Families that only support `@latest`.
pub const WINDOWS_ALIAS_FAMILIES: [&str; 3] = ["windows2019", "windows2022", "windows2025"];
/// Tag keys Karpenter sets itself and users may not.
pub const RESTRICTED_TAG_KEYS: [&str; 4] = [
    "eks:eks-cluster-name",
    NODEPOOL_LABEL,
    NODECLAIM_TAG,
    EC2NODECLASS_TAG,
];
/// Tag key prefix Karpenter owns (`kubernetes.io/cluster/<name>`).
pub const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";
/// Reserved-resource keys the kubelet accepts.
pub const RESERVED_RESOURCE_KEYS: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];
/// Eviction signals the kubelet accepts.
pub const EVICTION_SIGNALS: [&str; 6] = [
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
/// EBS volume size: up to 64 TiB in Gi/G/Ti/T.
pub const VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";
/// A Go `time.Duration` string (`1m30s`), as the kubelet parses it.
pub const GO_DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";
/// An eviction threshold: a percentage or a quantity.
pub const EVICTION_VALUE_PATTERN: &str = r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%|(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    status = "EC2NodeClassStatus",
    crates(kube_core = "::kube_core"),
    derive = "PartialEq",
    doc = "EC2NodeClass is the AWS-specific configuration of the nodes Karpenter launches.",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".spec.role","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = spec_rules()))]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into (OR of terms).
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [rule("self.size() != 0", "subnetSelectorTerms cannot be empty")]))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups to attach (OR of terms).
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty")]))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Reserved capacity (ODCRs, capacity blocks) to discover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// Whether instances get a public IP (defaults to the subnet's setting).
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// AMIs to use (OR of terms); an alias must be the only term.
    #[schemars(length(min = 1, max = 30))]
    #[schemars(extend("x-kubernetes-validations" = ami_terms_rules()))]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// Bootstrap format; inferred from an alias, required without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    /// User data merged with Karpenter's bootstrap (format depends on the family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for which Karpenter manages an instance profile (exclusive with instanceProfile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [rule("self != ''", "role cannot be empty")]))]
    pub role: Option<String>,
    /// A pre-existing instance profile (exclusive with role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [rule("self != ''", "instanceProfile cannot be empty")]))]
    pub instance_profile: Option<String>,
    /// Tags applied to instances, volumes, fleets and launch templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = tag_rules()))]
    pub tags: BTreeMap<String, String>,
    /// Kubelet settings Karpenter both passes to nodes and uses to compute allocatable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [rule(
        "self.filter(x, has(x.rootVolume) ? x.rootVolume == true : false).size() <= 1",
        "must have only one blockDeviceMappings with rootVolume"
    )]))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// `RAID0` turns NVMe instance store into the node's ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options.
    #[serde(
        default = "default_metadata_options",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("default" = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}))]
    pub metadata_options: Option<MetadataOptions>,
    /// Fleet context (for reserved capacity sharing across accounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// IPv4 prefixes to assign per ENI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 150))]
    #[schemars(extend("x-kubernetes-validations" = network_interface_rules()))]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
}

fn spec_rules() -> Value {
    let mut rules = vec![rule(
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    )];
    for (alias, family) in [
        ("al2", "AL2"),
        ("al2023", "AL2023"),
        ("bottlerocket", "Bottlerocket"),
        ("windows2019", "Windows2019"),
        ("windows2022", "Windows2022"),
        ("windows2025", "Windows2025"),
    ] {
        let article = if alias == "al2" || alias == "al2023" {
            "an"
        } else {
            "a"
        };
        rules.push(rule(
            &format!(
                "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && \
                 x.alias.split('@')[0] == '{alias}') ? (self.amiFamily == 'Custom' || \
                 self.amiFamily == '{family}') : true)"
            ),
            &format!("if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias"),
        ));
    }
    rules.push(rule(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ));
    Value::Array(rules)
}

fn tag_map_rules() -> Value {
    json!([rule(
        "self.all(k, k != '' && self[k] != '')",
        "empty tag keys or values aren't supported"
    )])
}

fn tag_rules() -> Value {
    let mut rules = vec![
        rule("self.all(k, k != '')", "empty tag keys aren't supported"),
        rule(
            &format!("self.all(k, !k.startsWith('{RESTRICTED_TAG_PREFIX}'))"),
            "tag contains a restricted tag matching kubernetes.io/cluster/",
        ),
    ];
    for key in RESTRICTED_TAG_KEYS {
        rules.push(rule(
            &format!("self.all(k, k != '{key}')"),
            &format!("tag contains a restricted tag matching {key}"),
        ));
    }
    Value::Array(rules)
}

/// Upstream writes the exclusivity rules as `!self.all(x, ...)`, which only fires when *every*
/// term is bad. We check each term (`self.all(x, !...)`), which is what the messages promise.
fn ami_terms_rules() -> Value {
    json!([
        rule(
            "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"
        ),
        rule(
            "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
        ),
        rule(
            "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
        ),
        rule(
            "!(self.exists(x, has(x.alias)) && self.size() != 1)",
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"
        ),
    ])
}

fn alias_rules() -> Value {
    let families: Vec<String> = ALIAS_FAMILIES.iter().map(|f| format!("'{f}'")).collect();
    let windows: Vec<String> = WINDOWS_ALIAS_FAMILIES
        .iter()
        .map(|f| format!("'{f}'"))
        .collect();
    json!([
        rule(
            "self.matches('^[a-zA-Z0-9]+@.+$')",
            "'alias' is improperly formatted, must match the format 'family@version'"
        ),
        rule(
            &format!("self.split('@')[0] in [{}]", families.join(",")),
            &format!(
                "family is not supported, must be one of the following: {}",
                families.join(", ")
            )
        ),
        rule(
            &format!(
                "self.split('@')[0] in [{}] ? self.split('@')[1] == 'latest' : true",
                windows.join(",")
            ),
            "windows families may only specify version 'latest'"
        ),
    ])
}

fn network_interface_rules() -> Value {
    json!([
        rule(
            "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')",
            "networkInterfaces must include a primary interface with interfaceType='interface'"
        ),
        rule(
            "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
            "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"
        ),
    ])
}

fn kubelet_rules() -> Value {
    json!([
        rule(
            "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true",
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"
        ),
        rule(
            "has(self.evictionSoft) ? self.evictionSoft.all(e, has(self.evictionSoftGracePeriod) && (e in self.evictionSoftGracePeriod)) : true",
            "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"
        ),
        rule(
            "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, has(self.evictionSoft) && (e in self.evictionSoft)) : true",
            "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"
        ),
    ])
}

fn reserved_rules(field: &str) -> Value {
    let keys: Vec<String> = RESERVED_RESOURCE_KEYS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect();
    json!([
        rule(
            &format!("self.all(x, x in [{}])", keys.join(",")),
            &format!("valid keys for {field} are [{}]", keys.join(","))
        ),
        rule(
            "self.all(x, !self[x].startsWith('-'))",
            &format!("{field} value cannot be a negative resource quantity")
        ),
    ])
}

fn eviction_rules(field: &str) -> Value {
    let keys: Vec<String> = EVICTION_SIGNALS.iter().map(|k| format!("'{k}'")).collect();
    json!([rule(
        &format!("self.all(x, x in [{}])", keys.join(",")),
        &format!("valid keys for {field} are [{}]", keys.join(","))
    )])
}

/// One subnet selector term: `tags` (value `*` matches any) or `id`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    rule("has(self.tags) || has(self.id)", "expected at least one, got none, ['tags', 'id']"),
    rule("!(has(self.id) && has(self.tags))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
]))]
pub struct SubnetSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = tag_map_rules()))]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// One security group selector term: `tags`, `id` or `name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    rule("has(self.tags) || has(self.id) || has(self.name)", "expected at least one, got none, ['tags', 'id', 'name']"),
    rule("!(has(self.id) && (has(self.tags) || has(self.name)))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
    rule("!(has(self.name) && (has(self.tags) || has(self.id)))", "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
]))]
pub struct SecurityGroupSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = tag_map_rules()))]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"sg-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One capacity reservation selector term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    rule("has(self.tags) || has(self.id) || has(self.instanceMatchCriteria)", "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
    rule("!(has(self.id) && (has(self.tags) || has(self.ownerID) || has(self.instanceMatchCriteria)))", "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"),
]))]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = tag_map_rules()))]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMatchCriteria {
    Open,
    Targeted,
}

/// One AMI selector term: `alias`, `id`, `name` (+`owner`), `tags` or `ssmParameter`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. `al2023@latest`, `bottlerocket@v1.20.3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = alias_rules()))]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = tag_map_rules()))]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"ami-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Owner account or alias for `name`; defaults to `self,amazon`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// AMI families (bootstrap formats).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum AmiFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AmiFamily {
    /// The family an alias prefix names (`al2023` → `AL2023`).
    pub fn from_alias_family(family: &str) -> Option<Self> {
        Some(match family {
            "al2" => Self::AL2,
            "al2023" => Self::AL2023,
            "bottlerocket" => Self::Bottlerocket,
            "windows2019" => Self::Windows2019,
            "windows2022" => Self::Windows2022,
            "windows2025" => Self::Windows2025,
            _ => return None,
        })
    }

    /// The Windows Server release of a Windows family (`2019`, `2022`, `2025`), as EKS names its
    /// AMIs; `None` for the Linux families.
    pub fn windows_version(self) -> Option<&'static str> {
        match self {
            Self::Windows2019 => Some("2019"),
            Self::Windows2022 => Some("2022"),
            Self::Windows2025 => Some("2025"),
            _ => None,
        }
    }

    /// The OS build a Windows family's kubelet reports as `node.kubernetes.io/windows-build`
    /// (major.minor.build, as upstream's `Windows*Build` constants); `None` for Linux families.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            Self::Windows2019 => Some("10.0.17763"),
            Self::Windows2022 => Some("10.0.20348"),
            Self::Windows2025 => Some("10.0.26100"),
            _ => None,
        }
    }
}

/// Kubelet settings (the typed `KubeletConfiguration` subset of released Karpenter v1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = kubelet_rules()))]
pub struct KubeletConfiguration {
    #[serde(
        default,
        rename = "clusterDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": QUANTITY_PATTERN}))]
    #[schemars(extend("x-kubernetes-validations" = reserved_rules("systemReserved")))]
    pub system_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": QUANTITY_PATTERN}))]
    #[schemars(extend("x-kubernetes-validations" = reserved_rules("kubeReserved")))]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": EVICTION_VALUE_PATTERN}))]
    #[schemars(extend("x-kubernetes-validations" = eviction_rules("evictionHard")))]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": EVICTION_VALUE_PATTERN}))]
    #[schemars(extend("x-kubernetes-validations" = eviction_rules("evictionSoft")))]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": GO_DURATION_PATTERN}))]
    #[schemars(extend("x-kubernetes-validations" = eviction_rules("evictionSoftGracePeriod")))]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// One block device mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Marks the volume the AMI boots from (at most one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

/// EBS settings of a block device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
    rule("!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')", "snapshotID must be set when volumeInitializationRate is set"),
]))]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = VOLUME_SIZE_PATTERN))]
    pub volume_size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    Standard,
    Io1,
    Io2,
    Gp2,
    Sc1,
    St1,
    Gp3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InstanceStorePolicy {
    RAID0,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    #[default]
    Enabled,
    Disabled,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    #[default]
    Required,
    Optional,
}

fn default_metadata_options() -> Option<MetadataOptions> {
    Some(MetadataOptions::default())
}
fn default_hop_limit() -> i64 {
    1
}
fn default_disabled() -> Toggle {
    Toggle::Disabled
}

/// Instance metadata service options (defaults are upstream's: IMDSv2 required, hop limit 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default)]
    pub http_endpoint: Toggle,
    #[serde(default = "default_disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: Toggle,
    #[serde(default = "default_hop_limit")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    #[serde(default)]
    pub http_tokens: HttpTokens,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: Toggle::Enabled,
            http_protocol_ipv6: Toggle::Disabled,
            http_put_response_hop_limit: 1,
            http_tokens: HttpTokens::Required,
        }
    }
}

/// One network interface of the launch template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    #[schemars(range(min = 0))]
    pub device_index: i32,
    pub interface_type: InterfaceType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InterfaceType {
    #[serde(rename = "interface")]
    Interface,
    #[serde(rename = "efa-only")]
    EfaOnly,
}

/// Connection tracking timeouts of the primary ENI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [rule(
    "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
    "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"
)]))]
pub struct ConnectionTracking {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<Toggle>,
}

/// Placement group to launch into, by name or id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    rule("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
    rule("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
]))]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// `status` of an EC2NodeClass: what the selectors resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroupStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservationStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AmiStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubnetStatus {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecurityGroupStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    pub availability_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    #[schemars(regex(pattern = r"^cr-[0-9a-z]+$"))]
    pub id: String,
    pub instance_match_criteria: InstanceMatchCriteria,
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    #[serde(rename = "ownerID")]
    #[schemars(regex(pattern = r"^[0-9]{12}$"))]
    pub owner_id: String,
    #[serde(default)]
    pub reservation_type: ReservationType,
    #[serde(default)]
    pub state: ReservationState,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReservationType {
    #[default]
    Default,
    CapacityBlock,
}

impl ReservationType {
    /// The `karpenter.k8s.aws/capacity-reservation-type` label value (EC2's name).
    pub fn label(self) -> &'static str {
        match self {
            ReservationType::Default => "default",
            ReservationType::CapacityBlock => "capacity-block",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        match label {
            "default" => Some(ReservationType::Default),
            "capacity-block" => Some(ReservationType::CapacityBlock),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReservationState {
    #[default]
    Active,
    Expiring,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AmiStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    pub requirements: Vec<AmiRequirement>,
}

/// A node selector requirement describing which instance types an AMI serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AmiRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}
