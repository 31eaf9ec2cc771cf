//! Custom AMIs: the user's user data verbatim. Karpenter injects nothing; the image's own
//! bootstrap (or the user's script) joins the cluster, or does not.

use super::BootstrapInput;

pub(super) fn generate(input: &BootstrapInput) -> String {
    input.user_data.unwrap_or_default().to_string()
}
