//! Work units left on a released pgbus queue move to the active set
//! (`switchyard_carrier::leftovers` knows pgbus's table): at a settle away
//! from a set that queued on pgbus, and at each of the leader's polls while
//! the active set does not queue there.

use switchyard_carrier::SetName;
use switchyard_carrier::leftovers::{self, LeftoverError};

use super::Carriers;

/// Moves what pgbus's queue holds to the active set `active`; returns how
/// many units moved. Nothing moves while `active` queues on pgbus itself.
pub async fn move_to_active(carriers: &Carriers, active: &str) -> Result<u64, LeftoverError> {
    if SetName::parse(active).is_none_or(|s| s.entry().messages_on_database) {
        return Ok(0);
    }
    leftovers::hand_over(&carriers.builder.bus, &carriers.queue).await
}

/// Units waiting on pgbus's queue (claimed or not); 0 where it never queued.
pub async fn pending(carriers: &Carriers) -> Result<i64, LeftoverError> {
    leftovers::pending(&carriers.builder.bus).await
}
