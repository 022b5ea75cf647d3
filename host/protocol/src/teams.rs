//! Teams as the admin API answers them (`/api/teams`): the unit usage
//! reports and budgets are kept by. A key belongs to at most one.

use serde::{Deserialize, Serialize};

/// A team as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Team {
    /// Its name (a label: letters, digits, `.`, `_`, `-`).
    pub name: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// Live keys in it.
    pub keys: u64,
}

/// `POST /api/teams`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewTeam {
    /// Its name.
    pub name: String,
}

/// `GET /api/teams`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Teams {
    /// Every team, by name.
    pub teams: Vec<Team>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_team_list_reads_back_as_the_api_writes_it() {
        let text =
            r#"{"teams":[{"name":"research","created_at":"2026-12-04T10:00:00Z","keys":2}]}"#;
        let teams: Teams = serde_json::from_str(text).unwrap();
        assert_eq!(teams.teams[0].keys, 2);
        let again: Teams = serde_json::from_value(serde_json::to_value(&teams).unwrap()).unwrap();
        assert_eq!(again, teams);
    }
}
