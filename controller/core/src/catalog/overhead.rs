//! Capacity and allocatable of a node, computed the way Karpenter's AWS provider computes them.
//!
//! The scheduler has to predict what a node will offer before the node exists, so it needs the
//! same arithmetic the kubelet and the AMI bootstrap apply: the hypervisor keeps some memory, the
//! VPC CNI limits pods by ENIs, and the kubelet sets aside kube-reserved resources and an
//! eviction threshold. Upstream's floating-point steps (and their rounding) are reproduced
//! exactly, so a prediction made here matches the one upstream Karpenter would make for the same
//! instance type.
//!
//! ```text
//! overhead    = kube-reserved + system-reserved (none by default) + eviction threshold
//! allocatable = capacity - overhead
//! ```

use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// Share of an instance's memory the hypervisor and firmware keep (upstream's
/// `VM_MEMORY_OVERHEAD_PERCENT` default): EC2 reports the memory it sells, the node sees less.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// Memory Graviton (arm64) instances reserve for the contiguous memory allocator, which the node
/// never reports as capacity.
pub const ARM64_CMA_RESERVED_MIB: i64 = 64;

/// Size of the default root volume of the EKS AMIs (20Gi): the node's ephemeral-storage capacity
/// unless a block-device mapping says otherwise.
pub const DEFAULT_EPHEMERAL_STORAGE: i64 = 20 * GIB;

/// kube-reserved ephemeral-storage (1Gi), upstream's default.
pub const KUBE_RESERVED_EPHEMERAL_STORAGE: i64 = GIB;

/// The kubelet's default hard eviction threshold for memory (`memory.available<100Mi`).
pub const EVICTION_HARD_MEMORY: i64 = 100 * MIB;

/// The kubelet's default hard eviction threshold for the node filesystem (`nodefs.available<10%`).
pub const EVICTION_HARD_NODEFS_PERCENT: f64 = 10.0;

/// Memory capacity in bytes of a node whose instance type EC2 reports with `reported_mib` MiB.
///
/// arm64 instances first lose [`ARM64_CMA_RESERVED_MIB`]; then `overhead_percent` of the rest
/// (normally [`VM_MEMORY_OVERHEAD_PERCENT`]) is subtracted, rounded up to whole MiB, computed in
/// the same floating-point order as upstream so both agree to the byte.
pub fn memory_capacity(reported_mib: i64, arch: &str, overhead_percent: f64) -> i64 {
    let mib = if arch == "arm64" {
        reported_mib - ARM64_CMA_RESERVED_MIB
    } else {
        reported_mib
    };
    let bytes = mib * MIB;
    let overhead_mib = (bytes as f64 * overhead_percent / 1024.0 / 1024.0).ceil() as i64;
    bytes - overhead_mib * MIB
}

/// Pods the VPC CNI can give addresses to: every ENI but the reserved ones brings
/// `ipv4_per_eni - 1` pod addresses (its primary address is the ENI's own), plus 2 for the
/// host-network pods (aws-node, kube-proxy) that need none.
pub fn eni_limited_pods(max_enis: i64, ipv4_per_eni: i64, reserved_enis: i64) -> i64 {
    let usable = (max_enis - reserved_enis).max(0);
    if usable == 0 {
        return 0;
    }
    usable * (ipv4_per_eni - 1) + 2
}

/// kube-reserved of a node with `cpu_millis` of CPU that runs up to `pods` pods.
///
/// CPU follows the tiers the EKS and Bottlerocket AMIs use: 6% of the first core, 1% of the
/// second, 0.5% of the third and fourth, 0.25% of every core above four (each tier truncated to
/// whole millicores, as upstream does). Memory is `11Mi × pods + 255Mi`; ephemeral-storage 1Gi.
pub fn kube_reserved(cpu_millis: i64, pods: i64) -> Resources {
    const TIERS: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    let mut cpu = 0;
    for (start, end, share) in TIERS {
        if cpu_millis >= start {
            let span = if cpu_millis < end {
                cpu_millis - start
            } else {
                end - start
            };
            cpu += (span as f64 * share) as i64;
        }
    }
    Resources::from_pairs([
        (CPU, cpu),
        (MEMORY, (11 * pods + 255) * MIB),
        (EPHEMERAL_STORAGE, KUBE_RESERVED_EPHEMERAL_STORAGE),
    ])
}

/// The kubelet's default hard eviction thresholds as resources held back: 100Mi of memory and
/// 10% of the node filesystem (rounded up to a whole byte).
pub fn eviction_threshold(ephemeral_storage: i64) -> Resources {
    let storage = (ephemeral_storage as f64 / 100.0 * EVICTION_HARD_NODEFS_PERCENT).ceil() as i64;
    Resources::from_pairs([(MEMORY, EVICTION_HARD_MEMORY), (EPHEMERAL_STORAGE, storage)])
}

/// What the kubelet holds back on a node with `capacity`: kube-reserved (from its cpu and pods)
/// plus the eviction threshold (from its ephemeral-storage). System-reserved is empty by default,
/// as upstream's. Extended resources (e.g. `nvidia.com/gpu`) get no overhead.
pub fn compute_overhead(capacity: &Resources) -> Resources {
    kube_reserved(capacity.get(CPU), capacity.get(PODS))
        .plus(&eviction_threshold(capacity.get(EPHEMERAL_STORAGE)))
}

/// `(overhead, allocatable)` for `capacity`, with [`compute_overhead`]'s overhead.
pub fn compute_allocatable(capacity: &Resources) -> (Resources, Resources) {
    let overhead = compute_overhead(capacity);
    let allocatable = capacity.minus(&overhead);
    (overhead, allocatable)
}
