//! Loading the AWS configuration the way every AWS tool does, plus the bounds this controller
//! puts on each call.
//!
//! - **Credentials** come from aws-config's default chain: environment variables, the shared
//!   profile, web identity (IRSA: `AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE`), the container
//!   credentials endpoint (EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` +
//!   `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`), then IMDS.
//! - **Region**: [`Settings::region`], else `AWS_REGION`/`AWS_DEFAULT_REGION`, the profile, IMDS.
//! - **Endpoint**: [`Settings::endpoint_url`], else `AWS_ENDPOINT_URL` (and the per-service
//!   `AWS_ENDPOINT_URL_EC2`, ...), which aws-config honours, so every client can be pointed at
//!   `fakecloud serve`.
//! - **Retries**: the SDK's standard mode (exponential backoff with jitter, throttling and
//!   transient errors only), at most [`Settings::attempts_max`] attempts.
//! - **Timeouts** on every call: connect, each attempt, and the whole operation with its retries;
//!   SQS gets a longer attempt timeout than its 20 s long poll.

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use karpenter_core::seams::Clock;
use karpenter_core::seams::sqs::{RECEIVE_WAIT_MAX, SqsError};

use crate::{AwsCatalog, AwsEc2, AwsEks, AwsIam, AwsSqs};

/// How the clients are built.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `None`: the default region chain.
    pub region: Option<String>,
    /// `None`: `AWS_ENDPOINT_URL` (or the real endpoints).
    pub endpoint_url: Option<String>,
    /// `Some((access key id, secret))`: fixed credentials instead of the default chain (tests
    /// against a fake endpoint).
    pub static_credentials: Option<(String, String)>,
    pub connect_timeout: Duration,
    /// One attempt of a call (SQS: plus the long poll).
    pub attempt_timeout: Duration,
    /// A call with all its retries.
    pub call_timeout: Duration,
    pub attempts_max: u32,
    /// The standard retry's base backoff (the SDK's default is 1 s; jittered and doubled per
    /// attempt).
    pub retry_initial_backoff: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            region: None,
            endpoint_url: None,
            static_credentials: None,
            connect_timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
            attempts_max: 3,
            retry_initial_backoff: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no AWS region: set AWS_REGION (or the profile's region); the pod's metadata did not give one"
    )]
    NoRegion,
}

/// The region the Pricing API is called in for `region` (it has endpoints in a few regions only).
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The loaded configuration and the seam implementations built from it.
#[derive(Clone)]
pub struct Aws {
    sdk: SdkConfig,
    region: String,
    settings: Settings,
    clock: Arc<dyn Clock>,
}

impl Aws {
    /// Resolves region, endpoint and credentials provider (credentials themselves are fetched
    /// lazily, on the first call).
    pub async fn load(settings: Settings, clock: Arc<dyn Clock>) -> Result<Self, ConfigError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(settings.attempts_max)
                    .with_initial_backoff(settings.retry_initial_backoff),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(settings.connect_timeout)
                    .operation_attempt_timeout(settings.attempt_timeout)
                    .operation_timeout(settings.call_timeout)
                    .build(),
            );
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some((key, secret)) = &settings.static_credentials {
            loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
                key, secret, None, None, "static",
            ));
        }
        let sdk = loader.load().await;
        let region = sdk.region().ok_or(ConfigError::NoRegion)?.to_string();
        Ok(Self {
            sdk,
            region,
            settings,
            clock,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn sdk_config(&self) -> &SdkConfig {
        &self.sdk
    }

    pub fn ec2(&self) -> AwsEc2 {
        AwsEc2::new(
            aws_sdk_ec2::Client::new(&self.sdk),
            aws_sdk_ssm::Client::new(&self.sdk),
            self.clock.clone(),
        )
    }

    pub fn iam(&self) -> AwsIam {
        AwsIam::new(aws_sdk_iam::Client::new(&self.sdk))
    }

    pub fn eks(&self) -> AwsEks {
        AwsEks::new(aws_sdk_eks::Client::new(&self.sdk))
    }

    pub fn catalog(&self) -> AwsCatalog {
        let pricing = aws_sdk_pricing::config::Builder::from(&self.sdk)
            .region(Region::new(pricing_region(&self.region)))
            .build();
        AwsCatalog::new(
            aws_sdk_ec2::Client::new(&self.sdk),
            aws_sdk_pricing::Client::from_conf(pricing),
            &self.region,
            self.clock.clone(),
        )
    }

    /// The interruption queue `queue_name`, its URL resolved now.
    pub async fn sqs(&self, queue_name: &str) -> Result<AwsSqs, SqsError> {
        let attempt = self.settings.attempt_timeout + RECEIVE_WAIT_MAX;
        let config = aws_sdk_sqs::config::Builder::from(&self.sdk)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(self.settings.connect_timeout)
                    .operation_attempt_timeout(attempt)
                    .operation_timeout(self.settings.call_timeout.max(attempt * 2))
                    .build(),
            )
            .build();
        AwsSqs::connect(aws_sdk_sqs::Client::from_conf(config), queue_name).await
    }
}
