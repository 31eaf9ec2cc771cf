//! AWS errors into the seams' typed errors.
//!
//! Every SDK failure becomes a [`Failure`]: a [`Class`] (what the caller can do about it), the
//! AWS error code and the message. Each seam's error type is then built from the class, so one
//! table decides for EC2, SSM, SQS, IAM, EKS and Pricing alike which codes are throttling,
//! capacity, not-found, unauthorized, invalid or transient.
//!
//! The SDK's standard retry has already retried throttling and transient errors (with jittered
//! exponential backoff) before an error gets here: what arrives is what is left after them.

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use karpenter_core::seams::catalog::CatalogError;
use karpenter_core::seams::ec2::Ec2Error;
use karpenter_core::seams::eks::EksError;
use karpenter_core::seams::iam::IamError;
use karpenter_core::seams::sqs::SqsError;

/// What a caller can do about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Back off and retry.
    Throttled,
    /// EC2 has no capacity for the request (instance type, zone, capacity type) or the account
    /// is at a launch quota.
    Capacity,
    /// The named resource does not exist (or is not visible yet).
    NotFound,
    /// The name is taken.
    AlreadyExists,
    /// The resource is in a state that forbids the call (IAM `LimitExceeded`, `DeleteConflict`).
    Conflict,
    /// Credentials or permissions: needs an operator.
    Unauthorized,
    /// The request is wrong: fix it, do not retry.
    Invalid,
    /// 5xx, timeouts, connection failures, unreadable answers.
    Unavailable,
}

/// One classified SDK failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub class: Class,
    pub code: String,
    pub message: String,
}

const THROTTLING: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
];

/// Upstream's unfulfillable-capacity codes plus EC2's other "no capacity" answers.
const CAPACITY: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
    "InstanceLimitExceeded",
];

const NOT_FOUND: &[&str] = &[
    "NoSuchEntity",
    "ParameterNotFound",
    "ParameterVersionNotFound",
    "ResourceNotFoundException",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.NonExistentQueue",
    "NotFoundException",
];

const UNAUTHORIZED: &[&str] = &[
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "OptInRequired",
    "Blocked",
];

const UNAVAILABLE: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServiceError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "ServerException",
    "ServiceFailure",
    "ServerInternal",
];

/// The class of an AWS error code answered with HTTP `status`.
pub fn classify(code: &str, status: u16) -> Class {
    if THROTTLING.contains(&code) {
        Class::Throttled
    } else if CAPACITY.contains(&code) {
        Class::Capacity
    } else if NOT_FOUND.contains(&code)
        || code.ends_with(".NotFound")
        || code.ends_with(".NotFoundException")
    {
        Class::NotFound
    } else if code == "EntityAlreadyExists"
        || code.ends_with("AlreadyExists")
        || code.ends_with(".AlreadyExistsException")
        || code == "ResourceInUseException"
    {
        Class::AlreadyExists
    } else if code == "LimitExceeded" || code == "DeleteConflict" {
        Class::Conflict
    } else if UNAUTHORIZED.contains(&code) || code.starts_with("AuthFailure") {
        Class::Unauthorized
    } else if UNAVAILABLE.contains(&code) || status >= 500 {
        Class::Unavailable
    } else if status == 429 {
        Class::Throttled
    } else if status == 403 || status == 401 {
        Class::Unauthorized
    } else {
        Class::Invalid
    }
}

/// Classifies one SDK failure.
pub fn failure<E>(error: SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match &error {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = error.code().unwrap_or("Unknown").to_string();
            let message = error
                .message()
                .map(String::from)
                .unwrap_or_else(|| DisplayErrorContext(&error).to_string());
            Failure {
                class: classify(&code, status),
                code,
                message,
            }
        }
        SdkError::ConstructionFailure(_) => Failure {
            class: Class::Invalid,
            code: "ConstructionFailure".into(),
            message: DisplayErrorContext(&error).to_string(),
        },
        SdkError::TimeoutError(_) => Failure {
            class: Class::Unavailable,
            code: "Timeout".into(),
            message: DisplayErrorContext(&error).to_string(),
        },
        _ => Failure {
            class: Class::Unavailable,
            code: "Dispatch".into(),
            message: DisplayErrorContext(&error).to_string(),
        },
    }
}

impl Failure {
    /// `CODE: message`, the text errors without a code field carry.
    fn text(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

impl From<Failure> for Ec2Error {
    fn from(f: Failure) -> Self {
        let Failure {
            class,
            code,
            message,
        } = f.clone();
        match class {
            Class::Throttled => Ec2Error::Throttled(f.text()),
            Class::Capacity => Ec2Error::InsufficientCapacity { code, message },
            Class::NotFound => Ec2Error::NotFound { code, message },
            Class::Unauthorized => Ec2Error::Unauthorized { code, message },
            Class::Unavailable => Ec2Error::Unavailable(f.text()),
            Class::AlreadyExists | Class::Conflict | Class::Invalid => {
                Ec2Error::InvalidRequest { code, message }
            }
        }
    }
}

impl From<Failure> for SqsError {
    fn from(f: Failure) -> Self {
        let text = f.text();
        match f.class {
            Class::Throttled => SqsError::Throttled(text),
            Class::NotFound => SqsError::QueueDoesNotExist(text),
            Class::Unauthorized => SqsError::Forbidden(text),
            Class::Unavailable => SqsError::Unavailable(text),
            _ if f.code.contains("ReceiptHandle") => SqsError::InvalidReceiptHandle(text),
            // Anything else SQS refuses is a request the controller cannot repair by retrying
            // soon; it reads like a broken setup, which `Forbidden` surfaces.
            _ => SqsError::Forbidden(text),
        }
    }
}

impl From<Failure> for IamError {
    fn from(f: Failure) -> Self {
        let Failure {
            class,
            code,
            message,
        } = f.clone();
        match class {
            Class::Throttled => IamError::Throttled(f.text()),
            Class::NotFound => IamError::NotFound { code, message },
            Class::AlreadyExists => IamError::AlreadyExists { code, message },
            Class::Conflict | Class::Capacity => IamError::Conflict { code, message },
            Class::Unauthorized => IamError::Unauthorized { code, message },
            Class::Unavailable => IamError::Unavailable(f.text()),
            Class::Invalid => IamError::InvalidRequest { code, message },
        }
    }
}

impl From<Failure> for EksError {
    fn from(f: Failure) -> Self {
        let Failure {
            class,
            code,
            message,
        } = f.clone();
        match class {
            Class::Throttled => EksError::Throttled(f.text()),
            Class::NotFound => EksError::NotFound { code, message },
            Class::Unauthorized => EksError::Unauthorized { code, message },
            Class::Unavailable => EksError::Unavailable(f.text()),
            _ => EksError::InvalidRequest { code, message },
        }
    }
}

impl From<Failure> for CatalogError {
    fn from(f: Failure) -> Self {
        let Failure {
            class,
            code,
            message,
        } = f.clone();
        match class {
            Class::Throttled => CatalogError::Throttled(f.text()),
            Class::Unauthorized => CatalogError::Unauthorized { code, message },
            Class::Unavailable => CatalogError::Unavailable(f.text()),
            _ => CatalogError::InvalidRequest { code, message },
        }
    }
}

/// `?`-friendly: an SDK result with its error classified; `?` then converts the [`Failure`]
/// into the calling seam's error type.
pub trait SdkResultExt<T> {
    fn seam(self) -> Result<T, Failure>;
}

impl<T, E> SdkResultExt<T> for Result<T, SdkError<E, HttpResponse>>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    fn seam(self) -> Result<T, Failure> {
        self.map_err(failure)
    }
}
