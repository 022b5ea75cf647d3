//! The engine kinds, one per module of knowledge: how each is started, where
//! it answers health, and which OpenAI routes it serves.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
pub use switchyard_protocol::engines::EngineKind;

/// What the worker runs for one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// The replica's id (unique on the worker).
    pub id: String,
    /// The engine.
    pub kind: EngineKind,
    /// The model file (or folder, for vLLM) on this machine.
    pub model_path: PathBuf,
    /// The model id clients use.
    pub served_model_name: String,
    /// GPU indices it is pinned to (`CUDA_VISIBLE_DEVICES`).
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// More arguments, appended.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// More environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The reference engine's delay per generated token, in ms.
    #[serde(default)]
    pub token_delay_ms: u64,
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct EngineBinaries {
    /// The `switchyard` binary (runs `engine reference`).
    pub switchyard: PathBuf,
    /// llama.cpp's server.
    pub llama_server: PathBuf,
    /// A Python with vLLM installed.
    pub python: PathBuf,
}

impl Default for EngineBinaries {
    fn default() -> Self {
        Self {
            switchyard: std::env::current_exe().unwrap_or_else(|_| "switchyard".into()),
            llama_server: "llama-server".into(),
            python: "python3".into(),
        }
    }
}

/// A process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment, over the worker's.
    pub env: BTreeMap<String, String>,
}

/// What the worker knows of running each kind (the kinds themselves are
/// the protocol's: the frontend names them in `engine.start`).
pub trait Launch: Copy {
    /// The path that answers 200 once the engine serves.
    fn health_path(self) -> &'static str;
    /// The OpenAI routes it serves.
    fn routes(self) -> &'static [&'static str];
    /// How to start it listening on 127.0.0.1:`port`.
    fn command(self, spec: &EngineSpec, port: u16, binaries: &EngineBinaries) -> CommandLine;
}

impl Launch for EngineKind {
    fn health_path(self) -> &'static str {
        "/health"
    }

    fn routes(self) -> &'static [&'static str] {
        match self {
            EngineKind::Reference | EngineKind::Vllm => &[
                "/v1/chat/completions",
                "/v1/completions",
                "/v1/embeddings",
                "/v1/models",
            ],
            // llama-server serves embeddings only when started with --embeddings.
            EngineKind::LlamaCpp => &["/v1/chat/completions", "/v1/completions", "/v1/models"],
        }
    }

    fn command(self, spec: &EngineSpec, port: u16, binaries: &EngineBinaries) -> CommandLine {
        let model = spec.model_path.display().to_string();
        let port = port.to_string();
        let (program, mut args) = match self {
            EngineKind::Reference => (
                binaries.switchyard.clone(),
                vec![
                    "engine".into(),
                    "reference".into(),
                    "--model".into(),
                    model,
                    "--served-model-name".into(),
                    spec.served_model_name.clone(),
                    "--listen".into(),
                    format!("127.0.0.1:{port}"),
                    "--token-delay-ms".into(),
                    spec.token_delay_ms.to_string(),
                ],
            ),
            EngineKind::LlamaCpp => (
                binaries.llama_server.clone(),
                vec![
                    "--model".into(),
                    model,
                    "--alias".into(),
                    spec.served_model_name.clone(),
                    "--host".into(),
                    "127.0.0.1".into(),
                    "--port".into(),
                    port,
                    // Every layer on the GPUs it is given (none: CPU).
                    "--n-gpu-layers".into(),
                    if spec.gpus.is_empty() { "0" } else { "999" }.into(),
                ],
            ),
            EngineKind::Vllm => (
                binaries.python.clone(),
                vec![
                    "-m".into(),
                    "vllm.entrypoints.openai.api_server".into(),
                    "--model".into(),
                    model,
                    "--served-model-name".into(),
                    spec.served_model_name.clone(),
                    "--host".into(),
                    "127.0.0.1".into(),
                    "--port".into(),
                    port,
                    "--tensor-parallel-size".into(),
                    spec.gpus.len().max(1).to_string(),
                ],
            ),
        };
        args.extend(spec.extra_args.iter().cloned());
        let mut env = spec.env.clone();
        let visible: Vec<String> = spec.gpus.iter().map(u32::to_string).collect();
        // Empty hides every GPU: an engine without GPUs must not grab one.
        env.insert("CUDA_VISIBLE_DEVICES".into(), visible.join(","));
        CommandLine { program, args, env }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: EngineKind, gpus: Vec<u32>) -> EngineSpec {
        EngineSpec {
            id: "r1".into(),
            kind,
            model_path: "/models/tiny.gguf".into(),
            served_model_name: "tiny".into(),
            gpus,
            extra_args: vec!["--extra".into()],
            env: BTreeMap::new(),
            token_delay_ms: 5,
        }
    }

    #[test]
    fn each_kind_is_pinned_to_its_gpus_and_listens_on_loopback() {
        let binaries = EngineBinaries {
            switchyard: "/bin/switchyard".into(),
            llama_server: "/opt/llama-server".into(),
            python: "/usr/bin/python3".into(),
        };
        let reference =
            EngineKind::Reference.command(&spec(EngineKind::Reference, vec![]), 9000, &binaries);
        assert_eq!(reference.program, PathBuf::from("/bin/switchyard"));
        assert!(
            reference
                .args
                .windows(2)
                .any(|w| w == ["--listen", "127.0.0.1:9000"])
        );
        assert_eq!(reference.env["CUDA_VISIBLE_DEVICES"], "");
        assert_eq!(reference.args.last().unwrap(), "--extra");

        let llama =
            EngineKind::LlamaCpp.command(&spec(EngineKind::LlamaCpp, vec![2, 3]), 9001, &binaries);
        assert_eq!(llama.env["CUDA_VISIBLE_DEVICES"], "2,3");
        assert!(llama.args.windows(2).any(|w| w == ["--alias", "tiny"]));
        assert!(
            llama
                .args
                .windows(2)
                .any(|w| w == ["--n-gpu-layers", "999"])
        );

        let vllm = EngineKind::Vllm.command(&spec(EngineKind::Vllm, vec![0, 1]), 9002, &binaries);
        assert_eq!(vllm.args[..2], ["-m", "vllm.entrypoints.openai.api_server"]);
        assert!(
            vllm.args
                .windows(2)
                .any(|w| w == ["--tensor-parallel-size", "2"])
        );
    }
}
