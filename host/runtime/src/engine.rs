//! The wasmtime engine shared by every plugin of a process, and the epoch
//! ticker that gives calls their wall-clock deadline (`ticker.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::cache::CompileCache;
use crate::metrics::MetricsRegistry;
use crate::ticker::Ticker;

/// How often the epoch advances: the granularity of every call deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Component instances the pooling allocator keeps slots for. Each memory slot
/// reserves 4 GiB of address space (so bounds checks can be elided), which
/// makes 256 instances 2 TiB of virtual space: cheap on a 47-bit address
/// space, and enough for ~12 policies with their warm pools of 16 plus the
/// calls in flight. A pool that cannot be reserved falls back to on-demand
/// allocation.
const POOLED_INSTANCES: u32 = 256;

/// Limits and knobs shared by every plugin of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Linear memory a plugin instance may grow to.
    pub memory_limit_bytes: usize,
    /// Wall-clock deadline of one call (settings validation included).
    pub call_deadline: Duration,
    /// Fuel per call; `None` disables fuel metering (it costs a few percent).
    pub fuel_per_call: Option<u64>,
    /// Where compiled components are cached; `None` keeps them in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Use the pooling allocator when the machine allows it.
    pub pooling: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            memory_limit_bytes: 64 << 20,
            call_deadline: Duration::from_millis(100),
            fuel_per_call: None,
            cache_dir: None,
            pooling: true,
        }
    }
}

impl RuntimeConfig {
    /// The limits of carrier plugins: one long-lived instance each, holding
    /// connection state and whole messages (a pgbus claim answer may hold
    /// 64 MiB), so a larger memory, on-demand instances rather than pool
    /// slots sized for policies, and a deadline for the largest batch.
    pub fn for_carriers(cache_dir: Option<PathBuf>) -> Self {
        Self {
            memory_limit_bytes: 512 << 20,
            call_deadline: Duration::from_secs(1),
            fuel_per_call: None,
            cache_dir,
            pooling: false,
        }
    }
}

/// One wasmtime engine, its compile cache and its epoch ticker.
pub struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) config: RuntimeConfig,
    pub(crate) cache: CompileCache,
    pub(crate) metrics: MetricsRegistry,
    pooled: bool,
    pub(crate) ticker: Ticker,
    /// Plugin stores alive now (warm policy instances, carriers, sessions).
    pub(crate) live: Arc<AtomicU64>,
    /// What policies read as the host's usage counters.
    pub(crate) usage: Arc<crate::usage::UsageSlot>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .field("pooled", &self.pooled)
            .finish()
    }
}

impl Runtime {
    /// Builds the engine (pooling where possible) and starts the epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Arc<Self>, crate::LoadError> {
        let (engine, pooled) = match config.pooling {
            true => match Engine::new(&engine_config(&config, true)) {
                Ok(engine) => (engine, true),
                Err(e) => {
                    tracing::warn!(error = %e, "pooling allocator unavailable, allocating on demand");
                    (build_engine(&config, false)?, false)
                }
            },
            false => (build_engine(&config, false)?, false),
        };
        let cache = CompileCache::new(&engine, config.cache_dir.clone());
        let ticker = Ticker::start(
            engine.clone(),
            deadline_ticks(&config) + crate::ticker::IDLE_GRACE_TICKS,
        );
        Ok(Arc::new(Self {
            engine,
            config,
            cache,
            metrics: MetricsRegistry::default(),
            pooled,
            ticker,
            live: Arc::new(AtomicU64::new(0)),
            usage: Arc::default(),
        }))
    }

    /// The configuration this runtime was built with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Every plugin's metrics.
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// Plugin instances (stores) alive on this runtime now: each warm or
    /// busy policy instance, each carrier, each tunnel session.
    pub fn live_instances(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// Hands policies the host's usage counters; `false` when a source
    /// was set already (the first stays).
    pub fn set_usage_counters(&self, source: Arc<dyn crate::usage::UsageCounters>) -> bool {
        self.usage.set(source)
    }

    /// Whether instances come from the pooling allocator.
    pub fn is_pooled(&self) -> bool {
        self.pooled
    }

    /// Ticks of [`EPOCH_TICK`] that make up one call's deadline (at least 1).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        deadline_ticks(&self.config)
    }

    /// Whether the epoch ticker sleeps now: no call has started for longer
    /// than any call may last.
    pub fn ticker_asleep(&self) -> bool {
        self.ticker.is_asleep()
    }
}

fn build_engine(config: &RuntimeConfig, pooled: bool) -> Result<Engine, crate::LoadError> {
    Engine::new(&engine_config(config, pooled))
        .map_err(|e| crate::LoadError::Compile(e.to_string()))
}

fn engine_config(config: &RuntimeConfig, pooled: bool) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true);
    c.epoch_interruption(true);
    c.consume_fuel(config.fuel_per_call.is_some());
    if pooled {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOLED_INSTANCES)
            .total_core_instances(POOLED_INSTANCES * 4)
            .total_memories(POOLED_INSTANCES * 2)
            .total_tables(POOLED_INSTANCES * 4)
            .max_memory_size(config.memory_limit_bytes);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    c
}

/// Ticks of [`EPOCH_TICK`] that make up a call's deadline under `config` (at least 1).
fn deadline_ticks(config: &RuntimeConfig) -> u64 {
    (config.call_deadline.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64
}
