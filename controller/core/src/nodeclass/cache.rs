//! The EC2 answers a launch reads but rarely change, cached with upstream's TTLs: a burst of a
//! thousand launches resolves its EC2NodeClass once, not a thousand times.
//!
//! [`CachedEc2`] is a layer over the `Ec2` seam (the seam keeps its shape): `DescribeSubnets`,
//! `DescribeSecurityGroups` and `DescribeImages` by their filters for [`DESCRIBE_TTL`]
//! (upstream's `DefaultTTL`, 1 minute), SSM parameters for [`SSM_MUTABLE_TTL`] when they name a
//! moving release (`recommended`, `latest`) and [`SSM_TTL`] otherwise (upstream's `SSMCacheTTL`,
//! 24 h), and launch templates it created or found existing by name for [`DESCRIBE_TTL`]
//! (upstream's launch-template cache; `CreateLaunchTemplate` for a name it knows is answered
//! from the cache). Errors are never cached. Every other call goes straight through. Time comes
//! from the Clock seam; entries are kept in ordered maps and bounded by [`CACHE_ENTRIES_MAX`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;

use crate::seams::Clock;
use crate::seams::ec2::{
    CapacityReservation, CreateFleetRequest, CreateFleetResponse, Ec2, Ec2Error, Filter, Image,
    ImageQuery, Instance, InstanceStatus, LaunchTemplate, LaunchTemplateRequest, SecurityGroup,
    Subnet,
};

/// Subnets, security groups, images and launch templates (upstream's `DefaultTTL`).
pub const DESCRIBE_TTL: Duration = Duration::from_secs(60);
/// SSM parameters of pinned releases (upstream's `SSMCacheTTL`).
pub const SSM_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// SSM parameters that move with each release (`.../recommended/...`, `.../latest/...`): a new
/// release is picked up within this.
pub const SSM_MUTABLE_TTL: Duration = Duration::from_secs(5 * 60);
/// Entries one cache holds at most; the oldest-expiring go first when it is full.
pub const CACHE_ENTRIES_MAX: usize = 10_000;

/// One TTL cache, ordered by key.
struct Ttl<K, V> {
    entries: BTreeMap<K, (Timestamp, V)>,
}

impl<K: Ord + Clone, V: Clone> Ttl<K, V> {
    fn new() -> Self {
        Self {
            entries: BTreeMap::new(),
        }
    }

    fn get(&self, key: &K, now: Timestamp) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(expires, _)| *expires > now)
            .map(|(_, value)| value.clone())
    }

    fn put(&mut self, key: K, value: V, now: Timestamp, ttl: Duration) {
        self.entries.retain(|_, (expires, _)| *expires > now);
        if self.entries.len() >= CACHE_ENTRIES_MAX {
            let soonest = self
                .entries
                .iter()
                .min_by_key(|(_, (expires, _))| *expires)
                .map(|(k, _)| k.clone());
            if let Some(soonest) = soonest {
                self.entries.remove(&soonest);
            }
        }
        let expires = now.saturating_add(ttl).unwrap_or(now);
        self.entries.insert(key, (expires, value));
    }
}

#[derive(Default)]
struct Caches {
    subnets: Option<Ttl<Vec<Filter>, Vec<Subnet>>>,
    groups: Option<Ttl<Vec<Filter>, Vec<SecurityGroup>>>,
    images: Option<Ttl<ImageQuery, Vec<Image>>>,
    parameters: Option<Ttl<String, Option<String>>>,
    templates: Option<Ttl<String, LaunchTemplate>>,
}

/// One lock per cache, held while a miss is filled: concurrent launches that miss the same
/// cache wait for the first one's answer instead of each calling EC2 (upstream holds its
/// subnet, security-group and launch-template providers' locks the same way). Async locks are
/// FIFO, so who fills first is the order of asking, and a seed replays.
#[derive(Default)]
struct Fills {
    subnets: tokio::sync::Mutex<()>,
    groups: tokio::sync::Mutex<()>,
    images: tokio::sync::Mutex<()>,
    parameters: tokio::sync::Mutex<()>,
    templates: tokio::sync::Mutex<()>,
}

/// The caching layer over an `Ec2` (see the module docs).
pub struct CachedEc2 {
    inner: Arc<dyn Ec2>,
    clock: Arc<dyn Clock>,
    caches: Mutex<Caches>,
    fills: Fills,
}

impl CachedEc2 {
    pub fn new(inner: Arc<dyn Ec2>, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            clock,
            caches: Mutex::new(Caches::default()),
            fills: Fills::default(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Caches) -> T) -> T {
        let mut caches = self
            .caches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut caches)
    }
}

/// Whether an SSM parameter names a moving release.
fn mutable_parameter(name: &str) -> bool {
    name.contains("/recommended/") || name.contains("/latest/")
}

#[async_trait]
impl Ec2 for CachedEc2 {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        self.inner.create_fleet(request).await
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        self.inner.describe_instances(instance_ids, filters).await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        self.inner.terminate_instances(instance_ids).await
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        self.inner.create_tags(resource_ids, tags).await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        let key = filters.to_vec();
        let hit = |c: &mut Caches, now| c.subnets.get_or_insert_with(Ttl::new).get(&key, now);
        if let Some(hit) = self.with(|c| hit(c, self.clock.now())) {
            return Ok(hit);
        }
        let _filling = self.fills.subnets.lock().await;
        let now = self.clock.now();
        if let Some(hit) = self.with(|c| hit(c, now)) {
            return Ok(hit);
        }
        let subnets = self.inner.describe_subnets(filters).await?;
        self.with(|c| {
            c.subnets.get_or_insert_with(Ttl::new).put(
                key.clone(),
                subnets.clone(),
                now,
                DESCRIBE_TTL,
            )
        });
        Ok(subnets)
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        let key = filters.to_vec();
        let hit = |c: &mut Caches, now| c.groups.get_or_insert_with(Ttl::new).get(&key, now);
        if let Some(hit) = self.with(|c| hit(c, self.clock.now())) {
            return Ok(hit);
        }
        let _filling = self.fills.groups.lock().await;
        let now = self.clock.now();
        if let Some(hit) = self.with(|c| hit(c, now)) {
            return Ok(hit);
        }
        let groups = self.inner.describe_security_groups(filters).await?;
        self.with(|c| {
            c.groups.get_or_insert_with(Ttl::new).put(
                key.clone(),
                groups.clone(),
                now,
                DESCRIBE_TTL,
            )
        });
        Ok(groups)
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        let hit = |c: &mut Caches, now| c.images.get_or_insert_with(Ttl::new).get(query, now);
        if let Some(hit) = self.with(|c| hit(c, self.clock.now())) {
            return Ok(hit);
        }
        let _filling = self.fills.images.lock().await;
        let now = self.clock.now();
        if let Some(hit) = self.with(|c| hit(c, now)) {
            return Ok(hit);
        }
        let images = self.inner.describe_images(query).await?;
        self.with(|c| {
            c.images.get_or_insert_with(Ttl::new).put(
                query.clone(),
                images.clone(),
                now,
                DESCRIBE_TTL,
            )
        });
        Ok(images)
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        let key = name.to_string();
        let hit = |c: &mut Caches, now| c.parameters.get_or_insert_with(Ttl::new).get(&key, now);
        if let Some(hit) = self.with(|c| hit(c, self.clock.now())) {
            return Ok(hit);
        }
        let _filling = self.fills.parameters.lock().await;
        let now = self.clock.now();
        if let Some(hit) = self.with(|c| hit(c, now)) {
            return Ok(hit);
        }
        let value = self.inner.get_parameter(name).await?;
        let ttl = if mutable_parameter(name) {
            SSM_MUTABLE_TTL
        } else {
            SSM_TTL
        };
        self.with(|c| {
            c.parameters
                .get_or_insert_with(Ttl::new)
                .put(key.clone(), value.clone(), now, ttl)
        });
        Ok(value)
    }

    /// A template this layer created (or found taken) within [`DESCRIBE_TTL`] is answered from
    /// the cache; a taken name is answered as EC2 would (`AlreadyExists`), so callers see one
    /// behaviour.
    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        let hit = |c: &mut Caches, now| {
            c.templates
                .get_or_insert_with(Ttl::new)
                .get(&request.name, now)
        };
        if let Some(hit) = self.with(|c| hit(c, self.clock.now())) {
            return Ok(hit);
        }
        let _filling = self.fills.templates.lock().await;
        let now = self.clock.now();
        if let Some(hit) = self.with(|c| hit(c, now)) {
            return Ok(hit);
        }
        let created = self.inner.create_launch_template(request).await;
        let known = match &created {
            Ok(template) => Some(template.clone()),
            Err(Ec2Error::InvalidRequest { code, .. }) if code.contains("AlreadyExists") => {
                Some(LaunchTemplate {
                    launch_template_id: String::new(),
                    launch_template_name: request.name.clone(),
                    tags: request.tags.clone(),
                })
            }
            Err(_) => None,
        };
        if let Some(template) = known {
            self.with(|c| {
                c.templates.get_or_insert_with(Ttl::new).put(
                    request.name.clone(),
                    template,
                    now,
                    DESCRIBE_TTL,
                )
            });
        }
        created
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        self.inner.describe_launch_templates(filters).await
    }

    /// Deleting a template forgets it, so the next launch creates it again.
    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        self.with(|c| {
            if let Some(t) = c.templates.as_mut() {
                t.entries.remove(name);
            }
        });
        self.inner.delete_launch_template(name).await
    }

    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        self.inner.describe_instance_status(filters).await
    }

    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        self.inner
            .describe_capacity_reservations(ids, filters)
            .await
    }
}
