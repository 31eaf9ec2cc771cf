//! kube-rs errors as the seam's [`KubeError`]: the API server's `Status` by HTTP code (and, for
//! 409, by reason), everything on the way to it (connection, TLS, timeouts, a proxy) as
//! retryable [`KubeError::Unavailable`].

use karpenter_core::seams::KubeError;
use kube::core::Status;

/// The seam's error for an API server `Status` (a failed call, or a watch's `ERROR` event).
pub fn from_status(status: &Status) -> KubeError {
    let message = if status.message.is_empty() {
        status.reason.clone()
    } else {
        status.message.clone()
    };
    match status.code {
        404 => KubeError::NotFound(message),
        // 409 is both "the name is taken" (create) and "stale resourceVersion" (update, patch).
        409 if status.reason == "AlreadyExists" => KubeError::AlreadyExists(message),
        409 => KubeError::Conflict(message),
        410 => KubeError::Gone(message),
        429 => KubeError::TooManyRequests(message),
        400 | 422 => KubeError::Invalid(message),
        401 | 403 => KubeError::Forbidden(message),
        // 408 (a server-side timeout), 5xx, and a Status without a code: the call may or may not
        // have taken effect; the caller re-reads and retries.
        _ if status.code == 408 || status.code == 0 || status.code >= 500 => {
            KubeError::Unavailable(format!("{} ({})", message, status.code))
        }
        code => KubeError::Invalid(format!("{message} (HTTP {code})")),
    }
}

/// The seam's error for any kube-rs error.
pub fn from_kube(error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) => from_status(&status),
        kube::Error::SerdeError(e) => KubeError::Decode(e.to_string()),
        kube::Error::BuildRequest(e) => KubeError::Invalid(format!("building the request: {e}")),
        kube::Error::Auth(e) => KubeError::Forbidden(format!("credentials: {e}")),
        // Connection, TLS, the service stack (timeouts), a stream cut mid-body.
        other => KubeError::Unavailable(other.to_string()),
    }
}
