//! The carrier sets and the cluster that runs on them, against real
//! servers. First the carriers alone, through the host's reactor and the
//! fan-out holder (`nats` on a real nats-server, `pgbus` on a real
//! PostgreSQL, `tunnel` sessions, the `nats` set's sessions dialled over
//! TCP in `dialled`, two sets side by side in `sets`, the tunnel's own
//! websocket framing against tungstenite in `websocket`); then
//! whole clusters of real `serve`, `worker` and engine processes on each
//! set (`cluster`, `placement`, `lifecycle`, `healing`, `inference`,
//! `cancel`, `keepalive`, `unhealthy`, `watch`, `up`), and the live switch
//! between sets while the cluster serves (`switch`).

mod bypass;
mod cancel;
mod cluster;
mod dialled;
mod follow;
mod healing;
mod inference;
mod keepalive;
mod lifecycle;
mod nats;
mod pgbus;
mod placement;
mod session_runtime;
mod sets;
mod switch;
mod tunnel;
mod unhealthy;
mod up;
mod watch;
mod websocket;
