//! The machinery of event-driven stepping for one instance: its state and assembly, the
//! derivative with the modes fixed, RK4 steps and the event test at a step's end (what is done
//! at an event is `event.rs`).

use super::phase::{RowSet, linear_step_into};
use super::{Coefficients, ContactMode, InstanceContacts, ModeContact, Tolerances, solve_modes};
use crate::batch::{Batch, InstanceState};
use crate::constraints::BodyKinematics;
use crate::contact::STABLE_STEP_FACTOR;
use crate::cpu::evaluate::{BaumgarteMode, InstanceSystem};
use crate::cpu::integrate::applied_power;
use crate::error::{Error, Result};
use crate::math::{quaternion_rate, vec3};
use crate::model::ConstraintId;
use nalgebra::DVector;

/// Where each part of an instance's `y` lies: q then u of the free bodies (what the contact
/// laws act on), one friction-loss integral per contact, then pose and velocity of every
/// prescribed body (a constant-law body moves at its acceleration; a driven one follows its law,
/// these values unused), then the work `[driven, applied]` on the free bodies.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub(super) nq: usize,
    pub(super) nu: usize,
    pub(super) losses: usize,
    pub(super) poses: usize,
    pub(super) velocities: usize,
    pub(super) work: usize,
    pub(super) len: usize,
}

impl Layout {
    pub(super) fn new(free: usize, prescribed: usize, contacts: usize) -> Self {
        let (nq, nu) = (7 * free, 6 * free);
        let losses = nq + nu;
        let poses = losses + contacts;
        let velocities = poses + 7 * prescribed;
        let work = velocities + 6 * prescribed;
        Self {
            nq,
            nu,
            losses,
            poses,
            velocities,
            work,
            len: work + 2,
        }
    }
}

/// The instance's state and what assembling it needs.
pub(super) struct Machine<'a> {
    pub(super) batch: &'a Batch,
    pub(super) instance: usize,
    pub(super) ids: Vec<ConstraintId>,
    pub(super) coefficients: Vec<Coefficients>,
    pub(super) tol: Tolerances,
    pub(super) state: InstanceState,
    pub(super) system: InstanceSystem,
    pub(super) kinematics: Vec<BodyKinematics>,
    pub(super) layout: Layout,
    /// Per contact, whether its slip has exceeded `v_roll` since it last changed mode: only then
    /// can slip → stick fire (§2's hysteresis).
    pub(super) armed: Vec<bool>,
    /// Per contact, whether a sliding contact's friction follows its slip at the stages of the
    /// present step (its slip exceeded `v_roll` at the step's start); if not, it keeps its
    /// frozen direction for the whole step, so a slip that grows through `v_roll` inside a
    /// step does not turn the friction with it (nothing stiff in that step,
    /// [`stable_step`](Self::stable_step)).
    pub(super) follows: Vec<bool>,
    /// A contact space no longer used, whose buffers the next [`contacts_at`](Self::contacts_at)
    /// builds in — or which it returns as it is, when it was built from the last assembly and
    /// that was of the state asked for.
    pub(super) spare: Option<Box<InstanceContacts>>,
    /// Another contact space no longer used, for its buffers alone (`pool.rs`'s
    /// [`recycle`](Self::recycle)).
    pub(super) reserve: Option<Box<InstanceContacts>>,
    /// Assemblies so far (the last one's number), and the time and state (`y`'s bits) it was
    /// of: a call's start assembles one state in its setup, in each part of the settling and in
    /// its first step, and an unchanged state needs no second assembly.
    pub(super) assemblies: u64,
    pub(super) assembled_time: f64,
    pub(super) assembled: Vec<u64>,
    /// The row sets of the last derivative, kept for their buffer.
    pub(super) sets: Vec<RowSet>,
    /// The multipliers of the last RK4 stage, kept for their buffer.
    pub(super) stage_multipliers: DVector<f64>,
    /// A step's stage state and its later stages' derivatives (three for RK4, four for
    /// Runge–Kutta–Merson), kept for their buffers.
    pub(super) stages: [Vec<f64>; 5],
}

impl Machine<'_> {
    /// The contact space at time `t` and state `y` ([`Layout`]); a driven body is where its
    /// law puts it at `t`.
    pub(super) fn contacts_at(&mut self, t: f64, y: &[f64]) -> Result<Box<InstanceContacts>> {
        // The last assembly's contact space, for that assembly's state: the same bits as
        // assembling it again (its state and system, which callers read too, are that state's).
        let same_state = self.assemblies > 0
            && self.assembled_time.to_bits() == t.to_bits()
            && self.assembled.len() == y.len()
            && self.assembled.iter().zip(y).all(|(a, b)| *a == b.to_bits());
        if same_state && let Some(spare) = self.spare.take_if(|s| s.assembly == self.assemblies) {
            return Ok(spare);
        }
        let l = self.layout;
        self.state.time = t;
        for (k, q) in self.state.q.iter_mut().enumerate() {
            q.copy_from_slice(&y[7 * k..7 * k + 7]);
        }
        for (k, u) in self.state.u.iter_mut().enumerate() {
            u.copy_from_slice(&y[l.nq + 6 * k..l.nq + 6 * k + 6]);
        }
        for (k, pose) in self.state.pose.iter_mut().enumerate() {
            pose.copy_from_slice(&y[l.poses + 7 * k..l.poses + 7 * k + 7]);
        }
        for (k, velocity) in self.state.velocity.iter_mut().enumerate() {
            velocity.copy_from_slice(&y[l.velocities + 6 * k..l.velocities + 6 * k + 6]);
        }
        self.batch.assemble_into(
            self.instance,
            &self.state,
            BaumgarteMode::Off,
            &mut self.system,
            &mut self.kinematics,
        );
        self.assemblies += 1;
        self.assembled_time = t;
        self.assembled.clear();
        self.assembled.extend(y.iter().map(|v| v.to_bits()));
        let template = self.batch.template();
        let mut contacts = match self.spare.take().or_else(|| self.reserve.take()) {
            Some(mut spare) => {
                spare.build_in(&self.system, template, &self.ids)?;
                spare
            }
            None => Box::new(InstanceContacts::new(&self.system, template, &self.ids)?),
        };
        contacts.assembly = self.assemblies;
        Ok(contacts)
    }

    /// `ẏ` at `y` with the contacts in `modes` into `dy`; a sliding contact slides along its
    /// slip while that is faster than `v_roll` and not reversed against `frozen` (its direction
    /// at the step start), else along `frozen` (so a slip that stops inside a step does not
    /// flip the friction between stages). For an RK4 stage: the multipliers, which the stages
    /// do not need, go to a buffer the machine keeps.
    pub(super) fn derivative_into(
        &mut self,
        t: f64,
        y: &[f64],
        modes: &[ContactMode],
        frozen: &[Option<[f64; 2]>],
        dy: &mut Vec<f64>,
    ) -> Result<()> {
        let contacts = self.contacts_at(t, y)?;
        let mut multipliers = std::mem::take(&mut self.stage_multipliers);
        self.parts_into(&contacts, y, modes, frozen, dy, &mut multipliers);
        self.stage_multipliers = multipliers;
        self.recycle(contacts);
        Ok(())
    }

    /// `ẏ` at `y` with the contact space at `y` given, and the multipliers it found (per row):
    /// `contacts` must be what the machine assembled last (its state and system are read too),
    /// as a step's start is — its first RK4 stage, shared by the step and every bisection point,
    /// then costs no assembly.
    pub(super) fn derivative_parts_at(
        &mut self,
        contacts: &InstanceContacts,
        y: &[f64],
        modes: &[ContactMode],
        frozen: &[Option<[f64; 2]>],
    ) -> (Vec<f64>, DVector<f64>) {
        let (mut dy, mut multipliers) = (Vec::new(), DVector::zeros(0));
        self.parts_into(contacts, y, modes, frozen, &mut dy, &mut multipliers);
        (dy, multipliers)
    }

    /// [`derivative_parts_at`](Self::derivative_parts_at) into `dy` and `multipliers`, whose
    /// buffers are reused: the event path computes four derivatives a step, and allocating
    /// their vectors took a sixth of its time.
    fn parts_into(
        &mut self,
        contacts: &InstanceContacts,
        y: &[f64],
        modes: &[ContactMode],
        frozen: &[Option<[f64; 2]>],
        dy: &mut Vec<f64>,
        multipliers: &mut DVector<f64>,
    ) {
        let mut sets = std::mem::take(&mut self.sets);
        sets.clear();
        sets.extend(
            modes
                .iter()
                .zip(contacts.space.contacts())
                .zip(frozen.iter().zip(&self.coefficients))
                .enumerate()
                .map(|(c, ((mode, rows), (start, k)))| match *mode {
                    ContactMode::Open => RowSet::Off,
                    ContactMode::Stick => RowSet::Stick,
                    ContactMode::Slide { direction } => {
                        let (sx, sy) = (contacts.velocity[rows[0]], contacts.velocity[rows[1]]);
                        let speed = sx.hypot(sy);
                        let start = start.unwrap_or(direction);
                        let slip = [sx / speed, sy / speed];
                        let direction = if self.follows.get(c).copied().unwrap_or(true)
                            && speed >= self.tol.v_roll
                            && slip[0] * start[0] + slip[1] * start[1] > 0.0
                        {
                            slip
                        } else {
                            start
                        };
                        RowSet::Slide {
                            direction,
                            mu: k.mu_dynamic,
                        }
                    }
                }),
        );
        linear_step_into(
            &contacts.space,
            &contacts.free_acceleration,
            &sets,
            &[],
            multipliers,
        );
        self.sets = sets;
        let multipliers = &*multipliers;
        let l = self.layout;
        dy.clear();
        dy.resize(y.len(), 0.0);
        contacts.udot_into(multipliers, &mut dy[l.nq..l.nq + l.nu]);
        let poses = (0..self.state.q.len())
            .map(|k| (7 * k, l.nq + 6 * k))
            .chain((0..self.state.pose.len()).map(|k| (l.poses + 7 * k, l.velocities + 6 * k)));
        for (k, (q_at, u_at)) in poses.enumerate() {
            let driven = k >= self.state.q.len()
                && self.batch.prescribed_columns()[k - self.state.q.len()]
                    .motion
                    .is_some();
            if driven {
                // Its law gives pose and velocity at every time: nothing to integrate.
                continue;
            }
            let (q, u) = (&y[q_at..q_at + 7], &y[u_at..u_at + 6]);
            dy[q_at..q_at + 4].copy_from_slice(&quaternion_rate(&q[..4], &vec3(&u[..3])));
            dy[q_at + 4..q_at + 7].copy_from_slice(&u[3..6]);
        }
        for (k, cols) in self.batch.prescribed_columns().iter().enumerate() {
            if cols.motion.is_none() {
                let at = l.velocities + 6 * k;
                dy[at..at + 6].copy_from_slice(&cols.acceleration[self.instance]);
            }
        }
        // Per contact, the rate at which its force takes energy, λ · v over its rows (§7:
        // sliding friction's μ_d |λ_z| |v_t|; zero to rounding when sticking or open).
        for (rate, rows) in dy[l.losses..l.poses]
            .iter_mut()
            .zip(contacts.space.contacts())
        {
            *rate = rows
                .iter()
                .map(|&r| multipliers[r] * contacts.velocity[r])
                .sum();
        }
        // Work on the free bodies: the forces −Gᵀλ deliver −λ · G u = −λ · v + λ · c, where
        // c = v − G u is what the prescribed bodies' motion adds to the row velocities. The
        // contacts take λ · v (above); the prescribed bodies do λ · c. Applied loads do F · v.
        dy[l.work] = self.motion_power(contacts, multipliers);
        dy[l.work + 1] = applied_power(self.batch, self.instance, &self.state);
    }

    /// The longest step with which RK4 integrates the sliding contacts' friction stably, at
    /// `contacts` with `multipliers` (∞ when none slides).
    ///
    /// A sliding contact's friction `μ_d N ŝ` turns with its slip `v_t`: a slip `δ` across
    /// `ŝ` turns the friction by `μ_d N δ / |v_t|`, which changes the tangential row
    /// accelerations by `W_TT` times that (`W_TT`: `W` over the sliding contacts' tangential
    /// rows). Linearised, the slip across its direction decays at a rate up to
    /// `κ = ‖W_TT‖∞ · max μ_d N / |v_t|` — stiff at low slip speeds, and RK4 is stable only for
    /// `h κ ≲ 2.8`. A brick sliding slowly on four corners showed it: at `h κ ≈ 36` its yaw,
    /// seeded by rounding, grew from 1e-11 to 5e-3 rad/s in two steps, the corners slid
    /// sideways, the brick ran 2.5 % fast and its energy books were off by 8e-5 J. So an
    /// instance with a slowly sliding contact takes steps of at most
    /// [`STABLE_STEP_FACTOR`]` / κ` (2 / κ), the slip taken at least `v_roll` and the contacts
    /// whose friction keeps its frozen direction over the step ([`follows`](Self::follows))
    /// left out of the `max`.
    pub(super) fn stable_step(
        &self,
        contacts: &InstanceContacts,
        modes: &[ContactMode],
        multipliers: &DVector<f64>,
    ) -> f64 {
        let w = contacts.space.delassus();
        let rows = contacts.space.contacts();
        let mut rate = 0.0f64;
        for (c, ((r, mode), k)) in rows.iter().zip(modes).zip(&self.coefficients).enumerate() {
            if let ContactMode::Slide { .. } = mode {
                let speed = contacts.velocity[r[0]].hypot(contacts.velocity[r[1]]);
                // A contact whose friction keeps its frozen direction over the step (its
                // slip was under v_roll at the step's start) feeds nothing back: not stiff.
                // Such a contact may stay there long (impending beside sticking ones, never
                // armed); limiting its steps made a brick at rest on a slope take 7 µs steps.
                if !self.follows.get(c).copied().unwrap_or(true) {
                    continue;
                }
                let normal = (-multipliers[r[2]]).max(0.0);
                rate = rate.max(k.mu_dynamic * normal / speed.max(self.tol.v_roll));
            }
        }
        if rate <= 0.0 {
            return f64::INFINITY;
        }
        let sliding = || {
            rows.iter()
                .zip(modes)
                .filter(|(_, m)| matches!(m, ContactMode::Slide { .. }))
                .flat_map(|(r, _)| [r[0], r[1]])
        };
        let norm = sliding()
            .map(|a| sliding().map(|b| w[(a, b)].abs()).sum::<f64>())
            .fold(0.0f64, f64::max);
        STABLE_STEP_FACTOR / (norm * rate)
    }

    /// `values · c`, with `c = v − G u` at the state last assembled: what the prescribed
    /// bodies' motion adds to each row's velocity (zero when every plane is Ground's or at
    /// rest). `c` is built in a buffer kept per thread (this runs at every RK4 stage of the
    /// event path), `G u` summed in nalgebra's matrix-vector order, so the bits are those of
    /// `values.dot(&(v − G * u))`.
    pub(super) fn motion_power(&self, contacts: &InstanceContacts, values: &DVector<f64>) -> f64 {
        thread_local! {
            static MOTION: std::cell::RefCell<DVector<f64>> =
                std::cell::RefCell::new(DVector::zeros(0));
        }
        let g = &self.system.jacobian;
        let (m, nu) = g.shape();
        // On the storage: `g[(r, k)]` is `g_data[r + m k]`, and u is the free bodies' u side by
        // side (indexing both per term took 4 % of a brick study).
        let (g_data, u) = (g.as_slice(), self.state.u.as_flattened());
        let fill = |c: &mut DVector<f64>| {
            super::system::shape_vector(c, m);
            for r in 0..m {
                let mut gu = 0.0;
                for (k, u_k) in u[..nu].iter().enumerate() {
                    let term = g_data[r + m * k] * u_k;
                    gu = if k == 0 { term } else { term + gu };
                }
                c[r] = contacts.velocity[r] - gu;
            }
        };
        MOTION.with(|c| match c.try_borrow_mut() {
            Ok(mut c) => {
                fill(&mut c);
                values.dot(&c)
            }
            Err(_) => {
                let mut c = DVector::zeros(m);
                fill(&mut c);
                values.dot(&c)
            }
        })
    }

    /// One trial step of length `h` from `y`, whose derivative (the first stage) is `k1`, with
    /// the modes fixed: RK4 (error 0), or with error control (`controlled`) Runge–Kutta–Merson
    /// with Simbody's error estimate `|y₁ − ŷ| / 5` relative to `max(1, |y₁|)` over the free
    /// bodies' q and u — the bilateral RKM's stages and estimate (`cpu::integrate`), operation
    /// for operation. The state's quaternions are renormalised.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn trial(
        &mut self,
        controlled: bool,
        t: f64,
        y: &[f64],
        k1: &[f64],
        h: f64,
        modes: &[ContactMode],
        frozen: &[Option<[f64; 2]>],
    ) -> Result<(Vec<f64>, f64)> {
        // The stages' states, one after the other in one buffer; the stages' derivatives in
        // buffers the machine keeps.
        let [mut stage, mut k2, mut k3, mut k4, mut k5] = std::mem::take(&mut self.stages);
        stage.clear();
        stage.resize(y.len(), 0.0);
        // The stage state: `y` plus the increment `combine(j)` of the derivatives so far.
        let set = |stage: &mut [f64], combine: &dyn Fn(usize) -> f64| {
            for (j, (out, x)) in stage.iter_mut().zip(y).enumerate() {
                *out = x + combine(j);
            }
        };
        let out = if controlled {
            set(&mut stage, &|j| h / 3.0 * k1[j]);
            let mut stages = || -> Result<()> {
                self.derivative_into(t + h / 3.0, &stage, modes, frozen, &mut k2)?;
                set(&mut stage, &|j| h / 6.0 * (k1[j] + k2[j]));
                self.derivative_into(t + h / 3.0, &stage, modes, frozen, &mut k3)?;
                set(&mut stage, &|j| h / 8.0 * (k1[j] + 3.0 * k3[j]));
                self.derivative_into(t + h / 2.0, &stage, modes, frozen, &mut k4)?;
                set(&mut stage, &|j| {
                    h * (0.5 * k1[j] - 1.5 * k3[j] + 2.0 * k4[j])
                });
                self.derivative_into(t + h, &stage, modes, frozen, &mut k5)
            };
            stages().map(|()| {
                let y1: Vec<f64> = (0..y.len())
                    .map(|j| y[j] + h / 6.0 * (k1[j] + 4.0 * k4[j] + k5[j]))
                    .collect();
                // ŷ (third order) is the last stage's state, still in `stage`.
                let error = (0..self.layout.losses)
                    .map(|j| ((y1[j] - stage[j]) / 5.0).abs() / y1[j].abs().max(1.0))
                    .fold(0.0f64, f64::max);
                (y1, error)
            })
        } else {
            set(&mut stage, &|j| h / 2.0 * k1[j]);
            let mut stages = || -> Result<()> {
                self.derivative_into(t + h / 2.0, &stage, modes, frozen, &mut k2)?;
                set(&mut stage, &|j| h / 2.0 * k2[j]);
                self.derivative_into(t + h / 2.0, &stage, modes, frozen, &mut k3)?;
                set(&mut stage, &|j| h * k3[j]);
                self.derivative_into(t + h, &stage, modes, frozen, &mut k4)
            };
            stages().map(|()| {
                let y1: Vec<f64> = (0..y.len())
                    .map(|j| y[j] + h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j]))
                    .collect();
                (y1, 0.0)
            })
        };
        self.stages = [stage, k2, k3, k4, k5];
        let (y1, error) = out?;
        Ok((self.finish_step(y1)?, error))
    }

    /// A step's end state: the quaternions renormalised, refused if not finite.
    fn finish_step(&self, mut out: Vec<f64>) -> Result<Vec<f64>> {
        let poses = self.layout.poses;
        for at in (0..self.state.q.len())
            .map(|k| 7 * k)
            .chain((0..self.state.pose.len()).map(|k| poses + 7 * k))
        {
            crate::math::normalize_quaternion(&mut out[at..at + 4]);
        }
        if !out.iter().all(|v| v.is_finite()) {
            return Err(Error::NonFinite {
                instance: self.instance,
                status: crate::batch::status::NONFINITE_STATE,
            });
        }
        Ok(out)
    }

    /// Whether the step from `(y_a, contacts_a)` to `y_b` at `t_b` contains an event, given
    /// the modes, and the contacts at `y_b` (the next step's start, when there is none).
    pub(super) fn has_event(
        &mut self,
        a: &InstanceContacts,
        t_b: f64,
        y_b: &[f64],
        h: f64,
        modes: &[ContactMode],
        frozen: &[Option<[f64; 2]>],
    ) -> Result<(bool, Box<InstanceContacts>)> {
        let b = self.contacts_at(t_b, y_b)?;
        let mut closed = Vec::with_capacity(modes.len());
        for (k, (rows, mode)) in b.space.contacts().iter().zip(modes).enumerate() {
            let [x, y, z] = *rows;
            match mode {
                ContactMode::Open => {
                    let (s_a, v_a) = (a.separation[k], a.velocity[z]);
                    let (s_b, v_b) = (b.separation[k], b.velocity[z]);
                    let dips = || hermite_minimum(s_a, v_a, s_b, v_b, h) <= 0.0;
                    let closes = if s_a > 0.0 {
                        s_b <= 0.0 || dips()
                    } else {
                        // It starts inside the plane's band (as a bounce, a lift-off or a
                        // touching contact the modes left open leaves it). Being below zero is
                        // no event — it would be one at every instant (§6). Inside, it closes
                        // when it approaches faster than a touchdown or stops leaving; out of
                        // the plane, when it dips back.
                        let (v_tol, leaving) = (self.tol.v_tol, v_a > self.tol.v_tol);
                        if s_b <= 0.0 {
                            v_b < -v_tol || (leaving && v_b <= v_tol)
                        } else {
                            dips()
                        }
                    };
                    if closes {
                        return Ok((true, b));
                    }
                }
                ContactMode::Slide { .. } => {
                    let d = frozen[k].unwrap_or([0.0, 0.0]);
                    // Signed, so a slip that passed through zero is seen too.
                    let along = b.velocity[x] * d[0] + b.velocity[y] * d[1];
                    if self.armed[k] && along <= self.tol.v_roll {
                        return Ok((true, b));
                    }
                }
                ContactMode::Stick => {}
            }
            closed.push(*mode != ContactMode::Open);
        }
        if !closed.contains(&true) {
            // Every contact open and none closing: the modes determined with nothing touching
            // are all open (`solve_modes` closes only a touching contact), as they are now.
            return Ok((false, b));
        }
        let determined = self.modes_of(&b, modes, &closed)?;
        let changed = determined
            .iter()
            .zip(modes)
            .any(|(new, old)| std::mem::discriminant(new) != std::mem::discriminant(old));
        Ok((changed, b))
    }

    /// The modes determined at `contacts` from `modes`, touching where `touching`.
    pub(super) fn modes_of(
        &self,
        contacts: &InstanceContacts,
        modes: &[ContactMode],
        touching: &[bool],
    ) -> Result<Vec<ContactMode>> {
        let input: Vec<ModeContact> = contacts
            .space
            .contacts()
            .iter()
            .zip(modes.iter().zip(touching))
            .zip(&self.coefficients)
            .map(|((rows, (mode, touching)), k)| ModeContact {
                coefficients: *k,
                mode: *mode,
                touching: *touching,
                slip: [contacts.velocity[rows[0]], contacts.velocity[rows[1]]],
            })
            .collect();
        Ok(solve_modes(
            &contacts.space,
            &contacts.free_acceleration,
            &input,
            &self.tol,
        )?
        .modes)
    }
}

/// The least value of the cubic Hermite interpolant of `s` at its interior critical points over
/// a step of length `h` with values `s_a`, `s_b` and rates `v_a`, `v_b` at its ends (∞ if none):
/// a whole dip below the plane inside one step is still seen (§6).
fn hermite_minimum(s_a: f64, v_a: f64, s_b: f64, v_b: f64, h: f64) -> f64 {
    // s(τ) = s_a + h v_a τ + (3Δ − h(2v_a + v_b)) τ² + (h(v_a + v_b) − 2Δ) τ³, τ ∈ [0, 1].
    let delta = s_b - s_a;
    let (c1, c2, c3) = (
        h * v_a,
        3.0 * delta - h * (2.0 * v_a + v_b),
        h * (v_a + v_b) - 2.0 * delta,
    );
    let value = |t: f64| s_a + t * (c1 + t * (c2 + t * c3));
    // The ends are checked by the caller (`s_b ≤ 0`); `s_a` may sit a rounding below zero just
    // after a bounce, which is not an event.
    let mut least = f64::INFINITY;
    // s'(τ) = c1 + 2 c2 τ + 3 c3 τ².
    let (qa, qb, qc) = (3.0 * c3, 2.0 * c2, c1);
    let roots: Vec<f64> = if qa.abs() < 1e-300 {
        if qb.abs() > 0.0 {
            vec![-qc / qb]
        } else {
            vec![]
        }
    } else {
        let disc = qb * qb - 4.0 * qa * qc;
        if disc < 0.0 {
            vec![]
        } else {
            let r = disc.sqrt();
            vec![(-qb - r) / (2.0 * qa), (-qb + r) / (2.0 * qa)]
        }
    };
    for t in roots {
        if t > 0.0 && t < 1.0 {
            least = least.min(value(t));
        }
    }
    least
}
