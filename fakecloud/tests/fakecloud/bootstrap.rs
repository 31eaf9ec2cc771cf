//! fakecloud's strict bootstrap parsers on hand-written user data: what each real bootstrap
//! accepts joins, and each reason a real node would not join is an error.

use fakecloud::bootstrap::{BootFamily, ClusterIdentity, JoinError, join};

// base64 of "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n"
const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClgKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

fn cluster() -> ClusterIdentity {
    ClusterIdentity {
        name: "demo".into(),
        endpoint: "https://api.demo".into(),
        ca_bundle: CA.into(),
        cidr: "10.100.0.0/16".into(),
    }
}

fn nodeconfig(extra_cluster: &str) -> String {
    format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n{extra_cluster}  kubelet:\n    config:\n      maxPods: 29\n      registerWithTaints:\n      - key: a\n        value: b\n        effect: NoSchedule\n    flags:\n    - --node-labels=\"team=x\"\n"
    )
}

const FULL: &str = "    apiServerEndpoint: https://api.demo\n    certificateAuthority: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClgKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\n    cidr: 10.100.0.0/16\n";

#[test]
fn nodeadm_accepts_a_complete_nodeconfig_and_reports_the_kubelets_labels_taints_and_max_pods() {
    let view = join(BootFamily::Al2023, &nodeconfig(FULL), &cluster()).unwrap();
    assert_eq!(view.labels["team"], "x");
    assert_eq!(view.max_pods, Some(29));
    assert_eq!(view.taints.len(), 1);
    assert_eq!(view.taints[0].effect, "NoSchedule");
}

#[test]
fn nodeadm_rejects_a_nodeconfig_missing_any_required_cluster_field() {
    for drop in ["apiServerEndpoint", "certificateAuthority", "cidr"] {
        let partial: String = FULL
            .lines()
            .filter(|l| !l.contains(drop))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = join(BootFamily::Al2023, &nodeconfig(&partial), &cluster()).unwrap_err();
        assert!(matches!(err, JoinError::Rejected(_)), "{drop}: {err}");
    }
}

#[test]
fn a_wrong_ca_or_cidr_never_joins() {
    let wrong_ca = FULL.replace(CA, "d3Jvbmc=");
    assert!(matches!(
        join(BootFamily::Al2023, &nodeconfig(&wrong_ca), &cluster()),
        Err(JoinError::WrongCluster(_))
    ));
    let wrong_cidr = FULL.replace("10.100.0.0/16", "172.20.0.0/16");
    assert!(matches!(
        join(BootFamily::Al2023, &nodeconfig(&wrong_cidr), &cluster()),
        Err(JoinError::WrongCluster(_))
    ));
}

#[test]
fn bootstrap_sh_needs_the_endpoint_and_ca_flags() {
    let good = format!(
        "#!/bin/bash\n/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://api.demo' --b64-cluster-ca '{CA}' \\\n--kubelet-extra-args '--node-labels=team=x --register-with-taints=a=b:NoExecute --max-pods=17'\n"
    );
    let view = join(BootFamily::Al2, &good, &cluster()).unwrap();
    assert_eq!(
        (view.labels["team"].as_str(), view.max_pods),
        ("x", Some(17))
    );
    let bare = "#!/bin/bash\n/etc/eks/bootstrap.sh demo\n";
    assert!(matches!(
        join(BootFamily::Al2, bare, &cluster()),
        Err(JoinError::Rejected(_))
    ));
    assert!(join(BootFamily::Al2, "echo hi", &cluster()).is_err());
}

#[test]
fn bottlerocket_needs_api_server_and_cluster_certificate() {
    let good = format!(
        "[settings.kubernetes]\ncluster-name = 'demo'\napi-server = 'https://api.demo'\ncluster-certificate = '{CA}'\n[settings.kubernetes.node-taints]\n'a' = ['b:NoSchedule']\n"
    );
    assert_eq!(
        join(BootFamily::Bottlerocket, &good, &cluster())
            .unwrap()
            .taints[0]
            .key,
        "a"
    );
    let partial = "[settings.kubernetes]\ncluster-name = 'demo'\n";
    assert!(matches!(
        join(BootFamily::Bottlerocket, partial, &cluster()),
        Err(JoinError::Rejected(_))
    ));
}

#[test]
fn windows_needs_start_eksbootstrap_with_the_cluster_values() {
    let good = format!(
        "<powershell>\n& 'C:\\Program Files\\Amazon\\EKS\\Start-EKSBootstrap.ps1' -EKSClusterName 'demo' -APIServerEndpoint 'https://api.demo' -Base64ClusterCA '{CA}' -KubeletExtraArgs '--node-labels=\"team=x\"'\n</powershell>\n"
    );
    assert_eq!(
        join(BootFamily::Windows, &good, &cluster()).unwrap().labels["team"],
        "x"
    );
    let no_ca = good.replace(&format!("-Base64ClusterCA '{CA}'"), "");
    assert!(join(BootFamily::Windows, &no_ca, &cluster()).is_err());
}

#[test]
fn the_kubelet_refuses_node_role_and_node_restriction_labels_but_allows_its_own() {
    let with = |label: &str| nodeconfig(FULL).replace("team=x", label);
    for refused in [
        "node-role.kubernetes.io/worker=",
        "node-restriction.kubernetes.io/a=b",
        "example.k8s.io/x=y",
    ] {
        let err = join(BootFamily::Al2023, &with(refused), &cluster()).unwrap_err();
        assert!(matches!(err, JoinError::Kubelet(_)), "{refused}: {err}");
    }
    for allowed in [
        "kubernetes.io/arch=amd64",
        "node.kubernetes.io/instance-type=m5.large",
        "topology.kubernetes.io/zone=z",
    ] {
        join(BootFamily::Al2023, &with(allowed), &cluster()).unwrap();
    }
}

#[test]
fn eks_describes_the_cluster_whose_values_the_bootstrap_check_accepts() {
    // A controller that discovers its cluster through EKS (the real binary against `serve`) must
    // get exactly what a node's user data has to carry to join.
    use karpenter_core::seams::Eks;
    let config = super::support::config();
    let identity = config.cluster_identity();
    let clock = std::sync::Arc::new(karpenter_core::seams::ManualClock::new(
        super::support::start(),
    ));
    let account = fakecloud::Account::new(clock, super::support::catalog(), config.clone());
    let described = super::support::block_on(account.eks.describe_cluster(&identity.name))
        .expect("the world's cluster is described");
    assert_eq!(described.endpoint, identity.endpoint);
    assert_eq!(described.certificate_authority, identity.ca_bundle);
    assert_eq!(
        described.service_ipv4_cidr.as_deref(),
        Some(identity.cidr.as_str())
    );
}

#[test]
fn a_launch_needs_an_existing_instance_profile_whose_role_the_cluster_admits() {
    use karpenter_core::catalog::CapacityType::OnDemand;
    use karpenter_core::seams::iam::InstanceProfiles;
    let w = super::support::world(super::support::config());
    let iam = std::sync::Arc::new(fakecloud::FakeIam::new(w.clock.clone(), "123456789012", 7));
    iam.add_role(&fakecloud::node_role_name("sim"), "/");
    iam.add_role("SomeOtherRole", "/");
    w.cloud.attach_iam(iam.clone());
    let profile = "KarpenterNodeInstanceProfile";

    let missing = w.fleet(OnDemand, &[("m5.large", "us-west-2a")], "1");
    assert!(missing.instances.is_empty());
    assert!(
        missing
            .errors
            .iter()
            .all(|e| e.code == "InvalidParameterValue" && e.message.contains(profile)),
        "{:?}",
        missing.errors
    );

    use super::support::block_on;
    block_on(iam.create_instance_profile(profile, "/", &Default::default())).unwrap();
    block_on(iam.add_role_to_instance_profile(profile, "SomeOtherRole")).unwrap();
    let stranger = w.launch(OnDemand, "m5.large", "2");
    assert!(
        matches!(
            w.cloud.join_error(&stranger),
            Some(JoinError::Unauthorized(_))
        ),
        "{:?}",
        w.cloud.join_error(&stranger)
    );

    block_on(iam.remove_role_from_instance_profile(profile, "SomeOtherRole")).unwrap();
    block_on(iam.add_role_to_instance_profile(profile, &fakecloud::node_role_name("sim"))).unwrap();
    let node = w.launch(OnDemand, "m5.large", "3");
    assert_eq!(w.cloud.join_error(&node), None);
}

/// A Windows class's user data on a Linux image, or a Linux class's on a Windows image, is read
/// by the image's own bootstrap, which does not understand it: the node never joins. A Windows
/// image's kubelet reports its OS build, one per Windows Server release.
#[test]
fn an_image_and_user_data_of_different_families_never_join_and_windows_images_carry_their_build() {
    let windows = format!(
        "<powershell>\n& 'C:\\Program Files\\Amazon\\EKS\\Start-EKSBootstrap.ps1' -EKSClusterName 'demo' -APIServerEndpoint 'https://api.demo' -Base64ClusterCA '{CA}'\n</powershell>\n"
    );
    join(BootFamily::Windows, &windows, &cluster()).unwrap();
    for linux in [
        BootFamily::Al2023,
        BootFamily::Al2,
        BootFamily::Bottlerocket,
    ] {
        assert!(
            matches!(
                join(linux, &windows, &cluster()),
                Err(JoinError::Rejected(_))
            ),
            "{linux:?} reads Windows user data"
        );
    }
    assert!(matches!(
        join(BootFamily::Windows, &nodeconfig(FULL), &cluster()),
        Err(JoinError::Rejected(_))
    ));
    let image =
        |year: &str| format!("Windows_Server-{year}-English-Core-EKS_Optimized-1.33-2025.06.11");
    assert_eq!(BootFamily::of_image(&image("2022")), BootFamily::Windows);
    assert_eq!(
        fakecloud::bootstrap::windows_build(&image("2019")),
        Some("10.0.17763")
    );
    assert_eq!(
        fakecloud::bootstrap::windows_build(&image("2022")),
        Some("10.0.20348")
    );
    assert_eq!(
        fakecloud::bootstrap::windows_build(&image("2025")),
        Some("10.0.26100")
    );
    assert_eq!(
        fakecloud::bootstrap::windows_build(
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20250601"
        ),
        None
    );
}
