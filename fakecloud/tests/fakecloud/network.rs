//! Subnets and security groups by tag; launch templates.

use std::collections::BTreeMap;

use fakecloud::Config;
use karpenter_core::seams::ec2::{Ec2Error, Filter, LaunchTemplateRequest, SecurityGroup, Subnet};

use super::support::{ZONE_A, ZONE_B, block_on, config, world};

#[test]
fn default_subnets_cover_every_catalog_zone_and_are_discoverable_by_tag() {
    let w = world(config());
    let subnets = block_on(
        w.ec2()
            .describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &["sim"])]),
    )
    .expect("subnets");
    let zones: Vec<(&str, &str, u32)> = subnets
        .iter()
        .map(|s| {
            (
                s.zone.as_str(),
                s.zone_id.as_str(),
                s.available_ip_address_count,
            )
        })
        .collect();
    let mut expected = vec![(ZONE_A, "usw2-az1", 4091), (ZONE_B, "usw2-az2", 4091)];
    expected.sort_by_key(|(zone, _, _)| *zone);
    let mut zones = zones;
    zones.sort_by_key(|(zone, _, _)| *zone);
    assert_eq!(zones, expected);
    assert!(subnets.iter().all(|s| s.subnet_id.starts_with("subnet-0")));

    let by_wildcard = block_on(
        w.ec2()
            .describe_subnets(&[Filter::new("tag:Name", &["sim-private-*a"])]),
    )
    .expect("wildcard");
    assert_eq!(by_wildcard.len(), 1);
    assert_eq!(by_wildcard[0].zone, ZONE_A);
    let other_cluster = block_on(
        w.ec2()
            .describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &["other"])]),
    )
    .expect("none");
    assert!(other_cluster.is_empty());
    let unknown = block_on(
        w.ec2()
            .describe_subnets(&[Filter::new("vpc-colour", &["x"])]),
    );
    assert!(matches!(unknown, Err(Ec2Error::InvalidRequest { .. })));
}

#[test]
fn configured_subnets_and_security_groups_replace_the_defaults() {
    let subnet = Subnet {
        subnet_id: "subnet-0123".into(),
        zone: ZONE_B.into(),
        zone_id: "usw2-az2".into(),
        available_ip_address_count: 12,
        tags: BTreeMap::from([("team".to_string(), "a".to_string())]),
    };
    let group = SecurityGroup {
        group_id: "sg-0123".into(),
        group_name: "nodes".into(),
        tags: BTreeMap::from([("team".to_string(), "a".to_string())]),
    };
    let w = world(Config {
        subnets: vec![subnet.clone()],
        security_groups: vec![group.clone()],
        ..config()
    });
    assert_eq!(
        block_on(
            w.ec2()
                .describe_subnets(&[Filter::new("tag-key", &["team"])])
        )
        .expect("subnets"),
        vec![subnet]
    );
    assert_eq!(
        block_on(
            w.ec2()
                .describe_security_groups(&[Filter::new("tag:team", &["a"])])
        )
        .expect("groups"),
        vec![group]
    );
}

#[test]
fn the_default_security_group_is_discoverable_by_tag_and_name() {
    let w = world(config());
    let by_tag = block_on(
        w.ec2()
            .describe_security_groups(&[Filter::new("tag:karpenter.sh/discovery", &["sim"])]),
    )
    .expect("groups");
    assert_eq!(by_tag.len(), 1);
    assert!(by_tag[0].group_id.starts_with("sg-0"));
    let by_name = block_on(
        w.ec2()
            .describe_security_groups(&[Filter::new("group-name", &["sim-node"])]),
    )
    .expect("groups");
    assert_eq!(by_name, by_tag);
}

fn template(name: &str) -> LaunchTemplateRequest {
    LaunchTemplateRequest {
        name: name.to_string(),
        image_id: "ami-0123".into(),
        user_data: String::new(),
        security_group_ids: vec!["sg-0123".into()],
        instance_profile: "profile".into(),
        tags: BTreeMap::from([("karpenter.k8s.aws/cluster".to_string(), "sim".to_string())]),
        extra: BTreeMap::new(),
    }
}

#[test]
fn launch_templates_are_created_described_and_deleted_by_name() {
    let w = world(config());
    let created = block_on(
        w.ec2()
            .create_launch_template(&template("karpenter.k8s.aws/a")),
    )
    .expect("create");
    assert!(created.launch_template_id.starts_with("lt-0"));
    block_on(
        w.ec2()
            .create_launch_template(&template("karpenter.k8s.aws/b")),
    )
    .expect("create");

    let duplicate = block_on(
        w.ec2()
            .create_launch_template(&template("karpenter.k8s.aws/a")),
    );
    assert!(
        matches!(&duplicate, Err(Ec2Error::InvalidRequest { code, .. }) if code == "InvalidLaunchTemplateName.AlreadyExistsException"),
        "{duplicate:?}"
    );

    let by_name = block_on(w.ec2().describe_launch_templates(&[Filter::new(
        "launch-template-name",
        &["karpenter.k8s.aws/a"],
    )]))
    .expect("describe");
    assert_eq!(by_name, vec![created]);
    let by_tag = block_on(
        w.ec2()
            .describe_launch_templates(&[Filter::new("tag:karpenter.k8s.aws/cluster", &["sim"])]),
    )
    .expect("describe");
    assert_eq!(by_tag.len(), 2);
    assert!(
        by_tag[0].launch_template_id < by_tag[1].launch_template_id,
        "sorted by id"
    );

    block_on(w.ec2().delete_launch_template("karpenter.k8s.aws/a")).expect("delete");
    block_on(w.ec2().delete_launch_template("karpenter.k8s.aws/a")).expect("deleting twice");
    let left = block_on(w.ec2().describe_launch_templates(&[])).expect("describe");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].launch_template_name, "karpenter.k8s.aws/b");
}

#[test]
fn a_malformed_launch_template_name_is_rejected() {
    let w = world(config());
    let result = block_on(w.ec2().create_launch_template(&template("a b")));
    assert!(
        matches!(&result, Err(Ec2Error::InvalidRequest { code, .. }) if code == "InvalidLaunchTemplateName.MalformedException")
    );
}
