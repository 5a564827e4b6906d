//! The `simbatch` command, one file per part: scenario files and their errors (`scenario`),
//! `run` and `check` (`run`), studies (`study`), the command's edges (`edges`), mutated
//! scenarios (`mutation`), prescribed bodies (`prescribed`), the scenario reference
//! `docs/scenario-format.md` (`reference`), `bench` (`bench`), draws (`draws`) and rollouts
//! (`rollout`). The helpers every part uses are here.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use simbatch::backend::Backend;
use simbatch::cli::sample::{Scalar, draw};
use simbatch::cli::scenario::{ConstraintSpec, DEFAULT_SCENARIO, Flag, InertiaSpec, Scenario};
use simbatch::cli::{CliError, output, run_study, shard_range, shard_spec};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simbatch"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simbatch-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small scenario: `{}` gets extra TOML at the end of the constraint table.
const SMALL: &str = r#"name = "small"
instances = 240
seed = 11

[vars]
radius = { uniform = [0.05, 0.15] }

[[body]]
name = "ball"
mass = { log_uniform = [0.5, 2.0] }
inertia = { solid_sphere = "$radius" }
position = [0.0, 0.0, "$radius"]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
rolling = { choice = [true, false] }
radius = "$radius"
incline_deg = { uniform = [5.0, 40.0] }

[simulation]
integrator = "rk4"
step = 0.01
stabilization = "projection"
tolerance = 1e-9
duration = 0.2
backend = "cpu"

[record]
interval = 0.05
series_instances = 240
events = true
"#;

/// Line and column (1-based) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    (
        before.matches('\n').count() + 1,
        before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1,
    )
}

/// `simbatch run DIR/NAME --out DIR/out --quiet` with `text` written to `DIR/NAME`: the
/// scenario file, the output directory and what the command did.
fn run_scenario(dir: &Path, name: &str, text: &str) -> (PathBuf, PathBuf, std::process::Output) {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let o = bin()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .arg("--quiet")
        .output()
        .unwrap();
    (file, out, o)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One-instance-kind study: a solid ball on level ground, with `simulation` and `extra` TOML.
fn ball_study(name: &str, body_extra: &str, simulation: &str) -> String {
    format!(
        r#"name = "{name}"
instances = 6
seed = 3

[[body]]
name = "ball"
mass = 2.0
inertia = {{ solid_sphere = 0.1 }}
position = [0.0, 0.0, 0.1]
{body_extra}

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
rolling = true
radius = 0.1

[simulation]
{simulation}
backend = "cpu"
"#
    )
}

fn results_of(dir: &Path) -> (Vec<String>, Vec<(usize, Vec<f64>)>) {
    output::read_csv(&dir.join("results.csv")).unwrap()
}

fn column(columns: &[String], name: &str) -> usize {
    columns
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {columns:?}"))
}

mod bench;
mod draws;
mod edges;
mod mutation;
mod prescribed;
mod reference;
mod rollout;
mod run;
mod scenario;
mod study;
