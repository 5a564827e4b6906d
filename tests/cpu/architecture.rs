//! The module arrows point one way (README, "Module map"): every `crate::` path in `src/` —
//! `use` lines, paths in code and intra-doc links alike — is read, and an arrow from a room to
//! one of the same or a higher rank fails, as does a cycle between the files of one room.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms, lowest first. A room may name only rooms of a lower rank.
const RANKS: &[(&str, usize)] = &[
    ("math", 0),
    ("error", 0),
    ("resources", 0),
    ("Error", 0),
    ("Result", 0),
    ("model", 1),
    ("batch", 2),
    ("constraints", 3),
    ("motion", 3),
    ("custom", 4),
    ("evaluation", 5),
    ("step", 5),
    ("contact", 5),
    ("cpu", 6),
    ("gpu", 6),
    ("backend", 7),
    ("scenarios", 8),
    ("golden", 8),
    ("render", 8),
    ("sample", 1),
    ("env", 10),
    ("cli", 11),
];

fn rank(room: &str) -> Option<usize> {
    RANKS.iter().find(|(r, _)| *r == room).map(|(_, k)| *k)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its unit tests (which may reach anywhere): what follows
/// `#[cfg(test)] mod tests`, or a whole `tests.rs`.
fn library_text(path: &Path) -> String {
    // A `tests.rs` file is a room's unit tests (`#[cfg(test)] mod tests;`), which may reach
    // anywhere.
    if path.file_name().is_some_and(|f| f == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(k) => text[..k].to_string(),
        None => text,
    }
}

/// Every `crate::a` (and `crate::a::b`) named in `text`.
fn crate_paths(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(k) = rest.find("crate::") {
        let before = rest[..k].chars().last();
        rest = &rest[k + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `simbatch_crate::`
        }
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        let first = ident(rest);
        let second = rest[first.len()..]
            .strip_prefix("::")
            .map(ident)
            .filter(|s| !s.is_empty());
        out.push((first, second));
    }
    out
}

/// The room and the file-level module (`cpu::evaluate`; `cpu` for `cpu/mod.rs`) of a file.
fn room_of(src: &Path, path: &Path) -> (String, String) {
    let rel: Vec<String> = path
        .strip_prefix(src)
        .unwrap()
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    let room = rel[0].clone();
    let module = match rel.get(1) {
        Some(m) if m != "mod" => format!("{room}::{m}"),
        _ => room.clone(),
    };
    (room, module)
}

#[test]
fn module_arrows_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = BTreeSet::new();
    let mut inner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let (room, module) = room_of(&src, path);
        if matches!(room.as_str(), "lib" | "main") {
            continue;
        }
        let from = rank(&room).unwrap_or_else(|| panic!("room `{room}` has no rank: add it"));
        for (to, sub) in crate_paths(&library_text(path)) {
            if to == room {
                if let Some(sub) = sub {
                    let target = format!("{room}::{sub}");
                    let is_file = src.join(&room).join(format!("{sub}.rs")).exists()
                        || src.join(&room).join(&sub).is_dir();
                    if is_file && target != module && module != room {
                        inner.entry(module.clone()).or_default().insert(target);
                    }
                }
                continue;
            }
            let Some(to_rank) = rank(&to) else {
                wrong.insert(format!("{}: names unknown room `{to}`", module));
                continue;
            };
            if to_rank >= from {
                wrong.insert(format!("{module} (rank {from}) -> {to} (rank {to_rank})"));
            }
        }
    }
    assert!(wrong.is_empty(), "arrows against the order:\n{}", {
        let v: Vec<_> = wrong.into_iter().collect();
        v.join("\n")
    });
    // Within a room, the files form no cycle (a depth-first search finds no back edge).
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(1) => {
                let k = stack.iter().position(|n| n == node).unwrap();
                let mut cycle = stack[k..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in inner.keys() {
        if let Some(cycle) = visit(node, &inner, &mut state, &mut Vec::new()) {
            panic!("cycle between files of a room: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn cpu_and_gpu_never_name_each_other() {
    // Already implied by the ranks (both are rank 6); stated on its own because it is the
    // rule a shortcut would break first.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (room, other) in [("cpu", "gpu"), ("gpu", "cpu")] {
        let mut files = Vec::new();
        rust_files(&src.join(room), &mut files);
        for path in files {
            let named = crate_paths(&library_text(&path));
            assert!(
                named.iter().all(|(to, _)| to != other),
                "{} names {other}",
                path.display()
            );
        }
    }
}

#[test]
fn the_reader_catches_a_forbidden_arrow() {
    // The parser itself, on text someone else wrote: a model file that names the batch.
    let named = crate_paths("use crate::batch::Batch;\n/// [`x`](crate::cpu::evaluate)\n");
    assert_eq!(
        named,
        vec![
            ("batch".to_string(), Some("Batch".to_string())),
            ("cpu".to_string(), Some("evaluate".to_string()))
        ]
    );
    assert!(rank("batch").unwrap() > rank("model").unwrap());
}
