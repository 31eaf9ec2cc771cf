//! Well-known label, annotation, taint and finalizer keys of the Karpenter v1 API (core and AWS).
//!
//! These strings are part of the wire contract with existing clusters: they must match upstream
//! exactly, so they live in one place and everything else refers to them.

/// API group of NodePool and NodeClaim.
pub const GROUP: &str = "karpenter.sh";
/// API group of EC2NodeClass.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";

pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
pub const DO_NOT_SYNC_TAINTS_LABEL: &str = "karpenter.sh/do-not-sync-taints";
pub const EC2NODECLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
pub const OS_LABEL: &str = "kubernetes.io/os";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";

pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// The values `karpenter.sh/capacity-type` can take.
pub const CAPACITY_TYPES: [&str; 3] = [
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    CAPACITY_TYPE_RESERVED,
];

pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
pub const NODEPOOL_HASH_ANNOTATION: &str = "karpenter.sh/nodepool-hash";
pub const NODEPOOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";
pub const TERMINATION_TIMESTAMP_ANNOTATION: &str = "karpenter.sh/nodeclaim-termination-timestamp";
pub const MIN_VALUES_RELAXED_ANNOTATION: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
pub const EC2NODECLASS_HASH_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const EC2NODECLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.k8s.aws/ec2nodeclass-hash-version";

/// Set by the interruption controller on a NodeClaim it deletes because of an interruption event:
/// the message kind (`spot_interrupted`, `scheduled_change`, `instance_stopped`,
/// `instance_terminated`). Ours, not upstream's: it lets termination (after a restart, too) tell
/// an interrupted claim from an ordinary deletion.
pub const INTERRUPTION_ANNOTATION: &str = "karpenter.sh/interruption";
/// RFC 3339 time by which termination starts evicting an interrupted claim's pods even if its
/// replacement capacity is not ready yet (absent: eviction is not held for replacements).
pub const INTERRUPTION_EVICTION_DEADLINE_ANNOTATION: &str =
    "karpenter.sh/interruption-eviction-deadline";
/// Set by the provisioner on a deleting, interrupted NodeClaim once a provisioning pass planned
/// capacity for its pods (so termination knows that "no replacement claim" means "none needed").
pub const REPLACEMENT_PLANNED_ANNOTATION: &str = "karpenter.sh/replacement-planned";
/// On a NodeClaim the provisioner created (or placed pods on) for pods of deleting NodeClaims:
/// their names, comma separated and sorted. Termination holds an interrupted claim's eviction
/// until these replacements are initialized.
pub const REPLACES_ANNOTATION: &str = "karpenter.sh/replaces";
/// On the NodeClaims of a disruption command in progress: `<method> <replacements> <id>` (the
/// method, how many replacements it launches, and the command's id: its first claim and start
/// time). Ours, not upstream's (upstream keeps its command queue in memory): with it a restarted
/// controller finds a half-done command and finishes or undoes it.
pub const DISRUPTION_COMMAND_ANNOTATION: &str = "karpenter.sh/disruption-command";
/// On each replacement NodeClaim a disruption command launched: the command's id. Ours, as
/// [`DISRUPTION_COMMAND_ANNOTATION`] (upstream's in-memory queue knows its command's replacements
/// by name): the command follows only these. `karpenter.sh/replaces` alone does not say whose a
/// claim is: the provisioner also sets it on claims it makes for the pods of a disrupted node.
pub const DISRUPTION_REPLACEMENT_ANNOTATION: &str = "karpenter.sh/disruption-replacement";
/// Kubernetes' label that takes a node out of external load balancers; termination sets it
/// (value `karpenter`, as upstream) so traffic stops before the instance does.
pub const EXCLUDE_FROM_LOAD_BALANCERS_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// Annotation the kubelet puts on static (mirror) pods.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// EC2 tag naming the NodeClaim an instance was launched for. Written at launch (upstream adds it
/// after registration) so a restarted controller adopts an instance launched just before a crash
/// instead of leaking it; garbage collection spares an instance whose claim still exists.
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
/// EC2 tag naming the EC2NodeClass an instance was launched with.
pub const EC2NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
pub const AWS_TERMINATION_FINALIZER: &str = "karpenter.k8s.aws/termination";

/// Labels the scheduler understands without a NodePool having to define them.
pub const WELL_KNOWN_LABELS: [&str; 8] = [
    NODEPOOL_LABEL,
    ZONE_LABEL,
    REGION_LABEL,
    INSTANCE_TYPE_LABEL,
    ARCH_LABEL,
    OS_LABEL,
    CAPACITY_TYPE_LABEL,
    WINDOWS_BUILD_LABEL,
];

/// The capacity reservation a `reserved` node runs in (upstream's `ReservationIDLabel`).
pub const CAPACITY_RESERVATION_ID_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// `default` (an on-demand capacity reservation) or `capacity-block`.
pub const CAPACITY_RESERVATION_TYPE_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// `true` for interruptible ODCRs (their owner can reclaim the capacity with a warning).
pub const CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";

/// AWS instance-attribute labels usable in requirements (and allowed despite the restricted
/// `karpenter.k8s.aws` domain).
pub const AWS_WELL_KNOWN_LABELS: [&str; 30] = [
    "karpenter.k8s.aws/instance-tenancy",
    CAPACITY_RESERVATION_TYPE_LABEL,
    CAPACITY_RESERVATION_ID_LABEL,
    CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
    EC2NODECLASS_LABEL,
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
    "topology.k8s.aws/zone-id",
];

/// Label domains reserved for Karpenter's own use (a label in them, or in a subdomain of them, is
/// rejected unless it is well known).
pub const RESTRICTED_LABEL_DOMAINS: [&str; 2] = [GROUP, AWS_GROUP];

/// Labels no NodePool may set or require: the scheduler derives them itself.
pub const RESTRICTED_LABELS: [&str; 1] = [HOSTNAME_LABEL];

/// Deprecated (or provider-specific) label keys and the well-known key they mean. The EBS CSI
/// driver's zone key is the AWS provider's addition: PV node affinity uses it.
pub const NORMALIZED_LABELS: [(&str, &str); 6] = [
    ("topology.ebs.csi.aws.com/zone", ZONE_LABEL),
    ("failure-domain.beta.kubernetes.io/zone", ZONE_LABEL),
    ("failure-domain.beta.kubernetes.io/region", REGION_LABEL),
    ("beta.kubernetes.io/arch", ARCH_LABEL),
    ("beta.kubernetes.io/os", OS_LABEL),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE_LABEL),
];

/// The key a deprecated alias stands for, or the key itself.
pub fn normalize_label(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// Whether `key` is understood by the scheduler without a NodePool defining it.
pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key) || AWS_WELL_KNOWN_LABELS.contains(&key)
}

/// The domain (prefix before `/`) of a label key, or `""` when it has none.
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

/// Why a label key may not be used in a NodePool's labels or requirements, if it may not.
pub fn restricted_label_reason(key: &str) -> Option<String> {
    if is_well_known(key) {
        return None;
    }
    let domain = label_domain(key);
    for restricted in RESTRICTED_LABEL_DOMAINS {
        if domain == restricted || domain.ends_with(&format!(".{restricted}")) {
            return Some(format!(
                "label domain \"{restricted}\" is restricted: label {key} might interfere with \
                 Karpenter's provisioning logic; use a well-known label or a custom domain"
            ));
        }
    }
    if RESTRICTED_LABELS.contains(&key) {
        return Some(format!(
            "label \"{key}\" is restricted: the scheduler derives it for every node"
        ));
    }
    None
}

// Instance-attribute labels every instance type of the catalog carries (`karpenter.k8s.aws`).
pub const INSTANCE_CATEGORY_LABEL: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY_LABEL: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION_LABEL: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE_LABEL: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU_LABEL: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER_LABEL: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// Memory in MiB as EC2 reports it (before the VM overhead).
pub const INSTANCE_MEMORY_LABEL: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_HYPERVISOR_LABEL: &str = "karpenter.k8s.aws/instance-hypervisor";
/// Baseline network bandwidth in Mbps.
pub const INSTANCE_NETWORK_BANDWIDTH_LABEL: &str = "karpenter.k8s.aws/instance-network-bandwidth";
/// Maximum EBS bandwidth in Mbps.
pub const INSTANCE_EBS_BANDWIDTH_LABEL: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// Total local NVMe instance storage, as EC2 reports it (`TotalSizeInGB`).
pub const INSTANCE_LOCAL_NVME_LABEL: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_GPU_NAME_LABEL: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER_LABEL: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-gpu-count";
/// Memory per GPU in MiB.
pub const INSTANCE_GPU_MEMORY_LABEL: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_ACCELERATOR_NAME_LABEL: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_MANUFACTURER_LABEL: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const INSTANCE_ACCELERATOR_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-accelerator-count";
pub const INSTANCE_TENANCY_LABEL: &str = "karpenter.k8s.aws/instance-tenancy";
/// The zone's id (`usw2-az1`): the same physical zone in every account, unlike its name.
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";
