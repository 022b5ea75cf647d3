//! `switchyard federation services|operations`: the remote services this
//! cluster may call, managed services on a peer, and the owner's receipt
//! of an operation.
//!
//! A mutation carries an operation id chosen here (or given with
//! `--operation-id`) and printed before the request leaves: if the
//! connection breaks, the operator still holds the id and inspects the
//! outcome on the owner (`federation operations PEER ID`) instead of
//! guessing. This is the idempotency-key practice of payment APIs (the
//! client makes the key, a retry reuses it, the server replays the
//! recorded answer).

use std::io::Write;
use std::process::ExitCode;

use reqwest::Method;
use switchyard_protocol::federation::{
    ManageAction, ManageCall, ManagedService, ManagedServiceSpec, OperationRecord, RemoteService,
};

use super::carrier::{row, table};
use super::federation::{print_json, segment, typed};
use crate::cli::federation::{Lifecycle, ManageTarget, Output, ServicesAction, SpecArgs};
use crate::client::{Client, api_error};

/// Lists remote services, lists a peer's managed services, or mutates one.
pub async fn services(action: Option<ServicesAction>, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let (target, action) = match action {
        None => return remote_services(&client, out.json).await,
        Some(ServicesAction::List { target }) => {
            return managed_services(&client, &target, out.json).await;
        }
        Some(action) => manage_action(action),
    };
    manage(&client, target, action, out.json).await
}

async fn remote_services(client: &Client, json: bool) -> anyhow::Result<ExitCode> {
    let body = client
        .send(client.request(Method::GET, "/api/federation/services"))
        .await?;
    if json {
        return print_json(&body);
    }
    let services: Vec<RemoteService> = typed(body["services"].clone())?;
    let mut rows = vec![row(["MODEL", "PEER", "SERVICE", "GRANT"])];
    for s in &services {
        rows.push(vec![
            s.model.clone(),
            s.peer.clone(),
            s.service.clone(),
            s.grant.clone(),
        ]);
    }
    print!(
        "remote services ({}), called on /v1 by MODEL\n{}",
        services.len(),
        table(&rows)
    );
    Ok(ExitCode::SUCCESS)
}

async fn managed_services(
    client: &Client,
    target: &ManageTarget,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = format!("/api/federation/peers/{}/services", segment(&target.peer));
    let body = client
        .send(
            client
                .request(Method::GET, &path)
                .query(&[("grant", &target.grant)]),
        )
        .await?;
    if json {
        return print_json(&body);
    }
    let services: Vec<ManagedService> = typed(body["services"].clone())?;
    let mut rows = vec![row([
        "SERVICE", "REVISION", "STATE", "READY", "MODEL", "RUNTIME", "MACHINES",
    ])];
    for s in &services {
        rows.push(vec![
            s.service.clone(),
            s.revision.to_string(),
            s.state.to_string(),
            format!("{}/{}", s.ready_replicas, s.spec.replicas),
            s.spec.model.clone(),
            s.spec.runtime.clone(),
            s.spec.machines.join(", "),
        ]);
    }
    print!(
        "managed services on {} under grant {} ({})\n{}",
        target.peer,
        target.grant,
        services.len(),
        table(&rows)
    );
    Ok(ExitCode::SUCCESS)
}

/// The target and the action of a mutation.
pub fn manage_action(action: ServicesAction) -> (ManageTarget, ManageAction) {
    let lifecycle = |l: Lifecycle, make: fn(String, i64) -> ManageAction| {
        (l.target, make(l.revision.service, l.revision.revision))
    };
    match action {
        ServicesAction::Create {
            target,
            service,
            spec,
        } => (
            target,
            ManageAction::Create {
                spec: managed_spec(service, spec),
            },
        ),
        ServicesAction::Configure {
            target,
            revision,
            spec,
        } => (
            target,
            ManageAction::Configure {
                service: revision.service.clone(),
                revision: revision.revision,
                spec: managed_spec(revision.service, spec),
            },
        ),
        ServicesAction::Start(l) => lifecycle(l, |service, revision| ManageAction::Start {
            service,
            revision,
        }),
        ServicesAction::Drain(l) => lifecycle(l, |service, revision| ManageAction::Drain {
            service,
            revision,
        }),
        ServicesAction::Stop(l) => lifecycle(l, |service, revision| ManageAction::Stop {
            service,
            revision,
        }),
        ServicesAction::Remove(l) => lifecycle(l, |service, revision| ManageAction::Remove {
            service,
            revision,
        }),
        ServicesAction::List { .. } => unreachable!("listing is not a mutation"),
    }
}

fn managed_spec(service: String, spec: SpecArgs) -> ManagedServiceSpec {
    ManagedServiceSpec {
        service,
        model: spec.model,
        runtime: spec.runtime,
        machines: spec.machines,
        replicas: spec.replicas,
    }
}

/// A new operation id: `op_` and 16 hex digits (64 random bits), so two
/// operators' ids never meet within one peer's 2,048 receipts.
pub fn new_operation_id() -> String {
    format!("op_{:016x}", rand::random::<u64>())
}

/// `create`, `start`, ...
fn verb(action: &ManageAction) -> &'static str {
    match action {
        ManageAction::Create { .. } => "create",
        ManageAction::Configure { .. } => "configure",
        ManageAction::Start { .. } => "start",
        ManageAction::Drain { .. } => "drain",
        ManageAction::Stop { .. } => "stop",
        ManageAction::Remove { .. } => "remove",
    }
}

/// Sends one manage call, its operation id shown first.
async fn manage(
    client: &Client,
    target: ManageTarget,
    action: ManageAction,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let operation_id = target.operation_id.unwrap_or_else(new_operation_id);
    let line = format!(
        "operation {operation_id}: sending {} to {} under grant {}",
        verb(&action),
        target.peer,
        target.grant
    );
    // Shown and flushed before the request leaves; on stderr under
    // `--json` so that stdout stays one JSON document.
    if json {
        eprintln!("{line}");
        std::io::stderr().flush()?;
    } else {
        println!("{line}");
        std::io::stdout().flush()?;
    }
    let call = ManageCall {
        grant: target.grant,
        operation_id: operation_id.clone(),
        action,
    };
    let inspect = format!(
        "inspect it with `switchyard federation operations {} {operation_id}` before acting again, \
         or retry it exactly with --operation-id {operation_id}",
        target.peer
    );
    let path = format!("/api/federation/peers/{}/services", segment(&target.peer));
    let (status, body) = match client
        .answer(client.request(Method::POST, &path).json(&call))
        .await
    {
        Ok(answer) => answer,
        Err(e) => {
            return Err(e.context(format!(
                "operation {operation_id}: the outcome is unknown; {inspect}"
            )));
        }
    };
    if !status.is_success() {
        let error = api_error(status, body);
        // A 503 or a gateway fault may have reached the owner (the link
        // broke after the call crossed); a 4xx is the owner's or this
        // server's refusal, a known outcome.
        return Err(if status.is_server_error() {
            error.context(format!(
                "operation {operation_id}: the outcome may be uncertain; {inspect}"
            ))
        } else {
            error.context(format!("operation {operation_id}: refused"))
        });
    }
    if json {
        return print_json(&body);
    }
    println!("operation {operation_id}: done ({})", status.as_u16());
    if let Ok(service) = serde_json::from_value::<ManagedService>(body.clone()) {
        print!("{}", render_service(&service));
    } else if !body.is_null() {
        println!("{}", serde_json::to_string_pretty(&body)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// A managed service, a field a line.
pub fn render_service(s: &ManagedService) -> String {
    format!(
        "service:   {}\nrevision:  {}\nstate:     {}\nready:     {}/{}\nmodel:     {}\n\
         runtime:   {}\nmachines:  {}\ngrant:     {}\n",
        s.service,
        s.revision,
        s.state,
        s.ready_replicas,
        s.spec.replicas,
        s.spec.model,
        s.spec.runtime,
        s.spec.machines.join(", "),
        s.grant
    )
}

/// The owner's receipt of an operation.
pub async fn operation(peer: String, id: String, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let path = format!(
        "/api/federation/peers/{}/operations/{}",
        segment(&peer),
        segment(&id)
    );
    let body = client.send(client.request(Method::GET, &path)).await?;
    if out.json {
        return print_json(&body);
    }
    print!("{}", render_operation(&typed(body)?));
    Ok(ExitCode::SUCCESS)
}

/// An operation's receipt, a field a line; the outcome as compact JSON.
pub fn render_operation(op: &OperationRecord) -> String {
    let mut out = format!(
        "operation: {}\ngrant:     {}\nstate:     {}\n",
        op.id, op.grant, op.state
    );
    if op.state != switchyard_protocol::federation::OperationState::Done {
        out.push_str(
            "           (not finished, or its answer was lost: do not repeat it elsewhere)\n",
        );
    }
    if let Some(status) = op.status {
        out.push_str(&format!("status:    {status}\n"));
    }
    if let Some(outcome) = &op.outcome {
        out.push_str(&format!("outcome:   {outcome}\n"));
    }
    out.push_str(&format!(
        "request:   sha256 {}\nreceived:  {}\n",
        op.request_sha256, op.created_at
    ));
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::federation::FederationCommand;
    use crate::cli::{Cli, Command};

    fn action(args: &[&str]) -> ServicesAction {
        let cli = Cli::try_parse_from(["switchyard", "federation", "services"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let Command::Federation(FederationCommand::Services {
            action: Some(action),
            ..
        }) = cli.command
        else {
            panic!("not a services action");
        };
        action
    }

    #[test]
    fn operation_ids_are_new_each_time_and_well_formed() {
        let (a, b) = (new_operation_id(), new_operation_id());
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.len(), 19, "{id}");
            assert!(id.starts_with("op_"));
            assert!(id[3..].bytes().all(|c| c.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn lifecycle_calls_name_the_service_revision_and_given_operation_id() {
        let (target, call) = manage_action(action(&[
            "start",
            "--peer",
            "east",
            "--grant",
            "g1",
            "--service",
            "chat",
            "--revision",
            "3",
            "--operation-id",
            "op_retry",
        ]));
        assert_eq!(target.operation_id.as_deref(), Some("op_retry"));
        let call = ManageCall {
            grant: target.grant,
            operation_id: "op_retry".into(),
            action: call,
        };
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            serde_json::json!({"grant": "g1", "operation_id": "op_retry",
                "action": "start", "service": "chat", "revision": 3})
        );
    }

    #[test]
    fn create_and_configure_carry_the_whole_spec() {
        let (_, create) = manage_action(action(&[
            "create",
            "--peer",
            "east",
            "--grant",
            "g1",
            "--service",
            "chat",
            "--model",
            "llama@q4",
            "--runtime",
            "vllm-1gpu",
            "--machines",
            "n1,n2",
        ]));
        let spec = ManagedServiceSpec {
            service: "chat".into(),
            model: "llama@q4".into(),
            runtime: "vllm-1gpu".into(),
            machines: vec!["n1".into(), "n2".into()],
            replicas: 1,
        };
        assert_eq!(create, ManageAction::Create { spec: spec.clone() });
        let (_, configure) = manage_action(action(&[
            "configure",
            "--peer",
            "east",
            "--grant",
            "g1",
            "--service",
            "chat",
            "--revision",
            "2",
            "--model",
            "llama@q4",
            "--runtime",
            "vllm-1gpu",
            "--machines",
            "n1,n2",
            "--replicas",
            "1",
        ]));
        assert_eq!(
            configure,
            ManageAction::Configure {
                service: "chat".into(),
                revision: 2,
                spec
            }
        );
    }
}
