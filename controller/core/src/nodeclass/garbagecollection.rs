//! Launch templates nobody launches with any more are deleted, as upstream's launch-template
//! cache deletes them: a template unused for [`LAUNCH_TEMPLATE_UNUSED_TTL`] goes when the next
//! collection (every [`LAUNCH_TEMPLATE_GC_INTERVAL`]) finds it, and templates this process finds
//! without having used them (an earlier process's, a class since changed) count as used when
//! first seen, so they go one TTL later unless a launch takes them up again. Every template name
//! is a hash of its content, so a new AMI, new user data or a new security group makes a new
//! template and the old one falls out of use.
//!
//! Scope: only templates tagged `eks:eks-cluster-name=CLUSTER` *and* carrying the
//! `karpenter.k8s.aws/ec2nodeclass` tag key — what this controller creates. (Upstream's cache
//! takes every template with the cluster tag; the second key keeps templates someone else tagged
//! with the cluster name out of reach.)
//!
//! A launch marks its template used before CreateFleet ([`TemplateUsage::used`]), and the
//! collector re-reads the mark just before each delete, so only a launch that starts in the
//! instant between the two finds its template gone: CreateFleet answers
//! `InvalidLaunchTemplateName.NotFoundException`, the launch forgets the template and the next
//! reconcile creates it again (`nodeclaim::launch`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::labels::EC2NODECLASS_TAG;
use crate::context::Context;
use crate::seams::ec2::{Ec2Error, Filter};

use super::launchtemplate::EKS_CLUSTER_NAME_TAG;

/// A template unused this long is deleted (upstream's launch-template cache TTL, `DefaultTTL`).
pub const LAUNCH_TEMPLATE_UNUSED_TTL: Duration = Duration::from_secs(60);
/// How often unused templates are looked for (upstream's cache clean-up interval,
/// `DefaultCleanupInterval`).
pub const LAUNCH_TEMPLATE_GC_INTERVAL: Duration = Duration::from_secs(60);
/// How soon a collection that failed (a throttled or failed DescribeLaunchTemplates or
/// DeleteLaunchTemplate) runs again, instead of [`LAUNCH_TEMPLATE_GC_INTERVAL`]: under EC2
/// throttling (up to a fifth of calls in the simulation's `ec2-throttle`) a collection of a
/// few calls fails often, and waiting a full interval after each left templates of ours for
/// over ten minutes (swarm seeds 918 and 13; upstream deletes on its cache's eviction, once,
/// and keeps a template whose delete failed until a restart). Six a minute at most.
pub const LAUNCH_TEMPLATE_GC_RETRY: Duration = Duration::from_secs(10);
/// Templates whose last use is remembered, at most; past it the longest unused are forgotten
/// (and so count as first seen at the next collection: kept one TTL longer, never deleted early).
pub const TEMPLATES_TRACKED_MAX: usize = 10_000;

/// When each launch template was last used by a launch (or first seen by the collector), and
/// when the collector last ran. Shared by the launch path and the collector through the
/// [`Context`].
#[derive(Debug, Default)]
pub struct TemplateUsage {
    inner: Mutex<Usage>,
}

#[derive(Debug, Default)]
struct Usage {
    last_used: BTreeMap<String, Timestamp>,
    /// When the next collection is due (`None`: at once).
    next: Option<Timestamp>,
}

impl TemplateUsage {
    /// A launch is about to use `name`.
    pub fn used(&self, name: &str, now: Timestamp) {
        let mut usage = self.lock();
        usage.last_used.insert(name.to_string(), now);
        if usage.last_used.len() > TEMPLATES_TRACKED_MAX {
            let oldest = usage
                .last_used
                .iter()
                .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                usage.last_used.remove(&oldest);
            }
        }
    }

    /// Forgets `name` (deleted, or found gone).
    pub fn forget(&self, name: &str) {
        self.lock().last_used.remove(name);
    }

    /// When `name` was last used, or `now` if it was never seen (first sight counts as a use).
    fn last_use_or_seen(&self, name: &str, now: Timestamp) -> Timestamp {
        *self.lock().last_used.entry(name.to_string()).or_insert(now)
    }

    /// Whether a collection is due now; if so, the next is due one interval later.
    fn due(&self, now: Timestamp) -> bool {
        let mut usage = self.lock();
        let due = usage.next.is_none_or(|next| now >= next);
        if due {
            usage.next = Some(now.checked_add(LAUNCH_TEMPLATE_GC_INTERVAL).unwrap_or(now));
        }
        due
    }

    /// The collection that started at `now` failed: the next is due
    /// [`LAUNCH_TEMPLATE_GC_RETRY`] later.
    fn failed(&self, now: Timestamp) {
        self.lock().next = Some(now.checked_add(LAUNCH_TEMPLATE_GC_RETRY).unwrap_or(now));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The filters that select the launch templates this controller created for `cluster` (all
/// classes, or one).
pub fn template_filters(cluster: &str, class: Option<&str>) -> Vec<Filter> {
    let mut filters = vec![Filter::new(
        format!("tag:{EKS_CLUSTER_NAME_TAG}"),
        &[cluster],
    )];
    match class {
        Some(class) => filters.push(Filter::new(format!("tag:{EC2NODECLASS_TAG}"), &[class])),
        None => filters.push(Filter::new("tag-key", &[EC2NODECLASS_TAG])),
    }
    filters
}

/// Deletes the templates unused for [`LAUNCH_TEMPLATE_UNUSED_TTL`], if a collection is due;
/// returns how many were deleted. A failed delete does not stop the others; a collection with
/// a failed call returns its first error and runs again [`LAUNCH_TEMPLATE_GC_RETRY`] later.
pub async fn collect_unused_templates(ctx: &Context) -> Result<usize, Ec2Error> {
    let now = ctx.clock.now();
    if !ctx.templates.due(now) {
        return Ok(0);
    }
    let cluster = &ctx.options.lifecycle.cluster_name;
    let found = match ctx
        .ec2
        .describe_launch_templates(&template_filters(cluster, None))
        .await
    {
        Ok(found) => found,
        Err(err) => {
            ctx.templates.failed(now);
            return Err(err);
        }
    };
    let mut deleted = 0;
    let mut first_error = None;
    for template in found {
        let name = &template.launch_template_name;
        let last = ctx.templates.last_use_or_seen(name, now);
        if ctx.clock.now().duration_since(last).unsigned_abs() < LAUNCH_TEMPLATE_UNUSED_TTL {
            continue;
        }
        match ctx.ec2.delete_launch_template(name).await {
            Ok(()) => {
                ctx.templates.forget(name);
                tracing::debug!(launch_template = %name, "deleted an unused launch template");
                deleted += 1;
            }
            Err(err) => {
                tracing::debug!(launch_template = %name, %err, "deleting an unused launch template failed");
                first_error.get_or_insert(err);
            }
        }
    }
    match first_error {
        Some(err) => {
            ctx.templates.failed(now);
            Err(err)
        }
        None => Ok(deleted),
    }
}

/// Deletes every template of `class` (the class is going: its finalizer).
pub async fn delete_class_templates(ctx: &Context, class: &str) -> Result<usize, Ec2Error> {
    let cluster = &ctx.options.lifecycle.cluster_name;
    let found = ctx
        .ec2
        .describe_launch_templates(&template_filters(cluster, Some(class)))
        .await?;
    for template in &found {
        ctx.ec2
            .delete_launch_template(&template.launch_template_name)
            .await?;
        ctx.templates.forget(&template.launch_template_name);
    }
    Ok(found.len())
}
