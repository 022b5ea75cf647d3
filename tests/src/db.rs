//! A fresh database per test in the suite's PostgreSQL, and connections to
//! it made as the host makes them (TLS as the URL's `ssl*` parameters ask:
//! the suite also runs against a PostgreSQL that accepts only TLS).

use rand::RngCore;
use switchyard_store::DatabaseUrl;

/// The connection string of a new, empty database.
pub async fn fresh_database() -> String {
    let base = std::env::var("SWITCHYARD_TEST_DATABASE_URL").expect(
        "SWITCHYARD_TEST_DATABASE_URL is not set: run the suites with scripts/test.sh, \
         which starts a private PostgreSQL for them",
    );
    fresh_database_in(&base).await
}

/// A new, empty database in the PostgreSQL that `base` (a superuser's
/// URL) reaches; its URL keeps every parameter of `base`.
pub async fn fresh_database_in(base: &str) -> String {
    let client = connect(base).await;
    let mut suffix = [0u8; 6];
    rand::rng().fill_bytes(&mut suffix);
    let name = format!("t_{}", hex::encode(suffix));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("creating a test database");
    with_database(base, &name)
}

/// A connection to `url`, its driver spawned, made by the host's own
/// [`DatabaseUrl`].
pub async fn connect(url: &str) -> tokio_postgres::Client {
    DatabaseUrl::parse(url)
        .expect("a valid database URL")
        .connect_spawned()
        .await
        .expect("connecting to the test PostgreSQL")
}

/// `base` pointed at another database (keyword form or URL form).
fn with_database(base: &str, name: &str) -> String {
    if base.starts_with("postgres://") || base.starts_with("postgresql://") {
        let (head, query) = base
            .split_once('?')
            .map_or((base, None), |(h, q)| (h, Some(q)));
        let scheme_end = head.find("://").map_or(0, |i| i + 3);
        let host_end = head[scheme_end..]
            .find('/')
            .map_or(head.len(), |i| scheme_end + i);
        let mut url = format!("{}/{name}", &head[..host_end]);
        if let Some(q) = query {
            url.push('?');
            url.push_str(q);
        }
        url
    } else {
        format!("{base} dbname={name}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_is_replaced_in_both_forms_keeping_every_parameter() {
        assert_eq!(
            super::with_database("host=/s user=postgres", "t1"),
            "host=/s user=postgres dbname=t1"
        );
        assert_eq!(
            super::with_database("postgres://u:p@h:5/db?sslmode=disable", "t1"),
            "postgres://u:p@h:5/t1?sslmode=disable"
        );
        assert_eq!(
            super::with_database(
                "postgres://u:p@localhost:5/postgres?sslmode=verify-full&sslrootcert=/t/ca.crt",
                "t1"
            ),
            "postgres://u:p@localhost:5/t1?sslmode=verify-full&sslrootcert=/t/ca.crt"
        );
    }
}
