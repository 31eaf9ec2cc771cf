//! EC2 `Filter` semantics: filters are ANDed, the values of one filter ORed, values may use the
//! `*` and `?` wildcards, `tag:KEY` matches a tag's value and `tag-key` a tag's key. Unknown filter
//! names are rejected as EC2 rejects them, so a typo in the controller fails loudly here too.

use std::collections::BTreeMap;

use karpenter_core::seams::ec2::{Ec2Error, Filter};

/// Rejects filters EC2 would reject for this resource: unknown names, empty value lists.
pub(crate) fn check(filters: &[Filter], known: &[&str]) -> Result<(), Ec2Error> {
    for filter in filters {
        let is_tag = filter.name == "tag-key" || filter.name.starts_with("tag:");
        if !is_tag && !known.contains(&filter.name.as_str()) {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidParameterValue".into(),
                message: format!("The filter '{}' is invalid", filter.name),
            });
        }
        if filter.values.is_empty() {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidParameterValue".into(),
                message: format!("The filter '{}' has no values", filter.name),
            });
        }
    }
    Ok(())
}

/// Whether a resource with `tags` and named `attribute`s passes every filter.
pub(crate) fn matches(
    filters: &[Filter],
    tags: &BTreeMap<String, String>,
    attribute: impl Fn(&str) -> Vec<String>,
) -> bool {
    filters.iter().all(|filter| {
        let candidates: Vec<String> = if filter.name == "tag-key" {
            tags.keys().cloned().collect()
        } else if let Some(key) = filter.name.strip_prefix("tag:") {
            tags.get(key).cloned().into_iter().collect()
        } else {
            attribute(&filter.name)
        };
        filter
            .values
            .iter()
            .any(|pattern| candidates.iter().any(|value| glob(pattern, value)))
    })
}

/// EC2 wildcard match: `*` is any run of characters, `?` any one character.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // Classic two-pointer match with backtracking to the last `*`.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}
