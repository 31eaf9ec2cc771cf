//! The built-in catalog: current EC2 instance types in `us-west-2` with their real vCPUs, memory,
//! ENI limits, bandwidths and on-demand Linux prices.
//!
//! It is the production fallback price table, what `fakecloud` serves and what `karpenter plan`
//! assumes, so its figures follow EC2's `DescribeInstanceTypes` and public price list (prices
//! rounded as EC2 publishes them; spot prices are synthetic but deterministic, see
//! [`spot_price`]). The data is a short table of family rows expanded by code, because EC2 sizes
//! scale regularly: within a family vCPUs, memory and on-demand price grow together, and ENI limits
//! and bandwidth depend only on the size and the platform generation.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{CapacityType, Catalog, InstanceType, Offering};
use crate::seams::catalog::{Gpu, InstanceTypeInfo, NeuronDevice};

/// The region the built-in prices are for.
pub const REGION: &str = "us-west-2";

/// The zones every built-in type is offered in (on-demand and spot in each).
pub const ZONES: [&str; 3] = ["us-west-2a", "us-west-2b", "us-west-2c"];

/// The built-in catalog, built once per process: expanding and pricing ~250 types is cheap but
/// not free, and the scheduler asks for it on every simulation.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(build)
}

/// Who makes the CPU; decides the `cpu-manufacturer` label and the architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Processor {
    Intel,
    Amd,
    /// AWS Graviton (arm64).
    Graviton,
}

/// A size of the fixed-performance families (c, m, r): vCPUs and ENI limits, which EC2 keeps the
/// same across these families and generations 5-7 for a given size.
struct Size {
    name: &'static str,
    vcpus: i64,
    max_enis: i64,
    ipv4_per_eni: i64,
}

const fn size(name: &'static str, vcpus: i64, max_enis: i64, ipv4_per_eni: i64) -> Size {
    Size {
        name,
        vcpus,
        max_enis,
        ipv4_per_eni,
    }
}

const SIZES: [Size; 13] = [
    size("medium", 1, 2, 4),
    size("large", 2, 3, 10),
    size("xlarge", 4, 4, 15),
    size("2xlarge", 8, 4, 15),
    size("4xlarge", 16, 8, 30),
    size("8xlarge", 32, 8, 30),
    size("9xlarge", 36, 8, 30),
    size("12xlarge", 48, 8, 30),
    size("16xlarge", 64, 15, 50),
    size("18xlarge", 72, 15, 50),
    size("24xlarge", 96, 15, 50),
    size("32xlarge", 128, 15, 50),
    size("48xlarge", 192, 15, 50),
];

/// `(size, baseline network Mbps, maximum EBS Mbps)` of one platform generation.
type Bandwidths = &'static [(&'static str, i64, i64)];

/// Skylake/Cascade Lake (c5, m5, r5 and their d variants).
const INTEL_GEN5: Bandwidths = &[
    ("large", 750, 4750),
    ("xlarge", 1250, 4750),
    ("2xlarge", 2500, 4750),
    ("4xlarge", 5000, 4750),
    ("8xlarge", 10000, 6800),
    ("9xlarge", 12000, 9500),
    ("12xlarge", 12000, 9500),
    ("16xlarge", 20000, 13600),
    ("18xlarge", 25000, 19000),
    ("24xlarge", 25000, 19000),
];

/// First-generation EPYC, general purpose and memory optimised (m5a, r5a).
const AMD_GEN5: Bandwidths = &[
    ("large", 750, 2880),
    ("xlarge", 1250, 2880),
    ("2xlarge", 2500, 2880),
    ("4xlarge", 5000, 2880),
    ("8xlarge", 7500, 4750),
    ("12xlarge", 10000, 6780),
    ("16xlarge", 12000, 9500),
    ("24xlarge", 20000, 13750),
];

/// Second-generation EPYC, compute optimised (c5a).
const AMD_C5A: Bandwidths = &[
    ("large", 750, 3170),
    ("xlarge", 1250, 3170),
    ("2xlarge", 2500, 3170),
    ("4xlarge", 5000, 3170),
    ("8xlarge", 10000, 3170),
    ("12xlarge", 12000, 4750),
    ("16xlarge", 20000, 6300),
    ("24xlarge", 20000, 9500),
];

/// Ice Lake, Milan, Sapphire Rapids (6i, 6a, 7i): 12.5 Gbps per 16 vCPUs up to 50 Gbps.
const X86_GEN6_7: Bandwidths = &[
    ("large", 781, 10000),
    ("xlarge", 1562, 10000),
    ("2xlarge", 3125, 10000),
    ("4xlarge", 6250, 10000),
    ("8xlarge", 12500, 10000),
    ("12xlarge", 18750, 15000),
    ("16xlarge", 25000, 20000),
    ("24xlarge", 37500, 30000),
    ("32xlarge", 50000, 40000),
    ("48xlarge", 50000, 40000),
];

/// Graviton2 (6g, 6gd).
const GRAVITON2: Bandwidths = &[
    ("medium", 500, 4750),
    ("large", 750, 4750),
    ("xlarge", 1250, 4750),
    ("2xlarge", 2500, 4750),
    ("4xlarge", 5000, 4750),
    ("8xlarge", 12000, 9000),
    ("12xlarge", 20000, 13500),
    ("16xlarge", 25000, 19000),
];

/// Graviton3 (7g).
const GRAVITON3: Bandwidths = &[
    ("medium", 520, 10000),
    ("large", 937, 10000),
    ("xlarge", 1876, 10000),
    ("2xlarge", 3750, 10000),
    ("4xlarge", 7500, 10000),
    ("8xlarge", 15000, 10000),
    ("12xlarge", 22500, 15000),
    ("16xlarge", 30000, 20000),
];

const SIZES_5: &str = "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge";
const SIZES_C5: &str = "large xlarge 2xlarge 4xlarge 9xlarge 12xlarge 18xlarge 24xlarge";
const SIZES_6I: &str = "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge";
const SIZES_6A: &str =
    "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge";
const SIZES_7I: &str = "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge";
const SIZES_G: &str = "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge";

/// Local NVMe (GB, as EC2 reports `TotalSizeInGB`) per size, in the order of the family's sizes.
const NVME_C5D: &[i64] = &[50, 100, 200, 400, 900, 1800, 1800, 3600];
const NVME_M5D: &[i64] = &[75, 150, 300, 600, 1200, 1800, 2400, 3600];
const NVME_6GD: &[i64] = &[59, 118, 237, 474, 950, 1900, 2850, 3800];

/// One fixed-performance family (c, m or r) and the sizes it comes in.
struct Family {
    name: &'static str,
    processor: Processor,
    /// GiB of memory per vCPU: 2 for compute (c), 4 for general purpose (m), 8 for memory (r).
    gib_per_vcpu: i64,
    /// On-demand $/hour of the `large` size; EC2 prices these families linearly in vCPUs.
    large_price: f64,
    encryption_in_transit: bool,
    bandwidths: Bandwidths,
    /// Space-separated sizes, smallest first.
    sizes: &'static str,
    /// Local NVMe GB per size (same order as `sizes`), empty without instance storage.
    nvme_gb: &'static [i64],
}

#[allow(clippy::too_many_arguments)]
const fn family(
    name: &'static str,
    processor: Processor,
    gib_per_vcpu: i64,
    large_price: f64,
    encryption_in_transit: bool,
    bandwidths: Bandwidths,
    sizes: &'static str,
    nvme_gb: &'static [i64],
) -> Family {
    Family {
        name,
        processor,
        gib_per_vcpu,
        large_price,
        encryption_in_transit,
        bandwidths,
        sizes,
        nvme_gb,
    }
}

use Processor::{Amd, Graviton, Intel};

/// The c, m and r families of generations 5-7: Graviton (`g`) about 20% and AMD (`a`) about 10%
/// cheaper than Intel of the same generation; c < m < r per vCPU.
#[rustfmt::skip]
const FAMILIES: [Family; 26] = [
    //     name    cpu       GiB/vCPU  $ large  in-transit  bandwidths   sizes     local NVMe
    family("c5",   Intel,    2,        0.085,   false,      INTEL_GEN5,  SIZES_C5, &[]),
    family("c5a",  Amd,      2,        0.077,   true,       AMD_C5A,     SIZES_5,  &[]),
    family("c5d",  Intel,    2,        0.096,   false,      INTEL_GEN5,  SIZES_C5, NVME_C5D),
    family("c6i",  Intel,    2,        0.085,   true,       X86_GEN6_7,  SIZES_6I, &[]),
    family("c6a",  Amd,      2,        0.0765,  true,       X86_GEN6_7,  SIZES_6A, &[]),
    family("c6g",  Graviton, 2,        0.068,   false,      GRAVITON2,   SIZES_G,  &[]),
    family("c6gd", Graviton, 2,        0.0768,  false,      GRAVITON2,   SIZES_G,  NVME_6GD),
    family("c7i",  Intel,    2,        0.08925, true,       X86_GEN6_7,  SIZES_7I, &[]),
    family("c7g",  Graviton, 2,        0.0725,  true,       GRAVITON3,   SIZES_G,  &[]),
    family("m5",   Intel,    4,        0.096,   false,      INTEL_GEN5,  SIZES_5,  &[]),
    family("m5a",  Amd,      4,        0.086,   false,      AMD_GEN5,    SIZES_5,  &[]),
    family("m5d",  Intel,    4,        0.113,   false,      INTEL_GEN5,  SIZES_5,  NVME_M5D),
    family("m6i",  Intel,    4,        0.096,   true,       X86_GEN6_7,  SIZES_6I, &[]),
    family("m6a",  Amd,      4,        0.0864,  true,       X86_GEN6_7,  SIZES_6A, &[]),
    family("m6g",  Graviton, 4,        0.077,   false,      GRAVITON2,   SIZES_G,  &[]),
    family("m6gd", Graviton, 4,        0.0904,  false,      GRAVITON2,   SIZES_G,  NVME_6GD),
    family("m7i",  Intel,    4,        0.1008,  true,       X86_GEN6_7,  SIZES_7I, &[]),
    family("m7g",  Graviton, 4,        0.0816,  true,       GRAVITON3,   SIZES_G,  &[]),
    family("r5",   Intel,    8,        0.126,   false,      INTEL_GEN5,  SIZES_5,  &[]),
    family("r5a",  Amd,      8,        0.113,   false,      AMD_GEN5,    SIZES_5,  &[]),
    family("r5d",  Intel,    8,        0.144,   false,      INTEL_GEN5,  SIZES_5,  NVME_M5D),
    family("r6i",  Intel,    8,        0.126,   true,       X86_GEN6_7,  SIZES_6I, &[]),
    family("r6a",  Amd,      8,        0.1134,  true,       X86_GEN6_7,  SIZES_6A, &[]),
    family("r6g",  Graviton, 8,        0.1008,  false,      GRAVITON2,   SIZES_G,  &[]),
    family("r7i",  Intel,    8,        0.1323,  true,       X86_GEN6_7,  SIZES_7I, &[]),
    family("r7g",  Graviton, 8,        0.1071,  true,       GRAVITON3,   SIZES_G,  &[]),
];

/// A size of the burstable (t) families: these do not scale like the others (every size up to
/// `large` has 2 vCPUs; memory and price double per size).
struct BurstableSize {
    name: &'static str,
    vcpus: i64,
    memory_mib: i64,
    /// On-demand price relative to the family's `large`.
    price_factor: f64,
    max_enis: i64,
    ipv4_per_eni: i64,
    network_mbps: i64,
}

const fn burstable(
    name: &'static str,
    vcpus: i64,
    memory_mib: i64,
    price_factor: f64,
    max_enis: i64,
    ipv4_per_eni: i64,
    network_mbps: i64,
) -> BurstableSize {
    BurstableSize {
        name,
        vcpus,
        memory_mib,
        price_factor,
        max_enis,
        ipv4_per_eni,
        network_mbps,
    }
}

const BURSTABLE_SIZES: [BurstableSize; 7] = [
    burstable("nano", 2, 512, 1.0 / 16.0, 2, 2, 32),
    burstable("micro", 2, 1024, 1.0 / 8.0, 2, 2, 64),
    burstable("small", 2, 2048, 1.0 / 4.0, 3, 4, 128),
    burstable("medium", 2, 4096, 1.0 / 2.0, 3, 6, 256),
    burstable("large", 2, 8192, 1.0, 3, 12, 512),
    burstable("xlarge", 4, 16384, 2.0, 4, 15, 1024),
    burstable("2xlarge", 8, 32768, 4.0, 4, 15, 2048),
];

/// Maximum EBS bandwidth of every burstable size.
const BURSTABLE_EBS_MBPS: i64 = 2085;

/// `(family, processor, on-demand $/hour of large, ENI exceptions as (size, max ENIs, IPv4/ENI))`.
type BurstableFamily = (
    &'static str,
    Processor,
    f64,
    &'static [(&'static str, i64, i64)],
);

const BURSTABLE_FAMILIES: [BurstableFamily; 3] = [
    ("t3", Intel, 0.0832, &[]),
    // t3a.small has one ENI fewer than t3.small and t4g.small.
    ("t3a", Amd, 0.0752, &[("small", 2, 4)]),
    ("t4g", Graviton, 0.0672, &[]),
];

/// One accelerated instance type, spelt out: these do not follow a family pattern.
struct GpuType {
    name: &'static str,
    processor: Processor,
    vcpus: i64,
    memory_mib: i64,
    /// Empty (with a zero count) on Neuron types.
    gpu_name: &'static str,
    gpu_count: i64,
    /// `(device name as EC2 spells it, devices, NeuronCores per device)` on Inferentia/Trainium.
    neuron: Option<(&'static str, i64, i64)>,
    efa_interfaces: i64,
    /// Per GPU, as EC2 reports it.
    gpu_memory_mib: i64,
    nvme_gb: Option<i64>,
    max_enis: i64,
    ipv4_per_eni: i64,
    network_mbps: i64,
    ebs_mbps: i64,
    hypervisor: &'static str,
    encryption_in_transit: bool,
    price: f64,
}

const GPU_TYPES: [GpuType; 8] = [
    GpuType {
        name: "g4dn.xlarge",
        processor: Intel,
        vcpus: 4,
        memory_mib: 16384,
        gpu_name: "t4",
        gpu_count: 1,
        gpu_memory_mib: 16384,
        neuron: None,
        efa_interfaces: 0,
        nvme_gb: Some(125),
        max_enis: 3,
        ipv4_per_eni: 10,
        network_mbps: 5000,
        ebs_mbps: 3500,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 0.526,
    },
    GpuType {
        name: "g4dn.2xlarge",
        processor: Intel,
        vcpus: 8,
        memory_mib: 32768,
        gpu_name: "t4",
        gpu_count: 1,
        gpu_memory_mib: 16384,
        neuron: None,
        efa_interfaces: 0,
        nvme_gb: Some(225),
        max_enis: 3,
        ipv4_per_eni: 10,
        network_mbps: 10000,
        ebs_mbps: 3500,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 0.752,
    },
    GpuType {
        name: "g5.xlarge",
        processor: Amd,
        vcpus: 4,
        memory_mib: 16384,
        gpu_name: "a10g",
        gpu_count: 1,
        gpu_memory_mib: 22888,
        neuron: None,
        efa_interfaces: 0,
        nvme_gb: Some(250),
        max_enis: 4,
        ipv4_per_eni: 15,
        network_mbps: 2500,
        ebs_mbps: 3500,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 1.006,
    },
    GpuType {
        name: "g5.2xlarge",
        processor: Amd,
        vcpus: 8,
        memory_mib: 32768,
        gpu_name: "a10g",
        gpu_count: 1,
        gpu_memory_mib: 22888,
        neuron: None,
        efa_interfaces: 0,
        nvme_gb: Some(450),
        max_enis: 4,
        ipv4_per_eni: 15,
        network_mbps: 5000,
        ebs_mbps: 3500,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 1.212,
    },
    GpuType {
        name: "g5.12xlarge",
        processor: Amd,
        vcpus: 48,
        memory_mib: 196608,
        gpu_name: "a10g",
        gpu_count: 4,
        gpu_memory_mib: 22888,
        neuron: None,
        efa_interfaces: 1,
        nvme_gb: Some(3800),
        max_enis: 15,
        ipv4_per_eni: 50,
        network_mbps: 40000,
        ebs_mbps: 16000,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 5.672,
    },
    // The one Xen-based type here: p3 predates Nitro.
    GpuType {
        name: "p3.2xlarge",
        processor: Intel,
        vcpus: 8,
        memory_mib: 62464,
        gpu_name: "v100",
        gpu_count: 1,
        gpu_memory_mib: 16384,
        neuron: None,
        efa_interfaces: 0,
        nvme_gb: None,
        max_enis: 4,
        ipv4_per_eni: 15,
        network_mbps: 2500,
        ebs_mbps: 1750,
        hypervisor: "xen",
        encryption_in_transit: false,
        price: 3.06,
    },
    // Neuron: Inferentia2 and Trainium, one device of two NeuronCores each.
    GpuType {
        name: "inf2.xlarge",
        processor: Amd,
        vcpus: 4,
        memory_mib: 16384,
        gpu_name: "",
        gpu_count: 0,
        gpu_memory_mib: 0,
        neuron: Some(("Inferentia2", 1, 2)),
        efa_interfaces: 0,
        nvme_gb: None,
        max_enis: 4,
        ipv4_per_eni: 15,
        network_mbps: 2083,
        ebs_mbps: 10000,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 0.7582,
    },
    GpuType {
        name: "trn1.2xlarge",
        processor: Intel,
        vcpus: 8,
        memory_mib: 32768,
        gpu_name: "",
        gpu_count: 0,
        gpu_memory_mib: 0,
        neuron: Some(("Trainium", 1, 2)),
        efa_interfaces: 0,
        nvme_gb: Some(474),
        max_enis: 4,
        ipv4_per_eni: 15,
        network_mbps: 3125,
        ebs_mbps: 20000,
        hypervisor: "nitro",
        encryption_in_transit: true,
        price: 1.34375,
    },
];

/// EFA interfaces of the fixed-performance types that have them: the largest size of the
/// Ice Lake, Milan, Sapphire Rapids and Graviton3 families (`NetworkInfo.EfaInfo`).
const EFA_TYPES: [&str; 12] = [
    "c6i.32xlarge",
    "m6i.32xlarge",
    "r6i.32xlarge",
    "c6a.48xlarge",
    "m6a.48xlarge",
    "r6a.48xlarge",
    "c7i.48xlarge",
    "m7i.48xlarge",
    "r7i.48xlarge",
    "c7g.16xlarge",
    "m7g.16xlarge",
    "r7g.16xlarge",
];

/// Everything about one instance type, the expanded form of a row above.
struct Spec {
    name: String,
    processor: Processor,
    vcpus: i64,
    memory_mib: i64,
    max_enis: i64,
    ipv4_per_eni: i64,
    network_mbps: i64,
    ebs_mbps: i64,
    nvme_gb: Option<i64>,
    hypervisor: &'static str,
    encryption_in_transit: bool,
    /// `(name, count, memory MiB per GPU)`; all built-in GPUs are NVIDIA's.
    gpu: Option<(&'static str, i64, i64)>,
    /// `(name, devices, NeuronCores per device)`.
    neuron: Option<(&'static str, i64, i64)>,
    efa_interfaces: i64,
    price: f64,
}

fn specs() -> Vec<Spec> {
    let mut out = Vec::new();
    for family in &FAMILIES {
        for (i, size_name) in family.sizes.split_whitespace().enumerate() {
            // The tables are constants checked by the catalog tests; a name missing from them is
            // a typo in this file, not an input error.
            let size = SIZES
                .iter()
                .find(|s| s.name == size_name)
                .unwrap_or_else(|| panic!("{}.{size_name}: size not in SIZES", family.name));
            let &(_, network_mbps, ebs_mbps) = family
                .bandwidths
                .iter()
                .find(|(s, _, _)| *s == size_name)
                .unwrap_or_else(|| panic!("{}.{size_name}: no bandwidth row", family.name));
            out.push(Spec {
                name: format!("{}.{size_name}", family.name),
                processor: family.processor,
                vcpus: size.vcpus,
                memory_mib: size.vcpus * family.gib_per_vcpu * 1024,
                max_enis: size.max_enis,
                ipv4_per_eni: size.ipv4_per_eni,
                network_mbps,
                ebs_mbps,
                nvme_gb: family.nvme_gb.get(i).copied(),
                hypervisor: "nitro",
                encryption_in_transit: family.encryption_in_transit,
                gpu: None,
                neuron: None,
                efa_interfaces: i64::from(
                    EFA_TYPES.contains(&format!("{}.{size_name}", family.name).as_str()),
                ),
                price: round_price(family.large_price * size.vcpus as f64 / 2.0),
            });
        }
    }
    for &(family, processor, large_price, eni_exceptions) in &BURSTABLE_FAMILIES {
        for size in &BURSTABLE_SIZES {
            let (max_enis, ipv4_per_eni) = eni_exceptions
                .iter()
                .find(|(s, _, _)| *s == size.name)
                .map_or((size.max_enis, size.ipv4_per_eni), |&(_, e, a)| (e, a));
            out.push(Spec {
                name: format!("{family}.{}", size.name),
                processor,
                vcpus: size.vcpus,
                memory_mib: size.memory_mib,
                max_enis,
                ipv4_per_eni,
                network_mbps: size.network_mbps,
                ebs_mbps: BURSTABLE_EBS_MBPS,
                nvme_gb: None,
                hypervisor: "nitro",
                encryption_in_transit: false,
                gpu: None,
                neuron: None,
                efa_interfaces: 0,
                price: round_price(large_price * size.price_factor),
            });
        }
    }
    for gpu in &GPU_TYPES {
        out.push(Spec {
            name: gpu.name.to_string(),
            processor: gpu.processor,
            vcpus: gpu.vcpus,
            memory_mib: gpu.memory_mib,
            max_enis: gpu.max_enis,
            ipv4_per_eni: gpu.ipv4_per_eni,
            network_mbps: gpu.network_mbps,
            ebs_mbps: gpu.ebs_mbps,
            nvme_gb: gpu.nvme_gb,
            hypervisor: gpu.hypervisor,
            encryption_in_transit: gpu.encryption_in_transit,
            gpu: Some((gpu.gpu_name, gpu.gpu_count, gpu.gpu_memory_mib))
                .filter(|(_, count, _)| *count > 0),
            neuron: gpu.neuron,
            efa_interfaces: gpu.efa_interfaces,
            price: gpu.price,
        });
    }
    out
}

/// Prices to the micro-dollar, as EC2's price list and spot price history publish them.
fn round_price(price: f64) -> f64 {
    (price * 1e6).round() / 1e6
}

/// 64-bit FNV-1a: a fixed, dependency-free hash so derived figures are identical on every run,
/// platform and Rust version (unlike `std`'s `DefaultHasher`, which makes no such promise).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The built-in spot price of `instance_type` in `zone`: between 30% and 45% of `on_demand`,
/// fixed per (type, zone) by a hash of the two names. Real spot prices move; a simulation needs
/// them stable, different per zone (so zone choice matters) and always below on-demand.
pub fn spot_price(instance_type: &str, zone: &str, on_demand: f64) -> f64 {
    let hash = fnv1a64(format!("{instance_type}/{zone}").as_bytes());
    let share = 0.30 + 0.15 * (hash % 10_001) as f64 / 10_000.0;
    round_price(on_demand * share)
}

/// One built-in type: its `DescribeInstanceTypes` form computed into a catalog entry by the same
/// code as the live catalog's ([`super::live::instance_type`]), with the built-in offerings.
fn instance_type(spec: Spec) -> InstanceType {
    let mut offerings = Vec::with_capacity(ZONES.len() * 2);
    for zone in ZONES {
        offerings.push(Offering {
            reservation: None,
            zone: zone.to_string(),
            capacity_type: CapacityType::OnDemand,
            price: spec.price,
            available: true,
        });
        offerings.push(Offering {
            reservation: None,
            zone: zone.to_string(),
            capacity_type: CapacityType::Spot,
            price: spot_price(&spec.name, zone, spec.price),
            available: true,
        });
    }
    let info = info(spec);
    super::live::instance_type(REGION, &info, offerings).unwrap_or_else(|| {
        panic!(
            "{}: a built-in type the catalog cannot use",
            info.instance_type
        )
    })
}

fn build() -> Catalog {
    Catalog::new(specs().into_iter().map(instance_type).collect())
        .with_zone_ids(zone_ids())
        .with_ipv4_per_interface(super::live::ipv4_per_interface(&instance_type_infos()))
}

/// The built-in zones' ids, in AWS's shape (`us-west-2a` → `usw2-az1`). Real accounts map names
/// to ids in their own order; `fakecloud` uses this same mapping for the subnets it makes.
pub fn zone_ids() -> BTreeMap<String, String> {
    ZONES
        .iter()
        .map(|zone| (zone.to_string(), zone_id(REGION, zone)))
        .collect()
}

/// `us-west-2a` → `usw2-az1`: the region's initials and digits, then the zone letter's position.
pub fn zone_id(region: &str, zone: &str) -> String {
    let short: String = region
        .split('-')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 || part.chars().all(|c| c.is_ascii_digit()) {
                part.to_string()
            } else {
                part.chars().take(1).collect()
            }
        })
        .collect();
    let index = zone
        .chars()
        .last()
        .filter(char::is_ascii_lowercase)
        .map(|c| (c as u8 - b'a' + 1).to_string())
        .unwrap_or_else(|| "1".into());
    format!("{short}-az{index}")
}

/// The built-in types as `DescribeInstanceTypes` describes them: what `fakecloud` answers that
/// call with, and what [`super::live::build`] turns back into this catalog.
pub fn instance_type_infos() -> Vec<InstanceTypeInfo> {
    let mut infos: Vec<InstanceTypeInfo> = specs().into_iter().map(info).collect();
    infos.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
    infos
}

fn info(spec: Spec) -> InstanceTypeInfo {
    let architecture = match spec.processor {
        Processor::Graviton => "arm64",
        Processor::Intel | Processor::Amd => "x86_64",
    };
    let manufacturer = match spec.processor {
        Processor::Intel => "Intel",
        Processor::Amd => "AMD",
        Processor::Graviton => "AWS",
    };
    InstanceTypeInfo {
        instance_type: spec.name,
        architectures: vec![architecture.to_string()],
        cpu_manufacturer: Some(manufacturer.to_string()),
        vcpus: spec.vcpus,
        memory_mib: spec.memory_mib,
        max_network_interfaces: spec.max_enis,
        ipv4_addresses_per_interface: spec.ipv4_per_eni,
        network_baseline_mbps: Some(spec.network_mbps),
        encryption_in_transit: spec.encryption_in_transit,
        ebs_max_bandwidth_mbps: Some(spec.ebs_mbps),
        hypervisor: Some(spec.hypervisor.to_string()),
        bare_metal: false,
        local_nvme_gb: spec.nvme_gb,
        gpus: spec
            .gpu
            .map(|(name, count, memory_mib)| Gpu {
                name: name.to_uppercase(),
                manufacturer: "NVIDIA".to_string(),
                count,
                memory_mib,
            })
            .into_iter()
            .collect(),
        neuron_devices: spec
            .neuron
            .map(|(name, count, cores_per_device)| NeuronDevice {
                name: name.to_string(),
                count,
                cores_per_device,
            })
            .into_iter()
            .collect(),
        efa_interfaces: spec.efa_interfaces,
        usage_classes: vec!["on-demand".to_string(), "spot".to_string()],
    }
}

/// The built-in on-demand Linux prices by type: the fallback price table when the Pricing API
/// cannot be reached.
pub fn on_demand_prices() -> BTreeMap<String, f64> {
    catalog()
        .instance_types
        .iter()
        .filter_map(|it| {
            it.offerings
                .iter()
                .find(|o| o.capacity_type == CapacityType::OnDemand)
                .map(|o| (it.name.clone(), o.price))
        })
        .collect()
}
