//! Support for the end-to-end suites: a fresh database per test, the built
//! components, replicas in-process or as real `switchyard` processes.
//!
//! The suites need `SWITCHYARD_TEST_DATABASE_URL` (a PostgreSQL superuser
//! connection) and the guest components; `scripts/test.sh` provides both.

pub mod batch;
pub mod bytes;
pub mod cluster;
pub mod db;
pub mod federation;
pub mod http;
pub mod nats;
pub mod otlp;
pub mod plugins;
pub mod process;
pub mod proxy;
pub mod replica;
pub mod switch;
pub mod tunnel;

/// The admin token every test replica is started with.
/// At least `MIN_ADMIN_TOKEN_LEN` (32) characters, as a chosen token must be.
pub const ADMIN_TOKEN: &str = "sy_test_admin_token_0123456789abcdef";
