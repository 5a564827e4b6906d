//! Checks on values written to a batch: each returns the accepted range on failure, so the
//! typed error can name it.

use nalgebra::{SymmetricEigen, Vector3};

use crate::error::{Error, Result};
use crate::math::{inertia_matrix, normalize_quaternion};
use crate::model::{Broadcast, ParamSpec, What};

pub(super) type Accepted = &'static str;

pub(super) fn finite<const K: usize>(v: [f64; K]) -> Result<[f64; K], Accepted> {
    if v.iter().all(|x| x.is_finite()) {
        Ok(v)
    } else {
        Err("finite numbers")
    }
}

pub(super) fn finite_scalar(v: f64) -> Result<f64, Accepted> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err("a finite number")
    }
}

pub(super) fn positive_mass(m: f64) -> Result<f64, Accepted> {
    if m.is_finite() && m > 0.0 {
        Ok(m)
    } else {
        Err("a finite number > 0")
    }
}

/// Inertia about the COM: finite, symmetric positive definite, principal moments satisfying the
/// triangle inequality (each ≤ the sum of the other two, within 1e-10 relative), as Simbody's
/// `Inertia` requires of a physical body.
pub(super) fn valid_inertia(i: [f64; 6]) -> Result<[f64; 6], Accepted> {
    valid_inertia_moments(i).map(|(i, _)| i)
}

/// [`valid_inertia`], also giving the principal moments it computed, for
/// [`conditioned`] to take without a second eigen solve.
pub(super) fn valid_inertia_moments(i: [f64; 6]) -> Result<([f64; 6], Vector3<f64>), Accepted> {
    const ACCEPTED: &str = "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz] finite, positive definite, principal \
                            moments satisfying the triangle inequality (each ≤ sum of the others)";
    if !i.iter().all(|x| x.is_finite()) {
        return Err(ACCEPTED);
    }
    let moments = principal_moments(&i);
    let largest = moments.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    let slop = 1e-10 * largest;
    if moments.iter().any(|m| *m <= 0.0) {
        return Err(ACCEPTED);
    }
    let sum: f64 = moments.iter().sum();
    if moments.iter().any(|m| *m > sum - *m + slop) {
        return Err(ACCEPTED);
    }
    Ok((i, moments))
}

/// The principal moments of an inertia `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]` (its eigenvalues).
fn principal_moments(i: &[f64; 6]) -> Vector3<f64> {
    SymmetricEigen::new(inertia_matrix(i)).eigenvalues
}

/// The largest condition number `max(m, I₁)/min(m, I₃)` of a free body's central mass matrix
/// (mass and principal moments, SI units) the batch accepts. Beyond it f64 keeps fewer than 4
/// significant digits through `M⁻¹` and the motion (spin rates ~ √(m/I) larger than the
/// translation) is too stiff for any step size a study would use: a 2 kg ball given an inertia
/// of 1e-14 (condition 2e14) leaves its rolling constraint. A solid 5 µm sphere sits at about
/// 1e12; use smaller units (mm, g) for bodies that small.
pub const MAX_MASS_CONDITION: f64 = 1e12;

/// Checks the conditioning of a free body's central mass matrix `diag(I_c, m 1)`; on failure
/// gives the condition number and what is accepted.
pub(super) fn well_conditioned(mass: f64, inertia: &[f64; 6]) -> Result<(), (f64, String)> {
    conditioned(mass, &principal_moments(inertia))
}

/// [`well_conditioned`] from the inertia's principal moments.
pub(super) fn conditioned(mass: f64, moments: &Vector3<f64>) -> Result<(), (f64, String)> {
    let largest = moments.iter().fold(mass, |a, b| a.max(*b));
    let smallest = moments.iter().fold(mass, |a, b| a.min(*b));
    let kappa = largest / smallest;
    if kappa <= MAX_MASS_CONDITION {
        Ok(())
    } else {
        Err((
            kappa,
            format!(
                "mass and principal moments of inertia within a factor {MAX_MASS_CONDITION:e} \
                 of each other (SI units; use smaller units for microscopic bodies)"
            ),
        ))
    }
}

pub(super) fn pose(mut p: [f64; 7]) -> Result<[f64; 7], Accepted> {
    const ACCEPTED: &str =
        "[e0, e1, e2, e3, x, y, z] finite, quaternion not zero (it is normalised)";
    if !p.iter().all(|x| x.is_finite()) || !normalize_quaternion(&mut p[..4]) {
        return Err(ACCEPTED);
    }
    Ok(p)
}

/// Parameter columns for `len` instances of the parameters `specs` (a constraint's or a motion
/// law's), every value at its checked default, stored once ([`Broadcast`]) until an instance
/// is given a value of its own; `owner` names them in errors.
pub(crate) fn default_columns(
    specs: &[ParamSpec],
    owner: &str,
    len: usize,
) -> Result<(Vec<Broadcast<f64>>, Vec<usize>)> {
    let mut params = Vec::with_capacity(specs.len());
    let mut widths = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut default = spec.default.clone();
        if default.is_empty() || !spec.check.accept(&mut default) {
            return Err(Error::Template(format!(
                "{owner}: default {} = {:?} not accepted; accepted: {}",
                spec.name,
                spec.default,
                spec.check.accepted()
            )));
        }
        widths.push(default.len());
        params.push(Broadcast::shared(len, &default));
    }
    Ok((params, widths))
}

/// One instance's value of a parameter (`width` values), checked by `spec` (and normalised
/// where the check says so); errors name `field`.
pub(crate) fn checked_param(
    spec: &ParamSpec,
    width: usize,
    field: What<'_>,
    instance: usize,
    value: &[f64],
) -> Result<Vec<f64>> {
    if value.len() != width {
        return Err(Error::ColumnLength {
            field: field(),
            got: value.len(),
            expected: width,
        });
    }
    let mut v = value.to_vec();
    if !spec.check.accept(&mut v) {
        return Err(invalid(
            field(),
            instance,
            format!("{value:?}"),
            spec.check.accepted(),
        ));
    }
    Ok(v)
}

pub(super) fn invalid(field: String, instance: usize, value: String, accepted: &str) -> Error {
    Error::InvalidValue {
        field,
        instance,
        value,
        accepted: accepted.to_string(),
    }
}
