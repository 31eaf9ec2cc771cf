//! Launch-template contents from the EC2NodeClass (`nodeclass::launchtemplate`), review
//! findings 5 and 10.

use karpenter_core::api::EC2NodeClass;
use karpenter_core::api::ec2nodeclass::AmiFamily;
use karpenter_core::nodeclass::launchtemplate::{
    build, default_block_devices, registered_tags, tags,
};
use serde_json::json;

fn class(spec: serde_json::Value) -> EC2NodeClass {
    let mut base = json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "instanceProfile": "KarpenterNodeProfile",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "tags": {"team": "a"}
        }
    });
    for (k, v) in spec.as_object().unwrap() {
        base["spec"][k] = v.clone();
    }
    serde_json::from_value(base).unwrap()
}

/// Finding 5: launch templates carried nothing of the class.
#[test]
fn finding_5_a_launch_template_carries_the_classs_devices_imds_public_ip_and_monitoring() {
    let c = class(json!({
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "encrypted": true, "kmsKeyID": "k"}}],
        "associatePublicIPAddress": false,
        "detailedMonitoring": true,
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}
    }));
    let lt = build(
        &c,
        AmiFamily::AL2023,
        "ami-1",
        vec!["sg-1".into()],
        "ud".into(),
        tags(&c, "demo", "default"),
    );
    assert_eq!(
        lt.block_device_mappings[0]
            .ebs
            .as_ref()
            .unwrap()
            .volume_size
            .as_deref(),
        Some("100Gi")
    );
    assert_eq!(lt.associate_public_ip_address, Some(false));
    assert!(lt.detailed_monitoring);
    assert_eq!(lt.metadata_options["httpPutResponseHopLimit"], 2);
    assert_eq!(lt.metadata_options["instanceMetadataTags"], "disabled");
    assert_eq!(lt.instance_profile, "KarpenterNodeProfile");
    let extra = lt.extra();
    assert!(extra["blockDeviceMappings"].contains("100Gi"));
    assert!(extra["metadataOptions"].contains("\"httpTokens\":\"required\""));
}

#[test]
fn without_settings_a_template_gets_imdsv2_hop_limit_1_and_the_familys_encrypted_root_volume() {
    let c = class(json!({}));
    let lt = build(
        &c,
        AmiFamily::AL2023,
        "ami-1",
        vec![],
        String::new(),
        Default::default(),
    );
    assert_eq!(lt.metadata_options["httpTokens"], "required");
    assert_eq!(lt.metadata_options["httpPutResponseHopLimit"], 1);
    let root = lt.block_device_mappings[0].clone();
    assert_eq!(root.device_name.as_deref(), Some("/dev/xvda"));
    assert_eq!(root.ebs.unwrap().encrypted, Some(true));
    let br: Vec<_> = default_block_devices(AmiFamily::Bottlerocket)
        .into_iter()
        .map(|b| b.device_name.unwrap())
        .collect();
    assert_eq!(br, ["/dev/xvda", "/dev/xvdb"]);
    assert_eq!(
        default_block_devices(AmiFamily::Windows2022)[0]
            .device_name
            .as_deref(),
        Some("/dev/sda1")
    );
    assert!(default_block_devices(AmiFamily::Custom).is_empty());
}

#[test]
fn a_template_is_named_by_its_content_so_a_new_profile_gets_a_new_template() {
    let a = class(json!({}));
    let b = class(json!({"instanceProfile": "Other"}));
    let lt = |c: &EC2NodeClass| {
        build(
            c,
            AmiFamily::AL2023,
            "ami-1",
            vec![],
            "ud".into(),
            Default::default(),
        )
    };
    assert_eq!(lt(&a).name(), lt(&a).name());
    assert_ne!(lt(&a).name(), lt(&b).name());
    assert!(lt(&a).name().starts_with("karpenter.k8s.aws/"));
}

#[test]
fn karpenters_tags_override_the_classs_and_name_the_cluster_pool_and_class() {
    let c = class(json!({"tags": {"team": "a", "eks:eks-cluster-name": "spoof"}}));
    let t = tags(&c, "demo", "default");
    assert_eq!(t["kubernetes.io/cluster/demo"], "owned");
    assert_eq!(t["eks:eks-cluster-name"], "demo");
    assert_eq!(t["karpenter.sh/nodepool"], "default");
    assert_eq!(t["karpenter.k8s.aws/ec2nodeclass"], "default");
    assert_eq!(t["team"], "a");
    let after = registered_tags("ip-10-0-0-1.ec2.internal", "default-abcde");
    assert_eq!(after["Name"], "ip-10-0-0-1.ec2.internal");
}
