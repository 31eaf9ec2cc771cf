//! Fleet composition and CreateFleet error classification (`nodeclaim::fleet`), review findings
//! 8 and 9.

use karpenter_core::catalog::{CapacityType, Catalog, InstanceType, NVIDIA_GPU};
use karpenter_core::nodeclaim::fleet::{
    FLEET_INSTANCE_TYPES_MAX, FleetErrorClass, classify, compose, is_exotic,
};
use karpenter_core::resources::Resources;

fn cheapest(t: &InstanceType, ct: CapacityType) -> Option<f64> {
    t.offerings
        .iter()
        .filter(|o| o.capacity_type == ct && o.available)
        .map(|o| o.price)
        .min_by(f64::total_cmp)
}

fn arch(t: &InstanceType) -> &str {
    t.labels
        .get("kubernetes.io/arch")
        .map(String::as_str)
        .unwrap_or("")
}

/// Finding 9: the types were taken in alphabetical order, so the alphabetically first fixed the
/// architecture and truncation kept the alphabetically first 60.
#[test]
fn finding_9_a_fleet_holds_the_cheapest_60_types_of_one_architecture_cheapest_first() {
    let catalog = Catalog::builtin_ref();
    let all: Vec<&InstanceType> = catalog.instance_types.iter().collect();
    let fleet = compose(&all, CapacityType::OnDemand, &Resources::new(), cheapest);
    assert_eq!(fleet.len(), FLEET_INSTANCE_TYPES_MAX);
    let prices: Vec<f64> = fleet
        .iter()
        .map(|t| cheapest(t, CapacityType::OnDemand).unwrap())
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    let first_arch = arch(fleet[0]);
    assert!(fleet.iter().all(|t| arch(t) == first_arch));
    // The cheapest type of all that architecture leads, whatever its name.
    let cheapest_overall = all
        .iter()
        .filter(|t| arch(t) == first_arch && !is_exotic(t))
        .filter_map(|t| cheapest(t, CapacityType::OnDemand))
        .min_by(f64::total_cmp)
        .unwrap();
    assert_eq!(prices[0], cheapest_overall);
    assert!(fleet.iter().all(|t| !is_exotic(t)));
}

#[test]
fn gpu_types_join_a_fleet_only_when_the_claim_asks_for_gpus() {
    let catalog = Catalog::builtin_ref();
    let types: Vec<&InstanceType> = ["g4dn.xlarge", "m5.large"]
        .iter()
        .map(|n| catalog.get(n).unwrap())
        .collect();
    let names = |v: Vec<&InstanceType>| v.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(compose(
            &types,
            CapacityType::OnDemand,
            &Resources::new(),
            cheapest
        )),
        ["m5.large"]
    );
    let mut gpu = Resources::new();
    gpu.set(NVIDIA_GPU, 1);
    assert_eq!(
        names(compose(&types, CapacityType::OnDemand, &gpu, cheapest)).len(),
        2
    );
    // Nothing but exotic types: they are used rather than nothing.
    let only_gpu = [catalog.get("g4dn.xlarge").unwrap()];
    assert_eq!(
        compose(
            &only_gpu,
            CapacityType::OnDemand,
            &Resources::new(),
            cheapest
        )
        .len(),
        1
    );
}

#[test]
fn spot_types_dearer_than_the_cheapest_on_demand_option_are_dropped() {
    let catalog = Catalog::builtin_ref();
    let types: Vec<&InstanceType> = ["m5.large", "m5.xlarge"]
        .iter()
        .map(|n| catalog.get(n).unwrap())
        .collect();
    // Pretend m5.xlarge's spot price is above m5.large's on-demand price.
    let price = |t: &InstanceType, ct: CapacityType| match (t.name.as_str(), ct) {
        ("m5.xlarge", CapacityType::Spot) => Some(10.0),
        _ => cheapest(t, ct),
    };
    let fleet = compose(&types, CapacityType::Spot, &Resources::new(), price);
    assert_eq!(
        fleet.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["m5.large"]
    );
}

/// Finding 8: every CreateFleet failure was taken for a capacity error.
#[test]
fn finding_8_only_capacity_codes_are_capacity_errors() {
    for code in [
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "InsufficientFreeAddressesInSubnet",
    ] {
        assert_eq!(classify(code), FleetErrorClass::Capacity, "{code}");
    }
    for code in [
        "InvalidParameterValue",
        "InvalidAMIID.NotFound",
        "UnauthorizedOperation",
        "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
        "InvalidLaunchTemplateName.NotFoundException",
    ] {
        assert_eq!(classify(code), FleetErrorClass::Configuration, "{code}");
    }
}
