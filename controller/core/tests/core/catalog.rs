//! The built-in instance catalog and catalog files.

use std::collections::BTreeSet;

use karpenter_core::api::labels;
use karpenter_core::catalog::builtin::{self, REGION, ZONES};
use karpenter_core::catalog::{
    CapacityType, Catalog, CatalogError, InstanceType, NVIDIA_GPU, Problem, compute_allocatable,
    compute_overhead, eni_limited_pods, kube_reserved, memory_capacity,
};
use karpenter_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn catalog() -> &'static Catalog {
    Catalog::builtin_ref()
}

fn it(name: &str) -> &'static InstanceType {
    catalog()
        .get(name)
        .unwrap_or_else(|| panic!("{name} in the built-in catalog"))
}

fn label<'a>(it: &'a InstanceType, key: &str) -> &'a str {
    it.labels
        .get(key)
        .unwrap_or_else(|| panic!("{} has label {key}", it.name))
}

fn on_demand_price(it: &InstanceType) -> f64 {
    it.offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand)
        .expect("an on-demand offering")
        .price
}

fn price_per_vcpu(name: &str) -> f64 {
    let it = it(name);
    on_demand_price(it) * 1000.0 / it.capacity.get(CPU) as f64
}

fn sizes_of(family: &str) -> Vec<String> {
    catalog()
        .instance_types
        .iter()
        .filter(|it| {
            it.labels
                .get(labels::INSTANCE_FAMILY_LABEL)
                .map(String::as_str)
                == Some(family)
        })
        .map(|it| label(it, labels::INSTANCE_SIZE_LABEL).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn set(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// The built-in catalog

#[test]
fn the_builtin_catalog_has_the_c_m_r_and_t_families_of_generations_5_to_7() {
    let families = [
        "c5", "c5a", "c5d", "c6i", "c6a", "c6g", "c6gd", "c7i", "c7g", "m5", "m5a", "m5d", "m6i",
        "m6a", "m6g", "m6gd", "m7i", "m7g", "r5", "r5a", "r5d", "r6i", "r6a", "r6g", "r7i", "r7g",
        "t3", "t3a", "t4g",
    ];
    for family in families {
        assert!(
            sizes_of(family).len() >= 7,
            "{family} has its sizes: {:?}",
            sizes_of(family)
        );
    }
    assert_eq!(
        sizes_of("c5"),
        set(&[
            "large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge"
        ])
    );
    assert_eq!(
        sizes_of("m6g"),
        set(&[
            "medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"
        ])
    );
    assert_eq!(
        sizes_of("t3"),
        set(&[
            "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"
        ])
    );
    assert!(sizes_of("m7i").contains(&"48xlarge".to_string()));
    assert!(sizes_of("c6i").contains(&"32xlarge".to_string()));
    assert!(catalog().instance_types.len() > 200);
}

#[test]
fn the_builtin_catalog_has_gpu_types_with_nvidia_gpus_in_capacity_and_allocatable() {
    for (name, gpus, gpu_name) in [
        ("g4dn.xlarge", 1, "t4"),
        ("g4dn.2xlarge", 1, "t4"),
        ("g5.xlarge", 1, "a10g"),
        ("g5.2xlarge", 1, "a10g"),
        ("g5.12xlarge", 4, "a10g"),
        ("p3.2xlarge", 1, "v100"),
    ] {
        let it = it(name);
        assert_eq!(it.capacity.get(NVIDIA_GPU), gpus, "{name} capacity");
        assert_eq!(it.allocatable.get(NVIDIA_GPU), gpus, "{name} allocatable");
        assert_eq!(it.overhead.get(NVIDIA_GPU), 0, "{name} overhead");
        assert_eq!(label(it, labels::INSTANCE_GPU_NAME_LABEL), gpu_name);
        assert_eq!(label(it, labels::INSTANCE_GPU_MANUFACTURER_LABEL), "nvidia");
        assert_eq!(
            label(it, labels::INSTANCE_GPU_COUNT_LABEL),
            gpus.to_string()
        );
        assert!(
            label(it, labels::INSTANCE_GPU_MEMORY_LABEL)
                .parse::<i64>()
                .unwrap()
                >= 16384
        );
    }
    assert_eq!(
        label(it("g5.xlarge"), labels::INSTANCE_GPU_MEMORY_LABEL),
        "22888"
    );
    assert_eq!(label(it("g5.xlarge"), labels::INSTANCE_CATEGORY_LABEL), "g");
    assert_eq!(
        label(it("p3.2xlarge"), labels::INSTANCE_CATEGORY_LABEL),
        "p"
    );
    assert_eq!(
        label(it("p3.2xlarge"), labels::INSTANCE_HYPERVISOR_LABEL),
        "xen"
    );
    assert_eq!(it("m5.large").capacity.get(NVIDIA_GPU), 0);
    assert!(
        !it("m5.large")
            .labels
            .contains_key(labels::INSTANCE_GPU_NAME_LABEL)
    );
}

#[test]
fn every_builtin_type_is_offered_on_demand_and_spot_in_each_of_three_zones() {
    for it in &catalog().instance_types {
        assert_eq!(it.offerings.len(), 6, "{}", it.name);
        let pairs: BTreeSet<(&str, CapacityType)> = it
            .offerings
            .iter()
            .map(|o| (o.zone.as_str(), o.capacity_type))
            .collect();
        for zone in ZONES {
            assert!(
                pairs.contains(&(zone, CapacityType::OnDemand)),
                "{} {zone}",
                it.name
            );
            assert!(
                pairs.contains(&(zone, CapacityType::Spot)),
                "{} {zone}",
                it.name
            );
        }
        assert!(it.offerings.iter().all(|o| o.available), "{}", it.name);
        let mut sorted = it.offerings.clone();
        sorted.sort_by(|a, b| (&a.zone, a.capacity_type).cmp(&(&b.zone, b.capacity_type)));
        assert_eq!(sorted, it.offerings, "{} offerings sorted", it.name);
    }
    assert_eq!(ZONES, ["us-west-2a", "us-west-2b", "us-west-2c"]);
}

#[test]
fn graviton_types_are_arm64_made_by_aws_and_the_rest_amd64() {
    for it in &catalog().instance_types {
        let family = label(it, labels::INSTANCE_FAMILY_LABEL);
        let graviton = [
            "c6g", "c6gd", "c7g", "m6g", "m6gd", "m7g", "r6g", "r7g", "t4g",
        ]
        .contains(&family);
        let (arch, maker) = (
            label(it, labels::ARCH_LABEL),
            label(it, labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        );
        if graviton {
            assert_eq!((arch, maker), ("arm64", "aws"), "{}", it.name);
        } else {
            assert_eq!(arch, "amd64", "{}", it.name);
            assert!(["intel", "amd"].contains(&maker), "{}", it.name);
        }
    }
    assert_eq!(
        label(it("m6a.large"), labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        "amd"
    );
    assert_eq!(
        label(it("t3a.large"), labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        "amd"
    );
    assert_eq!(
        label(it("m6i.large"), labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        "intel"
    );
    assert_eq!(
        label(it("m5.large"), labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        "intel"
    );
}

#[test]
fn spot_is_cheaper_than_on_demand_for_every_type_and_zone_and_differs_by_zone() {
    let mut types_with_zone_spread = 0;
    for it in &catalog().instance_types {
        let on_demand = on_demand_price(it);
        assert!(on_demand > 0.0, "{}", it.name);
        let mut spot_prices = BTreeSet::new();
        for zone in ZONES {
            let od = it
                .offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == CapacityType::OnDemand)
                .unwrap();
            let spot = it
                .offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == CapacityType::Spot)
                .unwrap();
            assert_eq!(
                od.price, on_demand,
                "{} on-demand is one price per region",
                it.name
            );
            let share = spot.price / od.price;
            assert!(
                (0.29..=0.46).contains(&share),
                "{} in {zone}: spot {} is {share:.3} of on-demand {}",
                it.name,
                spot.price,
                od.price
            );
            assert_eq!(spot.price, builtin::spot_price(&it.name, zone, on_demand));
            spot_prices.insert(spot.price.to_bits());
        }
        if spot_prices.len() > 1 {
            types_with_zone_spread += 1;
        }
    }
    assert_eq!(types_with_zone_spread, catalog().instance_types.len());
}

#[test]
fn fnv1a_is_the_standard_64_bit_algorithm_so_spot_prices_never_change_between_runs() {
    assert_eq!(builtin::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(builtin::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(builtin::fnv1a64(b"foobar"), 0x85944171f73967e8);
    assert_eq!(Catalog::builtin(), Catalog::builtin());
    assert_eq!(&Catalog::builtin(), Catalog::builtin_ref());
}

#[test]
fn on_demand_prices_keep_the_usual_ratios_between_families() {
    // Real us-west-2 figures.
    assert_eq!(on_demand_price(it("m5.large")), 0.096);
    assert_eq!(on_demand_price(it("c5.9xlarge")), 1.53);
    assert_eq!(on_demand_price(it("t3.nano")), 0.0052);
    assert_eq!(on_demand_price(it("p3.2xlarge")), 3.06);
    for (c, m, r) in [
        ("c5.large", "m5.large", "r5.large"),
        ("c5a.large", "m5a.large", "r5a.large"),
        ("c6i.large", "m6i.large", "r6i.large"),
        ("c6a.large", "m6a.large", "r6a.large"),
        ("c6g.large", "m6g.large", "r6g.large"),
        ("c7i.large", "m7i.large", "r7i.large"),
        ("c7g.large", "m7g.large", "r7g.large"),
    ] {
        assert!(price_per_vcpu(c) < price_per_vcpu(m), "{c} < {m}");
        assert!(price_per_vcpu(m) < price_per_vcpu(r), "{m} < {r}");
    }
    for (graviton, intel) in [
        ("c6g.large", "c6i.large"),
        ("m6g.large", "m6i.large"),
        ("r6g.large", "r6i.large"),
        ("c7g.large", "c7i.large"),
        ("m7g.large", "m7i.large"),
        ("r7g.large", "r7i.large"),
        ("t4g.large", "t3.large"),
    ] {
        let discount = 1.0 - price_per_vcpu(graviton) / price_per_vcpu(intel);
        assert!(
            (0.12..=0.25).contains(&discount),
            "{graviton} vs {intel}: {discount}"
        );
    }
    for (amd, intel) in [
        ("c5a.large", "c5.large"),
        ("m5a.large", "m5.large"),
        ("r5a.large", "r5.large"),
        ("c6a.large", "c6i.large"),
        ("m6a.large", "m6i.large"),
        ("r6a.large", "r6i.large"),
        ("t3a.large", "t3.large"),
    ] {
        let discount = 1.0 - price_per_vcpu(amd) / price_per_vcpu(intel);
        assert!(
            (0.05..=0.15).contains(&discount),
            "{amd} vs {intel}: {discount}"
        );
    }
    // Within a family, price grows with size.
    assert!(on_demand_price(it("m6i.xlarge")) == 2.0 * on_demand_price(it("m6i.large")));
}

#[test]
fn m5_large_has_the_figures_upstream_karpenter_computes() {
    let m5 = it("m5.large");
    assert_eq!(m5.capacity.get(CPU), 2000);
    // 8192Mi minus ceil(7.5% of 8192Mi) = 615Mi of VM overhead.
    assert_eq!(m5.capacity.get(MEMORY), (8192 - 615) * MI);
    assert_eq!(m5.capacity.get(PODS), 29);
    assert_eq!(m5.capacity.get(EPHEMERAL_STORAGE), 20 * GI);
    // kube-reserved cpu: 60m (first core) + 10m (second core).
    assert_eq!(m5.overhead.get(CPU), 70);
    assert_eq!(m5.allocatable.get(CPU), 1930);
    // kube-reserved memory 11Mi × 29 + 255Mi = 574Mi, plus the 100Mi eviction threshold.
    assert_eq!(kube_reserved(2000, 29).get(MEMORY), 574 * MI);
    assert_eq!(m5.overhead.get(MEMORY), 674 * MI);
    assert_eq!(m5.allocatable.get(MEMORY), (7577 - 674) * MI);
    // ephemeral-storage: 1Gi kube-reserved + 10% of 20Gi eviction threshold.
    assert_eq!(m5.overhead.get(EPHEMERAL_STORAGE), 3 * GI);
    assert_eq!(m5.allocatable.get(EPHEMERAL_STORAGE), 17 * GI);
    assert_eq!(m5.allocatable.get(PODS), 29);

    let expected_labels = [
        (labels::INSTANCE_TYPE_LABEL, "m5.large"),
        (labels::ARCH_LABEL, "amd64"),
        (labels::OS_LABEL, "linux"),
        (labels::REGION_LABEL, REGION),
        (labels::INSTANCE_CATEGORY_LABEL, "m"),
        (labels::INSTANCE_FAMILY_LABEL, "m5"),
        (labels::INSTANCE_GENERATION_LABEL, "5"),
        (labels::INSTANCE_SIZE_LABEL, "large"),
        (labels::INSTANCE_CPU_LABEL, "2"),
        (labels::INSTANCE_CPU_MANUFACTURER_LABEL, "intel"),
        (labels::INSTANCE_MEMORY_LABEL, "8192"),
        (labels::INSTANCE_HYPERVISOR_LABEL, "nitro"),
        (labels::INSTANCE_NETWORK_BANDWIDTH_LABEL, "750"),
        (labels::INSTANCE_EBS_BANDWIDTH_LABEL, "4750"),
        (
            labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL,
            "false",
        ),
        (labels::INSTANCE_TENANCY_LABEL, "default"),
    ];
    let actual: Vec<(&str, &str)> = m5
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut expected = expected_labels.to_vec();
    expected.sort();
    assert_eq!(actual, expected);
}

#[test]
fn max_pods_come_from_the_eni_limits() {
    for (name, pods) in [
        ("t3.nano", 4),
        ("t3.small", 11),
        ("t3a.small", 8),
        ("t3.medium", 17),
        ("t3.large", 35),
        ("c6g.medium", 8),
        ("m5.large", 29),
        ("m5.xlarge", 58),
        ("m5.4xlarge", 234),
        ("c5.9xlarge", 234),
        ("m5.16xlarge", 737),
        ("c7i.48xlarge", 737),
        ("g4dn.xlarge", 29),
        ("g5.12xlarge", 737),
    ] {
        assert_eq!(it(name).capacity.get(PODS), pods, "{name}");
    }
    assert_eq!(eni_limited_pods(3, 10, 0), 29);
    assert_eq!(eni_limited_pods(3, 10, 1), 20);
    assert_eq!(eni_limited_pods(1, 10, 1), 0);
}

#[test]
fn graviton_memory_also_loses_the_64mi_cma_reserve() {
    // (8192 - 64)Mi minus ceil(7.5% of 8128Mi) = 610Mi.
    assert_eq!(it("m6g.large").capacity.get(MEMORY), (8128 - 610) * MI);
    assert_eq!(memory_capacity(8192, "arm64", 0.075), 7518 * MI);
    assert_eq!(memory_capacity(8192, "amd64", 0.075), 7577 * MI);
    assert_eq!(memory_capacity(8192, "amd64", 0.0), 8192 * MI);
}

#[test]
fn kube_reserved_cpu_follows_the_6_1_half_and_quarter_percent_tiers() {
    assert_eq!(kube_reserved(1000, 0).get(CPU), 60);
    assert_eq!(kube_reserved(2000, 0).get(CPU), 70);
    assert_eq!(kube_reserved(4000, 0).get(CPU), 80);
    assert_eq!(kube_reserved(8000, 0).get(CPU), 90);
    assert_eq!(kube_reserved(96000, 0).get(CPU), 310);
    assert_eq!(it("m5.24xlarge").overhead.get(CPU), 310);
    assert_eq!(kube_reserved(500, 0).get(CPU), 30);
    assert_eq!(kube_reserved(1000, 0).get(MEMORY), 255 * MI);
    assert_eq!(kube_reserved(1000, 0).get(EPHEMERAL_STORAGE), GI);
}

#[test]
fn allocatable_is_capacity_minus_overhead_and_less_than_capacity_for_every_type() {
    for it in &catalog().instance_types {
        assert_eq!(
            it.allocatable,
            it.capacity.minus(&it.overhead),
            "{}",
            it.name
        );
        assert_eq!(it.overhead, compute_overhead(&it.capacity), "{}", it.name);
        for resource in [CPU, MEMORY, EPHEMERAL_STORAGE] {
            assert!(
                0 < it.allocatable.get(resource)
                    && it.allocatable.get(resource) < it.capacity.get(resource),
                "{} {resource}: allocatable {} capacity {}",
                it.name,
                it.allocatable.get(resource),
                it.capacity.get(resource)
            );
        }
        assert_eq!(
            it.allocatable.get(PODS),
            it.capacity.get(PODS),
            "{}",
            it.name
        );
        assert!(it.capacity.get(PODS) > 0, "{}", it.name);
    }
}

#[test]
fn every_builtin_type_carries_its_instance_attribute_labels() {
    for it in &catalog().instance_types {
        let (family, size) = it.name.split_once('.').unwrap();
        assert_eq!(label(it, labels::INSTANCE_TYPE_LABEL), it.name);
        assert_eq!(label(it, labels::OS_LABEL), "linux");
        assert_eq!(label(it, labels::INSTANCE_FAMILY_LABEL), family);
        assert_eq!(label(it, labels::INSTANCE_SIZE_LABEL), size);
        // `inf2`: category `inf`, generation `2`.
        let letters = family.chars().take_while(char::is_ascii_lowercase).count();
        assert_eq!(
            label(it, labels::INSTANCE_CATEGORY_LABEL),
            &family[..letters]
        );
        assert_eq!(
            label(it, labels::INSTANCE_GENERATION_LABEL),
            &family[letters..letters + 1]
        );
        assert_eq!(
            label(it, labels::INSTANCE_CPU_LABEL),
            (it.capacity.get(CPU) / 1000).to_string()
        );
        let reported_mib: i64 = label(it, labels::INSTANCE_MEMORY_LABEL).parse().unwrap();
        assert!(reported_mib * MI > it.capacity.get(MEMORY), "{}", it.name);
        for numeric in [
            labels::INSTANCE_NETWORK_BANDWIDTH_LABEL,
            labels::INSTANCE_EBS_BANDWIDTH_LABEL,
        ] {
            assert!(
                label(it, numeric).parse::<i64>().unwrap() > 0,
                "{} {numeric}",
                it.name
            );
        }
        assert!(["true", "false"].contains(&label(
            it,
            labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL
        )));
        assert!(["nitro", "xen"].contains(&label(it, labels::INSTANCE_HYPERVISOR_LABEL)));
        let has_nvme = it.labels.contains_key(labels::INSTANCE_LOCAL_NVME_LABEL);
        // d variants, the GPU types and Trainium (474 GB of NVMe) have instance storage.
        let d_variant = family.ends_with('d') || family.starts_with('g') || family == "trn1";
        assert_eq!(has_nvme, d_variant, "{}", it.name);
    }
    assert_eq!(
        label(it("c5d.large"), labels::INSTANCE_LOCAL_NVME_LABEL),
        "50"
    );
    assert_eq!(
        label(it("m6gd.16xlarge"), labels::INSTANCE_LOCAL_NVME_LABEL),
        "3800"
    );
    assert_eq!(
        label(it("r7g.4xlarge"), labels::INSTANCE_MEMORY_LABEL),
        "131072"
    );
    assert_eq!(label(it("t3.nano"), labels::INSTANCE_MEMORY_LABEL), "512");
    assert_eq!(
        label(
            it("c7i.large"),
            labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL
        ),
        "true"
    );
}

#[test]
fn the_catalog_is_sorted_by_name_and_get_finds_each_type() {
    let names: Vec<&str> = catalog()
        .instance_types
        .iter()
        .map(|it| it.name.as_str())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted);
    for name in names {
        assert_eq!(catalog().get(name).map(|it| it.name.as_str()), Some(name));
    }
    assert!(catalog().get("m5.huge").is_none());
    assert!(catalog().get("").is_none());
}

// ---------------------------------------------------------------------------------------------
// Catalog files

const C_LARGE: &str = r#"
instanceTypes:
  - name: c.large
    cpu: "2"
    memory: 4Gi
    pods: 29
    arch: amd64
    allocatable: {cpu: 1930m, memory: 3500Mi, pods: 29}
    labels: {karpenter.k8s.aws/instance-category: c}
    offerings:
      - {zone: us-west-2a, capacityType: on-demand, price: 0.085}
      - {zone: us-west-2a, capacityType: spot, price: 0.031, available: false}
"#;

fn load(text: &str) -> Catalog {
    Catalog::from_text(text).unwrap_or_else(|e| panic!("loads: {e}"))
}

fn reject(text: &str) -> CatalogError {
    match Catalog::from_text(text) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e,
    }
}

/// A file of two types whose second is `second` (YAML lines indented by 4).
fn second_type(second: &str) -> String {
    format!(
        "instanceTypes:\n  - name: ok.large\n    cpu: 2\n    memory: 4Gi\n    offerings:\n      - {{zone: z, capacityType: spot, price: 0.1}}\n  - {}\n",
        second.trim_start()
    )
}

#[test]
fn a_catalog_file_with_allocatable_keeps_the_stated_figures() {
    let catalog = load(C_LARGE);
    assert_eq!(catalog.instance_types.len(), 1);
    let c = catalog.get("c.large").unwrap();
    assert_eq!(c.capacity.get(CPU), 2000);
    assert_eq!(
        c.capacity.get(MEMORY),
        4 * GI,
        "no VM overhead on file memory"
    );
    assert_eq!(c.capacity.get(PODS), 29);
    assert_eq!(c.capacity.get(EPHEMERAL_STORAGE), 20 * GI);
    assert_eq!(c.allocatable.get(CPU), 1930);
    assert_eq!(c.allocatable.get(MEMORY), 3500 * MI);
    assert_eq!(c.allocatable.get(PODS), 29);
    // Not stated, so computed: 20Gi - 1Gi kube-reserved - 2Gi eviction threshold.
    assert_eq!(c.allocatable.get(EPHEMERAL_STORAGE), 17 * GI);
    assert_eq!(c.allocatable, c.capacity.minus(&c.overhead));
    assert_eq!(c.overhead.get(MEMORY), 596 * MI);
    assert_eq!(label(c, labels::INSTANCE_TYPE_LABEL), "c.large");
    assert_eq!(label(c, labels::ARCH_LABEL), "amd64");
    assert_eq!(label(c, labels::OS_LABEL), "linux");
    assert_eq!(label(c, labels::INSTANCE_CATEGORY_LABEL), "c");
    assert_eq!(c.offerings.len(), 2);
    let spot = &c.offerings[0];
    assert_eq!(
        (
            spot.zone.as_str(),
            spot.capacity_type,
            spot.price,
            spot.available
        ),
        ("us-west-2a", CapacityType::Spot, 0.031, false)
    );
    let od = &c.offerings[1];
    assert_eq!(
        (od.capacity_type, od.price, od.available),
        (CapacityType::OnDemand, 0.085, true)
    );
}

#[test]
fn a_catalog_file_without_allocatable_gets_it_from_the_formula_without_vm_overhead() {
    let text = r#"
instanceTypes:
  - name: c.large
    cpu: 2
    memory: 4Gi
    pods: 29
    offerings: [{zone: us-west-2a, capacityType: on-demand, price: 0.085}]
  - name: b.arm
    cpu: 500m
    memory: 1Gi
    pods: 8
    arch: arm64
    offerings: [{zone: us-west-2b, capacityType: spot, price: 0}]
"#;
    let catalog = load(text);
    assert_eq!(
        catalog
            .instance_types
            .iter()
            .map(|it| it.name.as_str())
            .collect::<Vec<_>>(),
        ["b.arm", "c.large"]
    );
    let c = catalog.get("c.large").unwrap();
    let expected_capacity = Resources::from_pairs([
        (CPU, 2000),
        (MEMORY, 4 * GI),
        (PODS, 29),
        (EPHEMERAL_STORAGE, 20 * GI),
    ]);
    assert_eq!(c.capacity, expected_capacity);
    let (overhead, allocatable) = compute_allocatable(&expected_capacity);
    assert_eq!(c.overhead, overhead);
    assert_eq!(c.allocatable, allocatable);
    assert_eq!(c.allocatable.get(CPU), 1930);
    assert_eq!(c.allocatable.get(MEMORY), (4096 - 574 - 100) * MI);

    let b = catalog.get("b.arm").unwrap();
    assert_eq!(b.capacity.get(PODS), 8);
    assert_eq!(b.capacity.get(MEMORY), GI, "no arm64 CMA reserve either");
    assert_eq!(b.allocatable.get(CPU), 470);
    assert_eq!(label(b, labels::ARCH_LABEL), "arm64");
    assert_eq!(b.offerings[0].price, 0.0);
}

#[test]
fn a_catalog_file_keeps_extended_resources_in_capacity_and_allocatable() {
    let text = r#"
instanceTypes:
  - name: gpu.big
    cpu: "8"
    memory: 32Gi
    pods: 58
    capacity: {nvidia.com/gpu: "4", ephemeral-storage: 100Gi}
    offerings: [{zone: us-west-2a, capacityType: on-demand, price: 4}]
  - name: gpu.small
    cpu: "4"
    memory: 16Gi
    allocatable: {cpu: 3920m, nvidia.com/gpu: 1, example.com/fpga: "2"}
    offerings: [{zone: us-west-2a, capacityType: on-demand, price: 1}]
"#;
    let catalog = load(text);
    let big = catalog.get("gpu.big").unwrap();
    assert_eq!(big.capacity.get(NVIDIA_GPU), 4);
    assert_eq!(big.allocatable.get(NVIDIA_GPU), 4);
    assert_eq!(big.capacity.get(EPHEMERAL_STORAGE), 100 * GI);
    assert_eq!(big.allocatable.get(EPHEMERAL_STORAGE), 89 * GI);
    let small = catalog.get("gpu.small").unwrap();
    assert_eq!(small.capacity.get(NVIDIA_GPU), 1);
    assert_eq!(small.allocatable.get(NVIDIA_GPU), 1);
    assert_eq!(small.capacity.get("example.com/fpga"), 2);
    assert_eq!(small.allocatable.get("example.com/fpga"), 2);
    assert_eq!(small.allocatable.get(CPU), 3920);
    assert_eq!(small.overhead.get(NVIDIA_GPU), 0);
    assert_eq!(
        small.capacity.get(PODS),
        110,
        "the kubelet's default max pods"
    );
}

#[test]
fn a_catalog_file_may_be_json() {
    let text = r#"{"instanceTypes": [{"name": "j.large", "cpu": 2, "memory": "8Gi", "pods": 29,
        "labels": {"karpenter.k8s.aws/instance-generation": 6},
        "offerings": [{"zone": "us-west-2c", "capacityType": "reserved", "price": 0.05,
            "reservationID": "cr-0abc", "reservationCapacity": 3}]}]}"#;
    let catalog = load(text);
    let j = catalog.get("j.large").unwrap();
    assert_eq!(j.capacity.get(MEMORY), 8 * GI);
    assert_eq!(label(j, labels::INSTANCE_GENERATION_LABEL), "6");
    assert_eq!(j.offerings[0].capacity_type, CapacityType::Reserved);
    let reservation = j.offerings[0].reservation.as_ref().unwrap();
    assert_eq!(
        (reservation.id.as_str(), reservation.capacity),
        ("cr-0abc", 3)
    );
}

#[test]
fn a_reserved_offering_without_its_reservation_id_is_rejected() {
    let text = r#"{"instanceTypes": [{"name": "j.large", "cpu": 2, "memory": "8Gi",
        "offerings": [{"zone": "us-west-2c", "capacityType": "reserved", "price": 0.05}]}]}"#;
    assert_rejected(
        text,
        0,
        Some("j.large"),
        "offerings[0].reservationID",
        Problem::Missing,
    );
}

fn assert_rejected(text: &str, index: usize, name: Option<&str>, field: &str, problem: Problem) {
    let err = reject(text);
    let expected = CatalogError::InstanceType {
        index,
        name: name.map(str::to_string),
        field: field.to_string(),
        problem,
    };
    assert_eq!(err, expected, "{err}");
}

#[test]
fn duplicate_names_are_rejected_naming_both_entries() {
    let text = second_type(
        "name: ok.large\n    cpu: 1\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    assert_rejected(
        &text,
        1,
        Some("ok.large"),
        "name",
        Problem::DuplicateName(0),
    );
    assert_eq!(
        reject(&text).to_string(),
        "instanceTypes[1] (ok.large): name: name is already used by instanceTypes[0]"
    );
}

#[test]
fn a_type_without_a_name_is_rejected() {
    let text = second_type(
        "cpu: 1\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    assert_rejected(&text, 1, None, "name", Problem::Missing);
    assert_eq!(
        reject(&text).to_string(),
        "instanceTypes[1] (no name): name: is required"
    );
}

#[test]
fn unparsable_quantities_are_rejected_naming_the_field() {
    let text = second_type(
        "name: bad.cpu\n    cpu: two\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    let err = reject(&text);
    assert!(
        matches!(&err, CatalogError::InstanceType { index: 1, field, problem: Problem::Quantity(_), .. } if field == "cpu"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "instanceTypes[1] (bad.cpu): cpu: invalid quantity \"two\": expected a number"
    );

    let text = second_type(
        "name: bad.alloc\n    cpu: 1\n    memory: 4Gi\n    allocatable: {memory: 3Zi}\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    let message = reject(&text).to_string();
    assert!(
        message.starts_with(
            "instanceTypes[1] (bad.alloc): allocatable.memory: invalid quantity \"3Zi\""
        ),
        "{message}"
    );

    let text = second_type(
        "name: neg\n    cpu: -1\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    assert_rejected(
        &text,
        1,
        Some("neg"),
        "cpu",
        Problem::Negative("-1".to_string()),
    );

    let text = second_type(
        "name: no.memory\n    cpu: 1\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    assert_rejected(&text, 1, Some("no.memory"), "memory", Problem::Missing);
}

#[test]
fn an_unknown_capacity_type_is_rejected() {
    let text = second_type(
        "name: odd\n    cpu: 1\n    memory: 4Gi\n    offerings:\n      - {zone: z, capacityType: spot, price: 0.1}\n      - {zone: z, capacityType: preemptible, price: 0.1}",
    );
    assert_rejected(
        &text,
        1,
        Some("odd"),
        "offerings[1].capacityType",
        Problem::UnknownCapacityType("preemptible".to_string()),
    );
    assert_eq!(
        reject(&text).to_string(),
        "instanceTypes[1] (odd): offerings[1].capacityType: unknown capacity type \"preemptible\"; expected on-demand, spot or reserved"
    );
}

#[test]
fn a_negative_price_is_rejected() {
    let text = second_type(
        "name: cheap\n    cpu: 1\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: on-demand, price: -0.5}]",
    );
    assert_rejected(
        &text,
        1,
        Some("cheap"),
        "offerings[0].price",
        Problem::InvalidPrice(-0.5),
    );
    assert!(
        reject(&text)
            .to_string()
            .starts_with("instanceTypes[1] (cheap): offerings[0].price: ")
    );
}

#[test]
fn an_instance_type_without_offerings_is_rejected() {
    let text = second_type("name: lonely\n    cpu: 1\n    memory: 4Gi");
    assert_rejected(&text, 1, Some("lonely"), "offerings", Problem::NoOfferings);
    let text = second_type("name: lonely\n    cpu: 1\n    memory: 4Gi\n    offerings: []");
    assert_eq!(
        reject(&text).to_string(),
        "instanceTypes[1] (lonely): offerings: an instance type needs at least one offering"
    );
}

#[test]
fn unknown_fields_are_rejected_naming_the_type_and_the_field() {
    let text = second_type(
        "name: typo\n    cpu: 1\n    memory: 4Gi\n    alocatable: {cpu: 1}\n    offerings: [{zone: z, capacityType: spot, price: 0.1}]",
    );
    let message = reject(&text).to_string();
    assert!(
        message.starts_with("instanceTypes[1] (typo): "),
        "{message}"
    );
    assert!(message.contains("unknown field `alocatable`"), "{message}");

    let text = second_type(
        "name: typo\n    cpu: 1\n    memory: 4Gi\n    offerings: [{zone: z, capacityType: spot, price: 0.1, weight: 3}]",
    );
    let message = reject(&text).to_string();
    assert!(
        message.starts_with("instanceTypes[1] (typo): offerings[0]"),
        "{message}"
    );
    assert!(message.contains("unknown field `weight`"), "{message}");

    let message = reject("instanceTypes: []\nregion: us-west-2\n").to_string();
    assert!(message.starts_with("catalog: "), "{message}");
    assert!(message.contains("unknown field `region`"), "{message}");
}

#[test]
fn other_mistakes_are_rejected_with_the_field() {
    let ok_offering = "offerings: [{zone: z, capacityType: spot, price: 0.1}]";
    let cases: [(String, &str, Problem); 5] = [
        (
            format!(
                "name: big\n    cpu: 1\n    memory: 4Gi\n    allocatable: {{cpu: 2}}\n    {ok_offering}"
            ),
            "allocatable.cpu",
            Problem::ExceedsCapacity {
                resource: CPU.to_string(),
                allocatable: 2000,
                capacity: 1000,
            },
        ),
        (
            format!(
                "name: twice\n    cpu: 1\n    memory: 4Gi\n    capacity: {{cpu: 1}}\n    {ok_offering}"
            ),
            "capacity.cpu",
            Problem::GivenTwice("cpu"),
        ),
        (
            format!("name: tiny\n    cpu: 1\n    memory: 100Mi\n    {ok_offering}"),
            "memory",
            Problem::OverheadExceedsCapacity {
                resource: MEMORY.to_string(),
                overhead: (11 * 110 + 255 + 100) * MI,
                capacity: 100 * MI,
            },
        ),
        (
            format!("name: sparc\n    cpu: 1\n    memory: 4Gi\n    arch: sparc\n    {ok_offering}"),
            "arch",
            Problem::Unsupported {
                what: "architecture",
                value: "sparc".to_string(),
                expected: "amd64 or arm64",
            },
        ),
        (
            format!(
                "name: liar\n    cpu: 1\n    memory: 4Gi\n    labels: {{kubernetes.io/arch: arm64}}\n    {ok_offering}"
            ),
            "labels.kubernetes.io/arch",
            Problem::ConflictingLabel {
                label: "arm64".to_string(),
                field: "arch",
                value: "amd64".to_string(),
            },
        ),
    ];
    for (body, field, problem) in cases {
        let text = second_type(&body);
        let name = body.lines().next().unwrap().trim_start_matches("name: ");
        assert_rejected(&text, 1, Some(name), field, problem);
    }

    let message = reject(&second_type(&format!(
        "name: tiny\n    cpu: 1\n    memory: 1Gi\n    {ok_offering}"
    )))
    .to_string();
    assert_eq!(
        message,
        "instanceTypes[1] (tiny): memory: capacity 1024Mi is less than the kube-reserved and \
         eviction threshold of 1565Mi it implies; give fewer pods or state allocatable"
    );

    let text = second_type(
        "name: dup\n    cpu: 1\n    memory: 4Gi\n    offerings:\n      - {zone: z, capacityType: spot, price: 0.1}\n      - {zone: z, capacityType: spot, price: 0.2}",
    );
    assert_rejected(
        &text,
        1,
        Some("dup"),
        "offerings[1].zone",
        Problem::DuplicateOffering {
            zone: "z".to_string(),
            capacity_type: "spot".to_string(),
            first: 0,
        },
    );
}

#[test]
fn a_file_that_is_not_a_catalog_is_rejected_as_a_whole() {
    assert!(matches!(
        reject("instanceTypes: [\n"),
        CatalogError::Syntax(_)
    ));
    assert!(reject("instanceTypes: [\n").to_string().contains("line"));
    assert!(matches!(reject(""), CatalogError::Document(_)));
    let message = reject("types: []\n").to_string();
    assert!(message.starts_with("catalog: "), "{message}");
    assert!(
        Catalog::from_text("instanceTypes: []")
            .unwrap()
            .instance_types
            .is_empty()
    );
}

/// An EC2NodeClass from its spec fields (the rest defaulted).
fn class(spec: serde_json::Value) -> karpenter_core::api::EC2NodeClass {
    let mut value = serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "custom"},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}
    });
    for (key, field) in spec.as_object().into_iter().flatten() {
        value["spec"][key] = field.clone();
    }
    serde_json::from_value(value).expect("class decodes")
}

/// Review B6: a 100Gi root volume makes a node with 100Gi of ephemeral storage (the global
/// catalog assumed 20Gi for every class), less kube-reserved's 1Gi and the 10% eviction
/// threshold.
#[test]
fn a_root_volume_sets_the_ephemeral_storage_of_every_type_of_its_class() {
    let class = class(serde_json::json!({"blockDeviceMappings": [
        {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}
    ]}));
    let m5 =
        karpenter_core::catalog::nodeclass::instance_type_for(catalog(), it("m5.large"), &class)
            .expect("launchable");
    assert_eq!(m5.capacity.get(EPHEMERAL_STORAGE), 100 * GI);
    assert_eq!(
        m5.allocatable.get(EPHEMERAL_STORAGE),
        100 * GI - GI - 10 * GI
    );
    // Everything else as the catalog has it.
    assert_eq!(m5.allocatable.get(CPU), it("m5.large").allocatable.get(CPU));
    assert_eq!(
        m5.allocatable.get(MEMORY),
        it("m5.large").allocatable.get(MEMORY)
    );
}

#[test]
fn kubelet_settings_set_pods_and_what_the_kubelet_holds_back() {
    let class = class(serde_json::json!({"kubelet": {
        "maxPods": 110, "podsPerCore": 20,
        "systemReserved": {"cpu": "100m"}, "kubeReserved": {"memory": "500Mi"},
        "evictionHard": {"memory.available": "5%"}
    }}));
    let base = it("m5.xlarge");
    let m5 = karpenter_core::catalog::nodeclass::instance_type_for(catalog(), base, &class)
        .expect("launchable");
    // 4 vCPUs × 20 pods per core = 80 < maxPods 110.
    assert_eq!(m5.capacity.get(PODS), 80);
    let default_reserved = kube_reserved(base.capacity.get(CPU), 80);
    assert_eq!(
        m5.allocatable.get(CPU),
        base.capacity.get(CPU) - default_reserved.get(CPU) - 100
    );
    let memory = base.capacity.get(MEMORY);
    let eviction = (memory as f64 / 100.0 * 5.0).ceil() as i64;
    assert_eq!(m5.allocatable.get(MEMORY), memory - 500 * MI - eviction);
}

#[test]
fn a_class_without_capacity_settings_shares_the_catalog() {
    let plain = class(serde_json::json!({}));
    assert!(karpenter_core::catalog::nodeclass::for_node_class(catalog(), &plain).is_none());
    let bottlerocket = class(serde_json::json!({
        "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
        "kubelet": {"podsPerCore": 1}
    }));
    let adjusted = karpenter_core::catalog::nodeclass::for_node_class(catalog(), &bottlerocket)
        .expect("a kubelet setting");
    assert_eq!(
        adjusted.get("m5.xlarge").expect("type").capacity.get(PODS),
        it("m5.xlarge").capacity.get(PODS),
        "Bottlerocket ignores podsPerCore"
    );
}

#[test]
fn raid0_instance_store_is_the_ephemeral_storage_of_types_that_have_one() {
    let class = class(serde_json::json!({"instanceStorePolicy": "RAID0"}));
    let with_nvme =
        karpenter_core::catalog::nodeclass::instance_type_for(catalog(), it("m5d.large"), &class)
            .expect("launchable");
    assert_eq!(with_nvme.capacity.get(EPHEMERAL_STORAGE), 75_000_000_000);
    let without =
        karpenter_core::catalog::nodeclass::instance_type_for(catalog(), it("m5.large"), &class)
            .expect("launchable");
    assert_eq!(without.capacity.get(EPHEMERAL_STORAGE), 20 * GI);
}

#[test]
fn aws_extended_resources_come_with_the_types_that_have_them() {
    use karpenter_core::catalog::{AWS_NEURON, AWS_NEURON_CORE, EFA, NVIDIA_GPU, POD_ENI};
    let capacity = |name: &str, resource: &str| it(name).capacity.get(resource);
    // Security groups for pods: branch interfaces on trunking-compatible types only.
    assert_eq!(capacity("m5.large", POD_ENI), 9);
    assert_eq!(capacity("c6i.8xlarge", POD_ENI), 84);
    assert_eq!(capacity("m5.24xlarge", POD_ENI), 107);
    assert_eq!(capacity("t3.large", POD_ENI), 0, "burstables cannot trunk");
    assert_eq!(capacity("p3.2xlarge", POD_ENI), 0, "nor can Xen types");
    // Neuron devices and their cores, with upstream's accelerator labels.
    assert_eq!(capacity("inf2.xlarge", AWS_NEURON), 1);
    assert_eq!(capacity("inf2.xlarge", AWS_NEURON_CORE), 2);
    assert_eq!(
        label(it("inf2.xlarge"), labels::INSTANCE_ACCELERATOR_NAME_LABEL),
        "inferentia2"
    );
    assert_eq!(
        label(
            it("trn1.2xlarge"),
            labels::INSTANCE_ACCELERATOR_MANUFACTURER_LABEL
        ),
        "aws"
    );
    assert_eq!(capacity("trn1.2xlarge", NVIDIA_GPU), 0);
    // EFA on the types EC2 gives it.
    assert_eq!(capacity("c7i.48xlarge", EFA), 1);
    assert_eq!(capacity("g5.12xlarge", EFA), 1);
    assert_eq!(capacity("c7i.24xlarge", EFA), 0);
}

/// Windows nodes, as upstream's `NewInstanceType` computes them for a Windows family: os
/// `windows` and the family's build, amd64 types only, the kubelet's 110 pods (not the ENI
/// limit) with kube-reserved memory for 110, and one `vpc.amazonaws.com/PrivateIPv4Address`
/// per secondary address of the primary interface (m5.large: 10 per interface, so 9). A Linux
/// class keeps `linux` and no build label.
#[test]
fn a_windows_class_launches_amd64_types_as_windows_nodes_with_their_private_addresses() {
    use karpenter_core::catalog::PRIVATE_IPV4_ADDRESS;
    use karpenter_core::catalog::nodeclass::{for_node_class, instance_type_for};
    let windows = class(serde_json::json!({"amiSelectorTerms": [{"alias": "windows2019@latest"}]}));
    let m5 = instance_type_for(catalog(), it("m5.large"), &windows).expect("amd64");
    assert_eq!(m5.labels["kubernetes.io/os"], "windows");
    assert_eq!(m5.labels["node.kubernetes.io/windows-build"], "10.0.17763");
    assert_eq!(m5.capacity.get(PODS), 110);
    assert_eq!(m5.capacity.get(PRIVATE_IPV4_ADDRESS), 9);
    assert_eq!(m5.allocatable.get(PRIVATE_IPV4_ADDRESS), 9);
    assert_eq!(
        m5.overhead.get(MEMORY),
        kube_reserved(it("m5.large").capacity.get(CPU), 110).get(MEMORY) + 100 * MI
    );
    assert_eq!(m5.capacity.get(EPHEMERAL_STORAGE), 50 * GI);
    assert!(
        instance_type_for(catalog(), it("m6g.large"), &windows).is_none(),
        "no arm64 Windows AMI"
    );
    let adjusted = for_node_class(catalog(), &windows).expect("a Windows class has its own types");
    assert!(
        adjusted
            .instance_types
            .iter()
            .all(|t| t.labels["kubernetes.io/arch"] == "amd64")
    );
    assert!(!adjusted.instance_types.is_empty());
    let linux = it("m5.large");
    assert_eq!(linux.labels["kubernetes.io/os"], "linux");
    assert!(
        !linux
            .labels
            .contains_key("node.kubernetes.io/windows-build")
    );
    assert_eq!(linux.capacity.get(PRIVATE_IPV4_ADDRESS), 0);
}
