//! UTC calendar days and months as numbers, for the day's and the month's
//! token budgets (Howard Hinnant's `civil_from_days` and
//! `days_from_civil`, proleptic Gregorian).

/// The month of a day since the Unix epoch, as `year * 12 + (month - 1)`.
pub(super) fn month_of_day(day: u64) -> u64 {
    let (year, month) = civil_from_days(day as i64);
    (year as u64) * 12 + (month as u64 - 1)
}

/// When a day (since the epoch) ends, in Unix milliseconds.
pub(super) fn day_end_ms(day: u64) -> u64 {
    (day + 1) * 86_400_000
}

/// When a month ([`month_of_day`]'s number) ends, in Unix milliseconds.
pub(super) fn month_end_ms(month: u64) -> u64 {
    let next = month + 1;
    let days = days_from_civil((next / 12) as i64, (next % 12 + 1) as i64);
    u64::try_from(days).unwrap_or(0) * 86_400_000
}

/// `(year, month 1..=12)` of a day since the epoch.
fn civil_from_days(z: i64) -> (i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month)
}

/// Days since the epoch of the first day of `year`-`month`.
fn days_from_civil(year: i64, month: i64) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_end_where_the_calendar_says() {
        // 2026-12-04 is day 20_791; December ends 2027-01-01T00:00Z.
        let december = month_of_day(20_791);
        assert_eq!(december, 2026 * 12 + 11);
        assert_eq!(month_end_ms(december), 1_798_761_600_000);
        // February of a leap year: 2024-02-10 (day 19_763) ends 2024-03-01.
        assert_eq!(month_end_ms(month_of_day(19_763)), 1_709_251_200_000);
        assert_eq!(day_end_ms(0), 86_400_000);
    }
}
