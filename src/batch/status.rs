//! Bits of the per-instance status column.

/// Nothing wrong.
pub const OK: u32 = 0;
/// The instance's state or parameters hold a non-finite number or a zero quaternion.
pub const NONFINITE_STATE: u32 = 1;
/// A computed result (u̇, multipliers, forces) is not finite.
pub const NONFINITE_RESULT: u32 = 2;
/// A free body's mass matrix could not be factored (not positive definite).
pub const SINGULAR_MASS: u32 = 4;
/// The integrator could not advance the instance: its adaptive step fell below the minimum
/// step (`step::MIN_STEP`, relative to the instance's time), e.g. because the constraint
/// error on entry is beyond what projection may correct
/// (`max(2·tol, √tol)`) or the dynamics are too stiff for the accuracy asked. The instance
/// keeps its last good state and is not stepped again until the user resets it (and calls
/// [`Batch::refresh_status_of`](crate::batch::Batch::refresh_status_of)).
pub const STEP_FAILED: u32 = 8;
/// After the last step of a call, a constraint error (position or velocity, enabled rows)
/// exceeds the stepper's violation tolerance (`Stepper::violation_tolerance`): the
/// instance left its constraints and its results are not to be trusted. It is still
/// stepped; the flag stays until the user clears it.
pub const CONSTRAINT_VIOLATED: u32 = 16;
/// A reported quantity (energy, force) overflowed to a non-finite value although the
/// state is finite.
pub const NONFINITE_OUTPUT: u32 = 32;
/// The bits that stop an instance from being stepped further.
pub const HALTED: u32 = NONFINITE_STATE | STEP_FAILED;

/// A short English description of every bit set in `bits` (`"ok"` when none).
pub fn describe(bits: u32) -> String {
    const NAMES: [(u32, &str); 6] = [
        (NONFINITE_STATE, "non-finite state"),
        (NONFINITE_RESULT, "non-finite result"),
        (SINGULAR_MASS, "singular or ill-conditioned mass matrix"),
        (
            STEP_FAILED,
            "step size below the minimum (could not advance)",
        ),
        (CONSTRAINT_VIOLATED, "constraint error beyond tolerance"),
        (NONFINITE_OUTPUT, "non-finite output"),
    ];
    let words: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if bits == 0 {
        "ok".into()
    } else if words.is_empty() {
        format!("unknown status bits {bits:#x}")
    } else {
        words.join(", ")
    }
}
