//! The seams' shared behaviour: the manual clock, retry classification, typed helpers.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::api::NodePool;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchStream,
};
use karpenter_core::seams::{
    Clock, Ec2Error, KubeApi, KubeApiExt, KubeError, ManualClock, Retryable, SqsError,
};
use serde_json::{Value, json};

#[test]
fn the_manual_clock_moves_only_when_told() {
    let start: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
    let clock = ManualClock::new(start);
    assert_eq!(clock.now(), start);
    clock.advance(Duration::from_secs(90));
    assert_eq!(clock.now().to_string(), "2026-01-01T00:01:30Z");
}

#[test]
#[should_panic(expected = "must not move time backwards")]
fn the_manual_clock_refuses_to_go_backwards() {
    let start: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
    let clock = ManualClock::new(start);
    clock.set("2025-01-01T00:00:00Z".parse().expect("timestamp"));
}

#[test]
fn only_transient_errors_are_retryable() {
    assert!(KubeError::Conflict("rv".into()).is_retryable());
    assert!(KubeError::TooManyRequests("pdb".into()).is_retryable());
    assert!(!KubeError::Invalid("schema".into()).is_retryable());
    assert!(!KubeError::NotFound("x".into()).is_retryable());
    assert!(Ec2Error::Throttled("RequestLimitExceeded".into()).is_retryable());
    assert!(
        !Ec2Error::InsufficientCapacity {
            code: "InsufficientInstanceCapacity".into(),
            message: String::new()
        }
        .is_retryable()
    );
    assert!(!SqsError::QueueDoesNotExist("q".into()).is_retryable());
    assert!(SqsError::Unavailable("503".into()).is_retryable());
}

#[test]
fn resource_kinds_know_their_api_version() {
    assert_eq!(ResourceKind::NODE_POOL.api_version(), "karpenter.sh/v1");
    assert_eq!(ResourceKind::POD.api_version(), "v1");
    assert_eq!(
        (ResourceKind::POD.namespaced, ResourceKind::NODE.namespaced),
        (true, false)
    );
}

/// A one-object store: enough to exercise the typed helpers over the object-safe trait.
struct OneObject {
    object: Mutex<Option<Value>>,
}

#[async_trait]
impl KubeApi for OneObject {
    async fn get(&self, _: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        let object = self.object.lock().expect("lock").clone();
        Ok(object.filter(|o| o["metadata"]["name"] == json!(key.name)))
    }
    async fn list(&self, _: &ResourceKind, _: &ListOptions) -> Result<ObjectList, KubeError> {
        let items = self
            .object
            .lock()
            .expect("lock")
            .clone()
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
        Ok(ObjectList {
            items,
            resource_version: "1".into(),
        })
    }
    async fn create(&self, _: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        let mut slot = self.object.lock().expect("lock");
        if slot.is_some() {
            return Err(KubeError::AlreadyExists(
                object["metadata"]["name"].to_string(),
            ));
        }
        *slot = Some(object.clone());
        Ok(object)
    }
    async fn patch(
        &self,
        _: &ResourceKind,
        key: &ObjectKey,
        _: &Patch,
    ) -> Result<std::sync::Arc<Value>, KubeError> {
        Err(KubeError::NotFound(key.name.clone()))
    }
    async fn patch_status(
        &self,
        _: &ResourceKind,
        key: &ObjectKey,
        _: &Patch,
    ) -> Result<std::sync::Arc<Value>, KubeError> {
        Err(KubeError::NotFound(key.name.clone()))
    }
    async fn delete(
        &self,
        _: &ResourceKind,
        _: &ObjectKey,
        _: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        Ok(self
            .object
            .lock()
            .expect("lock")
            .take()
            .map_or(DeleteOutcome::NotFound, |_| DeleteOutcome::Deleted))
    }
    async fn evict(&self, _: &ObjectKey, _: &DeleteOptions) -> Result<(), KubeError> {
        Ok(())
    }
    async fn watch(
        &self,
        _: &ResourceKind,
        _: &ListOptions,
        rv: &str,
    ) -> Result<WatchStream, KubeError> {
        Err(KubeError::Gone(rv.to_string()))
    }
    async fn record_event(&self, _: &EventRecord) -> Result<(), KubeError> {
        Ok(())
    }
}

#[test]
fn typed_helpers_round_trip_objects_through_the_object_safe_seam() {
    let api: Box<dyn KubeApi> = Box::new(OneObject {
        object: Mutex::new(None),
    });
    let pool: NodePool =
        serde_json::from_value(super::validation::nodepool()).expect("valid NodePool");
    futures::executor::block_on(async {
        let kind = ResourceKind::NODE_POOL;
        assert_eq!(
            api.get_typed::<NodePool>(&kind, &ObjectKey::cluster("default"))
                .await,
            Ok(None)
        );
        let created = api.create_typed(&kind, &pool).await.expect("created");
        assert_eq!(created, pool);
        assert_eq!(
            api.get_typed::<NodePool>(&kind, &ObjectKey::cluster("default"))
                .await,
            Ok(Some(pool.clone()))
        );
        assert_eq!(
            api.list_typed::<NodePool>(&kind, &ListOptions::default())
                .await,
            Ok(vec![pool.clone()])
        );
        assert!(matches!(
            api.create_typed(&kind, &pool).await,
            Err(KubeError::AlreadyExists(_))
        ));
        assert_eq!(
            api.delete(
                &kind,
                &ObjectKey::cluster("default"),
                &DeleteOptions::default()
            )
            .await,
            Ok(DeleteOutcome::Deleted)
        );
        assert_eq!(
            api.delete(
                &kind,
                &ObjectKey::cluster("default"),
                &DeleteOptions::default()
            )
            .await,
            Ok(DeleteOutcome::NotFound)
        );
    });
}
