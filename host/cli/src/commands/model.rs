//! `switchyard model`: import local files into the library, fetch one by
//! URL ([`super::model_fetch`]), list, show, delete.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use futures::StreamExt;
use reqwest::Method;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::model_fetch;
use super::progress::Progress;
use crate::cli::ModelCommand;
use crate::client::Client;
use switchyard_protocol::admin::FetchModel;
use switchyard_protocol::models::{ModelFile, ModelRevision};

const READ: usize = 1 << 20;

/// Runs a `model` command.
pub async fn model(command: ModelCommand) -> anyhow::Result<std::process::ExitCode> {
    match command {
        ModelCommand::Import {
            path,
            id,
            revision,
            licence,
            api,
        } => {
            let client = Client::new(&api);
            let files = files(&path)?;
            let mut manifest = Vec::new();
            for (name, file) in &files {
                let (sha256, size) = hash(name, file).await?;
                upload(&client, name, file, &sha256, size).await?;
                manifest.push(ModelFile {
                    path: name.clone(),
                    size: size as i64,
                    sha256,
                });
            }
            let body = ModelRevision {
                id,
                revision,
                licence,
                files: manifest,
                // The server records who and when.
                imported_by: String::new(),
                imported_at: String::new(),
            };
            let registered = client
                .send(client.request(Method::POST, "/api/models").json(&body))
                .await?;
            println!("{}", serde_json::to_string_pretty(&registered)?);
        }
        ModelCommand::Fetch {
            url,
            sha256,
            id,
            revision,
            name,
            licence,
            api,
        } => {
            let client = Client::new(&api);
            let fetch = FetchModel {
                url,
                sha256,
                id,
                revision,
                name,
                licence,
            };
            let registered = model_fetch::fetch(&client, fetch).await?;
            println!("{}", serde_json::to_string_pretty(&registered)?);
        }
        ModelCommand::List { api } => {
            let client = Client::new(&api);
            let listed = client
                .send(client.request(Method::GET, "/api/models"))
                .await?;
            println!("{}", serde_json::to_string_pretty(&listed)?);
        }
        ModelCommand::Show { id, revision, api } => {
            let client = Client::new(&api);
            let shown = client
                .send(client.request(Method::GET, &format!("/api/models/{id}/{revision}")))
                .await?;
            println!("{}", serde_json::to_string_pretty(&shown)?);
        }
        ModelCommand::Delete { id, revision, api } => {
            let client = Client::new(&api);
            client
                .send(client.request(Method::DELETE, &format!("/api/models/{id}/{revision}")))
                .await?;
            println!("deleted {id}@{revision}");
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The revision's files: `(name inside the model, path here)`, sorted.
fn files(path: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    if meta.is_file() {
        let name = path
            .file_name()
            .context("the file has no name")?
            .to_string_lossy()
            .into_owned();
        return Ok(vec![(name, path.to_path_buf())]);
    }
    let mut found = Vec::new();
    let mut folders = vec![path.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).with_context(|| format!("{}", folder.display()))? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                folders.push(entry.path());
            } else if kind.is_file() {
                let relative = entry
                    .path()
                    .strip_prefix(path)?
                    .to_string_lossy()
                    .into_owned();
                found.push((relative, entry.path()));
            }
        }
    }
    if found.is_empty() {
        bail!("{} holds no files", path.display());
    }
    found.sort();
    Ok(found)
}

async fn hash(name: &str, path: &Path) -> anyhow::Result<(String, u64)> {
    let mut file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("{}", path.display()))?;
    let total = file.metadata().await?.len();
    let mut progress = Progress::new(&format!("hashing {name}"), total);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; READ];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        size += n as u64;
        progress.advance(n as u64);
    }
    let digest = hex::encode(hasher.finalize());
    progress.finish(&digest[..12]);
    Ok((digest, size))
}

async fn upload(
    client: &Client,
    name: &str,
    path: &Path,
    sha256: &str,
    size: u64,
) -> anyhow::Result<()> {
    let present = client
        .send(client.request(Method::GET, &format!("/api/library/blobs/{sha256}")))
        .await
        .is_ok_and(|blob| blob["size"] == size);
    if present {
        eprintln!("{name}: already in the library");
        return Ok(());
    }
    let file = tokio::fs::File::open(path).await?;
    let progress = std::sync::Arc::new(std::sync::Mutex::new(Progress::new(
        &format!("uploading {name}"),
        size,
    )));
    let counted = progress.clone();
    let body = futures::stream::unfold(file, |mut file| async move {
        let mut buffer = vec![0u8; READ];
        match file.read(&mut buffer).await {
            Ok(0) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buffer)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    })
    .inspect(move |chunk| {
        if let Ok(chunk) = chunk {
            counted
                .lock()
                .expect("progress")
                .advance(chunk.len() as u64);
        }
    });
    let answer = client
        .send(
            client
                .request(Method::PUT, &format!("/api/library/blobs/{sha256}"))
                .body(reqwest::Body::wrap_stream(body)),
        )
        .await;
    let progress = std::sync::Arc::try_unwrap(progress)
        .ok()
        .map(|p| p.into_inner().expect("progress"));
    match (answer, progress) {
        (Ok(_), Some(progress)) => progress.finish("verified"),
        (Ok(_), None) => {}
        (Err(e), _) => bail!("uploading {name}: {e}"),
    }
    Ok(())
}
