//! Whose files and batches a caller sees. A file or a batch belongs to
//! the key that created it (a batch's output and error files to the
//! batch's owner); anyone else is answered 404 `file_not_found` or
//! `batch_not_found`, exactly as for an id that never existed, so an id
//! says nothing about another key's objects. A key with the `admin` scope
//! sees, cancels and deletes every key's (an operator cleaning up after a
//! key must reach its objects).
//!
//! The owner is a key id; teams, once they exist, widen [`visible`] here
//! and nowhere else. A peer's job is owned by `peer:<label>` and answered
//! about only to that peer (`jobs::owner`).

use switchyard_store::batches::Visible;

use switchyard_protocol::keys::Caller;

/// The owner of what `caller` creates.
pub fn owner(caller: &Caller) -> &str {
    &caller.key_id
}

/// Whose files and batches `caller` may see.
pub fn visible(caller: &Caller) -> Visible<'_> {
    if caller.scopes.iter().any(|s| s == "admin") {
        Visible::All
    } else {
        Visible::Owner(owner(caller))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(scopes: &[&str]) -> Caller {
        Caller {
            key_id: "key_a".into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            team: None,
        }
    }

    #[test]
    fn a_key_sees_its_own_and_an_admin_key_sees_all() {
        assert_eq!(visible(&caller(&["inference"])), Visible::Owner("key_a"));
        assert_eq!(visible(&caller(&["inference", "admin"])), Visible::All);
        assert_eq!(owner(&caller(&["admin"])), "key_a");
    }
}
