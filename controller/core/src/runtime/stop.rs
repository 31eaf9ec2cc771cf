//! The shutdown signal every controller loop watches: once it fires, a loop takes no new work
//! (a singleton starts no new pass, a keyed runner dequeues no new key) and returns when the
//! work it already started is done. `OperatorHandle::shutdown` fires it, waits up to its drain
//! bound, and aborts only what is still running then.

use tokio::sync::watch;

/// The sending half: fires the signal once, for every [`Stop`] cloned from its channel.
#[derive(Debug)]
pub struct StopSender {
    sender: watch::Sender<bool>,
}

impl StopSender {
    /// Tells every loop to stop taking work.
    pub fn stop(&self) {
        self.sender.send_replace(true);
    }
}

/// A loop's view of the shutdown signal.
#[derive(Clone, Debug)]
pub struct Stop {
    receiver: watch::Receiver<bool>,
}

impl Stop {
    /// A signal and its sender.
    pub fn channel() -> (StopSender, Self) {
        let (sender, receiver) = watch::channel(false);
        (StopSender { sender }, Self { receiver })
    }

    /// A signal that never fires (a loop run until it is aborted, as in unit tests).
    pub fn never() -> Self {
        Self::channel().1
    }

    /// Whether the signal has fired.
    pub fn is_stopping(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Returns once the signal has fired (at once if it already has); never if its sender is
    /// gone without firing.
    pub async fn stopped(&mut self) {
        loop {
            if *self.receiver.borrow_and_update() {
                return;
            }
            if self.receiver.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}
