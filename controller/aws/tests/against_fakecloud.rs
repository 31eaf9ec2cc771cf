//! The adapter against `fakecloud serve` over HTTP: every seam call through the real AWS SDK,
//! the real wire protocols (EC2 Query, SQS JSON, SSM and Pricing JSON, IAM Query, EKS REST),
//! and the fake's account ready for a cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Fake, Fault, Operation, Pool, node_role_name};
use fakecloud_serve::{Server, WallClock, World};
use karpenter_aws::{Aws, Settings};
use karpenter_core::catalog::live::{self, CatalogInputs, LiveCatalog, PriceSource};
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::interruption::messages;
use karpenter_core::seams::Retryable;
use karpenter_core::seams::catalog::CatalogSource;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, Ec2, Ec2Error, Filter, FleetOverride, ImageQuery, InstanceState,
    LaunchTemplateRequest,
};
use karpenter_core::seams::eks::{Eks, EksError};
use karpenter_core::seams::iam::{IamError, InstanceProfiles};
use karpenter_core::seams::sqs::{Sqs, SqsError};

const CLUSTER: &str = "wire-test";
/// The instance profile the test launch template names.
const TEST_PROFILE: &str = "wire-test-profile";
const AL2023: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";

struct Fixture {
    server: Server,
    world: Arc<World>,
    aws: Aws,
}

async fn fixture() -> Fixture {
    let world = World::for_cluster(CLUSTER, 7);
    // The launch template's profile, made as the account's stack would (EC2 refuses a launch
    // naming a profile IAM does not know). Straight into the fake: no wire call is recorded.
    let iam = &world.account.iam;
    iam.create_instance_profile(TEST_PROFILE, "/", &BTreeMap::new())
        .await
        .expect("profile");
    iam.add_role_to_instance_profile(TEST_PROFILE, &node_role_name(CLUSTER))
        .await
        .expect("role");
    let server = fakecloud_serve::serve(world.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("serve");
    let settings = Settings {
        region: Some("us-west-2".into()),
        endpoint_url: Some(server.endpoint()),
        static_credentials: Some(("AKIDTEST".into(), "secret".into())),
        retry_initial_backoff: Duration::from_millis(5),
        ..Settings::default()
    };
    let aws = Aws::load(settings, Arc::new(WallClock))
        .await
        .expect("config");
    Fixture { server, world, aws }
}

fn discovery() -> Vec<Filter> {
    vec![Filter::new("tag:karpenter.sh/discovery", &[CLUSTER])]
}

async fn template(f: &Fixture, name: &str) -> String {
    let ec2 = f.aws.ec2();
    let image = ec2
        .get_parameter(AL2023)
        .await
        .unwrap()
        .expect("AL2023 parameter");
    let groups = ec2.describe_security_groups(&discovery()).await.unwrap();
    ec2.create_launch_template(&LaunchTemplateRequest {
        name: name.into(),
        image_id: image.clone(),
        user_data: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n".into(),
        security_group_ids: groups.iter().map(|g| g.group_id.clone()).collect(),
        instance_profile: TEST_PROFILE.into(),
        tags: BTreeMap::from([("karpenter.sh/nodepool".to_string(), "default".to_string())]),
        extra: BTreeMap::new(),
    })
    .await
    .expect("launch template");
    image
}

async fn fleet(
    f: &Fixture,
    template: &str,
    capacity_type: CapacityType,
    types: &[&str],
) -> CreateFleetRequest {
    let subnets = f.aws.ec2().describe_subnets(&discovery()).await.unwrap();
    let mut overrides = Vec::new();
    for t in types {
        for s in &subnets {
            overrides.push(FleetOverride {
                instance_type: t.to_string(),
                subnet_id: s.subnet_id.clone(),
                zone: s.zone.clone(),
                price: None,
            });
        }
    }
    CreateFleetRequest {
        capacity_block: false,
        capacity_type,
        launch_template_name: template.into(),
        overrides,
        tags: BTreeMap::from([
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
            (
                "kubernetes.io/cluster/wire-test".to_string(),
                "owned".to_string(),
            ),
        ]),
        client_token: format!("token-{template}-{}", capacity_type.label()),
        context: None,
    }
}

/// Describes `id` until EC2's consistency window lets it show (at most 10 s).
async fn visible(f: &Fixture, id: &str) -> karpenter_core::seams::ec2::Instance {
    for _ in 0..100 {
        let found = f
            .aws
            .ec2()
            .describe_instances(&[id.to_string()], &[])
            .await
            .expect("describe");
        if let Some(instance) = found.into_iter().next() {
            return instance;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{id} never became visible");
}

#[tokio::test]
async fn discovery_finds_the_clusters_subnets_and_security_group() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    let subnets = ec2.describe_subnets(&discovery()).await.expect("subnets");
    let zones: Vec<&str> = subnets.iter().map(|s| s.zone.as_str()).collect();
    assert_eq!(zones.len(), 3, "{zones:?}");
    for s in &subnets {
        assert!(s.zone_id.starts_with("usw2-az"), "{s:?}");
        assert!(s.available_ip_address_count > 0);
        assert_eq!(s.tags["karpenter.sh/discovery"], CLUSTER);
    }
    assert!(
        ec2.describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &["other"])])
            .await
            .unwrap()
            .is_empty()
    );
    let groups = ec2
        .describe_security_groups(&discovery())
        .await
        .expect("groups");
    assert_eq!(groups.len(), 1);
    f.server.shutdown().await;
}

#[tokio::test]
async fn ami_aliases_resolve_through_ssm_and_describe_images() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    let image_id = ec2.get_parameter(AL2023).await.unwrap().expect("parameter");
    assert!(image_id.starts_with("ami-"));
    assert_eq!(
        ec2.get_parameter("/aws/service/eks/optimized-ami/1.33/nope/image_id")
            .await,
        Ok(None)
    );
    let images = ec2
        .describe_images(&ImageQuery {
            image_ids: vec![image_id.clone()],
            ..ImageQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].architecture, "x86_64");
    assert!(images[0].name.contains("al2023"), "{}", images[0].name);
    let amazon = ec2
        .describe_images(&ImageQuery {
            owners: vec!["amazon".into()],
            filters: vec![Filter::new("name", &["amazon-eks-node-al2023-arm64-*"])],
            ..ImageQuery::default()
        })
        .await
        .unwrap();
    assert!(!amazon.is_empty() && amazon.iter().all(|i| i.architecture == "arm64"));
    // A new release moves the alias.
    let released = f
        .world
        .account
        .cloud
        .publish_ami(fakecloud::AmiFamily::Al2023, "v20250701");
    let moved = ec2.get_parameter(AL2023).await.unwrap().unwrap();
    assert_ne!(moved, image_id);
    assert!(released.contains(&moved));
    f.server.shutdown().await;
}

#[tokio::test]
async fn a_launch_goes_from_template_to_fleet_to_a_visible_tagged_instance_and_is_terminated() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    let image = template(&f, "karpenter.k8s.aws/launch").await;
    let found = ec2
        .describe_launch_templates(&[Filter::new(
            "launch-template-name",
            &["karpenter.k8s.aws/launch"],
        )])
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].tags["karpenter.sh/nodepool"], "default");
    let again = ec2
        .create_launch_template(&LaunchTemplateRequest {
            name: "karpenter.k8s.aws/launch".into(),
            image_id: image.clone(),
            user_data: String::new(),
            security_group_ids: vec![],
            instance_profile: String::new(),
            tags: BTreeMap::new(),
            extra: BTreeMap::new(),
        })
        .await;
    assert!(
        matches!(again, Err(Ec2Error::InvalidRequest { ref code, .. }) if code == "InvalidLaunchTemplateName.AlreadyExistsException"),
        "{again:?}"
    );

    let request = fleet(
        &f,
        "karpenter.k8s.aws/launch",
        CapacityType::Spot,
        &["m5.large", "c5.large"],
    )
    .await;
    ec2.dry_run_create_fleet(&request)
        .await
        .expect("dry run passes");
    let response = ec2.create_fleet(&request).await.expect("fleet");
    assert_eq!(response.instances.len(), 1, "{response:?}");
    let launched = &response.instances[0];
    assert_eq!(launched.capacity_type, CapacityType::Spot);
    assert!(
        request
            .overrides
            .iter()
            .any(|o| o.instance_type == launched.instance_type
                && o.zone == launched.zone
                && o.subnet_id == launched.subnet_id)
    );
    // The same client token gives the same instance, not a second one.
    let retried = ec2.create_fleet(&request).await.unwrap();
    assert_eq!(retried.instances[0].instance_id, launched.instance_id);

    let instance = visible(&f, &launched.instance_id).await;
    assert_eq!(instance.image_id, image);
    assert_eq!(instance.tags["karpenter.sh/nodepool"], "default");
    // The instance carries the template's security groups (security-group drift reads them).
    let groups = ec2.describe_security_groups(&discovery()).await.unwrap();
    let mut group_ids: Vec<String> = groups.iter().map(|g| g.group_id.clone()).collect();
    group_ids.sort();
    assert!(!group_ids.is_empty());
    assert_eq!(instance.security_group_ids, group_ids);
    assert!(
        instance
            .private_dns_name
            .ends_with(".us-west-2.compute.internal")
    );
    ec2.create_tags(
        std::slice::from_ref(&launched.instance_id),
        &BTreeMap::from([("Name".to_string(), "node-1".to_string())]),
    )
    .await
    .expect("tags");
    let by_tag = ec2
        .describe_instances(&[], &[Filter::new("tag:Name", &["node-1"])])
        .await
        .unwrap();
    assert_eq!(by_tag.len(), 1);

    // Unknown ids are left out of describes and terminations, as the seam promises.
    let unknown = "i-0123456789abcdef0".to_string();
    let both = ec2
        .describe_instances(&[launched.instance_id.clone(), unknown.clone()], &[])
        .await
        .unwrap();
    assert_eq!(both.len(), 1);
    let terminated = ec2
        .terminate_instances(&[launched.instance_id.clone(), unknown])
        .await
        .expect("terminate");
    assert_eq!(terminated, vec![launched.instance_id.clone()]);
    let after = visible(&f, &launched.instance_id).await;
    assert!(matches!(
        after.state,
        InstanceState::ShuttingDown | InstanceState::Terminated
    ));

    ec2.delete_launch_template("karpenter.k8s.aws/launch")
        .await
        .expect("delete");
    ec2.delete_launch_template("karpenter.k8s.aws/launch")
        .await
        .expect("deleting a missing template succeeds");
    f.server.shutdown().await;
}

#[tokio::test]
async fn fleet_errors_carry_their_overrides_and_a_missing_template_fails_every_override() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    template(&f, "karpenter.k8s.aws/ice").await;
    let subnets = ec2.describe_subnets(&discovery()).await.unwrap();
    for s in &subnets {
        f.world
            .account
            .cloud
            .set_pool_capacity(&Pool::new("m5.large", &s.zone, CapacityType::OnDemand), 0);
    }
    let request = fleet(
        &f,
        "karpenter.k8s.aws/ice",
        CapacityType::OnDemand,
        &["m5.large"],
    )
    .await;
    let response = ec2.create_fleet(&request).await.expect("answered");
    assert!(response.instances.is_empty());
    let capacity: Vec<_> = response
        .errors
        .iter()
        .filter(|e| e.code == "InsufficientInstanceCapacity")
        .collect();
    assert_eq!(capacity.len(), 3, "{response:?}");
    assert!(
        capacity
            .iter()
            .all(|e| e.instance_type.as_deref() == Some("m5.large") && e.zone.is_some())
    );

    let missing = fleet(
        &f,
        "karpenter.k8s.aws/missing",
        CapacityType::Spot,
        &["c5.large"],
    )
    .await;
    let refused = ec2.create_fleet(&missing).await;
    assert!(
        matches!(refused, Err(Ec2Error::NotFound { ref code, .. }) if code == "InvalidLaunchTemplateName.NotFoundException"),
        "{refused:?}"
    );
    let dry = ec2.dry_run_create_fleet(&missing).await;
    assert!(
        matches!(dry, Err(Ec2Error::NotFound { ref code, .. }) if code == "InvalidLaunchTemplateName.NotFoundException"),
        "{dry:?}"
    );
    let run = ec2
        .dry_run_run_instances("karpenter.k8s.aws/ice", "m5.large", &subnets[0].subnet_id)
        .await;
    assert_eq!(run, Ok(()));
    f.server.shutdown().await;
}

#[tokio::test]
async fn throttling_is_retried_by_the_sdk_and_surfaced_when_it_persists() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    let cloud = &f.world.account.cloud;
    cloud.script_faults(
        Operation::DescribeSubnets,
        [Fault::Throttle, Fault::InternalError],
    );
    let subnets = ec2
        .describe_subnets(&discovery())
        .await
        .expect("two retried faults, then an answer");
    assert_eq!(subnets.len(), 3);
    cloud.script_faults(Operation::DescribeSubnets, [Fault::Throttle; 3]);
    let error = ec2
        .describe_subnets(&discovery())
        .await
        .expect_err("three throttles");
    assert!(
        matches!(error, Ec2Error::Throttled(ref m) if m.contains("RequestLimitExceeded")),
        "{error:?}"
    );
    assert!(error.is_retryable());
    f.server.shutdown().await;
}

#[tokio::test]
async fn a_spot_interruption_arrives_on_the_queue_and_is_deleted_once_handled() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    template(&f, "karpenter.k8s.aws/spot").await;
    let request = fleet(
        &f,
        "karpenter.k8s.aws/spot",
        CapacityType::Spot,
        &["m5.large"],
    )
    .await;
    let id = ec2.create_fleet(&request).await.unwrap().instances[0]
        .instance_id
        .clone();
    visible(&f, &id).await;
    let sqs = f.aws.sqs(CLUSTER).await.expect("queue");
    assert!(
        sqs.queue_url()
            .ends_with(&format!("/{}/{CLUSTER}", f.world.account.account_id()))
    );
    assert!(f.world.account.cloud.interrupt_spot(&id));
    let mut received = Vec::new();
    for _ in 0..5 {
        received = sqs
            .receive_messages(10, Duration::from_secs(2))
            .await
            .expect("receive");
        if !received.is_empty() {
            break;
        }
    }
    let message = received
        .iter()
        .find(|m| m.body.contains("Spot Instance Interruption Warning"))
        .expect("a warning");
    let parsed = messages::parse(&message.body).expect("EventBridge shape");
    assert!(format!("{parsed:?}").contains(&id), "{parsed:?}");
    sqs.delete_message(&message.receipt_handle)
        .await
        .expect("delete");
    sqs.delete_message(&message.receipt_handle)
        .await
        .expect("deleting again succeeds");
    let bad = sqs.delete_message("not-a-handle").await;
    assert!(
        matches!(bad, Err(SqsError::InvalidReceiptHandle(_))),
        "{bad:?}"
    );
    let missing = f.aws.sqs("no-such-queue").await;
    assert!(
        matches!(missing, Err(SqsError::QueueDoesNotExist(_))),
        "{missing:?}"
    );
    f.server.shutdown().await;
}

#[tokio::test]
async fn an_instance_profile_is_created_given_the_node_role_and_deleted() {
    let f = fixture().await;
    let iam = f.aws.iam();
    let role = iam
        .get_role(&node_role_name(CLUSTER))
        .await
        .unwrap()
        .expect("node role");
    assert!(
        role.arn
            .ends_with(&format!(":role/{}", node_role_name(CLUSTER)))
    );
    assert_eq!(iam.get_role("nope").await, Ok(None));
    let path = format!("/karpenter/us-west-2/{CLUSTER}/uid-1/");
    let tags = BTreeMap::from([(
        "karpenter.k8s.aws/ec2nodeclass".to_string(),
        "default".to_string(),
    )]);
    let created = iam
        .create_instance_profile("wire-test_123", &path, &tags)
        .await
        .expect("create");
    assert_eq!(created.path, path);
    assert!(matches!(
        iam.create_instance_profile("wire-test_123", &path, &tags)
            .await,
        Err(IamError::AlreadyExists { .. })
    ));
    iam.add_role_to_instance_profile("wire-test_123", &role.name)
        .await
        .expect("add role");
    let second = iam
        .add_role_to_instance_profile("wire-test_123", &role.name)
        .await;
    assert!(
        matches!(second, Err(IamError::Conflict { ref code, .. }) if code == "LimitExceeded"),
        "{second:?}"
    );
    iam.tag_instance_profile(
        "wire-test_123",
        &BTreeMap::from([("extra".to_string(), "yes".to_string())]),
    )
    .await
    .unwrap();
    let profile = iam
        .get_instance_profile("wire-test_123")
        .await
        .unwrap()
        .expect("profile");
    assert_eq!(profile.roles, vec![role.name.clone()]);
    assert_eq!(profile.tags["extra"], "yes");
    let listed = iam
        .list_instance_profiles(&format!("/karpenter/us-west-2/{CLUSTER}/"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let conflict = iam.delete_instance_profile("wire-test_123").await;
    assert!(
        matches!(conflict, Err(IamError::Conflict { ref code, .. }) if code == "DeleteConflict"),
        "{conflict:?}"
    );
    iam.remove_role_from_instance_profile("wire-test_123", &role.name)
        .await
        .unwrap();
    iam.delete_instance_profile("wire-test_123")
        .await
        .expect("delete");
    iam.delete_instance_profile("wire-test_123")
        .await
        .expect("deleting a missing profile succeeds");
    assert_eq!(iam.get_instance_profile("wire-test_123").await, Ok(None));
    f.server.shutdown().await;
}

#[tokio::test]
async fn the_cluster_is_described_with_what_nodes_need_to_join() {
    let f = fixture().await;
    let eks = f.aws.eks();
    let cluster = eks.describe_cluster(CLUSTER).await.expect("cluster");
    assert!(
        cluster.endpoint.starts_with("https://")
            && cluster.endpoint.ends_with(".us-west-2.eks.amazonaws.com")
    );
    assert!(!cluster.certificate_authority.is_empty());
    assert_eq!(cluster.service_ipv4_cidr.as_deref(), Some("10.100.0.0/16"));
    assert_eq!(
        (
            cluster.version.as_str(),
            cluster.status.as_str(),
            cluster.ip_family.as_str()
        ),
        ("1.33", "ACTIVE", "ipv4")
    );
    let missing = eks.describe_cluster("other").await;
    assert!(
        matches!(missing, Err(EksError::NotFound { .. })),
        "{missing:?}"
    );
    f.server.shutdown().await;
}

#[tokio::test]
async fn a_catalog_built_from_the_wire_equals_the_builtin_catalog() {
    let f = fixture().await;
    let source = f.aws.catalog();
    let inputs = CatalogInputs {
        instance_types: source.instance_types().await.expect("types"),
        zone_offerings: source.zone_offerings().await.expect("offerings"),
        spot_prices: source.spot_prices().await.expect("spot prices"),
        on_demand_prices: source.on_demand_prices().await.expect("price list"),
        zone_ids: source.zone_ids().await.expect("zones"),
    };
    assert_eq!(inputs.zone_ids["us-west-2b"], "usw2-az2");
    assert!(
        inputs.instance_types.len() > 100,
        "{} types: every page was followed",
        inputs.instance_types.len()
    );
    let built = live::build("us-west-2", &inputs);
    let builtin = Catalog::builtin();
    assert_eq!(built.instance_types.len(), builtin.instance_types.len());
    for (got, want) in built.instance_types.iter().zip(&builtin.instance_types) {
        assert_eq!(got, want, "{}", want.name);
    }
    let mut live = LiveCatalog::new(Arc::new(source), Arc::new(WallClock), "us-west-2");
    live.refresh().await.expect("refresh");
    assert_eq!(live.price_source(), PriceSource::PricingApi);
    assert_eq!(&*live.catalog().unwrap(), &builtin);
    f.server.shutdown().await;
}

/// Every seam method once (plus the dry runs), as a controller run would call them.
async fn every_seam_call(f: &Fixture) {
    let ec2 = f.aws.ec2();
    template(f, "karpenter.k8s.aws/all").await;
    ec2.describe_images(&ImageQuery {
        owners: vec!["amazon".into()],
        ..ImageQuery::default()
    })
    .await
    .unwrap();
    ec2.describe_launch_templates(&[]).await.unwrap();
    let request = fleet(
        f,
        "karpenter.k8s.aws/all",
        CapacityType::OnDemand,
        &["m5.large"],
    )
    .await;
    ec2.dry_run_create_fleet(&request).await.unwrap();
    ec2.dry_run_run_instances(
        "karpenter.k8s.aws/all",
        "m5.large",
        &request.overrides[0].subnet_id,
    )
    .await
    .unwrap();
    let id = ec2.create_fleet(&request).await.unwrap().instances[0]
        .instance_id
        .clone();
    visible(f, &id).await;
    ec2.create_tags(
        std::slice::from_ref(&id),
        &BTreeMap::from([("Name".to_string(), "n".to_string())]),
    )
    .await
    .unwrap();
    ec2.describe_instance_status(&[Filter::new("event.code", &["instance-retirement"])])
        .await
        .unwrap();
    ec2.describe_capacity_reservations(&[], &[Filter::new("state", &["active"])])
        .await
        .unwrap();
    ec2.terminate_instances(&[id]).await.unwrap();
    ec2.delete_launch_template("karpenter.k8s.aws/all")
        .await
        .unwrap();
    let sqs = f.aws.sqs(CLUSTER).await.unwrap();
    f.world.send("{}").await;
    let received = sqs
        .receive_messages(10, Duration::from_secs(1))
        .await
        .unwrap();
    sqs.delete_message(&received[0].receipt_handle)
        .await
        .unwrap();
    let iam = f.aws.iam();
    let role = iam
        .get_role(&node_role_name(CLUSTER))
        .await
        .unwrap()
        .unwrap();
    iam.create_instance_profile("p", "/karpenter/", &BTreeMap::new())
        .await
        .unwrap();
    iam.tag_instance_profile("p", &BTreeMap::from([("a".to_string(), "b".to_string())]))
        .await
        .unwrap();
    iam.add_role_to_instance_profile("p", &role.name)
        .await
        .unwrap();
    iam.get_instance_profile("p").await.unwrap();
    iam.list_instance_profiles("/karpenter/").await.unwrap();
    iam.remove_role_from_instance_profile("p", &role.name)
        .await
        .unwrap();
    iam.delete_instance_profile("p").await.unwrap();
    f.aws.eks().describe_cluster(CLUSTER).await.unwrap();
    let catalog = f.aws.catalog();
    catalog.instance_types().await.unwrap();
    catalog.zone_offerings().await.unwrap();
    catalog.spot_prices().await.unwrap();
    catalog.zone_ids().await.unwrap();
    catalog.on_demand_prices().await.unwrap();
}

#[tokio::test]
async fn the_adapter_calls_exactly_the_actions_the_iam_policy_table_lists() {
    let f = fixture().await;
    every_seam_call(&f).await;
    let called: Vec<String> = f.world.actions_called();
    // PassRole is not a call: EC2 checks it when a launch names the instance profile.
    let listed: std::collections::BTreeSet<String> = karpenter_aws::actions::ACTIONS
        .iter()
        .map(|a| a.action.to_string())
        .filter(|a| a != "iam:PassRole")
        .collect();
    let listed: Vec<String> = listed.into_iter().collect();
    assert_eq!(
        called, listed,
        "called on the wire (left) vs controller/aws/src/actions.rs (right)"
    );
    f.server.shutdown().await;
}

#[tokio::test]
async fn describe_instance_status_reads_failed_checks_and_scheduled_events_over_the_wire() {
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    template(&f, "karpenter.k8s.aws/od").await;
    let request = fleet(
        &f,
        "karpenter.k8s.aws/od",
        CapacityType::OnDemand,
        &["m5.large"],
    )
    .await;
    let id = ec2.create_fleet(&request).await.unwrap().instances[0]
        .instance_id
        .clone();
    visible(&f, &id).await;
    assert!(f.world.account.cloud.impair_instance(&id, true));
    assert!(
        f.world
            .account
            .cloud
            .schedule_instance_event(&id, "instance-retirement")
    );
    let impaired = [Filter::new("system-status.status", &["impaired"])];
    let mut statuses = Vec::new();
    // Only running instances are reported: wait out the launch's pending state.
    for _ in 0..40 {
        statuses = ec2
            .describe_instance_status(&impaired)
            .await
            .expect("status");
        if !statuses.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let status = statuses
        .iter()
        .find(|s| s.instance_id == id)
        .expect("reported");
    assert_eq!(status.system_checks[0].status, "failed");
    assert!(status.system_checks[0].impaired_since.is_some());
    assert_eq!(status.instance_checks[0].status, "passed");
    assert_eq!(status.events, ["instance-retirement"]);
    let ok_only = [Filter::new("instance-status.status", &["impaired"])];
    assert!(
        ec2.describe_instance_status(&ok_only)
            .await
            .unwrap()
            .is_empty()
    );
    f.server.shutdown().await;
}

#[tokio::test]
async fn launch_template_settings_and_a_reserved_launch_cross_the_wire() {
    use karpenter_core::api::EC2NodeClass;
    use karpenter_core::api::ec2nodeclass::AmiFamily;
    use karpenter_core::catalog::Reservation;
    use karpenter_core::nodeclass::launchtemplate;
    let f = fixture().await;
    let ec2 = f.aws.ec2();
    let cloud = &f.world.account.cloud;
    let zone = "us-west-2a";
    let id = cloud.create_capacity_reservation(
        fakecloud::ReservationSpec::new("m5.large", zone, 1).tag("team", "ml"),
    );
    let found = ec2
        .describe_capacity_reservations(&[], &[Filter::new("tag:team", &["ml"])])
        .await
        .expect("describe");
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].id.as_str(), found[0].available_instance_count),
        (id.as_str(), 1)
    );
    // The launch path's own template data: default block devices, IMDSv2, monitoring, targeted
    // at the reservation.
    let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"},
        "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                 "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
    }))
    .expect("class");
    let image = ec2.get_parameter(AL2023).await.unwrap().expect("image");
    let groups: Vec<String> = ec2
        .describe_security_groups(&discovery())
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    let data = launchtemplate::build(
        &class,
        AmiFamily::AL2023,
        &image,
        groups.clone(),
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n".into(),
        BTreeMap::new(),
    );
    let reservation = Reservation {
        id: id.clone(),
        kind: Default::default(),
        interruptible: false,
        capacity: 1,
    };
    let data = launchtemplate::into_reservation(data, &reservation);
    let request = LaunchTemplateRequest {
        name: data.name(),
        image_id: image,
        user_data: data.user_data.clone(),
        security_group_ids: groups,
        instance_profile: TEST_PROFILE.into(),
        tags: BTreeMap::new(),
        extra: data.extra(),
    };
    ec2.create_launch_template(&request)
        .await
        .expect("template");
    let stored = cloud
        .launch_templates()
        .into_iter()
        .find(|t| t.name == request.name)
        .expect("stored");
    let parsed = |extra: &BTreeMap<String, String>| -> BTreeMap<String, serde_json::Value> {
        extra
            .iter()
            .map(|(k, v)| {
                let mut value: serde_json::Value =
                    serde_json::from_str(v).unwrap_or(serde_json::json!(v));
                // `rootVolume` is Karpenter's, not EC2's: it does not cross the wire.
                for mapping in value.as_array_mut().into_iter().flatten() {
                    mapping.as_object_mut().map(|m| m.remove("rootVolume"));
                }
                (k.clone(), value)
            })
            .collect()
    };
    assert_eq!(parsed(&stored.extra), parsed(&request.extra));
    let subnet = ec2
        .describe_subnets(&discovery())
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.zone == zone)
        .expect("subnet");
    let launched = ec2
        .create_fleet(&CreateFleetRequest {
            capacity_block: false,
            capacity_type: CapacityType::Reserved,
            launch_template_name: request.name.clone(),
            overrides: vec![FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: subnet.subnet_id,
                zone: zone.into(),
                price: None,
            }],
            tags: BTreeMap::from([("karpenter.sh/nodepool".to_string(), "default".to_string())]),
            client_token: "reserved-1".into(),
            context: None,
        })
        .await
        .expect("fleet");
    assert_eq!(launched.instances.len(), 1, "{:?}", launched.errors);
    let instance = visible(&f, &launched.instances[0].instance_id).await;
    assert_eq!(
        instance.capacity_reservation_id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(instance.capacity_type, CapacityType::Reserved);
    f.server.shutdown().await;
}
