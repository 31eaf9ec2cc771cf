//! User data per AMI family (`nodeclass::userdata`) and the cluster's join data
//! (`nodeclass::cluster`), checked against fakecloud's strict bootstrap parsers: what the
//! controller writes must be what nodeadm, bootstrap.sh, Bottlerocket and Start-EKSBootstrap.ps1
//! accept for this cluster.

use std::collections::BTreeMap;

use base64::Engine;
use fakecloud::bootstrap::{BootFamily, ClusterIdentity, JoinError, join};
use karpenter_core::api::common::{Taint, TaintEffect};
use karpenter_core::api::ec2nodeclass::{AmiFamily, KubeletConfiguration};
use karpenter_core::nodeclass::cluster::{ClusterInfo, ClusterInfoError};
use karpenter_core::nodeclass::userdata::{
    BootstrapInput, generate, kubelet_labels, labels_to_sync, merge,
};

pub const ENDPOINT: &str = "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com";
pub const CIDR: &str = "10.100.0.0/16";

pub fn ca_bundle() -> String {
    base64::engine::general_purpose::STANDARD.encode(
        "-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBADANBgkq\n-----END CERTIFICATE-----\n",
    )
}

pub fn cluster() -> ClusterInfo {
    ClusterInfo::new("demo", ENDPOINT, &ca_bundle(), Some(CIDR), None).unwrap()
}

fn identity() -> ClusterIdentity {
    ClusterIdentity {
        name: "demo".into(),
        endpoint: ENDPOINT.into(),
        ca_bundle: ca_bundle(),
        cidr: CIDR.into(),
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("karpenter.sh/nodepool".into(), "default".into()),
        ("karpenter.sh/capacity-type".into(), "spot".into()),
        ("team".into(), "a".into()),
        ("node-role.kubernetes.io/worker".into(), "".into()),
        ("node-restriction.kubernetes.io/pci".into(), "true".into()),
        ("topology.kubernetes.io/zone".into(), "us-west-2a".into()),
    ])
}

fn taints() -> Vec<Taint> {
    vec![Taint {
        key: "example.com/special-taint".into(),
        value: Some("true".into()),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }]
}

fn input<'a>(cluster: &'a ClusterInfo, user_data: Option<&'a str>) -> BootstrapInput<'a> {
    BootstrapInput {
        cluster,
        labels: labels(),
        taints: taints(),
        kubelet: None,
        user_data,
        raid0: false,
    }
}

fn boot(family: AmiFamily) -> BootFamily {
    match family {
        AmiFamily::AL2023 => BootFamily::Al2023,
        AmiFamily::AL2 => BootFamily::Al2,
        AmiFamily::Bottlerocket => BootFamily::Bottlerocket,
        AmiFamily::Custom => BootFamily::Custom,
        _ => BootFamily::Windows,
    }
}

#[test]
fn the_cluster_dns_ip_is_the_tenth_address_of_the_service_cidr_as_eks_assigns_it() {
    assert_eq!(cluster().dns_ip.to_string(), "10.100.0.10");
    let v6 = ClusterInfo::new("c", ENDPOINT, &ca_bundle(), Some("fd00:10:96::/112"), None).unwrap();
    assert_eq!(v6.dns_ip.to_string(), "fd00:10:96::a");
    let given =
        ClusterInfo::new("c", ENDPOINT, &ca_bundle(), Some(CIDR), Some("10.100.0.53")).unwrap();
    assert_eq!(given.dns_ip.to_string(), "10.100.0.53");
}

#[test]
fn bad_cluster_values_are_clear_errors_before_any_launch() {
    let ca = ca_bundle();
    let err =
        |name, ep, ca: &str, cidr, dns| ClusterInfo::new(name, ep, ca, cidr, dns).unwrap_err();
    assert_eq!(
        err(" ", ENDPOINT, &ca, Some(CIDR), None),
        ClusterInfoError::EmptyName
    );
    assert!(matches!(
        err("c", "http://x", &ca, Some(CIDR), None),
        ClusterInfoError::Endpoint(..)
    ));
    assert!(matches!(
        err("c", ENDPOINT, "%%%", Some(CIDR), None),
        ClusterInfoError::CaBundle(_)
    ));
    assert!(matches!(
        err("c", ENDPOINT, "aGVsbG8=", Some(CIDR), None),
        ClusterInfoError::CaBundle(_)
    ));
    assert!(matches!(
        err("c", ENDPOINT, &ca, Some("10.100.0.1/16"), None),
        ClusterInfoError::Cidr(..)
    ));
    assert!(matches!(
        err("c", ENDPOINT, &ca, Some("10.100.0.0"), None),
        ClusterInfoError::Cidr(..)
    ));
    assert!(matches!(
        err("c", ENDPOINT, &ca, Some(CIDR), Some("10.200.0.10")),
        ClusterInfoError::Dns(..)
    ));
    assert_eq!(
        err("c", ENDPOINT, &ca, None, None),
        ClusterInfoError::NoNetwork
    );
}

#[test]
fn labels_the_kubelet_may_not_set_are_left_out_of_the_bootstrap_and_synced_after_registration() {
    let passed = kubelet_labels(&labels());
    let synced = labels_to_sync(&labels());
    assert!(passed.contains_key("team") && passed.contains_key("karpenter.sh/nodepool"));
    for restricted in [
        "node-role.kubernetes.io/worker",
        "node-restriction.kubernetes.io/pci",
        "topology.kubernetes.io/zone",
    ] {
        assert!(
            !passed.contains_key(restricted),
            "{restricted} passed to the kubelet"
        );
        assert!(synced.contains_key(restricted), "{restricted} not synced");
    }
    assert_eq!(passed.len() + synced.len(), labels().len());
}

/// Review finding 1 and 3: every family's user data joins the cluster, with the claim's labels
/// (filtered) and taints, the unregistered taint, and the cluster DNS.
#[test]
fn finding_1_and_3_every_family_writes_user_data_its_bootstrap_accepts_for_this_cluster() {
    let cluster = cluster();
    for family in [
        AmiFamily::AL2023,
        AmiFamily::AL2,
        AmiFamily::Bottlerocket,
        AmiFamily::Windows2022,
    ] {
        let text = generate(family, &input(&cluster, None)).unwrap();
        let view = join(boot(family), &text, &identity())
            .unwrap_or_else(|e| panic!("{family:?} rejected: {e}\n{text}"));
        assert_eq!(
            view.labels.get("team").map(String::as_str),
            Some("a"),
            "{family:?}"
        );
        assert_eq!(
            view.labels
                .get("karpenter.sh/do-not-sync-taints")
                .map(String::as_str),
            Some("true")
        );
        assert!(
            !view.labels.contains_key("node-role.kubernetes.io/worker"),
            "{family:?}"
        );
        let keys: Vec<&str> = view.taints.iter().map(|t| t.key.as_str()).collect();
        assert!(
            keys.contains(&"example.com/special-taint"),
            "{family:?}: {keys:?}"
        );
        assert!(
            keys.contains(&"karpenter.sh/unregistered"),
            "{family:?}: {keys:?}"
        );
        assert_eq!(
            view.cluster_dns,
            vec!["10.100.0.10".to_string()],
            "{family:?}"
        );
    }
}

/// Review finding 1: the NodeConfig karpenter-rs wrote before (cluster name only) never joins.
#[test]
fn finding_1_the_bare_nodeconfig_of_before_is_rejected_by_nodeadm() {
    let before = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n  kubelet:\n    flags:\n      - --node-labels=team=a\n      - --register-with-taints=karpenter.sh/unregistered=:NoExecute\n";
    let err = join(BootFamily::Al2023, before, &identity()).unwrap_err();
    assert!(matches!(err, JoinError::Rejected(_)), "{err}");
    // And the same YAML on a Bottlerocket or AL2 AMI is not even read.
    assert!(join(BootFamily::Bottlerocket, before, &identity()).is_err());
    assert!(join(BootFamily::Al2, before, &identity()).is_err());
}

#[test]
fn user_data_for_another_clusters_endpoint_never_joins() {
    let other = ClusterInfo::new(
        "demo",
        "https://other.eks.amazonaws.com",
        &ca_bundle(),
        Some(CIDR),
        None,
    )
    .unwrap();
    for family in [
        AmiFamily::AL2023,
        AmiFamily::AL2,
        AmiFamily::Bottlerocket,
        AmiFamily::Windows2019,
    ] {
        let text = generate(family, &input(&other, None)).unwrap();
        let err = join(boot(family), &text, &identity()).unwrap_err();
        assert!(
            matches!(err, JoinError::WrongCluster(_)),
            "{family:?}: {err}"
        );
    }
}

#[test]
fn al2023_keeps_the_users_shell_script_as_a_part_before_karpenters_nodeconfig() {
    let cluster = cluster();
    let text = generate(
        AmiFamily::AL2023,
        &input(&cluster, Some("#!/bin/bash\necho hello\n")),
    )
    .unwrap();
    let parts = merge::parse(&text).unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts[0].content_type.starts_with("text/x-shellscript"));
    assert_eq!(parts[0].content, "#!/bin/bash\necho hello\n");
    assert_eq!(parts[1].content_type, merge::CONTENT_TYPE_NODECONFIG);
    for needle in [
        ENDPOINT,
        CIDR,
        &ca_bundle(),
        "clusterDNS",
        "registerWithTaints",
    ] {
        assert!(
            parts[1].content.contains(needle),
            "NodeConfig lacks {needle}:\n{}",
            parts[1].content
        );
    }
    assert!(text.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\""));
}

#[test]
fn al2023_takes_a_users_yaml_as_a_nodeconfig_part_and_keeps_mime_parts_in_order() {
    let cluster = cluster();
    let yaml = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n";
    let text = generate(AmiFamily::AL2023, &input(&cluster, Some(yaml))).unwrap();
    let parts = merge::parse(&text).unwrap();
    assert_eq!(parts[0].content_type, merge::CONTENT_TYPE_NODECONFIG);
    assert_eq!(parts[0].content, yaml);
    let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho one\n--BOUNDARY\nContent-Type: text/cloud-config\n\nruncmd: []\n--BOUNDARY--\n";
    let text = generate(AmiFamily::AL2023, &input(&cluster, Some(mime))).unwrap();
    let types: Vec<String> = merge::parse(&text)
        .unwrap()
        .into_iter()
        .map(|p| p.content_type)
        .collect();
    assert_eq!(
        types,
        [
            "text/x-shellscript",
            "text/cloud-config",
            merge::CONTENT_TYPE_NODECONFIG
        ]
    );
    join(BootFamily::Al2023, &text, &identity()).unwrap();
    let broken = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho\n";
    assert!(generate(AmiFamily::AL2023, &input(&cluster, Some(broken))).is_err());
}

#[test]
fn al2_runs_the_users_script_before_bootstrap_sh() {
    let cluster = cluster();
    let text = generate(
        AmiFamily::AL2,
        &input(&cluster, Some("#!/bin/bash\necho first\n")),
    )
    .unwrap();
    let parts = merge::parse(&text).unwrap();
    assert_eq!(parts[0].content, "#!/bin/bash\necho first\n");
    assert!(
        parts[1]
            .content
            .contains("/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint")
    );
    assert!(parts[1].content.contains("--dns-cluster-ip '10.100.0.10'"));
    join(BootFamily::Al2, &text, &identity()).unwrap();
}

#[test]
fn bottlerocket_merges_the_users_toml_and_overwrites_the_cluster_settings() {
    let cluster = cluster();
    let user = "[settings.kubernetes]\ncluster-name = 'wrong'\n[settings.kubernetes.node-labels]\nmine = 'yes'\n[settings.network]\nhostname = 'test.local'\n";
    let text = generate(AmiFamily::Bottlerocket, &input(&cluster, Some(user))).unwrap();
    let table: toml::Table = text.parse().unwrap();
    let k8s = &table["settings"]["kubernetes"];
    assert_eq!(k8s["cluster-name"].as_str(), Some("demo"));
    assert_eq!(k8s["api-server"].as_str(), Some(ENDPOINT));
    assert_eq!(k8s["node-labels"]["mine"].as_str(), Some("yes"));
    assert_eq!(k8s["node-labels"]["team"].as_str(), Some("a"));
    assert_eq!(
        k8s["node-taints"]["example.com/special-taint"][0].as_str(),
        Some("true:NoSchedule")
    );
    assert_eq!(
        table["settings"]["network"]["hostname"].as_str(),
        Some("test.local")
    );
    assert!(
        generate(
            AmiFamily::Bottlerocket,
            &input(&cluster, Some("not = [toml"))
        )
        .is_err()
    );
}

#[test]
fn windows_runs_the_users_powershell_before_start_eksbootstrap() {
    let cluster = cluster();
    let user = "<powershell>\nWrite-Host 'mine'\n</powershell>";
    let text = generate(AmiFamily::Windows2022, &input(&cluster, Some(user))).unwrap();
    assert!(text.starts_with("<powershell>\nWrite-Host 'mine'\n[string]$EKSBootstrapScriptFile"));
    assert_eq!(text.matches("<powershell>").count(), 1);
    join(BootFamily::Windows, &text, &identity()).unwrap();
}

#[test]
fn custom_amis_get_the_users_user_data_verbatim_and_join_only_if_it_does() {
    let cluster = cluster();
    let mine = "#!/bin/bash\n/opt/my-bootstrap\n";
    assert_eq!(
        generate(AmiFamily::Custom, &input(&cluster, Some(mine))).unwrap(),
        mine
    );
    assert!(join(BootFamily::Custom, mine, &identity()).is_err());
    let al2 = generate(AmiFamily::AL2, &input(&cluster, None)).unwrap();
    join(BootFamily::Custom, &al2, &identity()).unwrap();
}

#[test]
fn spec_kubelet_reaches_every_family_and_max_pods_is_what_the_kubelet_starts_with() {
    let cluster = cluster();
    let kubelet = KubeletConfiguration {
        max_pods: Some(42),
        eviction_hard: Some(BTreeMap::from([("memory.available".into(), "5%".into())])),
        system_reserved: Some(BTreeMap::from([("cpu".into(), "100m".into())])),
        ..Default::default()
    };
    for family in [
        AmiFamily::AL2023,
        AmiFamily::AL2,
        AmiFamily::Bottlerocket,
        AmiFamily::Windows2025,
    ] {
        let mut i = input(&cluster, None);
        i.kubelet = Some(&kubelet);
        let text = generate(family, &i).unwrap();
        assert!(text.contains("memory.available"), "{family:?}:\n{text}");
        assert!(text.contains("100m"), "{family:?}:\n{text}");
        let view = join(boot(family), &text, &identity()).unwrap();
        assert_eq!(view.max_pods, Some(42), "{family:?}:\n{text}");
    }
}

#[test]
fn a_label_the_kubelet_refuses_makes_registration_fail_in_the_strict_world() {
    let cluster = cluster();
    // Hand-written user data that passes node-role (what karpenter-rs did before).
    let text = generate(AmiFamily::AL2023, &input(&cluster, None))
        .unwrap()
        .replace(
            "--node-labels=\"",
            "--node-labels=\"node-role.kubernetes.io/worker=,",
        );
    let err = join(BootFamily::Al2023, &text, &identity()).unwrap_err();
    assert!(matches!(err, JoinError::Kubelet(_)), "{err}");
}
