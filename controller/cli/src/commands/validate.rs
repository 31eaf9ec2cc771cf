//! `karpenter validate -f FILE...`: one line per object, `ok` or `invalid` with every violation.

use std::io::{Read, Write};
use std::process::ExitCode;

use karpenter_core::manifest::{Outcome, check_document, parse_documents};

/// Exit code when some object is invalid.
const EXIT_INVALID: u8 = 1;
/// Exit code when some input could not be read or parsed.
const EXIT_UNREADABLE: u8 = 2;

pub fn run(files: &[String]) -> ExitCode {
    // Write errors (a closed pipe) are ignored: the exit code still tells the outcome.
    let mut stdout = std::io::stdout().lock();
    let mut invalid = false;
    let mut unreadable = false;
    for file in files {
        let text = match read(file) {
            Ok(text) => text,
            Err(err) => {
                eprintln!("error: {file}: {err}");
                unreadable = true;
                continue;
            }
        };
        let documents = match parse_documents(&text) {
            Ok(documents) => documents,
            Err(err) => {
                let at = match (err.line, err.column) {
                    (Some(line), Some(column)) => format!(":{line}:{column}"),
                    _ => String::new(),
                };
                eprintln!("error: {file}{at}: YAML syntax error: {}", err.message);
                unreadable = true;
                continue;
            }
        };
        for (index, document) in &documents {
            let checked = check_document(document);
            let name = if checked.name.is_empty() {
                format!("<unnamed document {index}>")
            } else {
                checked.name.clone()
            };
            let kind = if checked.kind.is_empty() {
                "<no kind>"
            } else {
                &checked.kind
            };
            match checked.outcome {
                Outcome::Valid(_) => {
                    let _ = writeln!(stdout, "ok {kind}/{name}");
                }
                Outcome::Invalid(violations) => {
                    invalid = true;
                    let _ = writeln!(stdout, "invalid {kind}/{name}: {violations}");
                }
                Outcome::Other => {
                    let _ = writeln!(
                        stdout,
                        "skip {kind}/{name}: not a Karpenter object (document {index} of {file})"
                    );
                }
            }
        }
    }
    if unreadable {
        ExitCode::from(EXIT_UNREADABLE)
    } else if invalid {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    }
}

fn read(file: &str) -> std::io::Result<String> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file)
    }
}
