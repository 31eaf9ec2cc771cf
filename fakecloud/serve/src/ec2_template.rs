//! `CreateLaunchTemplate`'s `LaunchTemplateData` on the wire, read back into the seam's `extra`
//! settings in the shapes the launch path writes them (the inverse of the AWS adapter's
//! `template` module): block devices, metadata options, monitoring, a public IP, the
//! capacity-reservation preference or target and the market type. The fake cloud acts on the
//! reservation settings; the others are kept so tests can see what a client asked for.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::wire::Params;

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_string(), value);
    }
}

fn boolean(p: &Params, key: &str) -> Option<Value> {
    p.get(key).map(|v| json!(v.eq_ignore_ascii_case("true")))
}

fn string(p: &Params, key: &str) -> Option<Value> {
    p.get(key).map(|v| json!(v))
}

fn number(p: &Params, key: &str) -> Option<Value> {
    p.int(key).map(|v| json!(v))
}

/// The `extra` settings of `data` (the parameters below `LaunchTemplateData.`).
pub fn extra(data: &Params) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mappings: Vec<Value> = data
        .members("BlockDeviceMapping")
        .iter()
        .map(|m| {
            let mut mapping = Map::new();
            put(&mut mapping, "deviceName", string(m, "DeviceName"));
            let ebs = m.nested("Ebs");
            let mut e = Map::new();
            put(
                &mut e,
                "deleteOnTermination",
                boolean(&ebs, "DeleteOnTermination"),
            );
            put(&mut e, "encrypted", boolean(&ebs, "Encrypted"));
            put(&mut e, "iops", number(&ebs, "Iops"));
            put(&mut e, "kmsKeyID", string(&ebs, "KmsKeyId"));
            put(&mut e, "snapshotID", string(&ebs, "SnapshotId"));
            put(&mut e, "throughput", number(&ebs, "Throughput"));
            put(
                &mut e,
                "volumeInitializationRate",
                number(&ebs, "VolumeInitializationRate"),
            );
            put(
                &mut e,
                "volumeSize",
                ebs.get("VolumeSize").map(|gib| json!(format!("{gib}Gi"))),
            );
            put(&mut e, "volumeType", string(&ebs, "VolumeType"));
            if !e.is_empty() {
                mapping.insert("ebs".into(), Value::Object(e));
            }
            Value::Object(mapping)
        })
        .collect();
    if !mappings.is_empty() {
        out.insert(
            "blockDeviceMappings".into(),
            Value::Array(mappings).to_string(),
        );
    }
    let metadata = data.nested("MetadataOptions");
    let mut m = Map::new();
    put(&mut m, "httpEndpoint", string(&metadata, "HttpEndpoint"));
    put(
        &mut m,
        "httpProtocolIPv6",
        string(&metadata, "HttpProtocolIpv6"),
    );
    put(
        &mut m,
        "httpPutResponseHopLimit",
        number(&metadata, "HttpPutResponseHopLimit"),
    );
    put(&mut m, "httpTokens", string(&metadata, "HttpTokens"));
    put(
        &mut m,
        "instanceMetadataTags",
        string(&metadata, "InstanceMetadataTags"),
    );
    if !m.is_empty() {
        out.insert("metadataOptions".into(), Value::Object(m).to_string());
    }
    if let Some(enabled) = boolean(data, "Monitoring.Enabled") {
        out.insert("monitoring".into(), json!({"enabled": enabled}).to_string());
    }
    if let Some(public) = data
        .members("NetworkInterface")
        .first()
        .and_then(|n| n.get("AssociatePublicIpAddress").map(str::to_string))
    {
        out.insert(
            "associatePublicIPAddress".into(),
            public.eq_ignore_ascii_case("true").to_string(),
        );
    }
    let spec = data.nested("CapacityReservationSpecification");
    let mut s = Map::new();
    put(
        &mut s,
        "capacityReservationPreference",
        string(&spec, "CapacityReservationPreference"),
    );
    if let Some(id) = spec.get("CapacityReservationTarget.CapacityReservationId") {
        s.insert(
            "capacityReservationTarget".into(),
            json!({"capacityReservationId": id}),
        );
    }
    if !s.is_empty() {
        out.insert(
            "capacityReservationSpecification".into(),
            Value::Object(s).to_string(),
        );
    }
    if let Some(market) = data.get("InstanceMarketOptions.MarketType") {
        out.insert(
            "instanceMarketOptions".into(),
            json!({"marketType": market}).to_string(),
        );
    }
    out
}

/// The template's security groups: at the top level, or on its first network interface (where
/// EC2 wants them when the interface is configured).
pub fn security_groups(data: &Params) -> Vec<String> {
    let top = data.list("SecurityGroupId");
    if !top.is_empty() {
        return top;
    }
    data.members("NetworkInterface")
        .first()
        .map(|n| n.list("SecurityGroupId"))
        .unwrap_or_default()
}
