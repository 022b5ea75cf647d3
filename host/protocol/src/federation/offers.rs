//! Offers: the resources a cluster publishes for grants to name.

use serde::{Deserialize, Serialize};

text_enum! {
    /// What kind of resource an offer publishes.
    pub enum OfferKind {
        /// A deployment shared as a service.
        Service => "service",
        /// A model revision.
        Model => "model",
        /// A node.
        Machine => "machine",
        /// An engine kind with a GPU shape, for managed services.
        Runtime => "runtime",
    }
}

/// `POST /api/federation/offers`: publish a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewOffer {
    /// A stable id (a service id peers call the service by); default: the
    /// resource's own name.
    #[serde(default)]
    pub id: Option<String>,
    /// What is offered.
    pub resource: Resource,
}

/// A resource an offer publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A deployment, called by its service id.
    Service {
        /// The deployment's id.
        deployment: String,
    },
    /// A model revision.
    Model {
        /// The model.
        model: String,
        /// The revision.
        revision: String,
    },
    /// A node.
    Machine {
        /// The node's id.
        node: String,
    },
    /// An engine kind with a GPU shape, for managed services.
    Runtime {
        /// `reference`, `llama-cpp` or `vllm`.
        engine: String,
        /// GPUs per replica.
        #[serde(default)]
        gpus_per_replica: i32,
    },
}

impl Resource {
    /// The offer kind.
    pub fn kind(&self) -> OfferKind {
        match self {
            Resource::Service { .. } => OfferKind::Service,
            Resource::Model { .. } => OfferKind::Model,
            Resource::Machine { .. } => OfferKind::Machine,
            Resource::Runtime { .. } => OfferKind::Runtime,
        }
    }

    /// The id an offer takes when none is given.
    pub fn default_id(&self) -> String {
        match self {
            Resource::Service { deployment } => deployment.clone(),
            Resource::Model { model, revision } => format!("{model}@{revision}"),
            Resource::Machine { node } => node.clone(),
            Resource::Runtime {
                engine,
                gpus_per_replica,
            } => format!("{engine}-{gpus_per_replica}gpu"),
        }
    }
}

/// A published offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Offer {
    /// Its stable id.
    pub id: String,
    /// What it offers.
    pub resource: Resource,
    /// When it was published (RFC 3339).
    pub created_at: String,
}
