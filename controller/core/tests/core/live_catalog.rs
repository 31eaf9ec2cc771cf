//! The live catalog: `DescribeInstanceTypes`-shaped answers computed into the solver's catalog
//! (equal to the built-in one for the built-in types), and the refresher's intervals and
//! fallbacks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use karpenter_core::catalog::builtin;
use karpenter_core::catalog::live::{
    self, CatalogInputs, LiveCatalog, ON_DEMAND_FALLBACK_RETRY_INTERVAL,
    ON_DEMAND_PRICES_REFRESH_INTERVAL, PriceSource, SPOT_PRICES_REFRESH_INTERVAL,
};
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::seams::ManualClock;
use karpenter_core::seams::catalog::{
    CatalogError, CatalogSource, InstanceTypeInfo, SpotPrice, ZoneOffering,
};

fn builtin_inputs() -> CatalogInputs {
    let catalog = Catalog::builtin_ref();
    let mut inputs = CatalogInputs {
        instance_types: builtin::instance_type_infos(),
        on_demand_prices: builtin::on_demand_prices(),
        zone_ids: builtin::zone_ids(),
        ..CatalogInputs::default()
    };
    for it in &catalog.instance_types {
        for offering in &it.offerings {
            match offering.capacity_type {
                CapacityType::OnDemand => inputs.zone_offerings.push(ZoneOffering {
                    instance_type: it.name.clone(),
                    zone: offering.zone.clone(),
                }),
                CapacityType::Spot => inputs.spot_prices.push(SpotPrice {
                    instance_type: it.name.clone(),
                    zone: offering.zone.clone(),
                    price: offering.price,
                    timestamp: Timestamp::UNIX_EPOCH,
                }),
                CapacityType::Reserved => {}
            }
        }
    }
    inputs
}

#[test]
fn a_catalog_built_from_the_builtin_types_answers_equals_the_builtin_catalog() {
    let built = live::build(builtin::REGION, &builtin_inputs());
    let expected = Catalog::builtin_ref();
    assert_eq!(built.instance_types.len(), expected.instance_types.len());
    for (got, want) in built.instance_types.iter().zip(&expected.instance_types) {
        assert_eq!(got, want, "{}", want.name);
    }
}

#[test]
fn offerings_without_a_price_and_types_of_other_architectures_are_left_out() {
    let mut inputs = builtin_inputs();
    inputs
        .spot_prices
        .retain(|p| !(p.instance_type == "m5.large" && p.zone == "us-west-2b"));
    inputs.on_demand_prices.remove("c5.large");
    let mut mac = inputs.instance_types[0].clone();
    mac.instance_type = "mac1.metal".into();
    mac.architectures = vec!["x86_64_mac".into()];
    inputs.instance_types.push(mac);
    inputs.zone_offerings.push(ZoneOffering {
        instance_type: "mac1.metal".into(),
        zone: "us-west-2a".into(),
    });
    let built = live::build("us-west-2", &inputs);
    let m5 = built.get("m5.large").expect("m5.large");
    assert!(
        !m5.offerings
            .iter()
            .any(|o| o.zone == "us-west-2b" && o.capacity_type == CapacityType::Spot)
    );
    assert_eq!(m5.offerings.len(), 5);
    let c5 = built
        .get("c5.large")
        .expect("c5.large stays: it has spot offerings");
    assert!(
        c5.offerings
            .iter()
            .all(|o| o.capacity_type == CapacityType::Spot)
    );
    assert!(built.get("mac1.metal").is_none());
}

#[test]
fn labels_follow_the_region_the_catalog_is_built_for() {
    let mut inputs = builtin_inputs();
    for offering in &mut inputs.zone_offerings {
        offering.zone = offering.zone.replace("us-west-2", "eu-west-1");
    }
    for price in &mut inputs.spot_prices {
        price.zone = price.zone.replace("us-west-2", "eu-west-1");
    }
    let built = live::build("eu-west-1", &inputs);
    let it = built.get("m5.large").expect("m5.large");
    assert_eq!(it.labels["topology.kubernetes.io/region"], "eu-west-1");
    assert_eq!(it.offerings[0].zone, "eu-west-1a");
}

/// A source answering from fixed inputs, counting calls, with switchable failures.
struct Source {
    inputs: Mutex<CatalogInputs>,
    calls: BTreeMap<&'static str, AtomicUsize>,
    pricing_reachable: Mutex<bool>,
    spot_throttled: Mutex<bool>,
}

impl Source {
    fn new(pricing_reachable: bool) -> Arc<Self> {
        Arc::new(Self {
            inputs: Mutex::new(builtin_inputs()),
            calls: ["types", "zones", "spot", "on-demand"]
                .into_iter()
                .map(|k| (k, AtomicUsize::new(0)))
                .collect(),
            pricing_reachable: Mutex::new(pricing_reachable),
            spot_throttled: Mutex::new(false),
        })
    }

    fn count(&self, call: &str) -> usize {
        self.calls[call].load(Ordering::SeqCst)
    }

    fn called(&self, call: &str) {
        self.calls[call].fetch_add(1, Ordering::SeqCst);
    }

    fn inputs(&self) -> CatalogInputs {
        self.inputs.lock().unwrap().clone()
    }
}

#[async_trait]
impl CatalogSource for Source {
    async fn instance_types(&self) -> Result<Vec<InstanceTypeInfo>, CatalogError> {
        self.called("types");
        Ok(self.inputs().instance_types)
    }

    async fn zone_offerings(&self) -> Result<Vec<ZoneOffering>, CatalogError> {
        self.called("zones");
        Ok(self.inputs().zone_offerings)
    }

    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, CatalogError> {
        self.called("spot");
        if *self.spot_throttled.lock().unwrap() {
            return Err(CatalogError::Throttled("RequestLimitExceeded".into()));
        }
        Ok(self.inputs().spot_prices)
    }

    async fn on_demand_prices(&self) -> Result<BTreeMap<String, f64>, CatalogError> {
        self.called("on-demand");
        if !*self.pricing_reachable.lock().unwrap() {
            return Err(CatalogError::Unavailable("connect timeout".into()));
        }
        let mut prices = self.inputs().on_demand_prices;
        // Distinguishable from the built-in table.
        for price in prices.values_mut() {
            *price *= 2.0;
        }
        Ok(prices)
    }

    async fn zone_ids(&self) -> Result<BTreeMap<String, String>, CatalogError> {
        Ok(self.inputs().zone_ids)
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

#[test]
fn the_live_catalog_loads_everything_at_start_then_each_part_on_its_interval() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::from_second(1_750_000_000).unwrap(),
    ));
    let source = Source::new(true);
    let mut live = LiveCatalog::new(source.clone(), clock.clone(), "us-west-2");
    assert!(live.catalog().is_none());
    assert!(block_on(live.refresh()).expect("first refresh"));
    assert_eq!(live.price_source(), PriceSource::PricingApi);
    let m5 = live.catalog().unwrap().get("m5.large").unwrap().clone();
    let od = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand)
        .unwrap();
    assert_eq!(od.price, 0.192, "the Pricing API's price, not the table's");

    // Nothing is due a minute later.
    clock.advance(Duration::from_secs(60));
    assert!(!block_on(live.refresh()).unwrap());
    assert_eq!(source.count("spot"), 1);

    // A spot price moves; it shows up once the spot interval is over, types are not re-read.
    source.inputs.lock().unwrap().spot_prices[0].price = 0.001;
    clock.advance(SPOT_PRICES_REFRESH_INTERVAL);
    assert!(block_on(live.refresh()).unwrap());
    assert_eq!(source.count("spot"), 2);
    assert_eq!(source.count("types"), 1);
    assert_eq!(source.count("on-demand"), 1);

    clock.advance(ON_DEMAND_PRICES_REFRESH_INTERVAL);
    block_on(live.refresh()).unwrap();
    assert_eq!(source.count("types"), 2);
    assert_eq!(source.count("zones"), 2);
    assert_eq!(source.count("on-demand"), 2);
}

#[test]
fn an_unreachable_pricing_api_falls_back_to_the_builtin_prices_and_is_asked_again_hourly() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::from_second(1_750_000_000).unwrap(),
    ));
    let source = Source::new(false);
    let mut live = LiveCatalog::new(source.clone(), clock.clone(), builtin::REGION);
    block_on(live.refresh()).expect("pricing failures are not errors");
    assert_eq!(live.price_source(), PriceSource::BuiltIn);
    assert_eq!(&*live.catalog().unwrap(), Catalog::builtin_ref());
    *source.pricing_reachable.lock().unwrap() = true;
    clock.advance(ON_DEMAND_FALLBACK_RETRY_INTERVAL);
    assert!(block_on(live.refresh()).unwrap());
    assert_eq!(source.count("on-demand"), 2);
    assert_eq!(live.price_source(), PriceSource::PricingApi);
}

#[test]
fn a_failed_spot_refresh_keeps_the_previous_catalog_and_reports_the_error() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::from_second(1_750_000_000).unwrap(),
    ));
    let source = Source::new(true);
    let mut live = LiveCatalog::new(source.clone(), clock.clone(), "us-west-2");
    block_on(live.refresh()).unwrap();
    let before = live.catalog().unwrap();
    *source.spot_throttled.lock().unwrap() = true;
    clock.advance(SPOT_PRICES_REFRESH_INTERVAL);
    let error = block_on(live.refresh()).expect_err("throttled");
    assert!(matches!(error, CatalogError::Throttled(_)));
    assert_eq!(live.catalog().unwrap(), before);
    // Retried on the next call, not an hour later.
    *source.spot_throttled.lock().unwrap() = false;
    block_on(live.refresh()).unwrap();
    assert_eq!(source.count("spot"), 3);
}

#[test]
fn a_first_refresh_that_fails_leaves_no_catalog() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::from_second(1_750_000_000).unwrap(),
    ));
    let source = Source::new(true);
    *source.spot_throttled.lock().unwrap() = true;
    let mut live = LiveCatalog::new(source, clock, "us-west-2");
    assert!(block_on(live.refresh()).is_err());
    assert!(live.catalog().is_none());
}

#[test]
fn amd_and_habana_gpus_and_neuron_devices_become_their_device_plugins_resources_and_labels() {
    use karpenter_core::api::labels;
    use karpenter_core::catalog::{AMD_GPU, AWS_NEURON_CORE, EFA, HABANA_GAUDI, NVIDIA_GPU};
    use karpenter_core::catalog::{CapacityType, Offering};
    use karpenter_core::seams::catalog::{Gpu, NeuronDevice};
    let offering = vec![Offering {
        reservation: None,
        zone: "us-west-2a".into(),
        capacity_type: CapacityType::OnDemand,
        price: 1.0,
        available: true,
    }];
    let base = builtin::instance_type_infos()
        .into_iter()
        .find(|i| i.instance_type == "m5.4xlarge")
        .expect("m5.4xlarge");
    let amd = InstanceTypeInfo {
        instance_type: "g4ad.16xlarge".into(),
        gpus: vec![Gpu {
            name: "Radeon Pro V520".into(),
            manufacturer: "AMD".into(),
            count: 4,
            memory_mib: 8192,
        }],
        ..base.clone()
    };
    let it = live::instance_type("us-west-2", &amd, offering.clone()).expect("type");
    assert_eq!(it.capacity.get(AMD_GPU), 4);
    assert_eq!(it.capacity.get(NVIDIA_GPU), 0);
    assert_eq!(
        it.labels[labels::INSTANCE_GPU_NAME_LABEL],
        "radeon-pro-v520"
    );
    assert_eq!(it.labels[labels::INSTANCE_GPU_MANUFACTURER_LABEL], "amd");
    let gaudi = InstanceTypeInfo {
        instance_type: "dl1.24xlarge".into(),
        gpus: vec![Gpu {
            name: "Gaudi HL-205".into(),
            manufacturer: "Habana".into(),
            count: 8,
            memory_mib: 32768,
        }],
        efa_interfaces: 4,
        ..base.clone()
    };
    let it = live::instance_type("us-west-2", &gaudi, offering.clone()).expect("type");
    assert_eq!(it.capacity.get(HABANA_GAUDI), 8);
    assert_eq!(it.capacity.get(EFA), 4);
    let trainium = InstanceTypeInfo {
        instance_type: "trn1.32xlarge".into(),
        neuron_devices: vec![NeuronDevice {
            name: "Trainium".into(),
            count: 16,
            cores_per_device: 2,
        }],
        ..base
    };
    let it = live::instance_type("us-west-2", &trainium, offering).expect("type");
    assert_eq!(it.capacity.get(AWS_NEURON_CORE), 32);
    assert_eq!(it.labels[labels::INSTANCE_ACCELERATOR_COUNT_LABEL], "16");
    assert_eq!(
        it.capacity.get(karpenter_core::catalog::POD_ENI),
        0,
        "a type the branch table does not know promises no pod-eni"
    );
}
