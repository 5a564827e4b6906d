//! The input side of a layout: where each input column is stored (per instance, or one shared
//! row after the per-instance columns), the kernel's generated addressing, `input_at`, and each
//! thread's private copy of its parameter columns, `cache_parameters` and `load`.

use std::fmt::Write;

use super::{Layout, WgslSection};
use crate::batch::{Column, FreeField, PrescribedField};
use crate::error::Result;

/// The most parameter values a kernel thread keeps in its private copy (`cache_parameters`);
/// columns past it are read from the input buffer at every use. 64 holds the built-in
/// one-body systems several times over while leaving most of a thread's registers to the
/// dynamics.
pub const PARAMETER_SLOTS_CAP: usize = 64;

/// Whether the kernels advance `column` (the state: time, work, a body's pose and velocity),
/// so that it is read once at a dispatch's start and written at its end, never cached as a
/// parameter.
fn is_state(column: Column) -> bool {
    matches!(
        column,
        Column::Time
            | Column::Work
            | Column::Free {
                field: FreeField::Q | FreeField::U,
                ..
            }
            | Column::Prescribed {
                field: PrescribedField::Pose | PrescribedField::Velocity,
                ..
            }
    )
}

/// One input column: what it is, its width, its prefix and where its values are stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputColumn {
    /// The batch column.
    pub column: Column,
    /// Values per instance.
    pub width: usize,
    /// Logical prefix (in widths), the name the kernels use for the column (`BODY_IN`,
    /// `C_IN`, `TIME_IN` … plus the field offsets).
    pub prefix: usize,
    /// Stored once for every instance of the chunk (a shared [`Broadcast`](crate::batch::Broadcast)
    /// column) rather than once per instance.
    pub shared: bool,
    /// Where the values are: for a per-instance column its prefix among the per-instance
    /// columns (value `k` of instance `i` at `at · capacity + i · width + k`); for a shared
    /// one its offset in the shared region that follows them (value `k` at
    /// `varying_width · capacity + at + k`).
    pub at: usize,
}

impl InputColumn {
    /// Index in a chunk's input buffer of instance `local`'s first value, for a chunk of
    /// `count` instances and a layout whose per-instance columns are `varying_width` wide.
    pub fn offset(&self, varying_width: usize, count: usize, local: usize) -> usize {
        if self.shared {
            varying_width * count + self.at
        } else {
            self.at * count + local * self.width
        }
    }
}

impl Layout {
    /// Lays out `batch`'s template, storing once the columns the batch shares now.
    pub fn for_batch(batch: &crate::batch::Batch) -> Result<Self> {
        Self::with_shared(batch.template(), &|c| {
            batch.column_data(c).is_some_and(|v| v.shared)
        })
    }

    /// The shared pattern this layout was made for serves `batch` when every column it stores
    /// once is still shared there (a column it stores per instance serves either way).
    pub fn serves(&self, batch: &crate::batch::Batch) -> bool {
        self.inputs
            .iter()
            .filter(|c| c.shared)
            .all(|c| batch.column_data(c.column).is_some_and(|v| v.shared))
    }

    /// The same layout with every column per instance (what [`Layout::new`] gives).
    pub fn unshared(&self) -> Self {
        let mut l = self.clone();
        l.inputs.iter_mut().for_each(|c| c.shared = false);
        l.place_inputs();
        l
    }

    /// Index of the input column of `column`.
    pub fn input(&self, column: Column) -> Option<&InputColumn> {
        self.inputs.iter().find(|c| c.column == column)
    }

    /// Assigns each input column its storage (`at`) from its `shared` flag, and regenerates
    /// the kernel's addressing function.
    pub(crate) fn place_inputs(&mut self) {
        let (mut varying, mut shared) = (0, 0);
        // Branch-free, per run of consecutive shared columns (their values are consecutive in
        // the shared region too): the run's offset by select, and a per-instance column's
        // storage prefix is its logical prefix less the widths of the runs before it. (A
        // switch over every column compiled twice as slowly on lavapipe.)
        let mut runs: Vec<(usize, usize, usize)> = Vec::new(); // (first prefix, end prefix, at)
        for c in &mut self.inputs {
            let counter = if c.shared { &mut shared } else { &mut varying };
            c.at = *counter;
            *counter += c.width;
            if c.shared {
                match runs.last_mut() {
                    Some(run) if run.1 == c.prefix => run.1 += c.width,
                    _ => runs.push((c.prefix, c.prefix + c.width, c.at)),
                }
            }
        }
        let (mut shared_at, mut before) = (String::new(), String::new());
        for (first, end, at) in &runs {
            let _ = writeln!(
                shared_at,
                "    shared_at = select(shared_at, {at}u + prefix - {first}u, prefix >= {first}u && prefix < {end}u);"
            );
            let _ = writeln!(
                before,
                "    at -= select(0u, {}u, prefix >= {end}u);",
                end - first
            );
        }
        self.varying_width = varying;
        self.shared_width = shared;
        let text = format!(
            "// Where the input column of logical prefix `prefix` (`width` values per instance) keeps\n\
             // instance i's first value (generated per template and shared pattern: a shared\n\
             // column is one row after the per-instance columns).\n\
             const VARYING_WIDTH: u32 = {varying}u;\n\
             fn input_at(prefix: u32, width: u32, i: u32) -> u32 {{\n\
             \x20   var shared_at = 0xffffffffu;\n{shared_at}\
             \x20   if shared_at != 0xffffffffu {{\n        return VARYING_WIDTH * launch.capacity + shared_at;\n    }}\n\
             \x20   var at = prefix;\n{before}\
             \x20   return at * launch.capacity + i * width;\n}}\n"
        );
        let text = text + &self.parameter_cache();
        let name = "generated input addressing (shared columns stored once)";
        match self.constraint_sections.iter_mut().find(|s| s.name == name) {
            Some(s) => s.text = text,
            None => self.constraint_sections.push(WgslSection {
                name: name.into(),
                text,
            }),
        }
    }

    /// The kernels' private copy of instance i's parameter columns: every input column but the
    /// state the kernels advance (time, work, poses and velocities), up to
    /// [`PARAMETER_SLOTS_CAP`] values in layout order. Every entry point calls
    /// `cache_parameters(i)` first; `load` then serves a cached column from the copy (a
    /// constant index once the compiler has inlined it: registers) and the rest from the input
    /// buffer. The stepping and event kernels evaluate the dynamics four times a step, and
    /// without the copy each evaluation re-reads every parameter from the storage buffer,
    /// which a shader compiler need not hoist out of a loop that writes the same buffer. On
    /// the rolling-ball bench, whose parameters are one shared row, neither an H100 nor
    /// lavapipe measured a difference (`--gpu-probe no-cache`, 2026-11-26): their compilers
    /// kept those reads cheap. Per-instance parameters, a gather per value, were not measured.
    fn parameter_cache(&self) -> String {
        let (mut fill, mut slots, mut runs) = (String::new(), 0usize, String::new());
        let mut run: Option<(usize, usize, usize)> = None; // (first prefix, end prefix, slot)
        let close = |run: (usize, usize, usize), runs: &mut String| {
            let (first, end, slot) = run;
            let _ = writeln!(
                runs,
                "    slot = select(slot, {slot}u + prefix - {first}u, prefix >= {first}u && prefix < {end}u);"
            );
        };
        for c in &self.inputs {
            if is_state(c.column) || slots + c.width > PARAMETER_SLOTS_CAP {
                if let Some(r) = run.take() {
                    close(r, &mut runs);
                }
                continue;
            }
            for k in 0..c.width {
                let _ = writeln!(
                    fill,
                    "    parameters[{}u] = read_input({}u, {}u, i, {k}u);",
                    slots + k,
                    c.prefix,
                    c.width
                );
            }
            run = match run {
                Some((first, end, slot)) if end == c.prefix => Some((first, end + c.width, slot)),
                Some(r) => {
                    close(r, &mut runs);
                    Some((c.prefix, c.prefix + c.width, slots))
                }
                None => Some((c.prefix, c.prefix + c.width, slots)),
            };
            slots += c.width;
        }
        if let Some(r) = run.take() {
            close(r, &mut runs);
        }
        format!(
            "// Instance i's parameter columns (every input column but the state), read once per\n\
             // thread by `cache_parameters` and then served by `load` from this private copy.\n\
             const PARAMETER_SLOTS: u32 = {}u;\n\
             var<private> parameters: array<real, PARAMETER_SLOTS>;\n\
             fn cache_parameters(i: u32) {{\n{fill}}}\n\
             // The slot of the cached column of logical prefix `prefix`, or 0xffffffff.\n\
             fn parameter_slot(prefix: u32) -> u32 {{\n\
             \x20   var slot = 0xffffffffu;\n{runs}\
             \x20   return slot;\n}}\n\
             // Value k of instance i of the input column of logical prefix `prefix` (`width` values\n\
             // per instance): from the private copy when the column is cached.\n\
             fn load(prefix: u32, width: u32, i: u32, k: u32) -> real {{\n\
             \x20   let slot = parameter_slot(prefix);\n\
             \x20   if slot != 0xffffffffu {{\n        return parameters[slot + k];\n    }}\n\
             \x20   return read_input(prefix, width, i, k);\n}}\n",
            slots.max(1)
        )
    }
}
