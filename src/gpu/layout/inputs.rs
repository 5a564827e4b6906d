//! The input side of a layout: where each input column is stored (per instance, or one shared
//! row after the per-instance columns) and the kernel's generated addressing, `input_at`.

use std::fmt::Write;

use super::{Layout, WgslSection};
use crate::batch::Column;
use crate::error::Result;

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
        let name = "generated input addressing (shared columns stored once)";
        match self.constraint_sections.iter_mut().find(|s| s.name == name) {
            Some(s) => s.text = text,
            None => self.constraint_sections.push(WgslSection {
                name: name.into(),
                text,
            }),
        }
    }
}
