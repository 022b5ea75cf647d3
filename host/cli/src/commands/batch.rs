//! `switchyard batch create|get|list|cancel|output`: a client of the OpenAI
//! Batch API. `create` uploads the file as OpenAI's clients do (a multipart
//! form with `purpose=batch`), then creates the batch from it.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use switchyard_protocol::batch::{Batch, BatchList, CreateBatch, FileObject};

use super::carrier::{row, table};
use super::federation::{print_json, typed};
use crate::cli::ApiArgs;
use crate::cli::batch::{BatchCommand, BatchOutput};
use crate::client::{Client, api_error};

/// How often `--wait` looks at the batch.
const POLL: Duration = Duration::from_millis(500);

/// Runs a `batch` command.
pub async fn batch(command: BatchCommand) -> anyhow::Result<ExitCode> {
    match command {
        BatchCommand::Create {
            file,
            endpoint,
            owner,
            metadata,
            wait,
            out,
        } => {
            let content =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "batch.jsonl".into());
            let mut labels: BTreeMap<String, String> = metadata.into_iter().collect();
            if let Some(owner) = owner {
                labels.insert("owner".into(), owner);
            }
            create(&out, &name, content, endpoint, labels, wait).await
        }
        BatchCommand::Get { id, out } => {
            let client = Client::new(&out.api);
            let body = client
                .send(client.request(Method::GET, &format!("/v1/batches/{id}")))
                .await?;
            if out.json {
                return print_json(&body);
            }
            print!("{}", describe(&typed(body)?));
            Ok(ExitCode::SUCCESS)
        }
        BatchCommand::List { after, limit, out } => {
            let client = Client::new(&out.api);
            let mut request = client
                .request(Method::GET, "/v1/batches")
                .query(&[("limit", limit)]);
            if let Some(after) = &after {
                request = request.query(&[("after", after)]);
            }
            let body = client.send(request).await?;
            if out.json {
                return print_json(&body);
            }
            let list: BatchList = typed(body)?;
            let mut rows = vec![row(["ID", "STATUS", "DONE", "FAILED", "TOTAL", "ENDPOINT"])];
            for b in &list.data {
                let counts = b.request_counts;
                rows.push(vec![
                    b.id.clone(),
                    b.status.to_string(),
                    counts.completed.to_string(),
                    counts.failed.to_string(),
                    counts.total.to_string(),
                    b.endpoint.clone(),
                ]);
            }
            print!("batches ({})\n{}", list.data.len(), table(&rows));
            if list.has_more {
                println!(
                    "more: --after {}",
                    list.last_id.as_deref().unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        BatchCommand::Cancel { id, out } => {
            let client = Client::new(&out.api);
            let body = client
                .send(client.request(Method::POST, &format!("/v1/batches/{id}/cancel")))
                .await?;
            if out.json {
                return print_json(&body);
            }
            print!("{}", describe(&typed(body)?));
            Ok(ExitCode::SUCCESS)
        }
        BatchCommand::Output { id, errors, api } => output(&api, &id, errors).await,
    }
}

async fn create(
    out: &BatchOutput,
    name: &str,
    content: Vec<u8>,
    endpoint: String,
    metadata: BTreeMap<String, String>,
    wait: bool,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let (boundary, form) = multipart(name, &content);
    let uploaded = client
        .send(
            client
                .request(Method::POST, "/v1/files")
                .header(
                    CONTENT_TYPE,
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(form),
        )
        .await?;
    let file: FileObject = typed(uploaded)?;
    let request = CreateBatch {
        input_file_id: file.id.clone(),
        endpoint,
        completion_window: switchyard_protocol::batch::COMPLETION_WINDOW.into(),
        metadata: (!metadata.is_empty()).then_some(metadata),
    };
    let body = client
        .send_json(Method::POST, "/v1/batches", &request)
        .await?;
    let mut batch: Batch = typed(body.clone())?;
    if !wait {
        if out.json {
            return print_json(&body);
        }
        println!("uploaded {} ({} bytes)", file.id, file.bytes);
        print!("{}", describe(&batch));
        return Ok(ExitCode::SUCCESS);
    }
    if !out.json {
        println!(
            "uploaded {} ({} bytes); batch {}",
            file.id, file.bytes, batch.id
        );
    }
    let mut shown = None;
    while !batch.status.is_final() {
        let now = (batch.status, batch.request_counts);
        if !out.json && shown != Some(now) {
            let c = batch.request_counts;
            println!(
                "  {}: {} done, {} failed of {}",
                batch.status, c.completed, c.failed, c.total
            );
            shown = Some(now);
        }
        tokio::time::sleep(POLL).await;
        let body = client
            .send(client.request(Method::GET, &format!("/v1/batches/{}", batch.id)))
            .await?;
        batch = typed(body)?;
    }
    if out.json {
        print_json(&serde_json::to_value(&batch)?)?;
    } else {
        print!("{}", describe(&batch));
    }
    Ok(
        if batch.status == switchyard_protocol::batch::BatchStatus::Completed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

/// A form with `purpose=batch` and the file, as OpenAI's clients send it.
/// The boundary is random, and checked against the content.
fn multipart(name: &str, content: &[u8]) -> (String, Vec<u8>) {
    use rand::RngCore;
    let boundary = loop {
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        let boundary = format!("switchyard-{}", hex::encode(bytes));
        if !content
            .windows(boundary.len())
            .any(|w| w == boundary.as_bytes())
        {
            break boundary;
        }
    };
    let name = name.replace(['"', '\r', '\n'], "_");
    let mut form = Vec::with_capacity(content.len() + 512);
    write!(
        form,
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/jsonl\r\n\r\n"
    )
    .expect("writing to memory");
    form.extend_from_slice(content);
    write!(form, "\r\n--{boundary}--\r\n").expect("writing to memory");
    (boundary, form)
}

/// Streams the batch's output (or error) file to stdout.
async fn output(api: &ApiArgs, id: &str, errors: bool) -> anyhow::Result<ExitCode> {
    let client = Client::new(api);
    let batch: Batch = typed(
        client
            .send(client.request(Method::GET, &format!("/v1/batches/{id}")))
            .await?,
    )?;
    let file = if errors {
        batch.error_file_id
    } else {
        batch.output_file_id
    };
    let Some(file) = file else {
        anyhow::bail!(
            "batch {id} has no {} file ({})",
            if errors { "error" } else { "output" },
            batch.status
        );
    };
    let response = client
        .request(Method::GET, &format!("/v1/files/{file}/content"))
        .send()
        .await
        .context("cannot reach the server")?;
    let status = response.status();
    if !status.is_success() {
        return Err(api_error(status, response.json().await.unwrap_or_default()));
    }
    let mut body = response.bytes_stream();
    let mut stdout = std::io::stdout().lock();
    while let Some(chunk) = body.next().await {
        stdout.write_all(&chunk?)?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A batch in lines for a person.
fn describe(batch: &Batch) -> String {
    let c = batch.request_counts;
    let mut text = format!(
        "batch {}\n  status: {}\n  endpoint: {}\n  lines: {} done, {} failed of {}\n",
        batch.id, batch.status, batch.endpoint, c.completed, c.failed, c.total
    );
    for (label, file) in [
        ("output", &batch.output_file_id),
        ("errors", &batch.error_file_id),
    ] {
        if let Some(file) = file {
            text.push_str(&format!("  {label}: {file}\n"));
        }
    }
    if let Some(owner) = batch.metadata.as_ref().and_then(|m| m.get("owner")) {
        text.push_str(&format!("  owner: {owner}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_holds_the_purpose_and_the_file_between_boundaries() {
        let (boundary, form) = multipart("in\".jsonl", b"{\"a\":1}\n");
        let text = String::from_utf8(form).unwrap();
        assert!(text.starts_with(&format!("--{boundary}\r\n")));
        assert!(text.contains("name=\"purpose\"\r\n\r\nbatch\r\n"));
        assert!(text.contains("filename=\"in_.jsonl\""));
        assert!(text.ends_with(&format!("{{\"a\":1}}\n\r\n--{boundary}--\r\n")));
    }
}
