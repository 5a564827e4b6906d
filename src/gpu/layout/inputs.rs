//! The input side of a layout: where each input column is stored (per instance, or one shared
//! row after the per-instance columns), the kernel's generated addressing, `input_at`, and each
//! thread's private copy of its parameter columns, `cache_parameters` and `load`.
//!
//! **Shared parameters folded in.** A parameter column every instance shares (a template's
//! mass, inertia, radius, plane, gravity, enabled flag, … left alone, or made uniform by
//! `Batch::share_uniform_columns`) is written into the kernel as constants
//! ([`Layout::fold_shared`]): the shader compiler then drops what they make trivial (a COM at
//! the origin, a zero applied load, an inertia's zero products, an enabled constraint's
//! branches) instead of computing it for every instance at every stage. The shared row is still
//! uploaded, so anything reading the buffer reads the same values. A kernel made for folded
//! values serves only a batch holding those values ([`Layout::serves`]); the evaluator rebuilds
//! it otherwise, reading per instance the columns written since (at most one rebuild per
//! column), and `GpuOptions::fold_shared` turns folding off for callers that change shared
//! values from call to call.

use std::fmt::Write;

use super::{Layout, WgslSection};
use crate::batch::{Column, ColumnData, FreeField, PrescribedField};
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

/// Whether the parameter copy (`cache_parameters`) gives `c` slots when `slots` are taken by the
/// columns before it: every parameter column (not the state) that still fits under
/// [`PARAMETER_SLOTS_CAP`].
fn takes_slot(c: &InputColumn, slots: usize) -> bool {
    !is_state(c.column) && slots + c.width <= PARAMETER_SLOTS_CAP
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
    /// A shared parameter column whose values the kernels hold as constants
    /// ([`Layout::folded_values`]; module doc).
    pub folded: bool,
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

/// The one row of shared column `column` of `batch`, as f64 values read where the batch keeps
/// them (`None` when the column is missing or not shared).
fn shared_row(
    batch: &crate::batch::Batch,
    column: Column,
) -> Option<(usize, impl Iterator<Item = f64> + '_)> {
    let view = batch.column_data(column).filter(|v| v.shared)?;
    let (len, f64s, u32s) = match view.data {
        ColumnData::F64(v) => (v.len(), v, &[][..]),
        ColumnData::U32(v) => (v.len(), &[][..], v),
    };
    Some((
        len,
        f64s.iter()
            .copied()
            .chain(u32s.iter().map(|x| f64::from(*x))),
    ))
}

/// Whether `batch` shares `column` with exactly `values` as its row, bit for bit (a folded 0.0
/// is not a −0.0), compared without copying: [`Layout::serves`] asks at every call.
fn holds(batch: &crate::batch::Batch, column: Column, values: &[f64]) -> bool {
    shared_row(batch, column).is_some_and(|(len, row)| {
        len == values.len() && row.zip(values).all(|(x, y)| x.to_bits() == y.to_bits())
    })
}

/// Whether a kernel may hold `value` as a constant: finite, and finite in f32 too (naga
/// refuses a constant beyond f32's range; such a value stays in the buffer, where an f32
/// upload makes it ±∞, as it did before folding).
fn foldable(value: f64) -> bool {
    value.is_finite() && (value as f32).is_finite()
}

impl Layout {
    /// Lays out `batch`'s template, storing once the columns the batch shares now.
    pub fn for_batch(batch: &crate::batch::Batch) -> Result<Self> {
        Self::with_shared(batch.template(), &|c| {
            batch.column_data(c).is_some_and(|v| v.shared)
        })
    }

    /// The shared pattern this layout was made for serves `batch` when every column it stores
    /// once is still shared there (a column it stores per instance serves either way) and
    /// every column it folds holds the folded values there, bit for bit.
    pub fn serves(&self, batch: &crate::batch::Batch) -> bool {
        let shared = self
            .inputs
            .iter()
            .filter(|c| c.shared)
            .all(|c| batch.column_data(c.column).is_some_and(|v| v.shared));
        shared
            && self
                .folded()
                .all(|(c, values)| holds(batch, c.column, values))
    }

    /// The values the kernels hold as constants for `column`, if it is folded.
    pub fn folded_row(&self, column: Column) -> Option<&[f64]> {
        self.folded()
            .find(|(c, _)| c.column == column)
            .map(|(_, values)| values)
    }

    /// Whether the kernels hold free body `slot`'s inertia as the constants of an isotropic
    /// tensor `k 1` (`[k, k, k, 0, 0, 0]`, a uniform ball's): then `R I⁻¹ Rᵀ = I⁻¹` and the
    /// gyroscopic term `w × I_G w` is zero exactly, and the generated code says so to the
    /// dynamics (`add_free_body`'s `isotropic`), which skip forming them. The test is on the
    /// batch's f64 values, so the kernel's constants are those of an isotropic tensor too.
    pub fn isotropic_inertia(&self, slot: usize) -> bool {
        let inertia = Column::Free {
            slot,
            field: FreeField::Inertia,
        };
        matches!(
            self.folded_row(inertia),
            Some(&[a, b, c, d, e, f]) if a == b && b == c && [d, e, f] == [0.0; 3]
        )
    }

    /// The folded columns with their values.
    fn folded(&self) -> impl Iterator<Item = (&InputColumn, &[f64])> {
        let mut at = 0;
        self.inputs.iter().filter(|c| c.folded).map(move |c| {
            let values = self.folded_values.get(at..at + c.width).unwrap_or(&[]);
            at += c.width;
            (c, values)
        })
    }

    /// Folds `batch`'s shared parameter columns into the kernels (module doc): every shared
    /// column the parameter copy holds (not the state; up to [`PARAMETER_SLOTS_CAP`] values)
    /// whose values are finite and within f32's range (others are read from the shared row, as
    /// without folding), and regenerates the kernel's parameter copy. A column this layout
    /// stores per instance is not folded.
    pub fn fold_shared(&mut self, batch: &crate::batch::Batch) {
        let (mut values, mut slots) = (Vec::new(), 0);
        for c in &mut self.inputs {
            c.folded = false;
            // Only what the parameter copy holds is folded (its slots get the constants).
            if !takes_slot(c, slots) {
                continue;
            }
            slots += c.width;
            let Some((len, row)) = shared_row(batch, c.column).filter(|_| c.shared) else {
                continue;
            };
            let row: Vec<f64> = row.collect();
            if len == c.width && row.iter().all(|v| foldable(*v)) {
                c.folded = true;
                values.extend(row);
            }
        }
        self.folded_values = values;
        self.place_inputs();
    }

    /// The same layout with every column per instance and nothing folded (what
    /// [`Layout::new`] gives).
    pub fn unshared(&self) -> Self {
        let mut l = self.clone();
        l.inputs.iter_mut().for_each(|c| {
            c.shared = false;
            c.folded = false;
        });
        l.folded_values.clear();
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
    /// A folded column's slots are given its constants instead of buffer reads (module doc),
    /// which the compiler propagates to every use.
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
            let folded = self.folded_row(c.column).unwrap_or(&[]);
            if !takes_slot(c, slots) {
                if let Some(r) = run.take() {
                    close(r, &mut runs);
                }
                continue;
            }
            for k in 0..c.width {
                let slot = slots + k;
                let _ = match folded.get(k) {
                    // `{:?}` writes the shortest text that reads back as the same f64, which
                    // naga turns into the kernel's precision as the upload does (`as f32`).
                    Some(value) => {
                        writeln!(fill, "    parameters[{slot}u] = real({value:?});")
                    }
                    _ => writeln!(
                        fill,
                        "    parameters[{slot}u] = read_input({}u, {}u, i, {k}u);",
                        c.prefix, c.width
                    ),
                };
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
