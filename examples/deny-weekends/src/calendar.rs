//! The day of the week of a Unix time, without a date library: days since
//! the epoch, modulo seven.

use crate::Weekday;

const MS_PER_DAY: i64 = 24 * 60 * 60 * 1000;
const MS_PER_MINUTE: i64 = 60 * 1000;

/// The day of the week at `unix_ms` on a clock `utc_offset_minutes` ahead
/// of UTC.
pub fn weekday_at(unix_ms: u64, utc_offset_minutes: i32) -> Weekday {
    let local_ms = unix_ms as i64 + i64::from(utc_offset_minutes) * MS_PER_MINUTE;
    let days = local_ms.div_euclid(MS_PER_DAY);
    // 1970-01-01 was a Thursday, index 3 counting Monday as 0.
    Weekday::ALL[(days + 3).rem_euclid(7) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_was_a_thursday() {
        assert_eq!(weekday_at(0, 0), Weekday::Thursday);
        assert_eq!(weekday_at(0, -60), Weekday::Wednesday);
    }

    #[test]
    fn known_dates() {
        // 2024-06-01T12:00:00Z, a Saturday.
        assert_eq!(weekday_at(1_717_243_200_000, 0), Weekday::Saturday);
        // 2024-06-02T23:30:00Z: Sunday in UTC, Monday in UTC+01:00.
        assert_eq!(weekday_at(1_717_371_000_000, 0), Weekday::Sunday);
        assert_eq!(weekday_at(1_717_371_000_000, 60), Weekday::Monday);
    }
}
