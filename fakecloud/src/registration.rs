//! What a node's kubelet would register with, read from its launch template's user data the way
//! the AMI's bootstrap reads it: `--node-labels` / `--register-with-taints` kubelet flags (AL2
//! bootstrap arguments, AL2023 nodeadm `kubelet.flags`), nodeadm's `registerWithTaints`, and
//! Bottlerocket's `settings.kubernetes.node-labels` / `node-taints` tables.
//!
//! This is deliberately independent of how the controller writes user data: the simulation's
//! kubelet registers what the user data says, which checks the controller's bootstrap output.

use std::collections::BTreeMap;

/// A taint as the kubelet registers it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// Labels and taints found in user data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    pub labels: BTreeMap<String, String>,
    /// Sorted, without duplicates.
    pub taints: Vec<Taint>,
}

/// Reads labels and taints from (decoded) user data. Unreadable parts are skipped: a kubelet
/// with broken flags registers without them.
pub fn parse_user_data(user_data: &str) -> Registration {
    let mut registration = Registration::default();
    for value in flag_values(user_data, "--node-labels=") {
        for pair in value.split(',').filter(|p| !p.is_empty()) {
            if let Some((key, value)) = pair.split_once('=') {
                registration
                    .labels
                    .insert(key.trim().to_string(), value.trim().to_string());
            }
        }
    }
    for value in flag_values(user_data, "--register-with-taints=") {
        registration
            .taints
            .extend(value.split(',').filter_map(taint_from_flag));
    }
    for document in yaml_documents(user_data) {
        registration.taints.extend(nodeadm_taints(&document));
    }
    bottlerocket(user_data, &mut registration);
    registration.taints.sort();
    registration.taints.dedup();
    registration
}

/// User data as text: base64 is decoded (EC2 carries user data base64-encoded), anything else is
/// returned unchanged.
pub fn decode_user_data(user_data: &str) -> String {
    base64_decode(user_data)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| user_data.to_string())
}

/// Values of every `FLAG=value` / `FLAG="value"` occurrence.
fn flag_values<'a>(text: &'a str, flag: &str) -> Vec<&'a str> {
    let mut values = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(flag) {
        let after = &rest[start + flag.len()..];
        let (value, consumed) = match after.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let inner = &after[1..];
                let end = inner.find(quote).unwrap_or(inner.len());
                (&inner[..end], 1 + end)
            }
            _ => {
                let end = after
                    .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                    .unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        values.push(value);
        rest = &after[consumed.min(after.len())..];
    }
    values
}

/// `key=value:Effect` or `key:Effect`.
fn taint_from_flag(text: &str) -> Option<Taint> {
    let (key_value, effect) = text.trim().rsplit_once(':')?;
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    if key.is_empty() || effect.is_empty() {
        return None;
    }
    Some(Taint {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    })
}

/// The YAML documents of user data: each MIME part's body, or the whole text if it is not MIME.
fn yaml_documents(text: &str) -> Vec<String> {
    let boundary = text.find("boundary=").map(|i| {
        let rest = text[i + "boundary=".len()..].trim_start_matches('"');
        rest.split(|c: char| c == '"' || c.is_whitespace() || c == ';')
            .next()
            .unwrap_or_default()
            .to_string()
    });
    match boundary {
        Some(boundary) if !boundary.is_empty() => text
            .split(&format!("--{boundary}"))
            .skip(1)
            .filter_map(|part| {
                let part = part.replace("\r\n", "\n");
                part.split_once("\n\n").map(|(_, body)| body.to_string())
            })
            .collect(),
        _ => vec![text.to_string()],
    }
}

/// `spec.kubelet.config.registerWithTaints` of a nodeadm NodeConfig.
fn nodeadm_taints(document: &str) -> Vec<Taint> {
    let Ok(value) = serde_yaml::from_str::<serde_yaml::Value>(document) else {
        return Vec::new();
    };
    let taints = &value["spec"]["kubelet"]["config"]["registerWithTaints"];
    let Some(list) = taints.as_sequence() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|t| {
            let key = t["key"].as_str()?;
            let effect = t["effect"].as_str()?;
            Some(Taint {
                key: key.to_string(),
                value: t["value"].as_str().unwrap_or_default().to_string(),
                effect: effect.to_string(),
            })
        })
        .collect()
}

/// Bottlerocket TOML: `[settings.kubernetes.node-labels]` `"k" = "v"` lines and
/// `[settings.kubernetes.node-taints]` `"k" = ["v:Effect"]` lines.
fn bottlerocket(text: &str, registration: &mut Registration) {
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') && line.ends_with(']') {
            section = line.trim_matches(|c| c == '[' || c == ']').trim();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_matches('"').to_string();
        match section {
            "settings.kubernetes.node-labels" => {
                registration
                    .labels
                    .insert(key, value.trim().trim_matches('"').to_string());
            }
            "settings.kubernetes.node-taints" => {
                let values = value.trim().trim_start_matches('[').trim_end_matches(']');
                for entry in values.split(',') {
                    let entry = entry.trim().trim_matches('"');
                    if let Some((value, effect)) = entry.rsplit_once(':') {
                        registration.taints.push(Taint {
                            key: key.clone(),
                            value: value.to_string(),
                            effect: effect.to_string(),
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// Standard base64 (with padding, whitespace ignored); `None` if `text` is not base64.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if symbols.is_empty() || !symbols.len().is_multiple_of(4) {
        return None;
    }
    let value = |b: u8| -> Option<u32> {
        match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3);
    let chunks = symbols.len() / 4;
    for (i, chunk) in symbols.chunks(4).enumerate() {
        let padding = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if padding > 2 || (padding > 0 && i + 1 != chunks) {
            return None;
        }
        let mut bits = 0u32;
        for &b in &chunk[..4 - padding] {
            bits = (bits << 6) | value(b)?;
        }
        bits <<= 6 * padding as u32;
        let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        out.extend_from_slice(&bytes[..3 - padding]);
    }
    Some(out)
}
