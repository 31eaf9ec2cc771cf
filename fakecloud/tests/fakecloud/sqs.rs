//! The interruption queue: at-least-once delivery, visibility timeout, deletes, duplicates,
//! reordering, retention, depth bound, malformed bodies, long polls.

use std::time::Duration;

use fakecloud::Config;
use karpenter_core::interruption::messages::parse;
use karpenter_core::seams::sqs::SqsError;

use super::support::{block_on, config, world};

fn receive(w: &super::support::World, count: u8) -> Vec<karpenter_core::seams::sqs::Message> {
    block_on(w.sqs().receive_messages(count, Duration::ZERO)).expect("receive")
}

#[test]
fn an_undeleted_message_is_redelivered_after_the_visibility_timeout() {
    let w = world(Config {
        visibility_timeout_s: 30,
        ..config()
    });
    w.cloud.inject_message("hello");
    let first = receive(&w, 10);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].body, "hello");
    assert!(receive(&w, 10).is_empty(), "in flight");
    w.advance_s(29);
    assert!(receive(&w, 10).is_empty(), "still in flight");
    w.advance_s(1);
    let second = receive(&w, 10);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].message_id, first[0].message_id);
    assert_ne!(second[0].receipt_handle, first[0].receipt_handle);

    let stale = block_on(w.sqs().delete_message(&first[0].receipt_handle));
    assert!(
        matches!(stale, Err(SqsError::InvalidReceiptHandle(_))),
        "{stale:?}"
    );
    block_on(w.sqs().delete_message(&second[0].receipt_handle)).expect("delete");
    block_on(w.sqs().delete_message(&second[0].receipt_handle)).expect("deleting twice succeeds");
    w.advance_s(60);
    assert!(receive(&w, 10).is_empty(), "deleted for good");
    assert_eq!(w.cloud.queue_depth(), 0);
}

#[test]
fn a_receipt_handle_expires_with_the_visibility_timeout() {
    let w = world(config());
    w.cloud.inject_message("x");
    let message = receive(&w, 1).remove(0);
    w.advance_s(30);
    let expired = block_on(w.sqs().delete_message(&message.receipt_handle));
    assert!(matches!(expired, Err(SqsError::InvalidReceiptHandle(_))));
    assert_eq!(receive(&w, 1).len(), 1, "so the message comes back");
}

#[test]
fn a_malformed_receipt_handle_is_rejected() {
    let w = world(config());
    for handle in ["", "nonsense", &"f".repeat(40)] {
        let result = block_on(w.sqs().delete_message(handle));
        assert!(
            matches!(result, Err(SqsError::InvalidReceiptHandle(_))),
            "{handle:?}: {result:?}"
        );
    }
}

#[test]
fn a_receive_returns_at_most_ten_messages_in_send_order() {
    let w = world(config());
    for i in 0..15 {
        w.cloud.inject_message(&format!("m{i:02}"));
    }
    let batch = receive(&w, 255);
    let bodies: Vec<&str> = batch.iter().map(|m| m.body.as_str()).collect();
    let expected: Vec<String> = (0..10).map(|i| format!("m{i:02}")).collect();
    assert_eq!(bodies, expected);
    assert_eq!(receive(&w, 10).len(), 5);
}

#[test]
fn the_reorder_knob_shuffles_batches() {
    let w = world(Config {
        reorder_rate: 1.0,
        ..config()
    });
    for i in 0..10 {
        w.cloud.inject_message(&format!("m{i}"));
    }
    let bodies: Vec<String> = receive(&w, 10).into_iter().map(|m| m.body).collect();
    let mut sorted = bodies.clone();
    sorted.sort();
    assert_eq!(sorted.len(), 10);
    assert_ne!(bodies, sorted, "seeded shuffle changes the order");
}

#[test]
fn the_duplicate_knob_delivers_a_message_twice_under_the_same_id() {
    let w = world(Config {
        duplicate_delivery_rate: 1.0,
        ..config()
    });
    w.cloud.inject_message("once");
    let first = receive(&w, 10);
    assert_eq!(first.len(), 1);
    block_on(w.sqs().delete_message(&first[0].receipt_handle)).expect("delete");
    let again = receive(&w, 10);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message_id, first[0].message_id);
    assert_eq!(again[0].body, "once");
}

#[test]
fn messages_expire_after_the_retention_period() {
    let w = world(Config {
        message_retention_s: 300,
        ..config()
    });
    w.cloud.inject_message("old");
    w.advance_s(299);
    assert_eq!(w.cloud.queue_depth(), 1);
    w.advance_s(1);
    assert_eq!(w.cloud.queue_depth(), 0);
    assert!(receive(&w, 10).is_empty());
}

#[test]
fn a_full_queue_drops_and_counts_new_messages() {
    let w = world(Config {
        queue_depth_max: 3,
        ..config()
    });
    for i in 0..5 {
        w.cloud.inject_message(&format!("{i}"));
    }
    assert_eq!(w.cloud.queue_depth(), 3);
    assert_eq!(w.cloud.messages_dropped(), 2);
}

#[test]
fn injected_malformed_messages_are_rejected_by_the_controller_parser() {
    let w = world(config());
    let injected: Vec<String> = (0..20)
        .map(|_| w.cloud.inject_malformed_message())
        .collect();
    let distinct: std::collections::BTreeSet<&String> = injected.iter().collect();
    assert!(
        distinct.len() > 1,
        "the seed picks different kinds of damage"
    );
    let received = w.drain();
    assert_eq!(received.len(), 20);
    for message in received {
        assert!(parse(&message.body).is_err(), "{:?} parsed", message.body);
    }
}

#[test]
fn a_missing_queue_fails_receives_and_drops_events() {
    let w = world(config());
    w.cloud.set_queue_exists(false);
    let result = block_on(w.sqs().receive_messages(10, Duration::ZERO));
    assert!(matches!(result, Err(SqsError::QueueDoesNotExist(_))));
    w.cloud.inject_message("lost");
    assert_eq!(w.cloud.messages_dropped(), 1);
    w.cloud.set_queue_exists(true);
    assert!(receive(&w, 10).is_empty());
}
