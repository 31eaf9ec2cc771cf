//! Things due at a future time: state transitions, spot reclaims, message deliveries, capacity
//! waves. Processed lazily, in (time, insertion) order, whenever a call or the simulation asks the
//! fake to catch up with the clock, so no background task or wall-clock timer is needed.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::capacity::Pool;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Due {
    /// `pending` → `running`.
    Running(String),
    /// `shutting-down` → `terminated`.
    Terminated(String),
    /// `stopping` → `stopped`.
    Stopped(String),
    /// A random spot interruption: warn now, reclaim two minutes later.
    SpotInterruption(String),
    /// Two minutes after the warning: EC2 terminates the instance.
    SpotReclaim(String),
    RebalanceRecommendation(String),
    /// The start of a scheduled Health stop.
    ScheduledStop(String),
    /// EventBridge hands a message body to SQS.
    Deliver(String),
    /// A capacity wave: the pool's free units become this.
    Capacity(Pool, u32),
    /// A drought of the pool starts (`true`) or ends (`false`).
    Drought(Pool, bool),
    /// EC2 forgets a terminated instance.
    Forget(String),
    /// A capacity reservation reaches its end date.
    ReservationEnd(String),
    /// EC2 starts terminating a capacity block's instances (30 minutes before its end).
    CapacityBlockReclaim(String),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Timeline {
    due: BTreeMap<(Timestamp, u64), Due>,
    next_seq: u64,
}

impl Timeline {
    pub fn at(&mut self, time: Timestamp, due: Due) {
        self.due.insert((time, self.next_seq), due);
        self.next_seq += 1;
    }

    /// The earliest item due at or before `now`.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, Due)> {
        let (&(time, seq), _) = self.due.first_key_value()?;
        if time > now {
            return None;
        }
        self.due.remove(&(time, seq)).map(|due| (time, due))
    }

    pub fn next_time(&self) -> Option<Timestamp> {
        self.due.first_key_value().map(|(&(time, _), _)| time)
    }
}
