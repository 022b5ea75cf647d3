//! What a replica writes to its log: a newcomer's first screen holds no
//! red line that is not a fault. One test per process: the test installs
//! the process's subscriber, which hears every thread of the replica.

use reqwest::StatusCode;
use switchyard_tests::db::fresh_database;
use switchyard_tests::replica::Replica;

/// Keeps the request tracer's events: level and target.
struct Tracer(std::sync::Arc<std::sync::Mutex<Vec<(tracing::Level, String)>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Tracer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if meta.target().starts_with("tower_http") {
            let seen = (*meta.level(), meta.target().to_string());
            self.0.lock().unwrap().push(seen);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_answer_from_the_readiness_probe_is_not_logged_as_a_fault() {
    use tracing_subscriber::layer::SubscriberExt;
    let traced = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // The process's only test: its subscriber hears every thread.
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(Tracer(traced.clone())),
    )
    .unwrap();
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&database_url, data_dir.path()).await;
    // The database goes away: /readyz answers 503, as it does while a
    // replica starts; that is its answer, not a fault.
    let name = database_url.rsplit("dbname=").next().unwrap().to_string();
    let base = std::env::var("SWITCHYARD_TEST_DATABASE_URL").unwrap();
    let admin = switchyard_tests::db::connect(&base).await;
    admin
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
    let answer = replica
        .http
        .get(format!("{}/readyz", replica.url))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    let alarms: Vec<_> = traced
        .lock()
        .unwrap()
        .iter()
        .filter(|(level, _)| *level <= tracing::Level::WARN)
        .cloned()
        .collect();
    assert!(alarms.is_empty(), "{alarms:?}");
    // The API is still traced (the check above would pass if nothing were).
    traced.lock().unwrap().clear();
    let document = replica
        .http
        .get(format!("{}/api/openapi.json", replica.url))
        .send()
        .await
        .unwrap();
    assert_eq!(document.status(), StatusCode::OK);
    assert!(!traced.lock().unwrap().is_empty());
}
