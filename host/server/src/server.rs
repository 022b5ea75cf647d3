//! Start-up, background tasks and graceful shutdown of a replica.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use switchyard_runtime::Runtime;
use switchyard_store::Store;
use switchyard_store::embedded::EmbeddedPostgres;
use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::routes::app;
use crate::state::AppState;
use switchyard_binding::admission::{Admission, follow};
use switchyard_library::Library;
use switchyard_scheduler::Scheduler;
use switchyard_scheduler::routing::Routing;

mod counters;
mod tasks;
mod usage;
use tasks::Tasks;

/// How often a replica refreshes its row in `instances`.
const INSTANCE_HEARTBEAT: Duration = Duration::from_secs(5);

/// How long in-flight HTTP requests get to finish after shutdown is asked.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a replica deletes audit records past their age.
const AUDIT_PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Runs a replica on `config.listen` until `shutdown` resolves, then drains
/// and stops what it started.
pub async fn run(
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    run_on(listener, config, shutdown).await
}

/// [`run`] on a listener the caller bound (tests bind port 0 and read the address).
pub async fn run_on(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(token) = &config.admin_token {
        crate::config::check_admin_token(token)?;
    }
    let mut embedded = None;
    let database_url = match &config.database_url {
        Some(url) => url.clone(),
        None => {
            let data_dir = config.data_dir.clone();
            let pg =
                tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&data_dir)).await??;
            let url = pg.url();
            embedded = Some(pg);
            url
        }
    };
    let result = serve(listener, &config, &database_url, shutdown).await;
    if let Some(mut pg) = embedded {
        tokio::task::spawn_blocking(move || pg.stop()).await??;
    }
    result
}

/// Who this replica is, as the cluster sees it.
struct Replica {
    instance_id: String,
    hostname: String,
    /// The address other replicas and peers reach it at.
    advertise: String,
}

async fn serve(
    listener: tokio::net::TcpListener,
    config: &ServeConfig,
    database_url: &str,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = connect(config, database_url).await?;
    let replica = register(&store, config, &listener).await?;
    let (state, federation) = open_state(config, &store, database_url, &replica).await?;
    let tasks = start_tasks(config, &state, federation, &replica);

    println!("listening on http://{}", listener.local_addr()?);
    tracing::info!(instance = %replica.instance_id, addr = %listener.local_addr()?, pooled = state.runtime.is_pooled(), "replica serving");
    let served = serve_http(listener, state.clone(), config, shutdown).await;

    tasks.stop().await;
    if let Some(carriers) = &state.carriers {
        carriers.shutdown();
    }
    if let Err(e) = store.remove_instance(&replica.instance_id).await {
        tracing::warn!(error = %e, "could not remove this replica from instances");
    }
    served
}

/// The store, with the admin key made on a first start.
async fn connect(config: &ServeConfig, database_url: &str) -> anyhow::Result<Store> {
    let store = Store::connect(database_url)
        .await
        .context("connecting to PostgreSQL")?;
    match store
        .ensure_admin_key(config.admin_token.as_deref())
        .await?
    {
        Some(_) if config.admin_token.is_some() => {
            println!("admin key created with the configured admin token");
        }
        // Printed on stdout, once, never logged.
        Some(token) => println!("admin token (shown once; store it now): {token}"),
        None => {}
    }
    Ok(store)
}

/// Enters this replica in `instances` with the address it is reached at.
async fn register(
    store: &Store,
    config: &ServeConfig,
    listener: &tokio::net::TcpListener,
) -> anyhow::Result<Replica> {
    let instance_id = switchyard_store::keys::random_id("inst");
    let hostname = std::fs::read_to_string("/etc/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    store.heartbeat_instance(&instance_id, &hostname).await?;
    let advertise = config.advertise.clone().unwrap_or_else(|| {
        format!(
            "http://{}",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        )
    });
    store.set_instance_address(&instance_id, &advertise).await?;
    Ok(Replica {
        instance_id,
        hostname,
        advertise,
    })
}

/// Everything the routes and the tasks share: the runtime, the carriers,
/// admission, the grant evaluator, federation and the model library.
async fn open_state(
    config: &ServeConfig,
    store: &Store,
    database_url: &str,
    replica: &Replica,
) -> anyhow::Result<(Arc<AppState>, Arc<switchyard_federation::Federation>)> {
    let mut runtime_config = config.runtime.clone();
    runtime_config
        .cache_dir
        .get_or_insert_with(|| config.data_dir.join("cache"));
    let runtime = Runtime::new(runtime_config)?;
    let instance_id = &replica.instance_id;
    let carriers =
        switchyard_carrier_set::start::start(&config.carriers(), store, database_url, instance_id)
            .await?;
    let loader = Arc::new(switchyard_binding::bound::Loader::new(
        store.clone(),
        runtime.clone(),
        instance_id.clone(),
    ));
    let admission = Arc::new(Admission::new(loader.clone()));
    let grant_evaluator = Arc::new(switchyard_binding::grant_evaluator::GrantEvaluator::new(
        loader,
    ));
    let library_root = config
        .library_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("library"));
    let library = Library::open(&library_root)
        .map(|library| library.with_max_bytes(config.max_blob_bytes))
        .with_context(|| format!("opening the model library under {}", library_root.display()))?;
    let (federation, federation_local) = crate::federation::start(
        config,
        store,
        instance_id,
        &replica.advertise,
        &replica.hostname,
        crate::federation::PortParts {
            evaluator: grant_evaluator.clone(),
            carriers: carriers.clone(),
            library: library.clone(),
        },
    )
    .await?;
    let inference = Arc::new(switchyard_inference::Inference {
        admission: admission.clone(),
        routing: Arc::new(Routing::default()),
        carriers: carriers.clone(),
        federation: Some(federation.clone()),
        sse_keepalive: config.sse_keepalive,
        metrics: Default::default(),
        usage: config.usage_metering.then(Default::default),
        counters: config.usage_metering.then(|| {
            let counters = Arc::new(switchyard_inference::counters::UsageCounters::default());
            runtime.set_usage_counters(counters.clone());
            counters
        }),
        tracer: config.otlp_endpoint.as_ref().map(|endpoint| {
            let (tracer, export) =
                switchyard_telemetry::Tracer::start(switchyard_telemetry::TracerConfig {
                    endpoint: endpoint.clone(),
                    service: "switchyard-frontend".into(),
                });
            tokio::spawn(export);
            tracer
        }),
    });
    let batches = Arc::new(switchyard_batches::Batches {
        store: store.clone(),
        inference: inference.clone(),
        carriers: carriers.clone(),
        instance_id: instance_id.clone(),
        storage_quota: config.batch_storage_quota,
    });
    let state = Arc::new(AppState {
        federation: Some(federation.clone()),
        admission,
        grant_evaluator,
        store: store.clone(),
        runtime,
        instance_id: instance_id.clone(),
        auto_approve: config.auto_approve,
        inference,
        metrics_auth: config.metrics_auth,
        keys: Default::default(),
        library,
        carriers,
        fetch_allow: config.fetch_allow.clone(),
        batches,
    });
    federation_local.attach(&state);
    Ok((state, federation))
}

/// The replica's background tasks, by name.
fn start_tasks(
    config: &ServeConfig,
    state: &Arc<AppState>,
    federation: Arc<switchyard_federation::Federation>,
    replica: &Replica,
) -> Tasks {
    let store = &state.store;
    let mut tasks = Tasks::new();
    tasks.spawn("federation", federation.run(tasks.stop_signal()));
    tasks.spawn(
        "admission follower",
        follow(
            state.admission.clone(),
            config.poll_interval,
            tasks.stop_signal(),
        ),
    );
    tasks.spawn(
        "grant evaluator follower",
        switchyard_binding::grant_evaluator::follow(
            state.grant_evaluator.clone(),
            store.clone(),
            config.poll_interval,
            tasks.stop_signal(),
        ),
    );
    let scheduler = Scheduler {
        store: store.clone(),
        admission: state.admission.clone(),
        carriers: state.carriers.clone(),
        library: state.library.clone(),
        instance_id: replica.instance_id.clone(),
        routing: state.inference.routing.clone(),
        node_grace: config.node_grace,
        in_progress: Default::default(),
    };
    tasks.spawn(
        "scheduler",
        switchyard_scheduler::reconcile::run(scheduler, tasks.stop_signal()),
    );
    tasks.spawn(
        "library sweeper",
        switchyard_library::collect_garbage(
            store.clone(),
            state.library.clone(),
            tasks.stop_signal(),
        ),
    );
    // Every replica follows the cluster's carrier row; the one holding the
    // leader lock moves a change along.
    if let Some(carriers) = &state.carriers {
        tasks.spawn(
            "carrier follower",
            switchyard_carrier_set::follow::run(carriers.clone(), tasks.stop_signal()),
        );
        tasks.spawn(
            "carrier leader",
            switchyard_carrier_set::lead::run(carriers.clone(), tasks.stop_signal()),
        );
    }
    tasks.adopt(
        "batches",
        switchyard_batches::start(state.batches.clone(), tasks.stop_signal()),
    );
    start_records(&mut tasks, config, state, replica);
    tasks.spawn(
        "job projections",
        crate::jobs::sync_projections(state.clone(), tasks.stop_signal()),
    );
    tasks.spawn(
        "instance heartbeat",
        heartbeat(
            store.clone(),
            replica.instance_id.clone(),
            replica.hostname.clone(),
            tasks.stop_signal(),
        ),
    );
    tasks
}

/// The tasks that keep the replica's records: the decision log's and the
/// usage meter's writers, and the audit trail's retention.
fn start_records(
    tasks: &mut Tasks,
    config: &ServeConfig,
    state: &Arc<AppState>,
    replica: &Replica,
) {
    tasks.spawn(
        "decision log",
        switchyard_binding::admission::decisions::write(
            state.admission.recorder().clone(),
            state.store.clone(),
            replica.instance_id.clone(),
            config.decision_log,
            tasks.stop_signal(),
        ),
    );
    if let Some(counters) = &state.inference.counters {
        tasks.spawn(
            "usage counters",
            counters::share(
                counters.clone(),
                state.store.clone(),
                replica.instance_id.clone(),
                tasks.stop_signal(),
            ),
        );
    }
    if let Some(meter) = &state.inference.usage {
        tasks.spawn(
            "usage meter",
            usage::write(
                meter.clone(),
                state.store.clone(),
                replica.instance_id.clone(),
                (config.usage_events_max_age, config.usage_max_age),
                tasks.stop_signal(),
            ),
        );
    }
    tasks.spawn(
        "audit retention",
        prune_audit(
            state.store.clone(),
            config.audit_max_age,
            tasks.stop_signal(),
        ),
    );
}

/// Serves the API until `shutdown` resolves; requests in flight then get
/// [`DRAIN_TIMEOUT`] to finish.
async fn serve_http(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    config: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let server = crate::edge::serve(
        listener,
        app(state, config.pages),
        config.edge,
        async move {
            shutdown.await;
            tracing::info!("shutting down");
            let _ = drained_tx.send(());
        },
    );
    let server = tokio::spawn(server);
    let drained = async {
        let _ = drained_rx.await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        result = server => result?,
        _ = drained => tracing::warn!("requests still in flight after the drain timeout; stopping anyway"),
    }
    Ok(())
}

/// Deletes audit records older than `max_age`, hourly (a replica that
/// finds nothing to delete deletes nothing; the statement is idempotent).
async fn prune_audit(store: Store, max_age: Duration, mut stop: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(AUDIT_PRUNE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = every.tick() => {}
        }
        match store.prune_audit(max_age.as_secs_f64()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "audit trail pruned"),
            Err(e) => tracing::warn!(error = %e, "could not prune the audit trail"),
        }
    }
}

async fn heartbeat(store: Store, id: String, hostname: String, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(INSTANCE_HEARTBEAT) => {}
        }
        if let Err(e) = store.heartbeat_instance(&id, &hostname).await {
            tracing::warn!(error = %e, "instance heartbeat failed");
        }
    }
}
