//! TLS to PostgreSQL, as libpq's `sslmode` asks for it:
//!
//! | `sslmode` | without TLS on the server | certificate |
//! | --- | --- | --- |
//! | `disable` | plain | — |
//! | `allow`, `prefer` (the default) | plain | not verified |
//! | `require` | refused | not verified |
//! | `verify-ca`, `verify-full` | refused | verified against the system's roots, with the host name |
//!
//! `require` encrypts without authenticating the server, as libpq does when
//! no root certificate is configured; `verify-full` is the mode that also
//! stops a man in the middle. tokio-postgres knows `disable`, `prefer` and
//! `require`; the verifying modes are `require` here with a verifying
//! connector (`verify-ca` checks the host name too: stricter than libpq,
//! never weaker). `allow` (plain first, TLS if the server insists) is taken
//! as `prefer`. A private CA is trusted by adding it to the system's store.

use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// Whether the server's certificate is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verify {
    /// `verify-ca`, `verify-full`.
    Full,
    /// Every other mode: encrypted when TLS is used, not authenticated.
    No,
}

/// Parses a database URL (URL or key=value form) and the verification
/// its `sslmode` asks for.
pub(crate) fn parse(url: &str) -> Result<(tokio_postgres::Config, Verify), StoreError> {
    let mut verify = Verify::No;
    let mut url = url.to_string();
    for (libpq, ours) in [
        ("sslmode=verify-full", "sslmode=require"),
        ("sslmode=verify-ca", "sslmode=require"),
        ("sslmode=allow", "sslmode=prefer"),
    ] {
        if url.contains(libpq) {
            url = url.replace(libpq, ours);
            if libpq.contains("verify") {
                verify = Verify::Full;
            }
        }
    }
    let config = tokio_postgres::Config::from_str(&url)
        .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
    Ok((config, verify))
}

/// The connector for `verify`, with ring as the crypto provider (the one
/// the rest of the host's rustls uses).
pub(crate) fn connector(verify: Verify) -> MakeRustlsConnect {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
    let config = match verify {
        Verify::Full => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "a system root certificate could not be read");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            tracing::debug!(
                added,
                ignored,
                "system roots for verifying PostgreSQL's certificate"
            );
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Verify::No => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth(),
    };
    MakeRustlsConnect::new(config)
}

/// Accepts any certificate but still checks the handshake's signatures:
/// encryption against a passive listener, as libpq's `require` gives.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use tokio_postgres::config::SslMode;

    use super::*;

    #[test]
    fn libpq_modes_map_to_what_the_driver_knows() {
        for (url, mode, verify) in [
            (
                "host=/tmp user=a sslmode=disable",
                SslMode::Disable,
                Verify::No,
            ),
            ("host=/tmp user=a", SslMode::Prefer, Verify::No),
            (
                "host=/tmp user=a sslmode=allow",
                SslMode::Prefer,
                Verify::No,
            ),
            (
                "host=/tmp user=a sslmode=require",
                SslMode::Require,
                Verify::No,
            ),
            (
                "host=db user=a sslmode=verify-ca",
                SslMode::Require,
                Verify::Full,
            ),
            (
                "postgres://a@db/sy?sslmode=verify-full",
                SslMode::Require,
                Verify::Full,
            ),
        ] {
            let (config, parsed) = parse(url).unwrap();
            assert_eq!((config.get_ssl_mode(), parsed), (mode, verify), "{url}");
        }
        assert!(parse("host=/tmp sslmode=sometimes").is_err());
    }
}
