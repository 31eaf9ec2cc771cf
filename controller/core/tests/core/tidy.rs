//! Tidy checks over the source tree (TigerBeetle's `tidy.zig` habit): rules a reviewer would
//! otherwise have to enforce by eye.
//!
//! **Function length.** No function in the scanned roots is longer than [`FUNCTION_LINES_MAX`]
//! lines. The scan is line-based, on rustfmt-formatted code: a function starts at a line whose
//! text (after indentation) is `fn name`, optionally after `pub`/`pub(...)`, `const`, `async`
//! and `unsafe`; it ends at the first later line holding only `}` at the same indentation (a
//! one-line function is one line; a declaration without a body, ending in `;`, is no function).
//! Its length runs from the `fn` line to the closing brace, doc comments and attributes not
//! counted; a nested function counts inside its parent too. Data tables, listed in
//! [`DATA_TABLES`], are exempt. Tests live outside `src/` and are not scanned.

use std::path::{Path, PathBuf};

/// The longest function allowed, in lines (TigerBeetle's limit is 70; this is the first step).
const FUNCTION_LINES_MAX: usize = 100;

/// Source roots the function-length rule covers, relative to the workspace root.
const ROOTS: [&str; 4] = [
    "controller/core/src",
    "controller/cli/src",
    "controller/aws/src",
    "controller/kube/src",
];

/// The fakes, the simulation and the behaviour specs' step library: the same rule.
const TEST_HARNESS_ROOTS: [&str; 5] = [
    "fakekit/src",
    "fakecloud/src",
    "fakekube/src",
    "sim/src",
    "features/src",
];

/// Files that are data, not logic (relative to the workspace root): exempt.
const DATA_TABLES: [&str; 1] = ["controller/core/src/catalog/builtin.rs"];

/// A function over the limit.
#[derive(Debug, PartialEq, Eq)]
pub struct LongFunction {
    pub file: PathBuf,
    /// 1-based line of its `fn`.
    pub line: usize,
    pub name: String,
    pub lines: usize,
}

/// The name of the function a line starts, if it starts one.
fn function_name(trimmed: &str) -> Option<&str> {
    let mut rest = trimmed;
    if let Some(after) = rest.strip_prefix("pub(") {
        rest = after.split_once(')')?.1.trim_start();
    } else if let Some(after) = rest.strip_prefix("pub ") {
        rest = after;
    }
    for qualifier in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| &name[..end])
}

/// Every function of `text` (a file's contents) longer than `limit`, as (line, name, lines).
pub fn long_functions_in(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(name) = function_name(trimmed) else {
            continue;
        };
        let indent = &line[..line.len() - trimmed.len()];
        // A declaration ends in `;` before any body opens.
        let opens = lines[start..]
            .iter()
            .position(|l| l.contains('{') || l.trim_end().ends_with(';'));
        let Some(opens) = opens else {
            continue;
        };
        if !lines[start + opens].contains('{') {
            continue;
        }
        let one_line = opens == 0 && trimmed.trim_end().ends_with('}');
        let length = if one_line {
            1
        } else {
            let closing = format!("{indent}}}");
            match lines[start + 1..]
                .iter()
                .position(|l| l.trim_end() == closing)
            {
                Some(offset) => offset + 2,
                None => continue,
            }
        };
        if length > limit {
            out.push((start + 1, name.to_string(), length));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every function over `limit` lines in the `.rs` files under `roots` (relative to `workspace`),
/// except in `exempt` files.
pub fn long_functions(
    workspace: &Path,
    roots: &[&str],
    exempt: &[&str],
    limit: usize,
) -> Vec<LongFunction> {
    let mut files = Vec::new();
    for root in roots {
        rust_files(&workspace.join(root), &mut files);
    }
    let mut out = Vec::new();
    for file in files {
        let relative = file.strip_prefix(workspace).unwrap_or(&file).to_path_buf();
        if exempt.iter().any(|e| relative == Path::new(e)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        for (line, name, lines) in long_functions_in(&text, limit) {
            out.push(LongFunction {
                file: relative.clone(),
                line,
                name,
                lines,
            });
        }
    }
    out
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fails listing every function over [`FUNCTION_LINES_MAX`] under `roots`.
fn assert_no_long_functions(roots: &[&str]) {
    for root in roots {
        assert!(workspace().join(root).is_dir(), "{root} is scanned");
    }
    let long = long_functions(&workspace(), roots, &DATA_TABLES, FUNCTION_LINES_MAX);
    let report: Vec<String> = long
        .iter()
        .map(|f| {
            format!(
                "{}:{} fn {} is {} lines",
                f.file.display(),
                f.line,
                f.name,
                f.lines
            )
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these (limit {FUNCTION_LINES_MAX}):\n{}",
        report.join("\n")
    );
}

#[test]
fn no_function_in_the_controller_crates_is_longer_than_100_lines() {
    assert_no_long_functions(&ROOTS);
}

#[test]
fn no_function_in_the_fakes_the_sim_or_the_specs_library_is_longer_than_100_lines() {
    assert_no_long_functions(&TEST_HARNESS_ROOTS);
}

#[test]
fn the_scanner_measures_from_the_fn_line_to_its_closing_brace() {
    let body: String = (0..5)
        .map(|i| format!("        let _{i} = {i};\n"))
        .collect();
    let text = format!(
        "/// Doc.\n    pub(crate) async fn long(\n        x: u8,\n    ) -> u8 {{\n{body}        x\n    }}\n\
         fn short() -> u8 {{ 1 }}\n\
         trait T {{\n    fn declared(&self);\n}}\n"
    );
    // `long` spans its 3 signature lines, 5 statements, `x` and the brace: 10 lines.
    assert_eq!(
        long_functions_in(&text, 9),
        vec![(2, "long".to_string(), 10)]
    );
    assert!(long_functions_in(&text, 10).is_empty());
    assert_eq!(long_functions_in("fn short() -> u8 { 1 }\n", 0).len(), 1);
    assert!(long_functions_in("    fn declared(&self);\n}\n", 0).is_empty());
}
