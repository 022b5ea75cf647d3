//! `switchyard plugin sign`: a detached signature over a component, made
//! offline with a private key that never leaves this machine; and reading
//! one back for `plugin push --signature`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use sha2::{Digest, Sha256};
use switchyard_protocol::signing::{MAX_SIGNATURE_HEADER, PluginSignature};
use switchyard_signing::SigningKey;

use crate::cli::PluginSignArgs;

/// Signs the component and writes the signature (default `COMPONENT.sig`).
pub fn sign(args: PluginSignArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.component)
        .with_context(|| format!("reading {}", args.component.display()))?;
    // The kind is the component's own, read as the registry will read it.
    let info = switchyard_runtime::inspect::inspect(&bytes).with_context(|| {
        format!(
            "{} is not a component the host serves",
            args.component.display()
        )
    })?;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let key = SigningKey::load(&args.key)?;
    let signature = switchyard_signing::sign(&key, info.kind, &args.name, &args.version, &sha256);
    let out = args.out.unwrap_or_else(|| default_out(&args.component));
    std::fs::write(&out, serde_json::to_string_pretty(&signature)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!(
        "signed {}@{} ({}, sha256 {sha256}) with key {}: {}",
        args.name,
        args.version,
        info.kind,
        signature.key_id,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The signature file as the upload header carries it. Read bounded, and
/// parsed here so that a wrong file is named before anything is sent.
pub fn header(path: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(MAX_SIGNATURE_HEADER as u64)
                .read_to_string(&mut text)
        })
        .with_context(|| format!("reading {}", path.display()))?;
    let signature: PluginSignature = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a signature file (`switchyard plugin sign` writes one)",
            path.display()
        )
    })?;
    Ok(switchyard_signing::encode_header(&signature))
}

fn default_out(component: &Path) -> PathBuf {
    let mut name = component.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}
