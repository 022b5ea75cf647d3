//! The settings of a `deny-weekends` binding.

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

/// Offsets real time zones use: UTC-12:00 to UTC+14:00.
const UTC_OFFSET_RANGE_MINUTES: std::ops::RangeInclusive<i32> = -12 * 60..=14 * 60;

/// `{ "days": ["saturday", "sunday"], "utc_offset_minutes": 60 }`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The days on which inference is denied; Saturday and Sunday when left
    /// out.
    #[serde(default = "weekend")]
    pub days: Vec<Weekday>,
    /// The offset from UTC of the clock on the wall whose days count, in
    /// minutes (`60` for UTC+01:00); 0 when left out.
    #[serde(default)]
    pub utc_offset_minutes: i32,
}

/// A day of the week, written in lowercase in the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    /// Monday.
    Monday,
    /// Tuesday.
    Tuesday,
    /// Wednesday.
    Wednesday,
    /// Thursday.
    Thursday,
    /// Friday.
    Friday,
    /// Saturday.
    Saturday,
    /// Sunday.
    Sunday,
}

impl Weekday {
    /// Monday first, as ISO 8601 counts.
    pub const ALL: [Weekday; 7] = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];

    /// The lowercase name, as in the settings.
    pub fn name(self) -> &'static str {
        match self {
            Weekday::Monday => "monday",
            Weekday::Tuesday => "tuesday",
            Weekday::Wednesday => "wednesday",
            Weekday::Thursday => "thursday",
            Weekday::Friday => "friday",
            Weekday::Saturday => "saturday",
            Weekday::Sunday => "sunday",
        }
    }
}

fn weekend() -> Vec<Weekday> {
    vec![Weekday::Saturday, Weekday::Sunday]
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        if !UTC_OFFSET_RANGE_MINUTES.contains(&self.utc_offset_minutes) {
            return Err(format!(
                "utc_offset_minutes must be between -720 and 840, got {}",
                self.utc_offset_minutes
            ));
        }
        // Seven days would deny every request: surely a mistake, and
        // unbinding the policy is the way to close inference.
        if Weekday::ALL.iter().all(|day| self.days.contains(day)) {
            return Err("days lists all seven days, so every request would be denied".into());
        }
        Ok(())
    }
}
