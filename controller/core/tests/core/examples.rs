//! The user's example manifests (`examples/`, copied from `shared/examples/`) work as written.

use std::path::PathBuf;

use karpenter_core::manifest::{Outcome, check_document, parse_documents};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn outcomes(file: &str) -> Vec<(String, String, Outcome)> {
    let text = std::fs::read_to_string(examples_dir().join(file)).expect("example exists");
    parse_documents(&text)
        .expect("example parses")
        .into_iter()
        .map(|(_, doc)| {
            let checked = check_document(&doc);
            (checked.kind, checked.name, checked.outcome)
        })
        .collect()
}

#[test]
fn the_v1_examples_are_valid() {
    for file in [
        "seed-000-default.yaml",
        "seed-001-general.yaml",
        "seed-002-bottlerocket-and-taints.yaml",
        "seed-003-spot-inflate.yaml",
    ] {
        let found = outcomes(file);
        let karpenter: Vec<_> = found
            .iter()
            .filter(|(_, _, o)| *o != Outcome::Other)
            .collect();
        assert!(
            karpenter.len() >= 2,
            "{file}: expected a NodePool and an EC2NodeClass"
        );
        for (kind, name, outcome) in karpenter {
            assert!(
                matches!(outcome, Outcome::Valid(_)),
                "{file}: {kind}/{name}: {outcome:?}"
            );
        }
    }
}

#[test]
fn the_v1beta1_example_is_rejected_with_an_explanation_for_both_objects() {
    let found = outcomes("seed-004-v1beta1-ray.yaml");
    assert_eq!(found.len(), 2);
    for (kind, name, outcome) in found {
        let Outcome::Invalid(violations) = outcome else {
            panic!("{kind}/{name} must be rejected")
        };
        let text = violations.to_string();
        assert!(text.contains("v1beta1"), "{kind}/{name}: {text}");
        match kind.as_str() {
            "NodePool" => {
                assert!(
                    text.contains("expireAfter moved to spec.template.spec.expireAfter"),
                    "{text}"
                );
                assert!(text.contains("nodeClassRef needs group"), "{text}");
            }
            "EC2NodeClass" => assert!(text.contains("alias: al2@latest"), "{text}"),
            other => panic!("unexpected kind {other}"),
        }
    }
}

#[test]
fn the_committed_examples_match_the_shared_originals() {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/examples");
    let Ok(entries) = std::fs::read_dir(&shared) else {
        return; // shared/ is not beside this checkout: nothing to compare against
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let ours = std::fs::read_to_string(examples_dir().join(&name)).unwrap_or_else(|_| {
            panic!(
                "examples/{} is missing: copy it from shared/examples",
                name.to_string_lossy()
            )
        });
        let theirs = std::fs::read_to_string(entry.path()).expect("readable");
        assert_eq!(
            ours,
            theirs,
            "examples/{} differs from shared/examples",
            name.to_string_lossy()
        );
    }
}
