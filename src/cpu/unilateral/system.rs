//! An instance's contacts in contact space, read from the engine's own assembled rows: the bridge
//! between a template's constraints and the contact laws.

use nalgebra::{DMatrix, DVector};

use super::ContactSpace;
use crate::batch::status;
use crate::cpu::evaluate::InstanceSystem;
use crate::cpu::solver::MassFactor;
use crate::error::{Error, Result};
use crate::model::{ConstraintId, SystemTemplate};

/// One instance's rows as the contact laws see them, with what an impact or a mode
/// determination needs and what turns their answers back into `u`.
#[derive(Debug, Clone)]
pub struct InstanceContacts {
    /// `W = G M⁻¹ Gᵀ`, the contacts' `(x, y, z)` rows and every other enabled row (bilateral).
    pub space: ContactSpace,
    /// Row velocities: the velocity errors `v` (for a contact, its slip and normal speed).
    pub velocity: DVector<f64>,
    /// Free row accelerations `a₀ = G u̇₀ − b`: what the rows would do with no constraint force.
    pub free_acceleration: DVector<f64>,
    /// Separation `s` of each contact: its normal row's position error (> 0 apart).
    pub separation: Vec<f64>,
    /// `M⁻¹ Gᵀ` (nu × m): `u` changes by `−M⁻¹ Gᵀ π` under the impulse `π`.
    response: DMatrix<f64>,
    /// `u̇₀ = M⁻¹ (f − c)`.
    udot_free: DVector<f64>,
    /// The factored mass matrix (kept for [`build_in`](Self::build_in)).
    factor: MassFactor,
    /// Which assembly of its instance's event machine this was built from (0: none of them),
    /// so the machine can hand it out again for the same state instead of assembling anew.
    pub(crate) assembly: u64,
}

impl InstanceContacts {
    /// The contact space of `system` (an instance of `template`) with the constraints in
    /// `contacts` as unilateral contacts. Each must be enabled and report three rows in
    /// `(x, y, z)` order (slip along `Px`, `Py`, and the normal: a `SphereOnPlaneContact` with
    /// rolling rows); every other enabled row is bilateral.
    pub fn new(
        system: &InstanceSystem,
        template: &SystemTemplate,
        contacts: &[ConstraintId],
    ) -> Result<Self> {
        let mut space = Self {
            space: ContactSpace {
                w: DMatrix::zeros(0, 0),
                contacts: Vec::new(),
                bilateral: Vec::new(),
            },
            velocity: DVector::zeros(0),
            free_acceleration: DVector::zeros(0),
            separation: Vec::new(),
            response: DMatrix::zeros(0, 0),
            udot_free: DVector::zeros(0),
            factor: MassFactor::empty(),
            assembly: 0,
        };
        space.build_in(system, template, contacts)?;
        Ok(space)
    }

    /// [`new`](Self::new), built in the buffers of `self` (the same instance's contacts at an
    /// earlier state): the event-driven stepper assembles the contact space at every RK4 stage
    /// and event test, and perf put about a third of its run time in the allocator (reusing
    /// these buffers saved 12 % of a unilateral study). The values are the same bits as
    /// `new`'s. In place: the event machine keeps its contact spaces boxed and rebuilds them
    /// where they lie (moved by value through its calls, a contact space's few hundred bytes
    /// were copied several times an assembly: 8 % of a unilateral study in `memmove`). After
    /// an error `self` holds a partial build, to be built again before use.
    pub(crate) fn build_in(
        &mut self,
        system: &InstanceSystem,
        template: &SystemTemplate,
        contacts: &[ConstraintId],
    ) -> Result<()> {
        self.assembly = 0;
        if system.status != status::OK {
            return Err(Error::NonFinite {
                instance: system.instance,
                status: system.status,
            });
        }
        let factor = &mut self.factor;
        if !factor.refactor(&system.mass_blocks) {
            return Err(Error::NonFinite {
                instance: system.instance,
                status: status::SINGULAR_MASS,
            });
        }
        let (response, w) = (&mut self.response, &mut self.space.w);
        let g = &system.jacobian;
        let (m, nu) = g.shape();
        // M⁻¹ Gᵀ, and W = G M⁻¹ Gᵀ symmetrised: (W + Wᵀ) / 2.
        shape_matrix(response, nu, m);
        g.transpose_to(response);
        factor.solve_columns_in_place(response);
        shape_matrix(w, m, m);
        contact_gram_into(g, response, w);
        // On the column-major slice: `w[(i, j)]` is `data[i + m j]`. Indexing the matrix per
        // entry (bounds and strides each time) took a seventh of a brick study's time.
        let data = w.as_mut_slice();
        for j in 0..m {
            for i in j + 1..m {
                let mean = (data[i + m * j] + data[j + m * i]) * 0.5;
                data[i + m * j] = mean;
                data[j + m * i] = mean;
            }
        }
        let contact_rows = &mut self.space.contacts;
        contact_rows.clear();
        for id in contacts {
            let slot = template.constraint(*id)?;
            let rows = system
                .constraints
                .get(id.0)
                .ok_or_else(|| Error::BadHandle {
                    what: "constraint",
                    index: id.0,
                    reason: "not in this instance's system".into(),
                })?;
            if !rows.enabled {
                return Err(Error::BadHandle {
                    what: "constraint",
                    index: id.0,
                    reason: "a unilateral contact must be enabled in the instance".into(),
                });
            }
            let slots = slot.constraint.report_slots();
            match slots {
                [Some(x), Some(y), Some(z)] => {
                    contact_rows.push([rows.offset + x, rows.offset + y, rows.offset + z])
                }
                _ => {
                    return Err(Error::BadHandle {
                        what: "constraint",
                        index: id.0,
                        reason: format!(
                            "{} does not have the three rows (slip x, slip y, normal) a \
                             unilateral contact needs",
                            slot.constraint.kind_name()
                        ),
                    });
                }
            }
        }
        let bilateral = &mut self.space.bilateral;
        bilateral.clear();
        // Every row, then the contacts' struck out: one pass each, where asking each row
        // whether a contact names it scanned every contact row (a tenth of `build_in`).
        bilateral.extend(0..m);
        for &r in contact_rows.iter().flatten() {
            if let Some(row) = bilateral.get_mut(r) {
                *row = usize::MAX;
            }
        }
        bilateral.retain(|&r| r != usize::MAX);
        self.separation.clear();
        self.separation.extend(
            contact_rows
                .iter()
                .map(|rows| system.position_errors[rows[2]]),
        );
        // u̇₀ = M⁻¹ (f − c) and the free row accelerations a₀ = G u̇₀ − b.
        let udot_free = &mut self.udot_free;
        shape_vector(udot_free, nu);
        udot_free.copy_from(&system.applied);
        factor.solve_vector_in_place(udot_free);
        let free_acceleration = &mut self.free_acceleration;
        shape_vector(free_acceleration, m);
        g.mul_to(udot_free, free_acceleration);
        *free_acceleration -= &system.bias;
        shape_vector(&mut self.velocity, m);
        self.velocity.copy_from(&system.velocity_errors);
        self.space.check_built()
    }

    /// The change of `u` under the impulse `π` (per row): `−M⁻¹ Gᵀ π`.
    pub fn velocity_change(&self, impulse: &DVector<f64>) -> DVector<f64> {
        -(&self.response * impulse)
    }

    /// `u̇ = u̇₀ − M⁻¹ Gᵀ λ` for the multipliers `λ` (per row).
    pub fn udot(&self, multipliers: &DVector<f64>) -> DVector<f64> {
        &self.udot_free - &self.response * multipliers
    }

    /// [`udot`](Self::udot) into `out` (`nu` values), with no allocation: `M⁻¹ Gᵀ λ` summed in
    /// nalgebra's matrix-vector order, so the bits are `udot`'s.
    pub(crate) fn udot_into(&self, multipliers: &DVector<f64>, out: &mut [f64]) {
        let (nu, m) = self.response.shape();
        for (k, out) in out[..nu].iter_mut().enumerate() {
            let mut correction = 0.0;
            for r in 0..m {
                let term = self.response[(k, r)] * multipliers[r];
                correction = if r == 0 { term } else { term + correction };
            }
            *out = self.udot_free[k] - correction;
        }
    }
}

/// Gives `matrix` the shape `rows × cols`, keeping its buffer when it has that shape already:
/// nalgebra's `resize_mut` allocates a new buffer at every call, even to the same shape, and
/// the event path reshapes its buffers at every derivative. Entries are kept where the shape
/// is kept and zero where it grows, as `resize_mut`; the callers overwrite them all.
pub(super) fn shape_matrix(matrix: &mut DMatrix<f64>, rows: usize, cols: usize) {
    if matrix.shape() != (rows, cols) {
        matrix.resize_mut(rows, cols, 0.0);
    }
}

/// `W = G R` for `G` (m × nu) and `R = M⁻¹ Gᵀ` (nu × m) into `w` (m × m), each entry the
/// fused multiply-add chain `Σ_k G_ik R_kj` over `k` in order from zero, on the column-major
/// slices. For six rows and columns or more this is the sum nalgebra's `mul_to` took through
/// matrixmultiply's FMA kernel, the same bits; below that nalgebra summed unfused products
/// (one rounding more each). At these sizes (a few to a few dozen rows, `nu` a few)
/// matrixmultiply's packing buffers, allocated at every call, and its packing cost more than
/// the product: an eleventh of a brick study's time in all (`docs/performance-log.md`).
fn contact_gram_into(g: &DMatrix<f64>, response: &DMatrix<f64>, w: &mut DMatrix<f64>) {
    let (m, nu) = g.shape();
    let (g, r) = (g.as_slice(), response.as_slice());
    let w = w.as_mut_slice();
    match nu {
        6 => gram_columns::<6>(g, r, w, m),
        12 => gram_columns::<12>(g, r, w, m),
        _ => gram_rows(g, r, w, m, nu, 0),
    }
}

/// Rows kept in registers at once by [`gram_columns`]: two 256-bit vectors' worth.
const GRAM_ROWS: usize = 8;

/// [`contact_gram_into`] for `NU` columns of `G` (one free body, two): each block of
/// [`GRAM_ROWS`] rows of `G` is read once and held while every column of `W` takes its rows
/// from it (`NU` broadcasts and fused multiply-adds a column); the rows past the last full
/// block by [`gram_rows`]. (Summed column by column through `W`'s memory instead, each `k`
/// waited on the store of the one before, and the brick study ran slower than through
/// matrixmultiply.) `g` is `G`'s m × `NU` column-major slice, `r` `R`'s `NU` × m and `w` the
/// m × m one, so every block and column asked for below is there.
fn gram_columns<const NU: usize>(g: &[f64], r: &[f64], w: &mut [f64], m: usize) {
    let full = m - m % GRAM_ROWS;
    for i0 in (0..full).step_by(GRAM_ROWS) {
        let mut block = [[0.0; GRAM_ROWS]; NU];
        for (k, rows) in block.iter_mut().enumerate() {
            if let Some(from) = g
                .get(k * m + i0..)
                .and_then(|c| c.first_chunk::<GRAM_ROWS>())
            {
                *rows = *from;
            }
        }
        for (r_j, column) in r.chunks_exact(NU).zip(w.chunks_exact_mut(m)) {
            let mut sum = [0.0; GRAM_ROWS];
            for (rows, r_kj) in block.iter().zip(r_j) {
                for (s, g_ik) in sum.iter_mut().zip(rows) {
                    *s = g_ik.mul_add(*r_kj, *s);
                }
            }
            if let Some(out) = column
                .get_mut(i0..)
                .and_then(|c| c.first_chunk_mut::<GRAM_ROWS>())
            {
                *out = sum;
            }
        }
    }
    gram_rows(g, r, w, m, NU, full);
}

/// Rows `from..m` of [`contact_gram_into`]'s `W`, entry by entry (any `nu`).
fn gram_rows(g: &[f64], r: &[f64], w: &mut [f64], m: usize, nu: usize, from: usize) {
    for j in 0..m {
        for i in from..m {
            let mut sum = 0.0;
            for k in 0..nu {
                sum = g[i + m * k].mul_add(r[k + nu * j], sum);
            }
            w[i + m * j] = sum;
        }
    }
}

/// [`shape_matrix`] for a vector of `len` entries.
pub(super) fn shape_vector(vector: &mut DVector<f64>, len: usize) {
    if vector.len() != len {
        vector.resize_vertically_mut(len, 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::evaluate::BaumgarteMode;
    use crate::scenarios::{ContactKind, PlaneBody, contact_batch};

    fn bits<'a>(values: impl IntoIterator<Item = &'a f64>) -> Vec<u64> {
        values.into_iter().map(|x| x.to_bits()).collect()
    }

    /// Numbers in [-1, 1) from an xorshift generator started at `seed` (nonzero).
    fn numbers(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        }
    }

    /// `udot_into` sums `M⁻¹ Gᵀ λ` in its own loops; they must give `udot`'s bits (nalgebra's
    /// product), for the few rows of a ball and the 24 of a brick on eight corners alike.
    #[test]
    fn udot_into_has_the_bits_of_udot() {
        let (batch, _, c) =
            contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 4, 5).expect("batch");
        let system = batch.assemble_with(0, &batch.state_of(0), BaumgarteMode::Off);
        let mut contacts = InstanceContacts::new(&system, batch.template(), &[c]).expect("space");
        let mut next = numbers(0x9e37_79b9_7f4a_7c15);
        for (nu, m) in [(12, 3), (6, 1), (6, 24), (12, 12), (18, 9)] {
            contacts.response = DMatrix::from_fn(nu, m, |_, _| next() * 1e3);
            contacts.udot_free = DVector::from_fn(nu, |_, _| next());
            let multipliers = DVector::from_fn(m, |_, _| next() * 10.0);
            let mut out = vec![0.0; nu];
            contacts.udot_into(&multipliers, &mut out);
            assert_eq!(bits(&out), bits(&contacts.udot(&multipliers)), "{nu}×{m}");
        }
    }

    /// `contact_gram_into` is `G R` with each entry's fused sum taken over `k` in order — the
    /// same bits as that sum written plainly, whatever the row count's remainder after its
    /// blocks of eight — and within rounding of nalgebra's product (which sums unfused below
    /// six rows or columns). Empty shapes give empty or zero products.
    #[test]
    fn the_contact_gram_product_is_g_times_r() {
        let mut next = numbers(0x2545_f491_4f6c_dd1d);
        for (m, nu) in [
            (24, 6),
            (20, 6),
            (3, 6),
            (1, 6),
            (16, 12),
            (9, 12),
            (17, 7),
            (8, 1),
            (0, 6),
            (5, 0),
        ] {
            let g = DMatrix::from_fn(m, nu, |_, _| next() * 3.0);
            let r = DMatrix::from_fn(nu, m, |_, _| next() * 1e2);
            let mut w = DMatrix::from_element(m, m, f64::NAN);
            contact_gram_into(&g, &r, &mut w);
            let plain = DMatrix::from_fn(m, m, |i, j| {
                (0..nu).fold(0.0, |sum: f64, k| g[(i, k)].mul_add(r[(k, j)], sum))
            });
            assert_eq!(bits(w.as_slice()), bits(plain.as_slice()), "{m}×{nu}");
            let product = &g * &r;
            let scale = product.amax().max(1.0);
            assert!((&w - &product).amax() <= 1e-14 * scale, "{m}×{nu}");
        }
    }

    /// The event path builds each contact space in the buffers of the last one: the result
    /// must be the bits of a fresh build, instance after instance (a two-body template, so
    /// `W`, `M⁻¹ Gᵀ` and `u̇₀` are full), errors included.
    #[test]
    fn a_rebuilt_contact_space_has_the_bits_of_a_new_one() {
        let (batch, _, c) =
            contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 12, 3).expect("batch");
        let (template, ids) = (batch.template(), [c]);
        let mut spare: Option<InstanceContacts> = None;
        let mut rebuilt_count = 0;
        for i in 0..batch.len() {
            let system = batch.assemble_with(i, &batch.state_of(i), BaumgarteMode::Off);
            let fresh = InstanceContacts::new(&system, template, &ids);
            let reused = spare.is_some();
            let built = match spare.take() {
                Some(mut old) => old.build_in(&system, template, &ids).map(|()| old),
                None => InstanceContacts::new(&system, template, &ids),
            };
            match (fresh, built) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(bits(a.space.delassus()), bits(b.space.delassus()), "{i}");
                    assert_eq!(a.space.contacts(), b.space.contacts());
                    assert_eq!(a.space.bilateral(), b.space.bilateral());
                    assert_eq!(bits(&a.velocity), bits(&b.velocity));
                    assert_eq!(bits(&a.free_acceleration), bits(&b.free_acceleration));
                    assert_eq!(bits(&a.separation), bits(&b.separation));
                    assert_eq!(bits(&a.response), bits(&b.response));
                    assert_eq!(bits(&a.udot_free), bits(&b.udot_free));
                    rebuilt_count += usize::from(reused);
                    spare = Some(b);
                }
                // Instance 5 has its contact disabled: refused either way.
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("instance {i}: {:?} vs {:?}", a.is_ok(), b.is_ok()),
            }
        }
        assert!(rebuilt_count >= 9, "{rebuilt_count} rebuilds");
    }
}
