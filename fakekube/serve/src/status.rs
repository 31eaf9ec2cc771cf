//! `Status` objects: every error the server answers, with the `reason` and `code` clients branch
//! on (kubectl prints `Error from server (REASON): MESSAGE`; kube-rs maps `code`).

use karpenter_core::seams::KubeError;
use serde_json::{Value, json};

/// An error answer: HTTP status, reason and message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `PLURAL "NAME" not found`, as the real server words it.
    pub fn not_found(plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural} \"{name}\" not found"))
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format: {content_type}"),
        )
    }

    /// The `Status` object of this error.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}

impl From<KubeError> for ApiError {
    fn from(error: KubeError) -> Self {
        match error {
            KubeError::NotFound(m) => Self::new(404, "NotFound", m),
            KubeError::AlreadyExists(m) => Self::new(409, "AlreadyExists", m),
            KubeError::Conflict(m) => Self::new(409, "Conflict", m),
            KubeError::TooManyRequests(m) => Self::new(429, "TooManyRequests", m),
            KubeError::Invalid(m) => Self::new(422, "Invalid", m),
            KubeError::Gone(m) => Self::new(410, "Expired", m),
            KubeError::Forbidden(m) => Self::new(403, "Forbidden", m),
            // The API server's own failures (the eviction subresource's "more than one
            // PodDisruptionBudget") are 500s; everything else unavailable is a 503.
            KubeError::Unavailable(m) if m.starts_with("Internal error occurred") => {
                Self::new(500, "InternalError", m)
            }
            KubeError::Unavailable(m) => Self::new(503, "ServiceUnavailable", m),
            KubeError::Decode(m) => Self::new(400, "BadRequest", m),
        }
    }
}

/// A `Status` of success (what an eviction answers).
pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}
