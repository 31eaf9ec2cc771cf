//! The boot model and what the kubelet would register with.

use fakecloud::{BootModel, Config, Taint, parse_user_data};
use jiff::SignedDuration;
use karpenter_core::catalog::CapacityType::{OnDemand, Spot};

use super::support::{LAUNCH_TEMPLATE, base64, config, nodeconfig, world};

fn fixed_boot(ms: u64) -> Config {
    Config {
        boot: BootModel {
            boot_duration_ms_min: ms,
            boot_duration_ms_max: ms,
            ..BootModel::default()
        },
        ..config()
    }
}

#[test]
fn an_instance_is_ready_to_join_once_running_and_booted() {
    let w = world(fixed_boot(45_000));
    let id = w.launch(OnDemand, "m5.large", "1");
    let boot = w.cloud.boot(&id).expect("boot");
    assert_eq!(boot.ready_at, Some(w.now() + SignedDuration::from_secs(45)));
    assert_eq!(boot.provider_id, format!("aws:///us-west-2a/{id}"));
    w.advance_s(44);
    assert!(w.cloud.ready_to_join().is_empty());
    w.advance_s(1);
    let ready = w.cloud.ready_to_join();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].instance_id, id);

    block_on_terminate(&w, &id);
    assert!(
        w.cloud.ready_to_join().is_empty(),
        "a terminating instance does not join"
    );
}

fn block_on_terminate(w: &super::support::World, id: &str) {
    super::support::block_on(w.ec2().terminate_instances(&[id.to_string()])).expect("terminate");
}

#[test]
fn a_boot_never_finishes_before_the_instance_is_running() {
    let w = world(fixed_boot(1_000));
    let id = w.launch(OnDemand, "m5.large", "1");
    assert_eq!(
        w.cloud.boot(&id).expect("boot").ready_at,
        Some(w.now() + SignedDuration::from_secs(10))
    );
}

#[test]
fn the_never_boot_fraction_leaves_instances_that_never_join() {
    let w = world(Config {
        boot: BootModel {
            never_boot_fraction: 1.0,
            ..BootModel::default()
        },
        ..config()
    });
    let id = w.launch(Spot, "m5.large", "1");
    assert_eq!(w.cloud.boot(&id).expect("boot").ready_at, None);
    w.advance_s(3600);
    assert!(w.cloud.ready_to_join().is_empty());
}

#[test]
fn boot_durations_follow_the_configured_distribution() {
    let w = world(Config {
        boot: BootModel {
            boot_duration_ms_min: 30_000,
            boot_duration_ms_max: 60_000,
            slow_boot_fraction: 0.25,
            slow_boot_duration_ms_max: 600_000,
            never_boot_fraction: 0.1,
        },
        ..config()
    });
    let launched_at = w.now();
    let durations: Vec<Option<i64>> = (0..400)
        .map(|i| {
            let id = w.launch(OnDemand, "m5.large", &format!("{i}"));
            w.cloud
                .boot(&id)
                .expect("boot")
                .ready_at
                .map(|t| t.duration_since(launched_at).as_secs())
        })
        .collect();
    let never = durations.iter().filter(|d| d.is_none()).count();
    let slow = durations.iter().flatten().filter(|d| **d > 60).count();
    let normal = durations
        .iter()
        .flatten()
        .filter(|d| (30..=60).contains(*d))
        .count();
    assert!((20..=60).contains(&never), "never {never}");
    assert!((50..=130).contains(&slow), "slow {slow}");
    assert_eq!(never + slow + normal, 400);
    assert!(durations.iter().flatten().all(|d| (30..=600).contains(d)));
}

#[test]
fn the_kubelet_registers_with_well_known_labels_plus_the_user_data_labels_and_taints() {
    let user_data = r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: sim
    apiServerEndpoint: https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com
    certificateAuthority: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUZha2VjbG91ZENBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K
    cidr: 10.100.0.0/16
  kubelet:
    config:
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
      - effect: NoSchedule
        key: dedicated
        value: gpu
    flags:
    - --node-labels="karpenter.sh/nodepool=default,team=a"

--//--
"#;
    let w = world(config());
    w.launch_template(LAUNCH_TEMPLATE, user_data);
    let id = w.launch(OnDemand, "c6g.large", "1");
    let boot = w.cloud.boot(&id).expect("boot");
    assert_eq!(boot.user_data, user_data);
    assert_eq!(boot.labels["karpenter.sh/nodepool"], "default");
    assert_eq!(boot.labels["team"], "a");
    assert_eq!(boot.labels["kubernetes.io/arch"], "arm64");
    assert_eq!(boot.labels["kubernetes.io/os"], "linux");
    assert_eq!(boot.labels["node.kubernetes.io/instance-type"], "c6g.large");
    assert_eq!(boot.labels["topology.kubernetes.io/zone"], "us-west-2a");
    assert_eq!(boot.labels["topology.kubernetes.io/region"], "us-west-2");
    assert_eq!(boot.labels["kubernetes.io/hostname"], boot.private_dns_name);
    assert_eq!(
        boot.taints,
        vec![
            Taint {
                key: "dedicated".into(),
                value: "gpu".into(),
                effect: "NoSchedule".into()
            },
            Taint {
                key: "karpenter.sh/unregistered".into(),
                value: String::new(),
                effect: "NoExecute".into()
            },
        ]
    );
}

#[test]
fn base64_user_data_with_bootstrap_flags_is_decoded() {
    // nodeadm (the AL2023 image's bootstrap) reads kubelet flags from the NodeConfig.
    let script = nodeconfig(
        "  kubelet:\n    flags:\n    - --node-labels=\"a=1,b=2\"\n    - --register-with-taints=\"x=y:NoSchedule,z:NoExecute\"\n",
    );
    let script = script.as_str();
    let w = world(config());
    w.launch_template(LAUNCH_TEMPLATE, &base64(script));
    let id = w.launch(OnDemand, "m5.large", "1");
    let boot = w.cloud.boot(&id).expect("boot");
    assert_eq!(boot.user_data, script);
    assert_eq!(boot.labels["a"], "1");
    assert_eq!(boot.labels["b"], "2");
    assert_eq!(
        boot.taints,
        vec![
            Taint {
                key: "x".into(),
                value: "y".into(),
                effect: "NoSchedule".into()
            },
            Taint {
                key: "z".into(),
                value: String::new(),
                effect: "NoExecute".into()
            },
        ]
    );
}

#[test]
fn bottlerocket_settings_give_labels_and_taints() {
    let toml = r#"[settings.kubernetes]
cluster-name = "sim"

[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "br"

[settings.kubernetes.node-taints]
"dedicated" = ["infra:NoSchedule"]
"#;
    let registration = parse_user_data(toml);
    assert_eq!(registration.labels["karpenter.sh/nodepool"], "br");
    assert_eq!(
        registration.taints,
        vec![Taint {
            key: "dedicated".into(),
            value: "infra".into(),
            effect: "NoSchedule".into()
        }]
    );
    assert!(parse_user_data("").labels.is_empty());
}
