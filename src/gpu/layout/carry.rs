//! The stepping kernel's carry: the output columns (one value an instance each) that hold each
//! instance's progress through a call and stay on the device between dispatches. The host's
//! indices below and the kernel's `CARRY_*` constants ([`carry_constants`]) come from this one
//! list.

/// Status bits; non-zero: stop (the host sets it for halted instances).
pub const CARRY_STATUS: usize = 0;
/// Accepted steps of the call so far.
pub const CARRY_ACCEPTED: usize = 1;
/// Time elapsed in the call.
pub const CARRY_ELAPSED: usize = 2;
/// Kahan compensation of the elapsed time: the elapsed time is `ELAPSED − ELAPSED_LOW`.
pub const CARRY_ELAPSED_LOW: usize = 3;
/// RKM's step size (0: not yet chosen).
pub const CARRY_STEP_SIZE: usize = 4;
/// Whether the instance reached the call's goal.
pub const CARRY_FINISHED: usize = 5;
/// RKM's rejected trial steps of the call so far.
pub const CARRY_REJECTED: usize = 6;
/// Projections of the call so far.
pub const CARRY_PROJECTIONS: usize = 7;
/// Number of carry columns.
pub const CARRY_COLUMNS: usize = 8;

/// Each carry column's name in the kernel and its index.
const CARRY: [(&str, usize); CARRY_COLUMNS] = [
    ("CARRY_STATUS", CARRY_STATUS),
    ("CARRY_ACCEPTED", CARRY_ACCEPTED),
    ("CARRY_ELAPSED", CARRY_ELAPSED),
    ("CARRY_ELAPSED_LOW", CARRY_ELAPSED_LOW),
    ("CARRY_STEP_SIZE", CARRY_STEP_SIZE),
    ("CARRY_FINISHED", CARRY_FINISHED),
    ("CARRY_REJECTED", CARRY_REJECTED),
    ("CARRY_PROJECTIONS", CARRY_PROJECTIONS),
];

/// The kernel's `CARRY_*` constants (`shaders/step.wgsl` reads column `c` of instance `i` at
/// `output[c · capacity + i]`).
pub fn carry_constants() -> String {
    CARRY
        .iter()
        .map(|(name, index)| format!("const {name}: u32 = {index}u;\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns are `0..CARRY_COLUMNS`, each once, so no two share a column.
    #[test]
    fn carry_columns_are_distinct_and_dense() {
        let mut seen = [false; CARRY_COLUMNS];
        for (name, index) in CARRY {
            assert!(index < CARRY_COLUMNS, "{name}");
            assert!(!std::mem::replace(&mut seen[index], true), "{name}");
        }
        assert!(carry_constants().contains("const CARRY_ELAPSED_LOW: u32 = 3u;"));
    }
}
