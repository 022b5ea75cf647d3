//! Signed plugins on the server: what an upload's detached signature
//! proves, and whether the cluster's `require_signed` setting lets a
//! component in (at upload, and again when a binding names it, since a key
//! may have been removed from the trust set in between).
//!
//! Codes: an unsigned component where its kind requires a signature is 422
//! `signature_required`; a signature that does not verify, speaks of
//! another upload, or comes from a key the cluster does not trust (where
//! required) is 422 `untrusted_signature`; a header that is not a
//! signature file at all is 400 `invalid_signature`. With the requirement
//! off, a valid signature from an unknown key is kept as untrusted.

use switchyard_protocol::carrier::Pins;
use switchyard_protocol::plugin::PluginKind;
use switchyard_protocol::signing::{RequireSigned, Signer, SignerTrust};
use switchyard_signing::SignatureError;
use switchyard_store::admission::BoundComponent;
use switchyard_store::plugins::{PluginRecord, SignedBy};
use switchyard_store::{Store, StoreError};

/// Why a component is refused for its signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    /// The header is not a signature file.
    #[error("{0}")]
    Malformed(SignatureError),
    /// Its kind requires a signature and it has none.
    #[error(
        "{plugin}@{version} is {} and this cluster requires those to be signed by a trusted key (require_signed); sign it with `switchyard plugin sign` and upload it with --signature",
        .kind.with_article()
    )]
    Required {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// Its kind.
        kind: PluginKind,
    },
    /// The signature proves nothing this cluster accepts.
    #[error("{plugin}@{version}: {why}")]
    Untrusted {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// Why, in words.
        why: String,
    },
}

impl SignatureRefusal {
    /// Its stable error code (the server answers `invalid_signature` with
    /// 400, the others with 422).
    pub fn code(&self) -> &'static str {
        match self {
            SignatureRefusal::Malformed(_) => "invalid_signature",
            SignatureRefusal::Required { .. } => "signature_required",
            SignatureRefusal::Untrusted { .. } => "untrusted_signature",
        }
    }
}

/// Why a signature check did not get to a yes.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The component is refused for its signature.
    #[error(transparent)]
    Refused(#[from] SignatureRefusal),
    /// The trust set or the settings could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an upload claims to be, after its bytes were checked.
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    /// Its kind, read from the component.
    pub kind: PluginKind,
    /// Its name.
    pub name: &'a str,
    /// Its version.
    pub version: &'a str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'a str,
}

/// Checks an upload's signature header (its bytes, `None` when the upload
/// came without one) against the upload and the trust set: the signature to
/// keep (`None`: unsigned), or the refusal.
pub async fn check_upload(
    store: &Store,
    header: Option<&[u8]>,
    upload: Upload<'_>,
) -> Result<Option<SignedBy>, SigningError> {
    let required = store
        .cluster_settings()
        .await?
        .require_signed
        .requires(upload.kind);
    let untrusted = |why: String| SignatureRefusal::Untrusted {
        plugin: upload.name.into(),
        version: upload.version.into(),
        why,
    };
    let Some(header) = header else {
        return match required {
            true => Err(SignatureRefusal::Required {
                plugin: upload.name.into(),
                version: upload.version.into(),
                kind: upload.kind,
            }
            .into()),
            false => Ok(None),
        };
    };
    let signature =
        switchyard_signing::decode_header(header).map_err(SignatureRefusal::Malformed)?;
    if !signature.covers(upload.kind, upload.name, upload.version, upload.sha256) {
        // The signature's own fields are the client's text: not echoed.
        return Err(untrusted(
            "the signature was made for another component (its kind, name, version or sha256 differ from this upload's)".into(),
        )
        .into());
    }
    switchyard_signing::verify(&signature).map_err(|e| untrusted(e.to_string()))?;
    let trusted = store.trusted_key(&signature.public_key).await?;
    if required && trusted.is_none() {
        return Err(untrusted(format!(
            "signed by key {}, which this cluster does not trust (an admin adds it with `switchyard trust add`)",
            signature.key_id
        ))
        .into());
    }
    Ok(Some(SignedBy {
        key_id: signature.key_id,
        public_key: signature.public_key,
        signature: signature.signature,
        trusted_name: trusted.map(|key| key.name),
    }))
}

/// Whether a registered version may be bound now: its kind's requirement
/// against its signer's standing in the trust set today.
pub fn check_binding(
    required: &RequireSigned,
    record: &PluginRecord,
) -> Result<(), SignatureRefusal> {
    if !required.requires(record.kind) {
        return Ok(());
    }
    let Some(signer) = &record.signature else {
        return Err(SignatureRefusal::Required {
            plugin: record.name.clone(),
            version: record.version.clone(),
            kind: record.kind,
        });
    };
    let why = match signer.trust {
        SignerTrust::Trusted => return Ok(()),
        SignerTrust::NoLongerTrusted => "no longer trusted",
        SignerTrust::Untrusted => "not trusted",
    };
    Err(SignatureRefusal::Untrusted {
        plugin: record.name.clone(),
        version: record.version.clone(),
        why: format!(
            "signed by key {}{}, which is {why} by this cluster",
            signer.key_id,
            signer
                .key_name
                .as_deref()
                .map(|name| format!(" ({name})"))
                .unwrap_or_default()
        ),
    })
}

/// Whether stored bindings (a generation a rollback restores) may be bound
/// again now: [`check_binding`] for each component the registry holds.
pub async fn check_stored<E>(store: &Store, policies: &[BoundComponent]) -> Result<(), E>
where
    E: From<StoreError> + From<SignatureRefusal>,
{
    let required = store.cluster_settings().await?.require_signed;
    if required.is_off() {
        return Ok(());
    }
    for policy in policies {
        if let Some(record) = store.plugin(&policy.plugin, &policy.version).await? {
            check_binding(&required, &record)?;
        }
    }
    Ok(())
}

/// Whether a carrier change may pin these components: each must pass
/// [`check_binding`] (carrier and tunnel components, where carriers
/// require signatures).
pub async fn check_pins(store: &Store, pins: &Pins) -> Result<(), SigningError> {
    let required = store.cluster_settings().await?.require_signed;
    if required.is_off() {
        return Ok(());
    }
    for (name, pin) in pins {
        if let Some(record) = store.plugin(name, &pin.version).await? {
            check_binding(&required, &record)?;
        }
    }
    Ok(())
}

/// [`trust_warning`] for each component a carrier row pins.
pub async fn pin_warnings(store: &Store, pins: &Pins) -> Result<Vec<String>, StoreError> {
    let mut warnings = Vec::new();
    for (name, pin) in pins {
        if let Some(record) = store.plugin(name, &pin.version).await? {
            warnings.extend(trust_warning(&record));
        }
    }
    Ok(warnings)
}

/// A line for a status listing when a running version's signer is not
/// trusted (any more): what stays running, and why a new binding would not.
pub fn trust_warning(record: &PluginRecord) -> Option<String> {
    let signer = record.signature.as_ref()?;
    let standing = match signer.trust {
        SignerTrust::Trusted => return None,
        SignerTrust::NoLongerTrusted => "a key no longer trusted",
        SignerTrust::Untrusted => "a key this cluster does not trust",
    };
    Some(format!(
        "{}@{} is signed by {standing} ({}{}); it keeps running, but a new binding of it is refused where its kind requires signatures",
        record.name,
        record.version,
        signer.key_id,
        signer
            .key_name
            .as_deref()
            .map(|name| format!(", {name}"))
            .unwrap_or_default()
    ))
}

/// What a status shows of the signers of the components a generation
/// runs: each one's signer (`None`: unsigned, or gone from the registry),
/// in order, and a warning for each signed by a key not trusted (any more).
pub async fn signers(
    store: &Store,
    components: &[BoundComponent],
) -> Result<(Vec<Option<Signer>>, Vec<String>), StoreError> {
    let mut signers = Vec::new();
    let mut warnings = Vec::new();
    for component in components {
        let record = store.plugin(&component.plugin, &component.version).await?;
        warnings.extend(record.as_ref().and_then(trust_warning));
        signers.push(record.and_then(|r| r.signature));
    }
    Ok((signers, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: PluginKind, trust: Option<SignerTrust>) -> PluginRecord {
        PluginRecord {
            name: "p".into(),
            version: "1".into(),
            kind,
            world: "w".into(),
            sha256: "00".repeat(32),
            size: 1,
            uploaded_by: "admin".into(),
            uploaded_at: String::new(),
            signature: trust.map(|trust| Signer {
                key_id: "0123456789abcdef".into(),
                key_name: Some("release".into()),
                trusted: trust == SignerTrust::Trusted,
                trust,
            }),
        }
    }

    fn code(refusal: SignatureRefusal) -> &'static str {
        refusal.code()
    }

    #[test]
    fn a_binding_needs_a_trusted_signer_only_where_its_kind_requires_one() {
        let policies = RequireSigned {
            policy: true,
            ..RequireSigned::default()
        };
        let unsigned = record(PluginKind::Policy, None);
        assert_eq!(
            code(check_binding(&policies, &unsigned).unwrap_err()),
            "signature_required"
        );
        for trust in [SignerTrust::Untrusted, SignerTrust::NoLongerTrusted] {
            let refusal = check_binding(&policies, &record(PluginKind::Policy, Some(trust)));
            assert_eq!(code(refusal.unwrap_err()), "untrusted_signature");
        }
        assert!(
            check_binding(
                &policies,
                &record(PluginKind::Policy, Some(SignerTrust::Trusted))
            )
            .is_ok()
        );
        // Grant evaluators are not required here; carriers cover tunnels.
        assert!(check_binding(&policies, &record(PluginKind::Grant, None)).is_ok());
        let carriers = RequireSigned {
            carrier: true,
            ..RequireSigned::default()
        };
        assert!(check_binding(&carriers, &record(PluginKind::Tunnel, None)).is_err());
    }

    #[test]
    fn only_untrusted_signers_are_warned_of_and_the_warning_says_which() {
        assert_eq!(trust_warning(&record(PluginKind::Policy, None)), None);
        assert_eq!(
            trust_warning(&record(PluginKind::Policy, Some(SignerTrust::Trusted))),
            None
        );
        let warning = trust_warning(&record(
            PluginKind::Policy,
            Some(SignerTrust::NoLongerTrusted),
        ))
        .unwrap();
        assert!(warning.contains("no longer trusted"), "{warning}");
        assert!(warning.contains("0123456789abcdef, release"), "{warning}");
    }
}
