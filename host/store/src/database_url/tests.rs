use tokio_postgres::config::SslMode as Driver;

use super::*;

/// A CA certificate (no key kept): `openssl req -x509 -newkey ec ... -days 36500`.
const CA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/ca.pem");

fn refusal(url: &str) -> String {
    DatabaseUrl::parse(url)
        .expect_err("the URL was accepted")
        .to_string()
}

#[test]
fn libpq_modes_map_to_what_the_driver_knows() {
    for (url, mode, driver) in [
        (
            "host=/tmp user=a sslmode=disable",
            SslMode::Disable,
            Driver::Disable,
        ),
        ("host=/tmp user=a", SslMode::Prefer, Driver::Prefer),
        (
            "host=/tmp user=a sslmode=allow",
            SslMode::Allow,
            Driver::Prefer,
        ),
        (
            "host=/tmp user=a sslmode=require",
            SslMode::Require,
            Driver::Require,
        ),
        (
            "host=db user=a sslmode=verify-ca",
            SslMode::VerifyCa,
            Driver::Require,
        ),
        (
            "postgres://a@db/sy?sslmode=verify-full",
            SslMode::VerifyFull,
            Driver::Require,
        ),
        // A later occurrence overrides an earlier one, as in libpq.
        (
            "postgres://a@db/sy?sslmode=disable&sslmode=require",
            SslMode::Require,
            Driver::Require,
        ),
    ] {
        let parsed = DatabaseUrl::parse(url).unwrap();
        assert_eq!(
            (parsed.mode, parsed.config.get_ssl_mode()),
            (mode, driver),
            "{url}"
        );
    }
}

#[test]
fn an_unknown_sslmode_is_refused_naming_the_modes() {
    let message = refusal("postgres://a@db/sy?sslmode=sometimes");
    assert!(
        message.contains("sslmode `sometimes` is not one of disable, allow, prefer, require, verify-ca, verify-full"),
        "{message}"
    );
    assert!(refusal("host=/tmp sslmode=Require").contains("sslmode `Require`"));
}

#[test]
fn sslrootcert_is_accepted_in_both_forms_and_taken_from_the_driver_s_string() {
    let url = format!(
        "postgres://u:p@db:5433/sy?sslmode=verify-full&sslrootcert={CA}&application_name=x"
    );
    let parsed = DatabaseUrl::parse(&url).unwrap();
    assert_eq!(parsed.mode, SslMode::VerifyFull);
    assert_eq!(parsed.config.get_application_name(), Some("x"));
    assert_eq!(parsed.config.get_ports(), [5433]);

    let keywords = format!("host=db user=u sslrootcert='{CA}' sslmode = verify-ca dbname=sy");
    let parsed = DatabaseUrl::parse(&keywords).unwrap();
    assert_eq!(
        (parsed.mode, parsed.config.get_dbname()),
        (SslMode::VerifyCa, Some("sy"))
    );
}

#[test]
fn ssl_parameters_are_split_out_with_their_quoting_and_encoding_undone() {
    let (rest, ssl) =
        take_ssl(r"host=/s sslcert='/a b/c\'s.crt' user=me sslkey=/k\ ey.pem password='x y'")
            .unwrap();
    assert_eq!(rest, "host=/s user=me password='x y'");
    assert_eq!(ssl.cert.as_deref(), Some("/a b/c's.crt"));
    assert_eq!(ssl.key.as_deref(), Some("/k ey.pem"));

    let (rest, ssl) =
        take_ssl("postgresql://h/db?sslrootcert=%2Fca%20dir%2Fca.pem&sslmode=require").unwrap();
    assert_eq!(rest, "postgresql://h/db");
    assert_eq!(ssl.rootcert.as_deref(), Some("/ca dir/ca.pem"));
    assert_eq!(ssl.mode.as_deref(), Some("require"));
}

#[test]
fn a_root_file_that_is_missing_or_holds_no_certificate_is_refused_at_parse() {
    let message = refusal("host=db sslmode=verify-full sslrootcert=/nonexistent/ca.pem");
    assert!(
        message.contains("sslrootcert /nonexistent/ca.pem"),
        "{message}"
    );
    let empty = tempfile::NamedTempFile::new().unwrap();
    let url = format!(
        "host=db sslmode=verify-full sslrootcert={}",
        empty.path().display()
    );
    assert!(
        refusal(&url).contains("no usable CA certificate"),
        "{}",
        refusal(&url)
    );
}

#[test]
fn system_roots_need_verify_full() {
    let parsed = DatabaseUrl::parse("host=db sslrootcert=system").unwrap();
    assert_eq!(parsed.mode, SslMode::VerifyFull);
    let message = refusal("host=db sslrootcert=system sslmode=require");
    assert!(
        message.contains("sslrootcert=system needs sslmode=verify-full"),
        "{message}"
    );
}

#[test]
fn a_client_certificate_needs_both_halves() {
    assert!(refusal(&format!("host=db sslcert={CA}")).contains("sslcert is given without sslkey"));
    assert!(refusal("host=db sslkey=/k.pem").contains("sslkey is given without sslcert"));
}

#[test]
fn neither_the_password_nor_the_key_s_path_reaches_a_message() {
    let secret_key = "/srv/secret-tenant-42/client.key";
    for url in [
        format!("postgres://u:hunter2@db/sy?sslmode=require&sslcert={CA}&sslkey={secret_key}"),
        format!("host=db password=hunter2 sslcert={CA} sslkey={secret_key}"),
        // The certificate file is no key: what the parser says about it is not shown.
        format!("host=db password=hunter2 sslcert={CA} sslkey={CA}"),
        "postgres://u:hunter2@db/sy?sslmode=sometimes".to_string(),
        "host=db password=hunter2 port=notaport".to_string(),
    ] {
        let message = refusal(&url);
        assert!(
            !message.contains("hunter2") && !message.contains("secret-tenant"),
            "{message}"
        );
    }
    assert!(
        refusal(&format!("host=db sslcert={CA} sslkey={secret_key}"))
            .contains("the client key (sslkey) cannot be read")
    );
    assert!(refusal(&format!("host=db sslcert={CA} sslkey={CA}")).contains("holds no private key"));

    let parsed = DatabaseUrl::parse("postgres://u:hunter2@db/sy?sslmode=require").unwrap();
    let shown = format!("{parsed:?}");
    assert!(
        !shown.contains("hunter2") && shown.contains("Require"),
        "{shown}"
    );
}
