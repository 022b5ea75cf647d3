//! `switchyard policy new NAME --lang rust|python|js`: a policy project that
//! builds and passes its own tests before it is edited: settings with
//! validation, one evaluate, fixtures, a cases file, a build script and a
//! README.
//!
//! The templates are in `host/cli/templates/` (one folder per language, and
//! `policy-common/` for the fixtures and cases every language shares); the
//! Python and JavaScript projects also get a copy of their SDK helper and of
//! the WIT, so they build outside this repository. The Rust project depends
//! on `switchyard-sdk` by path (`--sdk`, by default this checkout's `sdk/`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cli::{PolicyLang, PolicyNewArgs};

/// Longest policy name: it becomes a crate, a file and a plugin name.
const MAX_NAME_LEN: usize = 64;

/// One file of a project: where it goes, its text (with `{{name}}`,
/// `{{crate_name}}` and `{{sdk_path}}` still in it), whether it is a script.
struct Template {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

macro_rules! template {
    ($path:literal, $source:literal) => {
        Template {
            path: $path,
            text: include_str!(concat!("../../templates/", $source)),
            executable: false,
        }
    };
    ($path:literal, $source:literal, executable) => {
        Template {
            path: $path,
            text: include_str!(concat!("../../templates/", $source)),
            executable: true,
        }
    };
}

const COMMON: &[Template] = &[
    template!(
        "test_data/settings.json",
        "policy-common/test_data/settings.json"
    ),
    template!(
        "test_data/short-prompt.json",
        "policy-common/test_data/short-prompt.json"
    ),
    template!(
        "test_data/long-prompt.json",
        "policy-common/test_data/long-prompt.json"
    ),
    template!("cases.json", "policy-common/cases.json"),
    template!(".gitignore", "policy-common/gitignore"),
];

const RUST: &[Template] = &[
    template!("Cargo.toml", "policy-rust/Cargo.toml.tmpl"),
    template!("src/lib.rs", "policy-rust/src/lib.rs"),
    template!("tests/cases.rs", "policy-rust/tests/cases.rs"),
    template!("build.sh", "policy-rust/build.sh", executable),
    template!("README.md", "policy-rust/README.md"),
];

// The WIT the Python and JavaScript builds read, in the layout their tools
// resolve (`wit/deps/<package>/`).
const POLICY_WIT: &str = include_str!("../../../../wit/deps/policy@0.1.0/policy.wit");
const PLUGIN_WIT: &str = include_str!("../../../../wit/deps/plugin@0.1.0/plugin.wit");

const PYTHON: &[Template] = &[
    template!("app.py", "policy-python/app.py"),
    template!("build.sh", "policy-python/build.sh", executable),
    template!("README.md", "policy-python/README.md"),
    Template {
        path: "switchyard_policy.py",
        text: include_str!("../../../../sdk/python/switchyard_policy.py"),
        executable: false,
    },
];

const JS: &[Template] = &[
    template!("policy.js", "policy-js/policy.js"),
    template!("build.sh", "policy-js/build.sh", executable),
    template!("README.md", "policy-js/README.md"),
    Template {
        path: "switchyard-policy.js",
        text: include_str!("../../../../sdk/js/switchyard-policy.js"),
        executable: false,
    },
];

const WIT: &[Template] = &[
    Template {
        path: "wit/policy.wit",
        text: POLICY_WIT,
        executable: false,
    },
    Template {
        path: "wit/deps/plugin@0.1.0/plugin.wit",
        text: PLUGIN_WIT,
        executable: false,
    },
];

pub fn run(args: PolicyNewArgs) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let sdk_path = match args.lang {
        PolicyLang::Rust => {
            let sdk = args.sdk.unwrap_or_else(default_sdk);
            let sdk = sdk.canonicalize().with_context(|| {
                format!(
                    "no Rust SDK at {}; pass --sdk with the path of a Switchyard checkout's sdk folder",
                    sdk.display()
                )
            })?;
            toml::Value::String(sdk.display().to_string()).to_string()
        }
        PolicyLang::Python | PolicyLang::Js => String::new(),
    };
    let own: &[&[Template]] = match args.lang {
        PolicyLang::Rust => &[RUST],
        PolicyLang::Python => &[PYTHON, WIT],
        PolicyLang::Js => &[JS, WIT],
    };
    let crate_name = args.name.replace('-', "_");
    for template in own.iter().flat_map(|t| t.iter()).chain(COMMON) {
        let text = template
            .text
            .replace("{{name}}", &args.name)
            .replace("{{crate_name}}", &crate_name)
            .replace("{{sdk_path}}", &sdk_path);
        write(&dir.join(template.path), &text, template.executable)?;
    }
    println!(
        "created {} ({}); next: cd {} && ./build.sh",
        dir.display(),
        args.lang.as_str(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// A name that is a valid crate, file and plugin name alike.
fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!(
            "'{name}' is not a policy name: use 1 to {MAX_NAME_LEN} lowercase letters, digits and \
             dashes, starting with a letter (e.g. prompt-limit)"
        );
    }
    Ok(())
}

/// This checkout's SDK, where the binary was built from.
fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk")
}

fn write(path: &Path, text: &str, executable: bool) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    #[cfg(not(unix))]
    let _ = executable;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_lowercase_words_with_dashes() {
        assert!(check_name("prompt-limit").is_ok());
        assert!(check_name("p2").is_ok());
        for bad in ["", "Prompt", "2fast", "a_b", "trailing-", "a/b", "../x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }
}
