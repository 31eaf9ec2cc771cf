//! A small hand-made world: three instance types in two zones, a manual clock, and helpers that
//! go through the seams.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Config, FakeCloud, Pool};
use jiff::Timestamp;
use karpenter_core::catalog::{CapacityType, Catalog, InstanceType, Offering};
use karpenter_core::interruption::messages::{InterruptionMessage, parse};
use karpenter_core::resources::Resources;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Ec2, Filter, FleetOverride, Instance,
    LaunchTemplateRequest,
};
use karpenter_core::seams::sqs::{Message, Sqs};
use karpenter_core::seams::{Clock, ManualClock};

pub const ZONE_A: &str = "us-west-2a";
pub const ZONE_B: &str = "us-west-2b";
pub const LAUNCH_TEMPLATE: &str = "karpenter.k8s.aws/test";
pub const AL2023_X86: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";

pub fn start() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("timestamp")
}

pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

fn instance_type(name: &str, arch: &str, offerings: &[(&str, CapacityType, f64)]) -> InstanceType {
    InstanceType {
        name: name.to_string(),
        labels: BTreeMap::from([
            ("kubernetes.io/arch".to_string(), arch.to_string()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            (
                "node.kubernetes.io/instance-type".to_string(),
                name.to_string(),
            ),
        ]),
        capacity: Resources::new(),
        overhead: Resources::new(),
        allocatable: Resources::new(),
        offerings: offerings
            .iter()
            .map(|(zone, capacity_type, price)| Offering {
                reservation: None,
                zone: zone.to_string(),
                capacity_type: *capacity_type,
                price: *price,
                available: true,
            })
            .collect(),
    }
}

/// m5.large (cheap), m5.xlarge (dearer) in both zones; c6g.large (arm64) in zone a only.
pub fn catalog() -> Catalog {
    use CapacityType::{OnDemand, Spot};
    Catalog::new(vec![
        instance_type(
            "m5.large",
            "amd64",
            &[
                (ZONE_A, OnDemand, 0.096),
                (ZONE_A, Spot, 0.030),
                (ZONE_B, OnDemand, 0.096),
                (ZONE_B, Spot, 0.035),
            ],
        ),
        instance_type(
            "m5.xlarge",
            "amd64",
            &[
                (ZONE_A, OnDemand, 0.192),
                (ZONE_A, Spot, 0.050),
                (ZONE_B, OnDemand, 0.192),
                (ZONE_B, Spot, 0.060),
            ],
        ),
        instance_type(
            "c6g.large",
            "arm64",
            &[(ZONE_A, OnDemand, 0.068), (ZONE_A, Spot, 0.025)],
        ),
    ])
}

/// Exact timings, no consistency lag: tests that need a knob set it.
pub fn config() -> Config {
    Config {
        seed: 7,
        eventual_consistency_lag_ms: 0,
        pending_duration_ms: 10_000,
        shutting_down_duration_ms: 30_000,
        stopping_duration_ms: 20_000,
        ..Config::default()
    }
}

pub struct World {
    pub clock: Arc<ManualClock>,
    pub cloud: Arc<FakeCloud>,
}

pub fn world(config: Config) -> World {
    world_with(config, catalog())
}

pub fn world_with(config: Config, catalog: Catalog) -> World {
    let clock = Arc::new(ManualClock::new(start()));
    let cloud = Arc::new(FakeCloud::new(
        clock.clone() as Arc<dyn Clock>,
        catalog,
        config,
    ));
    World { clock, cloud }
}

impl World {
    pub fn ec2(&self) -> &dyn Ec2 {
        self.cloud.as_ref()
    }

    pub fn sqs(&self) -> &dyn Sqs {
        self.cloud.as_ref()
    }

    /// Moves the clock and lets the fake catch up, as the simulation does each step.
    pub fn advance_s(&self, seconds: u64) {
        self.advance_ms(seconds * 1000);
    }

    pub fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
        self.cloud.advance_to_now();
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Subnet id by zone, discovered by tag through the seam.
    pub fn subnets(&self) -> BTreeMap<String, String> {
        let subnets = block_on(
            self.ec2()
                .describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &["sim"])]),
        )
        .expect("subnets");
        subnets.into_iter().map(|s| (s.zone, s.subnet_id)).collect()
    }
}

/// An AL2023 `NodeConfig` (YAML, as nodeadm reads it) that joins the default config's cluster,
/// with `kubelet` (a `  kubelet:` block indented under `spec`, or empty) added.
pub fn nodeconfig(kubelet: &str) -> String {
    format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: sim\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: 10.100.0.0/16\n{kubelet}",
        fakecloud::DEFAULT_CLUSTER_ENDPOINT,
        fakecloud::DEFAULT_CLUSTER_CA_BUNDLE
    )
}

impl World {
    /// Creates the test launch template (AL2023 x86 image, `user_data`) through the seam.
    pub fn launch_template(&self, name: &str, user_data: &str) {
        self.launch_template_with(name, user_data, BTreeMap::new());
    }

    /// The test launch template with `extra` settings (capacity reservation, market type...).
    pub fn launch_template_with(
        &self,
        name: &str,
        user_data: &str,
        extra: BTreeMap<String, String>,
    ) {
        let image_id = block_on(self.ec2().get_parameter(AL2023_X86))
            .expect("parameter")
            .expect("al2023 image");
        block_on(self.ec2().create_launch_template(&LaunchTemplateRequest {
            name: name.to_string(),
            image_id,
            user_data: user_data.to_string(),
            security_group_ids: Vec::new(),
            instance_profile: "KarpenterNodeInstanceProfile".into(),
            tags: BTreeMap::new(),
            extra,
        }))
        .expect("launch template");
    }

    pub fn request(
        &self,
        capacity_type: CapacityType,
        overrides: &[(&str, &str)],
        token: &str,
    ) -> CreateFleetRequest {
        let subnets = self.subnets();
        CreateFleetRequest {
            capacity_block: false,
            capacity_type,
            launch_template_name: LAUNCH_TEMPLATE.to_string(),
            overrides: overrides
                .iter()
                .map(|(instance_type, zone)| FleetOverride {
                    instance_type: instance_type.to_string(),
                    subnet_id: subnets[*zone].clone(),
                    zone: zone.to_string(),
                    price: None,
                })
                .collect(),
            tags: BTreeMap::from([
                ("karpenter.sh/nodepool".to_string(), "default".to_string()),
                (
                    "karpenter.sh/nodeclaim".to_string(),
                    format!("claim-{token}"),
                ),
            ]),
            client_token: token.to_string(),
            context: None,
        }
    }

    /// Creates the test launch template if needed and launches through `CreateFleet`.
    pub fn fleet(
        &self,
        capacity_type: CapacityType,
        overrides: &[(&str, &str)],
        token: &str,
    ) -> CreateFleetResponse {
        let exists =
            !block_on(self.ec2().describe_launch_templates(&[Filter::new(
                "launch-template-name",
                &[LAUNCH_TEMPLATE],
            )]))
            .expect("describe templates")
            .is_empty();
        if !exists {
            self.launch_template(LAUNCH_TEMPLATE, &nodeconfig(""));
        }
        let request = self.request(capacity_type, overrides, token);
        block_on(self.ec2().create_fleet(&request)).expect("create fleet")
    }

    /// Launches one instance and returns its id.
    pub fn launch(&self, capacity_type: CapacityType, instance_type: &str, token: &str) -> String {
        let response = self.fleet(capacity_type, &[(instance_type, ZONE_A)], token);
        assert!(
            response.errors.is_empty(),
            "unexpected errors {:?}",
            response.errors
        );
        response.instances[0].instance_id.clone()
    }

    pub fn describe(&self, id: &str) -> Option<Instance> {
        block_on(self.ec2().describe_instances(&[id.to_string()], &[]))
            .expect("describe")
            .into_iter()
            .next()
    }

    /// Receives (short poll) and deletes every visible message.
    pub fn drain(&self) -> Vec<Message> {
        let mut all = Vec::new();
        loop {
            let batch = block_on(self.sqs().receive_messages(10, Duration::ZERO)).expect("receive");
            if batch.is_empty() {
                return all;
            }
            for message in &batch {
                block_on(self.sqs().delete_message(&message.receipt_handle)).expect("delete");
            }
            all.extend(batch);
        }
    }

    /// [`World::drain`], parsed with the controller's parser.
    pub fn drain_parsed(&self) -> Vec<InterruptionMessage> {
        self.drain()
            .iter()
            .map(|m| parse(&m.body).expect("fakecloud emits parseable messages"))
            .collect()
    }
}

pub fn pool(instance_type: &str, zone: &str, capacity_type: CapacityType) -> Pool {
    Pool::new(instance_type, zone, capacity_type)
}

/// Standard base64, for user data.
pub fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let bits = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((bits >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
