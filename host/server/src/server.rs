//! Start-up, background tasks and graceful shutdown of a replica.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use switchyard_runtime::Runtime;
use switchyard_store::Store;
use switchyard_store::embedded::EmbeddedPostgres;
use tokio::sync::watch;

use crate::admission::{Admission, follow};
use crate::config::ServeConfig;
use crate::library::Library;
use crate::routes::app;
use crate::routing::Routing;
use crate::scheduler::Scheduler;
use crate::state::AppState;

/// How often a replica refreshes its row in `instances`.
const INSTANCE_HEARTBEAT: Duration = Duration::from_secs(5);

/// How long in-flight HTTP requests get to finish after shutdown is asked.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

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

async fn serve(
    listener: tokio::net::TcpListener,
    config: &ServeConfig,
    database_url: &str,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
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

    let mut runtime_config = config.runtime.clone();
    runtime_config
        .cache_dir
        .get_or_insert_with(|| config.data_dir.join("cache"));
    let runtime = Runtime::new(runtime_config)?;
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
    let carriers =
        crate::carriers::start::start(config, &store, database_url, &instance_id).await?;
    let admission = Arc::new(Admission::new(
        store.clone(),
        runtime.clone(),
        instance_id.clone(),
    ));
    let grant_evaluator = Arc::new(crate::grant_evaluator::GrantEvaluator::new(
        store.clone(),
        runtime.clone(),
        instance_id.clone(),
    ));
    let (federation, federation_host) = crate::federation::start(
        config,
        &store,
        &instance_id,
        &advertise,
        &hostname,
        grant_evaluator.clone(),
        carriers.clone(),
    )
    .await?;
    let routing = Arc::new(Routing::default());
    let state = Arc::new(AppState {
        federation: Some(federation.clone()),
        admission: admission.clone(),
        grant_evaluator: grant_evaluator.clone(),
        store: store.clone(),
        runtime,
        instance_id: instance_id.clone(),
        auto_approve: config.auto_approve,
        routing: routing.clone(),
        inference: Default::default(),
        sse_keepalive: config.sse_keepalive,
        metrics_auth: config.metrics_auth,
        keys: Default::default(),
        library: {
            let root = config
                .library_dir
                .clone()
                .unwrap_or_else(|| config.data_dir.join("library"));
            Library::open(&root)
                .map(|library| library.with_max_bytes(config.max_blob_bytes))
                .with_context(|| format!("opening the model library under {}", root.display()))?
        },
        carriers,
        admission_synced: AtomicBool::new(false),
        fetch_allow: config.fetch_allow.clone(),
        batch_storage_quota: config.batch_storage_quota,
    });

    federation_host.attach(&state);
    let (stop_tx, stop_rx) = watch::channel(false);
    let federating = tokio::spawn(federation.run(stop_rx.clone()));
    let follower = tokio::spawn(follow(state.clone(), config.poll_interval, stop_rx.clone()));
    let evaluator_follower = tokio::spawn(crate::grant_evaluator::follow(
        grant_evaluator,
        store.clone(),
        config.poll_interval,
        stop_rx.clone(),
    ));
    let scheduler = Scheduler {
        store: store.clone(),
        admission,
        carriers: state.carriers.clone(),
        library: state.library.clone(),
        instance_id: instance_id.clone(),
        routing,
        node_grace: config.node_grace,
        in_progress: Default::default(),
    };
    let reconciler = tokio::spawn(crate::scheduler::reconcile::run(scheduler, stop_rx.clone()));
    let sweeper = tokio::spawn(crate::library::collect_garbage(
        store.clone(),
        state.library.clone(),
        stop_rx.clone(),
    ));
    // Every replica follows the cluster's carrier row; the one holding the
    // leader lock moves a change along.
    let switch = state.carriers.clone().map(|carriers| {
        (
            tokio::spawn(crate::carriers::follow::run(
                carriers.clone(),
                stop_rx.clone(),
            )),
            tokio::spawn(crate::carriers::lead::run(carriers, stop_rx.clone())),
        )
    });
    let batches = crate::batches::start(state.clone(), stop_rx.clone());
    let decisions = tokio::spawn(crate::admission::decisions::write(
        state.admission.recorder().clone(),
        store.clone(),
        instance_id.clone(),
        config.decision_log,
        stop_rx.clone(),
    ));
    let projections = tokio::spawn(crate::jobs::sync_projections(
        state.clone(),
        stop_rx.clone(),
    ));
    let heartbeat = tokio::spawn(heartbeat(
        store.clone(),
        instance_id.clone(),
        hostname,
        stop_rx,
    ));

    println!("listening on http://{}", listener.local_addr()?);
    tracing::info!(instance = %instance_id, addr = %listener.local_addr()?, pooled = state.runtime.is_pooled(), "replica serving");

    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let server = crate::edge::serve(listener, app(state.clone()), config.edge, async move {
        shutdown.await;
        tracing::info!("shutting down");
        let _ = drained_tx.send(());
    });
    let server = tokio::spawn(server);
    // Once shutdown starts, in-flight requests get DRAIN_TIMEOUT to finish.
    let drained = async {
        let _ = drained_rx.await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        result = server => result?,
        _ = drained => tracing::warn!("requests still in flight after the drain timeout; stopping anyway"),
    }

    let _ = stop_tx.send(true);
    let _ = tokio::join!(
        follower,
        evaluator_follower,
        federating,
        heartbeat,
        reconciler,
        sweeper,
        batches,
        projections,
        decisions
    );
    if let Some((following, leading)) = switch {
        let _ = tokio::join!(following, leading);
    }
    if let Some(carriers) = &state.carriers {
        carriers.shutdown();
    }
    if let Err(e) = store.remove_instance(&instance_id).await {
        tracing::warn!(error = %e, "could not remove this replica from instances");
    }
    Ok(())
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

/// Resolves on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
}
