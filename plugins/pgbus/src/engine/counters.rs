//! What the engine counts, for the logs and the host's status.

use std::fmt;

/// What the engine has counted since it started; logged on every reconnect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages accepted by `publish` and `request`.
    pub published: u64,
    /// Of those, messages that went through the spill table.
    pub spilled: u64,
    /// Deliveries handed to subscriptions.
    pub delivered: u64,
    /// Messages heard but never delivered: dropped by the host's queue, spill
    /// rows gone (expired) or unreadable, reads timed out, the wait queue full.
    pub lost: u64,
    /// Times the carrier became ready again after losing a connection.
    pub reconnects: u64,
    /// Accepted messages the database refused or that were never sent (the
    /// publisher closed first).
    pub failed_publishes: u64,
    /// Notifications on the channel that are not this format.
    pub malformed: u64,
    /// Work units the queue table took (a unit id already there not counted).
    pub queued: u64,
    /// Work units claimed here (a unit whose lease ran out counts again).
    pub claimed: u64,
    /// Acknowledgements the queue table took.
    pub acknowledged: u64,
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "published={} spilled={} delivered={} lost={} reconnects={} failed_publishes={} malformed={} queued={} claimed={} acknowledged={}",
            self.published,
            self.spilled,
            self.delivered,
            self.lost,
            self.reconnects,
            self.failed_publishes,
            self.malformed,
            self.queued,
            self.claimed,
            self.acknowledged
        )
    }
}
