//! The window of a carrier change: between the commit and the settle, the
//! control and streams holders name a [`Window`] over the new set and the
//! set that drains. A call to a worker goes to the set that worker reported
//! it is attached to, the new one first; a worker attached to neither gets
//! [`Refusal::NoRoute`] (nothing is sent). A stream keeps the set it was
//! opened on, so a call in flight finishes where it began.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::control::{ControlError, ControlSeam};
use crate::refusal::Refusal;
use crate::stream::{Stream, StreamReader};
use crate::stream_seam::{Lane, StreamsSeam};

/// What each worker reported it is attached to (node → set names),
/// refreshed by the replica's follower while a change is under way.
pub type Attachments = Arc<ArcSwap<HashMap<String, Vec<String>>>>;

/// One set's seams, under the set's name.
#[derive(Clone)]
pub struct Route {
    /// The set's name (`nats`, `tunnel`).
    pub set: String,
    /// Its control seam.
    pub control: Arc<dyn ControlSeam>,
    /// Its streams seam.
    pub streams: Arc<dyn StreamsSeam>,
}

/// The control and streams seams of a change's window.
pub struct Window {
    new: Route,
    old: Route,
    attached: Attachments,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("new", &self.new.set)
            .field("old", &self.old.set)
            .finish_non_exhaustive()
    }
}

impl Window {
    /// A window from `old` to `new`, routing by `attached`.
    pub fn new(new: Route, old: Route, attached: Attachments) -> Arc<Self> {
        Arc::new(Self { new, old, attached })
    }

    /// The route to `node`: the new set when the worker is attached to it
    /// (or never said: a worker that reports nothing is tried on the new
    /// set), else the old one when it is attached to that.
    fn route(&self, node: &str) -> Result<&Route, Refusal> {
        let attached = self.attached.load();
        let Some(sets) = attached.get(node) else {
            return Ok(&self.new);
        };
        if sets.contains(&self.new.set) {
            Ok(&self.new)
        } else if sets.contains(&self.old.set) {
            Ok(&self.old)
        } else {
            Err(Refusal::NoRoute(format!(
                "node {node} is attached to neither `{}` nor `{}`",
                self.new.set, self.old.set
            )))
        }
    }
}

impl StreamsSeam for Window {
    fn open(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
    ) -> BoxFuture<'static, Result<Stream, Refusal>> {
        match self.route(node) {
            Ok(route) => route.streams.open(node, lane, service),
            Err(refusal) => Box::pin(async move { Err(refusal) }),
        }
    }

    fn call(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        match self.route(node) {
            Ok(route) => route.streams.call(node, lane, service, request),
            Err(refusal) => Box::pin(async move { Err(refusal) }),
        }
    }
}

impl ControlSeam for Window {
    fn call(
        &self,
        node: &str,
        verb: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Bytes, ControlError>> {
        match self.route(node) {
            Ok(route) => route.control.call(node, verb, payload, deadline),
            Err(refusal) => {
                Box::pin(async move { Err(ControlError::NoRoute(refusal.to_string())) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seam that answers every open with its set's name as a refusal.
    struct Named(&'static str);

    impl StreamsSeam for Named {
        fn open(&self, _: &str, _: Lane, _: &str) -> BoxFuture<'static, Result<Stream, Refusal>> {
            let name = self.0;
            Box::pin(async move { Err(Refusal::ServiceRefused(name.into())) })
        }
    }

    impl ControlSeam for Named {
        fn call(
            &self,
            _: &str,
            _: &str,
            _: Bytes,
            _: Duration,
        ) -> BoxFuture<'static, Result<Bytes, ControlError>> {
            let name = self.0;
            Box::pin(async move { Ok(Bytes::from_static(name.as_bytes())) })
        }
    }

    fn route(set: &'static str) -> Route {
        Route {
            set: set.into(),
            control: Arc::new(Named(set)),
            streams: Arc::new(Named(set)),
        }
    }

    #[tokio::test]
    async fn a_call_goes_to_the_set_its_worker_is_attached_to_new_first() {
        let attached: Attachments = Default::default();
        attached.store(Arc::new(HashMap::from([
            ("both".to_string(), vec!["nats".into(), "tunnel".into()]),
            ("old".to_string(), vec!["nats".into()]),
            ("gone".to_string(), vec![]),
        ])));
        let window = Window::new(route("tunnel"), route("nats"), attached);
        let opened = |node: &'static str| {
            let window = window.clone();
            async move { window.open(node, Lane::Inference, "x").await.err() }
        };
        let set = |s: &str| Some(Refusal::ServiceRefused(s.into()));
        assert_eq!(opened("both").await, set("tunnel"));
        assert_eq!(opened("old").await, set("nats"));
        assert_eq!(opened("never-said").await, set("tunnel"));
        assert!(matches!(opened("gone").await, Some(Refusal::NoRoute(_))));
        let control = ControlSeam::call(&*window, "old", "v", Bytes::new(), Duration::from_secs(1));
        assert_eq!(control.await.unwrap(), Bytes::from_static(b"nats"));
        let control =
            ControlSeam::call(&*window, "gone", "v", Bytes::new(), Duration::from_secs(1));
        assert!(matches!(control.await, Err(ControlError::NoRoute(_))));
    }
}
