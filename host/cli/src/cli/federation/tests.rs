//! Parsing the federation arguments.

use clap::{CommandFactory, Parser};

use super::*;
use crate::cli::{Cli, Command};

#[test]
fn the_command_tree_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn join_takes_the_printed_line_as_it_is() {
    let cli = Cli::try_parse_from([
        "switchyard",
        "federation",
        "join",
        "--url",
        "http://10.0.0.5:8080",
        "--token",
        "fjt_1",
        "--label",
        "east",
        "--api-token",
        "key",
        "--server",
        "http://127.0.0.1:9",
    ])
    .unwrap();
    let Command::Federation(FederationCommand::Join {
        url,
        join_token,
        label,
        out,
    }) = cli.command
    else {
        panic!("not join");
    };
    assert_eq!(
        (url.as_str(), join_token.as_str(), label.as_str()),
        ("http://10.0.0.5:8080", "fjt_1", "east")
    );
    let out = Output::from(out);
    assert_eq!(out.api.token.as_deref(), Some("key"));
    assert_eq!(out.api.server, "http://127.0.0.1:9");
}
