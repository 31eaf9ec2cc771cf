//! Branch network interfaces per instance type: the `vpc.amazonaws.com/pod-eni` capacity the VPC
//! resource controller advertises on nodes of trunking-compatible types (security groups for
//! pods). `DescribeInstanceTypes` does not say it; upstream ships the VPC resource controller's
//! limits table. This module knows the families the built-in catalog has, from the same public
//! limits: the c, m and r families of generations 5-7 by size (Ice Lake, Milan and Sapphire
//! Rapids have more at 8xlarge and 12xlarge), the accelerated types one by one. Burstable (t)
//! and Xen types are not trunking-compatible.
//!
//! A type it does not know gets no pod-eni capacity, so a pod asking for `pod-eni` is never sent
//! to a node that may not have it (it may be unschedulable instead, with an event naming the
//! resource): deliberate difference 21 in the README.

/// Branch interfaces of `instance_type`, 0 when it is not trunking-compatible or not known.
pub fn branch_interfaces(instance_type: &str) -> i64 {
    if let Some(&(_, n)) = ACCELERATED.iter().find(|(name, _)| *name == instance_type) {
        return n;
    }
    let Some((family, size)) = instance_type.split_once('.') else {
        return 0;
    };
    if !FAMILIES.contains(&family) {
        return 0;
    }
    // 6i, 6a, 7i (x86, generation 6 and 7): more branches at 8xlarge and 12xlarge.
    let x86_gen6_7 = matches!(family.as_bytes().get(1), Some(b'6' | b'7'))
        && !family.ends_with('g')
        && !family.ends_with("gd");
    match (size, x86_gen6_7) {
        ("medium", _) => 4,
        ("large", _) => 9,
        ("xlarge", _) => 18,
        ("2xlarge", _) => 38,
        ("8xlarge", true) => 84,
        ("12xlarge", true) => 114,
        ("4xlarge" | "8xlarge" | "9xlarge" | "12xlarge", _) => 54,
        ("16xlarge" | "18xlarge" | "24xlarge" | "32xlarge" | "48xlarge", _) => 107,
        _ => 0,
    }
}

/// Trunking-compatible fixed-performance families.
const FAMILIES: [&str; 26] = [
    "c5", "c5a", "c5d", "c6i", "c6a", "c6g", "c6gd", "c7i", "c7g", "m5", "m5a", "m5d", "m6i",
    "m6a", "m6g", "m6gd", "m7i", "m7g", "r5", "r5a", "r5d", "r6i", "r6a", "r6g", "r7i", "r7g",
];

/// Accelerated types, which follow no size pattern.
const ACCELERATED: [(&str, i64); 9] = [
    ("g4dn.xlarge", 39),
    ("g4dn.2xlarge", 39),
    ("g5.xlarge", 4),
    ("g5.2xlarge", 17),
    ("g5.12xlarge", 107),
    ("g4ad.xlarge", 12),
    ("inf2.xlarge", 18),
    ("trn1.2xlarge", 17),
    ("dl1.24xlarge", 62),
];
