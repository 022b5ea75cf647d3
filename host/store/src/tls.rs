//! TLS to PostgreSQL, as libpq's parameters ask for it:
//!
//! | `sslmode` | without TLS on the server | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | plain | — (no TLS) |
//! | `allow`, `prefer` (the default) | plain | not verified, unless `sslrootcert` is given |
//! | `require` | refused | not verified, unless `sslrootcert` is given |
//! | `verify-ca` | refused | its chain, up to a root |
//! | `verify-full` | refused | its chain and the host name |
//!
//! The roots are the CAs of `sslrootcert` (a PEM file), or the system's
//! with `sslrootcert=system` (which needs `verify-full`, as in libpq 16) or
//! when no `sslrootcert` is given. A root file makes every TLS mode check the
//! chain, as libpq does when it finds one. `sslcert` and `sslkey` (PEM, the
//! key unencrypted) are the client certificate, sent when the server asks
//! for one (`clientcert=verify-full`, or the `cert` method). `require`
//! encrypts without authenticating the server, as libpq does; `verify-full`
//! is the mode that also stops a man in the middle. The driver knows
//! `disable`, `prefer` and `require`: `allow` (plain first, TLS if the server
//! insists) is taken as `prefer`, and the verifying modes are `require` with
//! a verifying connector.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

const MODES: [(&str, SslMode); 6] = [
    ("disable", SslMode::Disable),
    ("allow", SslMode::Allow),
    ("prefer", SslMode::Prefer),
    ("require", SslMode::Require),
    ("verify-ca", SslMode::VerifyCa),
    ("verify-full", SslMode::VerifyFull),
];

impl FromStr for SslMode {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, StoreError> {
        MODES
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, mode)| *mode)
            .ok_or_else(|| {
                StoreError::Config(format!(
                    "sslmode `{text}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ))
            })
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = MODES
            .iter()
            .find(|(_, m)| m == self)
            .map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

impl SslMode {
    /// The driver's mode: whether it asks for TLS and whether it insists.
    pub(crate) fn driver_mode(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            SslMode::Disable => Driver::Disable,
            SslMode::Allow | SslMode::Prefer => Driver::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Driver::Require,
        }
    }
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Roots {
    /// The operating system's store.
    System,
    /// A PEM file of CA certificates.
    File(PathBuf),
}

/// What the URL's `ssl*` parameters ask for.
#[derive(Debug)]
pub(crate) struct TlsSettings {
    pub(crate) mode: SslMode,
    /// `sslrootcert`.
    pub(crate) roots: Option<Roots>,
    /// `sslcert` and `sslkey`.
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    /// Nothing: encrypted, not authenticated.
    No,
    /// The chain up to a root, not the host name (`verify-ca`).
    Chain,
    /// The chain and the host name (`verify-full`).
    Full,
}

impl TlsSettings {
    fn verify(&self) -> Verify {
        match self.mode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Chain,
            _ if self.roots.is_some() => Verify::Chain,
            _ => Verify::No,
        }
    }
}

/// The connector `settings` ask for, with ring as the crypto provider (the
/// one the rest of the host's rustls uses); the certificate files are read
/// now, so that a missing one fails at start, not at the first connection.
pub(crate) fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
    let verify = settings.verify();
    let verifier: Arc<dyn ServerCertVerifier> = match verify {
        Verify::No => Arc::new(EncryptOnly(provider)),
        Verify::Chain | Verify::Full => {
            let roots = match &settings.roots {
                Some(Roots::File(path)) => file_roots(path)?,
                Some(Roots::System) | None => system_roots(),
            };
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| StoreError::Config(format!("sslrootcert: {e}")))?;
            match verify {
                Verify::Full => webpki as Arc<dyn ServerCertVerifier>,
                _ => Arc::new(ChainOnly(webpki)),
            }
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &settings.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let (chain, key) = client_identity(cert, key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                StoreError::Config(format!(
                    "the client certificate (sslcert) and key (sslkey) cannot be used together: {e}"
                ))
            })?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The CAs of `sslrootcert`. The path is in the message: it names no secret.
fn file_roots(path: &Path) -> Result<RootCertStore, StoreError> {
    let unreadable =
        |e: &dyn fmt::Display| StoreError::Config(format!("sslrootcert {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| unreadable(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(unreadable(&"holds no usable CA certificate"));
    }
    Ok(roots)
}

fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
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
    roots
}

/// `sslcert`'s chain and `sslkey`'s key. The key's path and the key file's
/// text never reach a message: a path can say more than it should, and a
/// PEM parser's complaint can quote the line it stopped at.
fn client_identity(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), StoreError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| StoreError::Config(format!("sslcert {}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(StoreError::Config(format!(
            "sslcert {}: holds no certificate",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::Io(e) => format!("cannot be read ({})", e.kind()),
            rustls::pki_types::pem::Error::NoItemsFound => "holds no private key".into(),
            _ => "is not an unencrypted PEM private key".into(),
        };
        StoreError::Config(format!("the client key (sslkey) {why}"))
    })?;
    Ok((chain, key))
}

/// `verify-ca`: the chain must lead to a trusted root; the name in the
/// certificate need not be the host's (libpq's meaning, for servers reached
/// by an address their certificate does not name).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The verifier checks the chain first and the name last: a name
        // mismatch is the only error left once the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
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
