//! AMIs behind SSM alias parameters, publishing a newer release, DescribeImages.

use std::collections::BTreeMap;

use fakecloud::{AMAZON_OWNER_ID, AmiFamily};
use karpenter_core::seams::ec2::{Ec2Error, Filter, Image, ImageQuery};

use super::support::{AL2023_X86, block_on, config, start, world};

fn image(w: &super::support::World, parameter: &str) -> Image {
    let id = block_on(w.ec2().get_parameter(parameter))
        .expect("get parameter")
        .unwrap_or_else(|| panic!("no parameter {parameter}"));
    let images = block_on(w.ec2().describe_images(&ImageQuery {
        image_ids: vec![id],
        ..ImageQuery::default()
    }))
    .expect("describe images");
    assert_eq!(images.len(), 1);
    images[0].clone()
}

#[test]
fn every_alias_family_resolves_through_its_public_parameters() {
    let w = world(config());
    let cases = [
        (
            AL2023_X86,
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20250601",
            "x86_64",
        ),
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id",
            "amazon-eks-node-al2023-arm64-standard-1.33-v20250601",
            "arm64",
        ),
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250601/image_id",
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20250601",
            "x86_64",
        ),
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id",
            "amazon-eks-node-1.33-v20250601",
            "x86_64",
        ),
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-arm64/recommended/image_id",
            "amazon-eks-arm64-node-1.33-v20250601",
            "arm64",
        ),
        (
            "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id",
            "bottlerocket-aws-k8s-1.33-x86_64-v1.40.0-",
            "x86_64",
        ),
        (
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.40.0/image_id",
            "bottlerocket-aws-k8s-1.33-arm64-v1.40.0-",
            "arm64",
        ),
    ];
    for (parameter, name, architecture) in cases {
        let image = image(&w, parameter);
        assert!(image.name.starts_with(name), "{parameter}: {}", image.name);
        assert_eq!(image.architecture, architecture, "{parameter}");
        assert!(image.image_id.starts_with("ami-0"));
        assert_eq!(image.owner_id, AMAZON_OWNER_ID);
        assert_eq!(image.creation_date, start());
        assert!(!image.deprecated);
    }
    assert_eq!(
        block_on(
            w.ec2()
                .get_parameter("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/9.9.9/image_id")
        )
        .expect("get"),
        None
    );
}

#[test]
fn publishing_a_release_moves_latest_and_keeps_pinned_versions() {
    let w = world(config());
    let old = image(&w, AL2023_X86);
    w.advance_s(86_400);
    let new_ids = w.cloud.publish_ami(AmiFamily::Al2023, "v20250701");
    assert_eq!(new_ids.len(), 5, "x86_64 and arm64 variants");
    let latest = image(&w, AL2023_X86);
    assert_ne!(latest.image_id, old.image_id);
    assert!(new_ids.contains(&latest.image_id));
    assert_eq!(
        latest.name,
        "amazon-eks-node-al2023-x86_64-standard-1.33-v20250701"
    );
    assert_eq!(latest.creation_date, w.now());
    let pinned = image(
        &w,
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250601/image_id",
    );
    assert_eq!(pinned.image_id, old.image_id);

    let bottlerocket = w.cloud.publish_ami(AmiFamily::Bottlerocket, "v1.41.0");
    let br = image(
        &w,
        "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id",
    );
    assert!(bottlerocket.contains(&br.image_id));
    assert!(br.name.contains("v1.41.0"), "{}", br.name);
}

#[test]
fn describe_images_fails_on_a_malformed_or_unknown_listed_id_while_an_id_filter_matches_nothing() {
    let w = world(config());
    let known = image(&w, AL2023_X86).image_id;
    let by_ids = |ids: &[&str]| {
        block_on(w.ec2().describe_images(&ImageQuery {
            image_ids: ids.iter().map(|i| i.to_string()).collect(),
            ..ImageQuery::default()
        }))
    };
    let code = |result: Result<Vec<Image>, Ec2Error>| match result {
        Err(Ec2Error::InvalidRequest { code, .. } | Ec2Error::NotFound { code, .. }) => code,
        other => panic!("expected an EC2 error, got {other:?}"),
    };
    assert_eq!(code(by_ids(&[&known, "ami-123"])), "InvalidAMIID.Malformed");
    assert_eq!(
        code(by_ids(&[&known, "ami-0123456789abcdef0"])),
        "InvalidAMIID.NotFound"
    );
    let filtered = block_on(w.ec2().describe_images(&ImageQuery {
        filters: vec![Filter::new(
            "image-id",
            &[known.as_str(), "ami-123", "ami-0123456789abcdef0"],
        )],
        ..ImageQuery::default()
    }))
    .expect("a filter never fails on ids");
    let found: Vec<&str> = filtered.iter().map(|i| i.image_id.as_str()).collect();
    assert_eq!(found, [known.as_str()]);
}

#[test]
fn describe_images_filters_by_name_owner_and_tags() {
    let w = world(config());
    let query = |owners: &[&str], filters: Vec<Filter>| {
        block_on(w.ec2().describe_images(&ImageQuery {
            image_ids: Vec::new(),
            owners: owners.iter().map(|o| o.to_string()).collect(),
            filters,
        }))
        .expect("describe")
    };
    let al2023 = query(
        &["amazon"],
        vec![Filter::new("name", &["amazon-eks-node-al2023-*"])],
    );
    assert_eq!(al2023.len(), 5);
    let ids: Vec<&String> = al2023.iter().map(|i| &i.image_id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "sorted by id");
    assert!(query(&["self"], Vec::new()).is_empty());

    w.cloud.add_image(Image {
        image_id: "ami-0custom0000000001".into(),
        name: "team-golden-2026".into(),
        architecture: "arm64".into(),
        creation_date: start(),
        deprecated: false,
        owner_id: "123456789012".into(),
        tags: BTreeMap::from([("golden".to_string(), "true".to_string())]),
    });
    let own = query(&["self"], vec![Filter::new("tag:golden", &["true"])]);
    assert_eq!(own.len(), 1);
    assert!(w.cloud.deprecate_image("ami-0custom0000000001"));
    assert!(query(&["123456789012"], Vec::new())[0].deprecated);
    assert_eq!(
        query(
            &[],
            vec![
                Filter::new("architecture", &["arm64"]),
                Filter::new("name", &["team-*"])
            ]
        )
        .len(),
        1
    );
}

/// The Windows aliases' public parameters (`ami-windows-latest`) name x86_64 EKS-optimized
/// Windows Server Core images; Windows Server 2025 only from Kubernetes 1.35, as EKS publishes
/// it. They come from a stream of their own: every other id of a seed is what it was.
#[test]
fn windows_aliases_resolve_to_x86_64_server_core_images_for_the_clusters_version() {
    let w = world(config());
    for year in ["2019", "2022"] {
        let parameter = format!(
            "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-1.33/image_id"
        );
        let image = image(&w, &parameter);
        assert_eq!(
            image.name,
            format!("Windows_Server-{year}-English-Core-EKS_Optimized-1.33-2025.06.11")
        );
        assert_eq!(image.architecture, "x86_64");
        assert_eq!(image.owner_id, AMAZON_OWNER_ID);
    }
    let ws2025 = "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.33/image_id";
    assert_eq!(block_on(w.ec2().get_parameter(ws2025)).expect("get"), None);
    let mut newer = config();
    newer.kubernetes_version = "1.35".into();
    let w = world(newer);
    let image = image(
        &w,
        "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id",
    );
    assert!(
        image.name.starts_with("Windows_Server-2025-"),
        "{}",
        image.name
    );
}
