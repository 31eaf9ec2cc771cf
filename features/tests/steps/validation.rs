//! Manifest steps: what `karpenter validate` says about a file (the same
//! `karpenter_core::manifest::check_document` it runs), and what the cluster does with one.

use cucumber::gherkin::Step;
use cucumber::{then, when};
use karpenter_core::manifest::{KarpenterObject, Outcome, check_document};
use karpenter_features::SimWorld;
use karpenter_features::manifests;

use crate::params::list;

fn validate(w: &mut SimWorld, text: &str, source: &str) {
    let documents = manifests::documents(text).unwrap_or_else(|e| w.fail(format!("{source}: {e}")));
    w.validated = documents.iter().map(|d| check_document(&d.value)).collect();
}

#[when(expr = "{string} is validated")]
fn file_validated(w: &mut SimWorld, file: String) {
    let text = manifests::read(&file).unwrap_or_else(|e| w.fail(e));
    validate(w, &text, &file);
}

#[when("this manifest is validated:")]
fn docstring_validated(w: &mut SimWorld, step: &Step) {
    let text = step.docstring.clone().unwrap_or_default();
    validate(w, &text, "the docstring");
}

fn is_karpenter(outcome: &Outcome) -> bool {
    !matches!(outcome, Outcome::Other)
}

/// The Karpenter objects of the validated file are exactly these (`Kind/name`, in file order)
/// and every one of them is valid.
#[then(expr = "it holds the valid Karpenter objects {string}")]
fn valid_objects(w: &mut SimWorld, objects: String) {
    let want = list(&objects);
    let got: Vec<String> = w
        .validated
        .iter()
        .filter(|c| is_karpenter(&c.outcome))
        .map(|c| format!("{}/{}", c.kind, c.name))
        .collect();
    if got != want {
        w.fail(format!("the Karpenter objects are {got:?}, want {want:?}"));
    }
    for checked in &w.validated {
        if let Outcome::Invalid(violations) = &checked.outcome {
            w.fail(format!(
                "{}/{} is invalid: {violations}",
                checked.kind, checked.name
            ));
        }
        // A valid object decodes into the controller's own types.
        if let Outcome::Valid(object) = &checked.outcome {
            let kind = match object {
                KarpenterObject::NodePool(_) => "NodePool",
                KarpenterObject::NodeClaim(_) => "NodeClaim",
                KarpenterObject::EC2NodeClass(_) => "EC2NodeClass",
            };
            if kind != checked.kind {
                w.fail(format!(
                    "{}/{} decoded as a {kind}",
                    checked.kind, checked.name
                ));
            }
        }
    }
}

/// The documents validation leaves alone (not Karpenter objects), `Kind/name`; empty: none.
#[then(expr = "it skips {string}")]
fn skipped(w: &mut SimWorld, objects: String) {
    let want = list(&objects);
    let got: Vec<String> = w
        .validated
        .iter()
        .filter(|c| !is_karpenter(&c.outcome))
        .map(|c| format!("{}/{}", c.kind, c.name))
        .collect();
    if got != want {
        w.fail(format!("skipped {got:?}, want {want:?}"));
    }
}

/// The object is invalid, with a violation at `path` whose message contains `text`.
#[then(expr = "{word} {string} is rejected at {string} because {string}")]
fn rejected(w: &mut SimWorld, kind: String, name: String, path: String, text: String) {
    let Some(checked) = w
        .validated
        .iter()
        .find(|c| c.kind == kind && c.name == name)
    else {
        w.fail(format!("no {kind} {name} was validated"));
    };
    let Outcome::Invalid(violations) = &checked.outcome else {
        w.fail(format!("{kind} {name} was accepted"));
    };
    if !violations
        .0
        .iter()
        .any(|v| v.path == path && v.message.contains(&text))
    {
        w.fail(format!(
            "{kind} {name}: no violation at {path} saying {text:?}; got: {violations}"
        ));
    }
}

/// The rejection also explains `text` (anywhere in its messages).
#[then(expr = "the rejection of {word} {string} says {string}")]
fn rejection_says(w: &mut SimWorld, kind: String, name: String, text: String) {
    let message = w
        .validated
        .iter()
        .find(|c| c.kind == kind && c.name == name)
        .and_then(|c| match &c.outcome {
            Outcome::Invalid(v) => Some(v.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| w.fail(format!("{kind} {name} was not rejected")));
    if !message.contains(&text) {
        w.fail(format!(
            "the rejection of {kind} {name} does not say {text:?}: {message}"
        ));
    }
}

#[then(expr = "the cluster refuses the manifests because {string}")]
async fn cluster_refuses(w: &mut SimWorld, text: String) {
    match w.refusal().await {
        None => w.fail("the cluster accepted the manifests"),
        Some(reason) if !reason.contains(&text) => w.fail(format!(
            "the cluster refused them, but not because {text:?}: {reason}"
        )),
        Some(_) => {}
    }
}

/// The cluster stores the objects (`Kind/name`, comma-separated) as applied.
#[then(expr = "the cluster holds {string}")]
async fn cluster_holds(w: &mut SimWorld, objects: String) {
    let world = w.world().await;
    let api = world.api().clone();
    for object in list(&objects) {
        let (kind, name) = object
            .split_once('/')
            .unwrap_or_else(|| w.fail(format!("{object:?}: write Kind/name")));
        let resource = match kind {
            "NodePool" => karpenter_core::seams::kube::ResourceKind::NODE_POOL,
            "EC2NodeClass" => karpenter_core::seams::kube::ResourceKind::EC2_NODE_CLASS,
            other => w.fail(format!("cannot look up kind {other}")),
        };
        let key = karpenter_core::seams::kube::ObjectKey::cluster(name);
        if api.object(&resource, &key).is_none() {
            w.fail(format!("the cluster has no {object}"));
        }
    }
}
