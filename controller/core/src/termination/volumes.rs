//! The VolumeAttachment wait between the drain and the instance's termination.

use super::*;

impl Termination {
    /// VolumeAttachments on the node still to go: those of volumes the drain moves (attachments
    /// of pods that are not drained, such as ones tolerating the disrupted taint, stay until the
    /// instance goes, and attachments without a PersistentVolume do not block).
    pub(super) async fn pending_attachments(
        &self,
        node_name: &str,
        pods: &[&Pod],
        view: &View,
        now: Timestamp,
    ) -> Result<usize, KubeError> {
        let on_node: Vec<&Value> = view
            .attachments
            .iter()
            .map(|va| &**va)
            .filter(|va| va["spec"]["nodeName"].as_str() == Some(node_name))
            .filter(|va| va["spec"]["source"]["persistentVolumeName"].is_string())
            .collect();
        if on_node.is_empty() {
            return Ok(0);
        }
        let mut kept_volumes = BTreeSet::new();
        for pod in pods.iter().filter(|p| !drain::is_drainable(p, now)) {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            for volume in pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_deref())
                .unwrap_or_default()
            {
                let Some(source) = &volume.persistent_volume_claim else {
                    continue;
                };
                let claim: Option<PersistentVolumeClaim> = self
                    .ctx
                    .kube
                    .get_typed(
                        &ResourceKind::PERSISTENT_VOLUME_CLAIM,
                        &ObjectKey::namespaced(namespace.clone(), source.claim_name.clone()),
                    )
                    .await
                    .or_else(|err| match err {
                        KubeError::Decode(_) => Ok(None),
                        other => Err(other),
                    })?;
                if let Some(volume_name) = claim.and_then(|c| c.spec).and_then(|s| s.volume_name) {
                    kept_volumes.insert(volume_name);
                }
            }
        }
        Ok(on_node
            .iter()
            .filter(|va| {
                va["spec"]["source"]["persistentVolumeName"]
                    .as_str()
                    .is_some_and(|pv| !kept_volumes.contains(pv))
            })
            .count())
    }
}
