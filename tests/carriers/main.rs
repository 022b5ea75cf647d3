//! Carriers against real servers: the nats plugin on a real nats-server,
//! through the host's reactor and the fan-out holder.

mod nats;
