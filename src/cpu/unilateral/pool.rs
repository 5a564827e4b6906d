//! An instance's event machine at its stored state (`machine_at`), and the machine's buffers,
//! handed from one machine to the next on the same thread.
//!
//! A machine lives for one instance and one call: a study recording at intervals, a rollout
//! stepping one control period at a time or an environment's toss each build one per instance
//! and call. Its buffers — the assembled system, the stages' states, and two contact spaces —
//! are the same sizes from one instance of a template to the next, so a machine dropped leaves
//! them here and the next one on its thread starts from them instead of allocating: what a
//! step-by-step rollout of bouncing balls spent in the allocator (about a fifth of its
//! instructions, `docs/performance-log.md`). Every buffer is reshaped and overwritten before it
//! is read (`Batch::assemble_into`, `InstanceContacts::build_in`, which the tests hold to a
//! fresh build's bits), so what a machine computes does not depend on what ran before it on
//! the thread.

use std::cell::RefCell;

use nalgebra::DVector;

use super::machine::{Layout, Machine};
use super::phase::RowSet;
use super::{EventOptions, InstanceContacts, Tolerances, UnilateralContact};
use crate::batch::Batch;
use crate::constraints::BodyKinematics;
use crate::cpu::evaluate::InstanceSystem;
use crate::error::Result;
use crate::math::vec3;

/// Most buffer sets a thread keeps: one machine at a time runs on a thread (a call's
/// instances run one after another on each), and a spare for one more.
const KEPT_PER_THREAD: usize = 2;

/// What a machine keeps for its buffers alone.
pub(super) struct MachineBuffers {
    pub(super) system: InstanceSystem,
    pub(super) kinematics: Vec<BodyKinematics>,
    pub(super) assembled: Vec<u64>,
    pub(super) sets: Vec<RowSet>,
    pub(super) stage_multipliers: DVector<f64>,
    pub(super) stages: [Vec<f64>; 5],
    /// Contact spaces no longer used (their `assembly` reset to 0, which no assembly of a
    /// machine has: never handed out as a state's own).
    pub(super) spare: Option<Box<InstanceContacts>>,
    pub(super) reserve: Option<Box<InstanceContacts>>,
}

impl MachineBuffers {
    fn empty() -> Self {
        Self {
            system: InstanceSystem::empty(),
            kinematics: Vec::new(),
            assembled: Vec::new(),
            sets: Vec::new(),
            stage_multipliers: DVector::zeros(0),
            stages: Default::default(),
            spare: None,
            reserve: None,
        }
    }

    /// The buffers a machine on this thread left, or empty ones.
    pub(super) fn take() -> Self {
        KEPT.try_with(|kept| kept.try_borrow_mut().ok().and_then(|mut k| k.pop()))
            .ok()
            .flatten()
            .unwrap_or_else(Self::empty)
    }
}

/// The event machine of instance `i` at its stored state, and its `y` ([`Layout`]), the
/// friction losses zero.
pub(super) fn machine_at<'a>(
    batch: &'a Batch,
    i: usize,
    contacts: &[UnilateralContact],
    options: &EventOptions,
) -> Result<(Machine<'a>, Vec<f64>)> {
    let state = batch.state_of(i);
    let layout = Layout::new(state.q.len(), state.pose.len(), contacts.len());
    let mut y: Vec<f64> = Vec::with_capacity(layout.len);
    y.extend(state.q.iter().flatten());
    y.extend(state.u.iter().flatten());
    // Each contact's friction loss, integrated with the state.
    y.extend(std::iter::repeat_n(0.0, contacts.len()));
    y.extend(state.pose.iter().flatten());
    y.extend(state.velocity.iter().flatten());
    y.extend_from_slice(&state.work);
    let gravity = vec3(&batch.gravity_column()[i]).norm();
    // The buffers the last machine on this thread left (`pool.rs`).
    let buffers = MachineBuffers::take();
    let mut machine = Machine {
        batch,
        instance: i,
        ids: contacts.iter().map(|c| c.constraint).collect(),
        coefficients: contacts.iter().map(|c| c.coefficients).collect(),
        tol: Tolerances::f64(options.constraint_tolerance, gravity, 1.0, 0.0, 0.0),
        state,
        system: buffers.system,
        kinematics: buffers.kinematics,
        layout,
        armed: vec![false; contacts.len()],
        follows: vec![true; contacts.len()],
        spare: buffers.spare,
        reserve: buffers.reserve,
        assemblies: 0,
        assembled_time: 0.0,
        assembled: buffers.assembled,
        sets: buffers.sets,
        stage_multipliers: buffers.stage_multipliers,
        stages: buffers.stages,
    };
    let t = machine.state.time;
    // Kept as the spare: the call's first contact space (settling, or the multipliers) is
    // at this same state, so it is handed out again instead of assembled anew.
    let at_start = machine.contacts_at(t, &y)?;
    machine.recycle(at_start);
    let mass = machine
        .system
        .mass_blocks
        .iter()
        .fold(0.0f64, |m, b| m.max(b[(5, 5)]));
    machine.tol = Tolerances::f64(
        options.constraint_tolerance,
        gravity,
        mass,
        options.capture_speed,
        options.roll_speed,
    );
    Ok((machine, y))
}

thread_local! {
    static KEPT: RefCell<Vec<MachineBuffers>> = const { RefCell::new(Vec::new()) };
}

impl Machine<'_> {
    /// Keeps `contacts`, no longer used, as the spare: [`contacts_at`](Self::contacts_at)
    /// hands it out again for its own state, or builds the next contact space in its buffers.
    /// The spare it replaces is kept too, for a contact space built while the spare is in use
    /// (a step's later stages while its start's space is held).
    pub(super) fn recycle(&mut self, contacts: Box<InstanceContacts>) {
        if let Some(older) = self.spare.replace(contacts) {
            self.reserve = Some(older);
        }
    }
}

impl Drop for Machine<'_> {
    fn drop(&mut self) {
        let mut buffers = MachineBuffers {
            system: std::mem::replace(&mut self.system, InstanceSystem::empty()),
            kinematics: std::mem::take(&mut self.kinematics),
            assembled: std::mem::take(&mut self.assembled),
            sets: std::mem::take(&mut self.sets),
            stage_multipliers: std::mem::replace(&mut self.stage_multipliers, DVector::zeros(0)),
            stages: std::mem::take(&mut self.stages),
            spare: self.spare.take(),
            reserve: self.reserve.take(),
        };
        for contacts in [&mut buffers.spare, &mut buffers.reserve]
            .into_iter()
            .flatten()
        {
            contacts.assembly = 0;
        }
        // At a thread's exit the pool may be gone: the buffers are then dropped.
        let _ = KEPT.try_with(|kept| {
            if let Ok(mut kept) = kept.try_borrow_mut()
                && kept.len() < KEPT_PER_THREAD
            {
                kept.push(buffers);
            }
        });
    }
}
