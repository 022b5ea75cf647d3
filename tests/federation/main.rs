//! Federation end to end: two (or three) independently run clusters on
//! this machine, each with its own PostgreSQL database, frontend, worker
//! and reference engine, loopback only.
//!
//! Needs `SWITCHYARD_TEST_DATABASE_URL`, the built guest components and a
//! built `switchyard` binary (`scripts/test.sh` provides all three).

mod admission;
mod bounds;
mod chains;
mod console;
mod copies;
mod counters;
mod identity;
mod inference;
mod jobs;
mod manage;
mod offers;
mod pairing;
mod replicas;
mod revocation;
mod strangers;
mod traces;
