//! Carriers against real servers, through the host's reactor and the
//! fan-out holder: nats on a real nats-server, pgbus on a real PostgreSQL.

mod cancel;
mod cluster;
mod healing;
mod inference;
mod keepalive;
mod lifecycle;
mod nats;
mod pgbus;
mod placement;
mod session_runtime;
mod tunnel;
mod unhealthy;
mod up;
mod watch;
