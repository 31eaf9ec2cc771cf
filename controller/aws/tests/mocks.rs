//! The adapter against canned SDK answers (aws-smithy-mocks): how AWS errors become the seams'
//! typed errors, that every page is followed, and that ids EC2 reports missing are dropped.
//!
//! The `mock!` macro's type hints expand to `todo!()` inside a closure that never runs.
#![allow(clippy::todo)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput;
use aws_sdk_ec2::operation::describe_instances::{DescribeInstancesError, DescribeInstancesOutput};
use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsError;
use aws_sdk_ec2::operation::terminate_instances::{
    TerminateInstancesError, TerminateInstancesOutput,
};
use aws_sdk_ec2::types as ec2t;
use aws_sdk_sqs::operation::receive_message::ReceiveMessageError;
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, create_mock_http_client, mock};
use aws_smithy_types::error::ErrorMetadata;
use jiff::Timestamp;
use karpenter_aws::errors::{Class, classify};
use karpenter_aws::{AwsCatalog, AwsEc2, AwsIam, AwsSqs};
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::catalog::CatalogSource;
use karpenter_core::seams::ec2::{CreateFleetRequest, Ec2, Ec2Error, FleetOverride};
use karpenter_core::seams::iam::InstanceProfiles;
use karpenter_core::seams::sqs::{Sqs, SqsError};
use karpenter_core::seams::{ManualClock, Retryable};

fn interceptor(rules: &[&Rule]) -> MockResponseInterceptor {
    let mut interceptor = MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny);
    for rule in rules {
        interceptor = interceptor.with_rule(rule);
    }
    interceptor
}

/// Standard retries, 3 attempts, with a 1 ms base backoff so retried tests stay fast.
fn retries() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(1))
}

fn credentials() -> aws_sdk_ec2::config::Credentials {
    aws_sdk_ec2::config::Credentials::new("AKIDTEST", "secret", None, None, "test")
}

fn ec2_client(rules: &[&Rule]) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-west-2"))
        .credentials_provider(credentials())
        .http_client(create_mock_http_client())
        .interceptor(interceptor(rules))
        .retry_config(retries())
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

fn ssm_client(rules: &[&Rule]) -> aws_sdk_ssm::Client {
    let config = aws_sdk_ssm::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-west-2"))
        .credentials_provider(credentials())
        .http_client(create_mock_http_client())
        .interceptor(interceptor(rules))
        .retry_config(retries())
        .build();
    aws_sdk_ssm::Client::from_conf(config)
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Timestamp::from_second(1_750_000_000).unwrap(),
    ))
}

fn ec2(rules: &[&Rule]) -> AwsEc2 {
    AwsEc2::new(ec2_client(rules), ssm_client(&[]), clock())
}

/// Error metadata as the SDK's deserializers fill it from a response (modeled errors included:
/// their `code()` is read from here).
fn code_error(code: &str, message: &str) -> ErrorMetadata {
    ErrorMetadata::builder().code(code).message(message).build()
}

#[test]
fn error_codes_fall_into_the_classes_callers_act_on() {
    let cases = [
        ("RequestLimitExceeded", 503, Class::Throttled),
        ("ThrottlingException", 400, Class::Throttled),
        ("RequestThrottled", 400, Class::Throttled),
        ("InsufficientInstanceCapacity", 500, Class::Capacity),
        ("MaxSpotInstanceCountExceeded", 400, Class::Capacity),
        ("VcpuLimitExceeded", 400, Class::Capacity),
        ("InvalidInstanceID.NotFound", 400, Class::NotFound),
        (
            "InvalidLaunchTemplateName.NotFoundException",
            400,
            Class::NotFound,
        ),
        ("ParameterNotFound", 400, Class::NotFound),
        ("NoSuchEntity", 404, Class::NotFound),
        (
            "AWS.SimpleQueueService.NonExistentQueue",
            400,
            Class::NotFound,
        ),
        ("ResourceNotFoundException", 404, Class::NotFound),
        (
            "InvalidLaunchTemplateName.AlreadyExistsException",
            400,
            Class::AlreadyExists,
        ),
        ("EntityAlreadyExists", 409, Class::AlreadyExists),
        ("LimitExceeded", 409, Class::Conflict),
        ("DeleteConflict", 409, Class::Conflict),
        ("UnauthorizedOperation", 403, Class::Unauthorized),
        (
            "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
            400,
            Class::Unauthorized,
        ),
        ("AccessDeniedException", 400, Class::Unauthorized),
        ("InternalError", 500, Class::Unavailable),
        ("Unavailable", 503, Class::Unavailable),
        ("SomethingNew", 502, Class::Unavailable),
        ("InvalidParameterValue", 400, Class::Invalid),
        ("DryRunOperation", 412, Class::Invalid),
    ];
    for (code, status, class) in cases {
        assert_eq!(classify(code, status), class, "{code} ({status})");
    }
}

#[tokio::test]
async fn throttling_left_after_the_sdk_retries_is_a_retryable_throttled_error() {
    let throttled = mock!(aws_sdk_ec2::Client::describe_subnets).then_error(|| {
        DescribeSubnetsError::generic(code_error(
            "RequestLimitExceeded",
            "Request limit exceeded.",
        ))
    });
    let ec2 = ec2(&[&throttled]);
    let error = ec2.describe_subnets(&[]).await.expect_err("throttled");
    assert!(
        matches!(error, Ec2Error::Throttled(ref m) if m.starts_with("RequestLimitExceeded")),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(
        throttled.num_calls(),
        3,
        "the SDK's standard retry made 3 attempts"
    );
}

#[tokio::test]
async fn a_server_error_the_sdk_retries_away_is_never_seen() {
    let flaky = mock!(aws_sdk_ec2::Client::terminate_instances)
        .sequence()
        .http_status(503, None)
        .times(2)
        .output(|| {
            TerminateInstancesOutput::builder()
                .terminating_instances(
                    ec2t::InstanceStateChange::builder()
                        .instance_id("i-1")
                        .build(),
                )
                .build()
        })
        .build();
    let ec2 = ec2(&[&flaky]);
    let terminated = ec2
        .terminate_instances(&["i-1".into()])
        .await
        .expect("retried");
    assert_eq!(terminated, vec!["i-1".to_string()]);
    assert_eq!(flaky.num_calls(), 3);
}

#[tokio::test]
async fn terminating_an_unknown_instance_succeeds_for_the_others() {
    let unknown = mock!(aws_sdk_ec2::Client::terminate_instances)
        .match_requests(|r| r.instance_ids().len() == 2)
        .then_error(|| {
            TerminateInstancesError::generic(code_error(
                "InvalidInstanceID.NotFound",
                "The instance ID 'i-2' does not exist",
            ))
        });
    let known = mock!(aws_sdk_ec2::Client::terminate_instances)
        .match_requests(|r| r.instance_ids() == ["i-1".to_string()])
        .then_output(|| {
            TerminateInstancesOutput::builder()
                .terminating_instances(
                    ec2t::InstanceStateChange::builder()
                        .instance_id("i-1")
                        .build(),
                )
                .build()
        });
    let ec2 = ec2(&[&unknown, &known]);
    let terminated = ec2
        .terminate_instances(&["i-1".into(), "i-2".into()])
        .await
        .expect("ok");
    assert_eq!(terminated, vec!["i-1".to_string()]);
    assert_eq!((unknown.num_calls(), known.num_calls()), (1, 1));
}

fn reservation(ids: &[&str]) -> ec2t::Reservation {
    let mut r = ec2t::Reservation::builder();
    for id in ids {
        r = r.instances(
            ec2t::Instance::builder()
                .instance_id(*id)
                .instance_type(ec2t::InstanceType::M5Large)
                .instance_lifecycle(ec2t::InstanceLifecycleType::Spot)
                .state(
                    ec2t::InstanceState::builder()
                        .name(ec2t::InstanceStateName::Running)
                        .build(),
                )
                .placement(
                    ec2t::Placement::builder()
                        .availability_zone("us-west-2a")
                        .build(),
                )
                .tags(
                    ec2t::Tag::builder()
                        .key("karpenter.sh/nodepool")
                        .value("default")
                        .build(),
                )
                .build(),
        );
    }
    r.build()
}

#[tokio::test]
async fn describe_instances_follows_every_page() {
    let first = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.next_token().is_none())
        .then_output(|| {
            DescribeInstancesOutput::builder()
                .reservations(reservation(&["i-2", "i-1"]))
                .next_token("page-2")
                .build()
        });
    let second = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.next_token() == Some("page-2"))
        .then_output(|| {
            DescribeInstancesOutput::builder()
                .reservations(reservation(&["i-3"]))
                .build()
        });
    let ec2 = ec2(&[&first, &second]);
    let found = ec2.describe_instances(&[], &[]).await.expect("pages");
    let ids: Vec<&str> = found.iter().map(|i| i.instance_id.as_str()).collect();
    assert_eq!(ids, ["i-1", "i-2", "i-3"], "all pages, sorted by id");
    assert_eq!(found[0].capacity_type, CapacityType::Spot);
    assert_eq!(found[0].zone, "us-west-2a");
    assert_eq!(found[0].tags["karpenter.sh/nodepool"], "default");
}

#[tokio::test]
async fn describe_instances_by_id_omits_the_ids_ec2_cannot_see_yet() {
    let both = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.instance_ids().len() == 2)
        .then_error(|| {
            DescribeInstancesError::generic(code_error(
                "InvalidInstanceID.NotFound",
                "The instance IDs 'i-0b, i-0c' do not exist",
            ))
        });
    let one = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.instance_ids().len() == 1)
        .then_output(|| {
            DescribeInstancesOutput::builder()
                .reservations(reservation(&["i-0a"]))
                .build()
        });
    let ec2 = ec2(&[&both, &one]);
    let ids = ["i-0a".to_string(), "i-0b".to_string()];
    // EC2 also names an id the request did not carry; only i-0b is dropped.
    let found = ec2.describe_instances(&ids, &[]).await.expect("ok");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].instance_id, "i-0a");
    assert_eq!((both.num_calls(), one.num_calls()), (1, 1));
}

#[tokio::test]
async fn create_fleet_reports_each_overrides_error_with_its_type_and_zone() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| {
        let overrides = |t: ec2t::InstanceType, zone: &str| {
            ec2t::LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    ec2t::FleetLaunchTemplateOverrides::builder()
                        .instance_type(t)
                        .availability_zone(zone)
                        .subnet_id("subnet-1")
                        .build(),
                )
                .build()
        };
        CreateFleetOutput::builder()
            .errors(
                ec2t::CreateFleetError::builder()
                    .launch_template_and_overrides(overrides(
                        ec2t::InstanceType::C5Large,
                        "us-west-2b",
                    ))
                    .error_code("InsufficientInstanceCapacity")
                    .error_message("no capacity")
                    .build(),
            )
            .instances(
                ec2t::CreateFleetInstance::builder()
                    .launch_template_and_overrides(overrides(
                        ec2t::InstanceType::M5Large,
                        "us-west-2a",
                    ))
                    .lifecycle(ec2t::InstanceLifecycle::Spot)
                    .instance_ids("i-0123")
                    .build(),
            )
            .build()
    });
    let ec2 = ec2(&[&fleet]);
    let request = CreateFleetRequest {
        capacity_block: false,
        capacity_type: CapacityType::Spot,
        launch_template_name: "karpenter.k8s.aws/1".into(),
        overrides: vec![FleetOverride {
            instance_type: "m5.large".into(),
            subnet_id: "subnet-1".into(),
            zone: "us-west-2a".into(),
            price: Some(0.03),
        }],
        tags: BTreeMap::from([("karpenter.sh/nodepool".to_string(), "default".to_string())]),
        client_token: "uid-1".into(),
        context: None,
    };
    let response = ec2.create_fleet(&request).await.expect("fleet");
    assert_eq!(response.instances.len(), 1);
    let launched = &response.instances[0];
    assert_eq!(
        (
            launched.instance_id.as_str(),
            launched.instance_type.as_str(),
            launched.zone.as_str()
        ),
        ("i-0123", "m5.large", "us-west-2a")
    );
    assert_eq!(launched.capacity_type, CapacityType::Spot);
    assert_eq!(response.errors[0].code, "InsufficientInstanceCapacity");
    assert_eq!(
        response.errors[0].instance_type.as_deref(),
        Some("c5.large")
    );
    assert_eq!(response.errors[0].zone.as_deref(), Some("us-west-2b"));
}

#[tokio::test]
async fn a_missing_ssm_parameter_is_none_and_other_ssm_errors_are_errors() {
    use aws_sdk_ssm::operation::get_parameter::GetParameterError;
    let missing = mock!(aws_sdk_ssm::Client::get_parameter)
        .match_requests(|r| r.name() == Some("/missing"))
        .then_error(|| {
            GetParameterError::ParameterNotFound(
                aws_sdk_ssm::types::error::ParameterNotFound::builder()
                    .meta(code_error("ParameterNotFound", ""))
                    .build(),
            )
        });
    let denied = mock!(aws_sdk_ssm::Client::get_parameter)
        .match_requests(|r| r.name() == Some("/denied"))
        .then_error(|| {
            GetParameterError::generic(code_error("AccessDeniedException", "not allowed"))
        });
    let ec2 = AwsEc2::new(ec2_client(&[]), ssm_client(&[&missing, &denied]), clock());
    assert_eq!(ec2.get_parameter("/missing").await, Ok(None));
    let error = ec2.get_parameter("/denied").await.expect_err("denied");
    assert!(
        matches!(error, Ec2Error::Unauthorized { ref code, .. } if code == "AccessDeniedException")
    );
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn sqs_errors_become_the_sqs_seams_errors() {
    let missing = mock!(aws_sdk_sqs::Client::receive_message).then_error(|| {
        ReceiveMessageError::QueueDoesNotExist(
            aws_sdk_sqs::types::error::QueueDoesNotExist::builder()
                .meta(code_error(
                    "AWS.SimpleQueueService.NonExistentQueue",
                    "The specified queue does not exist.",
                ))
                .build(),
        )
    });
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-west-2"))
        .credentials_provider(credentials())
        .http_client(create_mock_http_client())
        .interceptor(interceptor(&[&missing]))
        .retry_config(retries())
        .build();
    let sqs = AwsSqs::with_url(
        aws_sdk_sqs::Client::from_conf(config),
        "https://sqs.us-west-2.amazonaws.com/1/q",
    );
    let error = sqs
        .receive_messages(10, Duration::from_secs(0))
        .await
        .expect_err("missing");
    assert!(matches!(error, SqsError::QueueDoesNotExist(_)), "{error:?}");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn iam_reads_of_missing_entities_are_none() {
    use aws_sdk_iam::operation::get_instance_profile::GetInstanceProfileError;
    let missing = mock!(aws_sdk_iam::Client::get_instance_profile).then_error(|| {
        GetInstanceProfileError::NoSuchEntityException(
            aws_sdk_iam::types::error::NoSuchEntityException::builder()
                .message("nope")
                .meta(code_error("NoSuchEntity", "nope"))
                .build(),
        )
    });
    let config = aws_sdk_iam::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(credentials())
        .http_client(create_mock_http_client())
        .interceptor(interceptor(&[&missing]))
        .retry_config(retries())
        .build();
    let iam = AwsIam::new(aws_sdk_iam::Client::from_conf(config));
    assert_eq!(iam.get_instance_profile("karpenter-x").await, Ok(None));
}

#[tokio::test]
async fn describe_instance_types_follows_every_page_and_reads_the_fields_the_catalog_needs() {
    let info = |name: ec2t::InstanceType, vcpus: i32| {
        ec2t::InstanceTypeInfo::builder()
            .instance_type(name)
            .processor_info(
                ec2t::ProcessorInfo::builder()
                    .supported_architectures(ec2t::ArchitectureType::X8664)
                    .manufacturer("Intel")
                    .build(),
            )
            .v_cpu_info(ec2t::VCpuInfo::builder().default_v_cpus(vcpus).build())
            .memory_info(ec2t::MemoryInfo::builder().size_in_mib(8192).build())
            .network_info(
                ec2t::NetworkInfo::builder()
                    .maximum_network_interfaces(3)
                    .ipv4_addresses_per_interface(10)
                    .network_cards(
                        ec2t::NetworkCardInfo::builder()
                            .baseline_bandwidth_in_gbps(0.75)
                            .build(),
                    )
                    .build(),
            )
            .supported_usage_classes(ec2t::UsageClassType::Spot)
            .build()
    };
    let first = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .match_requests(|r| r.next_token().is_none() && r.max_results() == Some(100))
        .then_output(move || {
            DescribeInstanceTypesOutput::builder()
                .instance_types(info(ec2t::InstanceType::M5Large, 2))
                .next_token("t2")
                .build()
        });
    let second = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .match_requests(|r| r.next_token() == Some("t2"))
        .then_output(move || {
            DescribeInstanceTypesOutput::builder()
                .instance_types(info(ec2t::InstanceType::C5Large, 2))
                .build()
        });
    let pricing = aws_sdk_pricing::Client::from_conf(
        aws_sdk_pricing::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(credentials())
            .http_client(create_mock_http_client())
            .build(),
    );
    let catalog = AwsCatalog::new(
        ec2_client(&[&first, &second]),
        pricing,
        "us-west-2",
        clock(),
    );
    let types = catalog.instance_types().await.expect("types");
    let names: Vec<&str> = types.iter().map(|t| t.instance_type.as_str()).collect();
    assert_eq!(names, ["c5.large", "m5.large"]);
    let m5 = &types[1];
    assert_eq!(
        (
            m5.vcpus,
            m5.memory_mib,
            m5.max_network_interfaces,
            m5.ipv4_addresses_per_interface
        ),
        (2, 8192, 3, 10)
    );
    assert_eq!(m5.network_baseline_mbps, Some(750));
    assert_eq!(m5.architectures, ["x86_64"]);
    assert_eq!(m5.usage_classes, ["spot"]);
}

#[test]
fn a_price_list_document_gives_its_types_on_demand_price() {
    let doc = r#"{"product":{"attributes":{"instanceType":"m5.large"}},"terms":{"OnDemand":{"X.Y":{"priceDimensions":{"X.Y.Z":{"pricePerUnit":{"USD":"0.0960000000"}}}}}}}"#;
    assert_eq!(
        karpenter_aws::catalog::price_list_entry(doc),
        Some(("m5.large".to_string(), 0.096))
    );
    assert_eq!(karpenter_aws::catalog::price_list_entry("{}"), None);
}

#[test]
fn the_pricing_api_is_asked_in_its_own_regions() {
    use karpenter_aws::config::pricing_region;
    assert_eq!(pricing_region("us-west-2"), "us-east-1");
    assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
    assert_eq!(pricing_region("ap-northeast-1"), "ap-south-1");
    assert_eq!(pricing_region("cn-north-1"), "cn-northwest-1");
}

#[test]
fn the_ids_an_instance_not_found_message_names_are_read_back() {
    use karpenter_aws::ec2::missing_instance_ids;
    assert_eq!(
        missing_instance_ids("The instance ID 'i-0abc' does not exist"),
        ["i-0abc"]
    );
    assert_eq!(
        missing_instance_ids("The instance IDs 'i-1, i-2' do not exist"),
        ["i-1", "i-2"]
    );
}
