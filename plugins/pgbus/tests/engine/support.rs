//! Shared helpers: an engine brought to ready the way a host would, and
//! readers for the actions it answers.

use switchyard_plugin_pgbus::{
    Action, Config, Delivery, Engine, Handle, Notification, Param, Query, Row,
};

/// The publisher's handle in a fresh engine.
pub const PUBLISHER: Handle = 1;
/// The listener's handle in a fresh engine.
pub const LISTENER: Handle = 2;
/// The first reader's handle; the others follow.
pub const FIRST_READER: Handle = 3;

/// A fresh engine (seed 42, t=0) and its first actions.
pub fn start(json: &str) -> (Engine, Vec<Action>) {
    Engine::new(Config::parse(json).expect("valid config"), 42, 0)
}

/// An engine whose connections all opened and whose setup queries answered
/// at t=0: ready.
pub fn ready(json: &str) -> Engine {
    let (mut engine, out) = start(json);
    let mut setup = Vec::new();
    for action in out {
        if let Action::Open(h) = action {
            setup.extend(queries(&engine.opened(h, 0)));
        }
    }
    assert_eq!(setup.len(), 2, "table creation and LISTEN check: {setup:?}");
    let mut last = Vec::new();
    for query in setup {
        last = engine.answered(query.id, answer_for(&query), 0);
    }
    assert_eq!(last, vec![Action::Ready]);
    engine
}

/// What a healthy database answers to a setup query.
pub fn answer_for(query: &Query) -> Result<Vec<Row>, String> {
    if query.sql == switchyard_plugin_pgbus::sql::CHECK_LISTENING {
        Ok(rows(b"1"))
    } else {
        Ok(Vec::new())
    }
}

/// One row of one column.
pub fn rows(column: &[u8]) -> Vec<Row> {
    vec![vec![Some(column.to_vec())]]
}

/// The queries among the actions, in order.
pub fn queries(out: &[Action]) -> Vec<Query> {
    out.iter()
        .filter_map(|a| match a {
            Action::Query(q) => Some(q.clone()),
            _ => None,
        })
        .collect()
}

/// The one query among the actions.
pub fn only_query(out: &[Action]) -> Query {
    let mut all = queries(out);
    assert_eq!(all.len(), 1, "one query: {out:?}");
    all.remove(0)
}

/// The deliveries among the actions, in order.
pub fn deliveries(out: &[Action]) -> Vec<Delivery> {
    out.iter()
        .filter_map(|a| match a {
            Action::Deliver(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

/// The timer the actions set, if any.
pub fn timer(out: &[Action]) -> Option<u64> {
    out.iter().rev().find_map(|a| match a {
        Action::SetTimer(ms) => Some(*ms),
        _ => None,
    })
}

/// The actions without log lines and timers.
pub fn effects(out: &[Action]) -> Vec<Action> {
    out.iter()
        .filter(|a| !matches!(a, Action::Log(..) | Action::SetTimer(_)))
        .cloned()
        .collect()
}

/// A text parameter.
pub fn text(query: &Query, index: usize) -> &str {
    match &query.params[index] {
        Param::Text(t) => t,
        other => panic!("parameter {index} is {other:?}"),
    }
}

/// A notification on the default channel.
pub fn heard(payload: impl Into<String>) -> Notification {
    Notification {
        channel: "switchyard_bus".into(),
        payload: payload.into(),
    }
}

/// What a publish query notifies, as the database would deliver it: the
/// texts of NOTIFY / NOTIFY_BATCH, or the markers of a SPILL or spill batch
/// (as rows `spill_id`, `spill_id + 1`, ...).
pub fn notified_by(query: &Query, spill_id: i64) -> Vec<Notification> {
    use switchyard_plugin_pgbus::{notification, sql};
    match &*query.sql {
        sql::NOTIFY => vec![heard(text(query, 1))],
        sql::NOTIFY_BATCH => text(query, 1).split('\n').map(heard).collect(),
        sql::SPILL => vec![heard(notification::marker(spill_id, text(query, 3)))],
        other if other.contains("unnest(string_to_array($2::text") => text(query, 1)
            .split('\n')
            .zip(spill_id..)
            .map(|(tail, id)| heard(notification::marker(id, tail)))
            .collect(),
        other => panic!("not a publish query: {other}"),
    }
}

/// The `Int` parameter of a spill read.
pub fn read_id(query: &Query) -> i64 {
    assert_eq!(query.sql, switchyard_plugin_pgbus::sql::READ_SPILL);
    match query.params.as_slice() {
        [Param::Int(id)] => *id,
        other => panic!("spill read parameters {other:?}"),
    }
}

/// A payload where every byte value occurs.
pub fn binary(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

/// The publisher's setup statement with the default queue table.
pub fn create_tables() -> String {
    switchyard_plugin_pgbus::sql::TableStatements::new(switchyard_plugin_pgbus::DEFAULT_QUEUE_TABLE)
        .create_tables
}

/// The unit id header alone.
pub fn unit(id: &str) -> Vec<switchyard_plugin_pgbus::Header> {
    vec![switchyard_plugin_pgbus::Header::new(
        "switchyard-unit-id",
        id,
    )]
}

/// One row of text columns.
pub fn text_row(columns: &[&str]) -> Row {
    columns
        .iter()
        .map(|c| Some(c.as_bytes().to_vec()))
        .collect()
}
