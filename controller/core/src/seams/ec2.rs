//! The EC2 seam: the EC2 (and SSM parameter) calls the launch, garbage-collection and
//! node-class paths make. Shapes follow the EC2 API, trimmed to the fields the controller reads.

use std::collections::BTreeMap;

use async_trait::async_trait;
use jiff::Timestamp;

use super::Retryable;
pub use crate::api::ec2nodeclass::{InstanceMatchCriteria, ReservationType};
pub use crate::catalog::CapacityType;

/// A tag filter: instances/subnets/... whose tag `key` has one of `values` (`*` = any value).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    /// EC2 filter name, e.g. `tag:karpenter.sh/discovery`, `instance-state-name`, `subnet-id`.
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(name: impl Into<String>, values: &[&str]) -> Self {
        Self {
            name: name.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// One launch option of a fleet request: an instance type in a subnet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetOverride {
    pub instance_type: String,
    pub subnet_id: String,
    pub zone: String,
    /// Price hint used by `lowest-price`; EC2 uses its own prices when absent.
    pub price: Option<f64>,
}

/// `CreateFleet` of type `instant` for one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateFleetRequest {
    pub capacity_type: CapacityType,
    /// A `reserved` launch into a capacity block: EC2 wants the `capacity-block` target
    /// capacity type (and the launch template its market type).
    pub capacity_block: bool,
    pub launch_template_name: String,
    /// Instance types × subnets to choose from (EC2 allows up to 300).
    pub overrides: Vec<FleetOverride>,
    /// Tags for the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    /// Idempotency token: the same token returns the same result instead of a second instance.
    pub client_token: String,
    /// Fleet `context` passthrough from the EC2NodeClass.
    pub context: Option<String>,
}

/// An instance a fleet launched.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetInstance {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub capacity_type: CapacityType,
    /// The capacity reservation the instance runs in, if any.
    pub capacity_reservation_id: Option<String>,
}

/// One override EC2 could not fulfil, with its error code (e.g. `InsufficientInstanceCapacity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

/// Result of `CreateFleet`: the launched instance (if any) and the per-override errors.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CreateFleetResponse {
    pub instances: Vec<FleetInstance>,
    pub errors: Vec<FleetError>,
}

/// Instance lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

/// An instance as `DescribeInstances` reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub image_id: String,
    pub capacity_type: CapacityType,
    pub state: InstanceState,
    pub launch_time: Timestamp,
    pub private_dns_name: String,
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation the instance runs in (`CapacityReservationId`); an instance
    /// whose reservation ended runs on as on-demand with none.
    pub capacity_reservation_id: Option<String>,
    /// The security groups of its primary network interface (`SecurityGroups`), sorted: what
    /// security-group drift compares with the EC2NodeClass's resolved groups.
    pub security_group_ids: Vec<String>,
}

/// A subnet with the free-IP count used to pick the emptiest subnet per zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub subnet_id: String,
    pub zone: String,
    pub zone_id: String,
    pub available_ip_address_count: u32,
    pub tags: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityGroup {
    pub group_id: String,
    pub group_name: String,
    pub tags: BTreeMap<String, String>,
}

/// An AMI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub image_id: String,
    pub name: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    pub creation_date: Timestamp,
    pub deprecated: bool,
    pub owner_id: String,
    pub tags: BTreeMap<String, String>,
}

/// `DescribeImages` query: by ids, or by filters and owners.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageQuery {
    pub image_ids: Vec<String>,
    pub owners: Vec<String>,
    pub filters: Vec<Filter>,
}

/// A launch template, as created by Karpenter for one (AMI, user data, security groups, ...) set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplate {
    pub launch_template_id: String,
    pub launch_template_name: String,
    pub tags: BTreeMap<String, String>,
}

/// `CreateLaunchTemplate` input, trimmed to what Karpenter sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplateRequest {
    pub name: String,
    pub image_id: String,
    pub user_data: String,
    pub security_group_ids: Vec<String>,
    pub instance_profile: String,
    pub tags: BTreeMap<String, String>,
    /// Raw JSON of block devices, metadata options and network interfaces from the EC2NodeClass.
    pub extra: BTreeMap<String, String>,
}

/// Errors of the EC2 seam, by EC2 error code family.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ec2Error {
    /// `RequestLimitExceeded`: back off and retry.
    #[error("throttled: {0}")]
    Throttled(String),
    /// `InsufficientInstanceCapacity` and friends for a whole request (per-override capacity
    /// errors come back in [`CreateFleetResponse::errors`] instead).
    #[error("insufficient capacity ({code}): {message}")]
    InsufficientCapacity { code: String, message: String },
    /// `Invalid*.NotFound`: the named resource does not exist (yet, under eventual consistency).
    #[error("not found ({code}): {message}")]
    NotFound { code: String, message: String },
    /// `InvalidParameter*`, `Unsupported`, malformed input: fix the request, do not retry.
    #[error("invalid request ({code}): {message}")]
    InvalidRequest { code: String, message: String },
    /// `UnauthorizedOperation`, `AuthFailure`: needs operator action.
    #[error("unauthorized ({code}): {message}")]
    Unauthorized { code: String, message: String },
    /// 5xx (`InternalError`, `Unavailable`), timeouts, connection errors.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Retryable for Ec2Error {
    fn is_retryable(&self) -> bool {
        matches!(self, Ec2Error::Throttled(_) | Ec2Error::Unavailable(_))
    }
}

/// One check of `DescribeInstanceStatus` (`InstanceStatus.Details[]`, `SystemStatus.Details[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCheck {
    /// `reachability`.
    pub name: String,
    /// `passed`, `failed`, `insufficient-data`, `initializing`.
    pub status: String,
    /// Since when a failed check has failed.
    pub impaired_since: Option<Timestamp>,
}

/// One `DescribeInstanceStatus` entry: the status checks and scheduled events of a running
/// instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceStatus {
    pub instance_id: String,
    /// The instance's own checks (its OS and network reachability).
    pub instance_checks: Vec<StatusCheck>,
    /// The host's checks (AWS hardware, power, network).
    pub system_checks: Vec<StatusCheck>,
    /// Codes of its scheduled events: `instance-reboot`, `system-reboot`, `system-maintenance`,
    /// `instance-retirement`, `instance-stop`.
    pub events: Vec<String>,
}

/// A capacity reservation as `DescribeCapacityReservations` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityReservation {
    /// `cr-...`.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// The account that owns it (reservations can be shared from another account).
    pub owner_id: String,
    /// `open` reservations take any matching on-demand launch that does not opt out; `targeted`
    /// ones only launches that name them.
    pub instance_match_criteria: InstanceMatchCriteria,
    pub reservation_type: ReservationType,
    /// Interruptible ODCRs can be reclaimed by their owner, with a warning.
    pub interruptible: bool,
    /// `active`, `expired`, `cancelled`, `pending`, `failed`, `scheduled`, ...
    pub state: String,
    pub total_instance_count: u32,
    pub available_instance_count: u32,
    /// When it ends (capacity blocks always have one; ODCRs may be unlimited).
    pub end_date: Option<Timestamp>,
    pub tags: BTreeMap<String, String>,
}

/// The EC2 calls the controller makes.
///
/// Contract shared by every implementation:
/// - `Describe*` by id omit ids they cannot see (EC2 is eventually consistent: a just-launched
///   instance may be missing for a while); callers never read absence as "terminated" inside the
///   consistency window;
/// - `TerminateInstances` is idempotent: terminating a terminated or unknown instance succeeds;
/// - results are returned in a defined order (by id), so callers iterate deterministically.
#[async_trait]
pub trait Ec2: Send + Sync {
    /// Launches one instance from the cheapest/most available override (`lowest-price` for
    /// on-demand, `price-capacity-optimized` for spot). An empty `instances` with `errors` means
    /// no override could be fulfilled; whole-request failures are `Err`.
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error>;

    /// Instances by id (when `instance_ids` is non-empty) or by filters.
    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error>;

    /// Terminates instances; returns the ids now shutting down or terminated.
    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error>;

    /// Adds or overwrites tags on resources.
    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error>;

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error>;

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error>;

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error>;

    /// SSM `GetParameter` for public AMI parameters (alias resolution); `Ok(None)` if absent.
    /// Lives on this seam because the launch path is its only user.
    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error>;

    /// Creates a launch template; `InvalidRequest` with code
    /// `InvalidLaunchTemplateName.AlreadyExistsException` if the name is taken.
    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error>;

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error>;

    /// Deletes a launch template by name; deleting a missing one succeeds.
    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error>;

    /// `DescribeInstanceStatus` of running instances matching `filters` (`instance-status.status`,
    /// `system-status.status`, `event.code`), every page, by instance id.
    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error>;

    /// `DescribeCapacityReservations` by ids (when non-empty; EC2 then fails with
    /// `InvalidCapacityReservationId.NotFound` for an id it does not know) or by filters
    /// (`state`, `owner-id`, `tag:<key>`, `tag-key`, `instance-match-criteria`,
    /// `instance-type`, `availability-zone`), every page, by id.
    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error>;
}
