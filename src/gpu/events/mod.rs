//! Event-driven stepping of unilateral contact on the GPU: the twin of
//! `cpu::unilateral::run_batch_resuming`. Two kernels share the machine
//! (`shaders/event_trial.wgsl`): the one-contact kernel (`shaders/event_step.wgsl`, stage 1 of
//! `docs/gpu-unilateral.md`) for one free body whose only rows are one unilateral contact's, and
//! the several-contact kernel (`shaders/event_contacts.wgsl`, stage 2) for up to
//! [`MAX_CONTACTS`](crate::gpu::contact_laws::general::MAX_CONTACTS) contacts (a
//! `SphereOnPlaneContact` with rolling rows, or any constraint reporting slip x, slip y and
//! normal rows) on any free bodies beside up to
//! [`MAX_BILATERAL`](crate::gpu::contact_laws::general::MAX_BILATERAL) bilateral rows — bricks
//! on their corners, several balls, a ball beside a rail — with the laws of
//! `gpu::contact_laws::general`. Planes are Ground, constant-law or driven bodies.
//!
//! Each instance runs the CPU's event machine — RK4 steps with the mode fixed (or, for calls
//! under error control, `EventOptions::accuracy`, Runge–Kutta–Merson steps each accepted within
//! the accuracy, in a second build of the kernel), the event test at each step's end, bisection
//! on real steps to `t_tol`, and at the event the impact law, the slip → stick projection and
//! the mode determined again (`shaders/contact_laws.wgsl`) — inside
//! the kernel, with no host round trip per event: an instance is a state machine whose progress
//! (phase, mode, bracket, records) lives in carry columns, a dispatch runs a bounded number of
//! trials of it, and the host submits rounds of dispatches until every instance is done,
//! reading back the carry and the state columns after each round. An instance's events do not
//! shorten the others' steps.

mod carry;
mod host;
mod source;

pub use carry::{
    CarryLayout, EVENT_CARRY, EVENT_WITHHELD, carry_width, event_constants, general_event_constants,
};
pub use source::{
    EVENT_CONTACTS, EVENT_CONTACTS_TRIAL, EVENT_MACHINE, EVENT_MACHINE_GENERAL, EVENT_STEP,
    EVENT_TRIAL, assembly_loops, event_kernel_source, general_event_kernel_source,
};

use std::sync::Arc;

use crate::batch::Batch;
use crate::contact::{
    Coefficients, ContactRecord, EventOptions, MAX_BISECTIONS, MIN_STEP_FRACTION,
};
use crate::error::{Error, Result};
use crate::gpu::buffers::layout_entry;
use crate::gpu::cache::KernelLayout;
use crate::gpu::contact_laws::general::{SOFTWARE_LOOP_BUDGET, SpaceShape};
use crate::gpu::device::GpuDevice;
use crate::gpu::evaluate::GpuEvaluator;
use crate::gpu::layout::Layout;
use crate::gpu::shader::KernelSource;
use crate::gpu::step::readback::state_columns;
use crate::gpu::{GpuOptions, Precision};
use crate::model::ConstraintId;
use crate::step::MAX_ADAPTIVE_ATTEMPTS;

/// The `option` of the error [`GpuEventStepper::new`] and [`GpuEventStepper::with_contacts`]
/// refuse a template outside the kernels' reach with (a caller that has the CPU's event path to
/// fall back on matches it).
pub const OUTSIDE_STAGE_ONE: &str = "GPU unilateral contact";

/// Trials (RK4 steps, bisection points, settlings) per instance per dispatch: as the stepping
/// kernel's, short enough for lavapipe's JIT (the several-contact kernel on a software adapter
/// takes one).
const TRIALS_PER_DISPATCH: u32 = 16;
/// Most dispatches in one submit.
const MAX_DISPATCHES_PER_SUBMIT: usize = 1024;

/// What one instance's GPU run did, for an instance with one contact (the one-contact
/// `cpu::unilateral::EventRun`, with the events counted rather than listed: the kernel keeps no
/// list).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuEventRun {
    /// The contact's record.
    pub contact: ContactRecord,
    /// Events located (impacts, mode changes).
    pub events: usize,
    /// Steps committed (RK4, or Merson under error control; rejected trials and bisection
    /// points not counted).
    pub steps: usize,
    /// Penetration at the end (m, ≥ 0).
    pub penetration: f64,
    /// The penetration exceeds `p_tol`: the instance is flagged `status::CONSTRAINT_VIOLATED`.
    pub violated: bool,
}

/// What one instance's GPU run did, any number of contacts (`cpu::unilateral::EventRun` with
/// the events counted rather than listed).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuEventRuns {
    /// Per contact, its record.
    pub contacts: Vec<ContactRecord>,
    /// Events located (impacts, mode changes).
    pub events: usize,
    /// Steps committed (RK4, or Merson under error control; rejected trials and bisection
    /// points not counted).
    pub steps: usize,
    /// Deepest penetration of a contact at the end (m, ≥ 0).
    pub penetration: f64,
    /// The penetration exceeds `p_tol`: the instance is flagged `status::CONSTRAINT_VIOLATED`.
    pub violated: bool,
    /// The most loop iterations one dispatch of it ran, as the several-contact kernel counts
    /// them (how near it came to a software adapter's budget; the one-contact kernel counts
    /// only a few loops of its own).
    pub most_loop_iterations: u64,
}

/// How one instance's call ended on the GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuEventOutcome {
    /// It ran the call; its state is stored in the batch.
    Ran(GpuEventRuns),
    /// It was halted before the call, or failed in it (kept at its state, flagged
    /// `status::STEP_FAILED`), as the CPU's `None`.
    Stopped,
    /// The kernel gave it back: on a software adapter one of its dispatches passed the loop
    /// budget (`gpu::contact_laws::general::SOFTWARE_LOOP_BUDGET`), so its loops may have been
    /// cut short. Its state is left at the call's start, for the caller to run on the CPU's
    /// event path (`backend::UnilateralRunner` does).
    Withheld,
}

/// Which event kernel a template takes.
#[derive(Debug, Clone, PartialEq)]
enum Kernel {
    /// One contact, its rows (x, y, z) the template's `rows` (stage 1).
    One { rows: [usize; 3] },
    /// Several contacts and bilateral rows: the contact space's shape and the template row of
    /// each of its rows in canonical order (stage 2).
    General {
        shape: SpaceShape,
        space_rows: Vec<usize>,
    },
}

/// A chunk's event buffers: its launch uniform and carry, bound to its input buffer.
struct EventChunk {
    launch: wgpu::Buffer,
    carry: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

/// The event-driven stepping kernel of one template.
pub struct GpuEventStepper {
    evaluator: GpuEvaluator,
    contacts: Vec<ConstraintId>,
    kernel: Kernel,
    carry: CarryLayout,
    /// The event kernel's workgroup size, trials per dispatch and loop budget: one instance per
    /// workgroup, one trial per dispatch and `SOFTWARE_LOOP_BUDGET` for the several-contact
    /// kernel on a software adapter; else the evaluator's workgroups, 16 trials, no budget.
    workgroup: u32,
    trials: u32,
    loop_budget: u32,
    kernel_layout: KernelLayout,
    /// The kernel with fixed RK4 steps (`[0]`) and the one under error control (`[1]`), each
    /// built on first use.
    pipelines: [Option<wgpu::ComputePipeline>; 2],
    params: wgpu::Buffer,
    chunks: Vec<EventChunk>,
    bound_to: u64,
    staging: Option<crate::gpu::buffers::Staging>,
    readback: Vec<Vec<f64>>,
}

impl std::fmt::Debug for GpuEventStepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEventStepper")
            .field("evaluator", &self.evaluator)
            .field("contacts", &self.contacts)
            .field("kernel", &self.kernel)
            .finish()
    }
}

/// The error a template outside the event kernels' reach is refused with.
fn unsupported(reason: String, accepted: &str) -> Error {
    Error::InvalidOption {
        option: OUTSIDE_STAGE_ONE,
        value: reason,
        accepted: accepted.into(),
    }
}

const STAGE_ONE: &str = "one free body whose only rows are one unilateral contact's slip and \
                         normal rows (stage 1 of docs/gpu-unilateral.md); others run on the CPU";
/// PCI vendor id of NVIDIA adapters.
const NVIDIA: u32 = 0x10de;

/// Why the several-contact kernel is not built in f64 on NVIDIA adapters: on an H200 (driver
/// 580.159.04, 2026-11-26) its first dispatch lost the device, at any instance count, step
/// count and workgroup size, while its f32 twin and the f64 one-contact kernel ran and matched
/// the CPU; lavapipe runs the f64 kernel and matches the CPU to 1e-8. A lost device ends every
/// GPU call of the process, so until the cause is found such batches run on the CPU's event
/// path (`UnilateralRunner` says so in its note).
pub const NVIDIA_F64_SEVERAL_CONTACTS: &str = concat!(
    "f64 on an NVIDIA adapter (the f64 several-contact kernel lost the device at its ",
    "first dispatch on an H200, driver 580.159.04)"
);

/// Whether [`GpuEventStepper::with_contacts`] refuses the several-contact kernel in f64 on
/// `device`: on NVIDIA hardware ([`NVIDIA_F64_SEVERAL_CONTACTS`] says why).
pub fn refuses_f64_several_contacts(device: &GpuDevice) -> bool {
    device.info.vendor == NVIDIA && device.info.device_type != wgpu::DeviceType::Cpu
}

/// What the several-contact kernel takes.
fn stage_two() -> String {
    use crate::gpu::contact_laws::general::{MAX_BILATERAL, MAX_CONTACTS};
    format!(
        "1 to {MAX_CONTACTS} unilateral contacts with slip and normal rows and at most \
         {MAX_BILATERAL} bilateral rows beside them (docs/gpu-unilateral.md); others run on the CPU"
    )
}

impl GpuEventStepper {
    /// The one-contact kernel for `batch`'s template with `contact` as its unilateral contact.
    /// Refused with an error naming what is outside stage 1: more than one free body, rows
    /// other than the contact's three, a contact without slip and normal rows
    /// ([`with_contacts`](Self::with_contacts) takes those).
    pub fn new(
        device: Arc<GpuDevice>,
        batch: &Batch,
        contact: ConstraintId,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let free = batch.template().free_bodies().len();
        if free != 1 {
            return Err(unsupported(format!("{free} free bodies"), STAGE_ONE));
        }
        let evaluator = GpuEvaluator::new(device, batch, precision, options)?;
        let space_rows = contact_rows(batch, &evaluator.layout, &[contact], STAGE_ONE)?;
        if evaluator.layout.rows != 3 {
            return Err(unsupported(
                format!(
                    "{} rows in all, 3 of them the contact's",
                    evaluator.layout.rows
                ),
                STAGE_ONE,
            ));
        }
        let rows = [space_rows[0], space_rows[1], space_rows[2]];
        Self::build(evaluator, vec![contact], Kernel::One { rows })
    }

    /// The event kernel for `batch`'s template with `contacts` (in this order) as its
    /// unilateral contacts and every other row bilateral: the one-contact kernel where it
    /// applies, else the several-contact one. Refused with an error naming what is outside
    /// their reach: no contact or more than
    /// [`MAX_CONTACTS`](crate::gpu::contact_laws::general::MAX_CONTACTS), more than [`MAX_BILATERAL`](crate::gpu::contact_laws::general::MAX_BILATERAL)
    /// bilateral rows, a contact without slip and normal rows, a repeated contact.
    pub fn with_contacts(
        device: Arc<GpuDevice>,
        batch: &Batch,
        contacts: &[ConstraintId],
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let free = batch.template().free_bodies().len();
        // The one-contact kernel where it applies (it refuses other rows beside the contact);
        // any other error is the caller's.
        if contacts.len() == 1 && free == 1 {
            match Self::new(device.clone(), batch, contacts[0], precision, options) {
                Ok(one) => return Ok(one),
                Err(Error::InvalidOption {
                    option: OUTSIDE_STAGE_ONE,
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
        }
        // On a software adapter the several-contact kernel runs one instance per workgroup, so
        // the evaluator's chunks are sized for that too (at most a dispatch's workgroups each).
        let software = device.info.device_type == wgpu::DeviceType::Cpu;
        let options = if software {
            GpuOptions {
                workgroup_size: Some(1),
                ..options
            }
        } else {
            options
        };
        if precision == Precision::F64 && refuses_f64_several_contacts(&device) {
            return Err(unsupported(
                NVIDIA_F64_SEVERAL_CONTACTS.into(),
                &format!("{}; in f32 on NVIDIA adapters", stage_two()),
            ));
        }
        let evaluator = GpuEvaluator::new(device, batch, precision, options)?;
        let layout = &evaluator.layout;
        let mut space_rows = contact_rows(batch, layout, contacts, &stage_two())?;
        let bilateral: Vec<usize> = (0..layout.rows)
            .filter(|r| !space_rows.contains(r))
            .collect();
        let shape = SpaceShape::new(contacts.len(), bilateral.len())
            .map_err(|e| unsupported(e.to_string(), &stage_two()))?;
        space_rows.extend(bilateral);
        Self::build(
            evaluator,
            contacts.to_vec(),
            Kernel::General { shape, space_rows },
        )
    }

    fn build(evaluator: GpuEvaluator, contacts: Vec<ConstraintId>, kernel: Kernel) -> Result<Self> {
        let software = evaluator.device.info.device_type == wgpu::DeviceType::Cpu;
        let (workgroup, trials, loop_budget) = match kernel {
            Kernel::General { .. } if software => (1, 1, SOFTWARE_LOOP_BUDGET),
            _ => (evaluator.workgroup_size, TRIALS_PER_DISPATCH, u32::MAX),
        };
        let d = &evaluator.device.device;
        let kernel_layout = evaluator.device.kernels.layout(
            d,
            "simbatch events",
            &[
                layout_entry(0, wgpu::BufferBindingType::Uniform),
                layout_entry(1, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(2, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(4, wgpu::BufferBindingType::Storage { read_only: true }),
            ],
        );
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch event parameters"),
            size: 32,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Self {
            evaluator,
            carry: CarryLayout::new(contacts.len()),
            contacts,
            kernel,
            workgroup,
            trials,
            loop_budget,
            kernel_layout,
            pipelines: [None, None],
            params,
            chunks: Vec::new(),
            bound_to: 0,
            staging: None,
            readback: Vec::new(),
        })
    }

    /// Whether this is the several-contact kernel (stage 2).
    pub fn is_general(&self) -> bool {
        matches!(self.kernel, Kernel::General { .. })
    }

    /// The kernel's whole source: with fixed RK4 steps, or under error control (`adaptive`,
    /// calls whose `EventOptions::accuracy` is set).
    pub fn kernel_source(&self, adaptive: bool) -> KernelSource {
        let gpu = &self.evaluator;
        match &self.kernel {
            Kernel::One { rows } => {
                event_kernel_source(gpu.precision, &gpu.layout, self.workgroup, *rows, adaptive)
            }
            Kernel::General { shape, space_rows } => general_event_kernel_source(
                gpu.precision,
                &gpu.layout,
                self.workgroup,
                *shape,
                space_rows,
                self.loop_budget,
                adaptive,
            ),
        }
    }

    /// Bytes of GPU memory these kernels hold (the evaluator's, the carry, the staging buffer).
    pub fn device_bytes(&self) -> u64 {
        let chunks: u64 = self
            .chunks
            .iter()
            .map(|c| c.carry.size() + c.launch.size())
            .sum();
        self.evaluator.device_bytes() + chunks + self.staging.as_ref().map_or(0, |s| s.size())
    }

    /// Runs every instance of `batch` for `duration` with its contact's coefficients
    /// `coefficients[i]`, resuming from `previous[i]` (its mode and slip → stick readiness; `None`:
    /// afresh), as `cpu::unilateral::run_batch_resuming` does, on a kernel with one contact.
    /// Returns each instance's run, `None` for one halted before the call or failed in it (kept
    /// at its state, flagged `status::STEP_FAILED`); one ending deeper in its plane than `p_tol`
    /// is flagged `status::CONSTRAINT_VIOLATED`. An instance the kernel withholds
    /// ([`GpuEventOutcome::Withheld`], only the several-contact kernel on a software adapter
    /// does) is an error here: [`run_contacts`](Self::run_contacts) hands it back.
    pub fn run(
        &mut self,
        batch: &mut Batch,
        coefficients: &[Coefficients],
        duration: f64,
        options: &EventOptions,
        previous: &[Option<ContactRecord>],
    ) -> Result<Vec<Option<GpuEventRun>>> {
        if self.contacts.len() != 1 {
            return Err(Error::Dimension {
                what: "unilateral contacts of GpuEventStepper::run (use run_contacts)",
                got: self.contacts.len(),
                expected: 1,
            });
        }
        let coefficients: Vec<Vec<Coefficients>> = coefficients.iter().map(|k| vec![*k]).collect();
        let previous: Vec<Option<Vec<ContactRecord>>> =
            previous.iter().map(|p| p.map(|r| vec![r])).collect();
        let outcomes = self.run_contacts(batch, &coefficients, duration, options, &previous)?;
        outcomes
            .into_iter()
            .map(|o| match o {
                GpuEventOutcome::Ran(r) => Ok(Some(GpuEventRun {
                    contact: r.contacts[0],
                    events: r.events,
                    steps: r.steps,
                    penetration: r.penetration,
                    violated: r.violated,
                })),
                GpuEventOutcome::Stopped => Ok(None),
                GpuEventOutcome::Withheld => Err(Error::Gpu(
                    "the event kernel withheld an instance (use run_contacts)".into(),
                )),
            })
            .collect()
    }

    /// Runs every instance of `batch` for `duration`, instance `i` with its contacts'
    /// coefficients `coefficients[i]` (one per contact, in the order the kernel was built
    /// with), resuming from `previous[i]` (one record per contact; `None`: afresh), as
    /// `cpu::unilateral::run_batch_resuming` does. Returns how each instance's call ended.
    pub fn run_contacts(
        &mut self,
        batch: &mut Batch,
        coefficients: &[Vec<Coefficients>],
        duration: f64,
        options: &EventOptions,
        previous: &[Option<Vec<ContactRecord>>],
    ) -> Result<Vec<GpuEventOutcome>> {
        let n = batch.len();
        for (what, got) in [
            (
                "contact coefficients (one entry per instance)",
                coefficients.len(),
            ),
            (
                "previous contact records (one entry per instance)",
                previous.len(),
            ),
        ] {
            if got != n {
                return Err(Error::Dimension {
                    what,
                    got,
                    expected: n,
                });
            }
        }
        let k = self.contacts.len();
        for (i, per) in coefficients.iter().enumerate() {
            if per.len() != k {
                return Err(Error::per_contact("contact coefficients", i, per.len(), k));
            }
            if let Some(records) = &previous[i]
                && records.len() != k
            {
                return Err(Error::per_contact(
                    "previous contact records",
                    i,
                    records.len(),
                    k,
                ));
            }
            for c in per {
                c.check()?;
            }
        }
        options.check(duration)?;
        let adaptive = options.accuracy.is_some();
        self.prepare(batch, adaptive)?;
        self.write_params(duration, options);
        let columns = state_columns(batch);
        let state_width: usize = columns.iter().map(|(_, w)| w).sum();
        self.bind_chunks(batch, state_width)?;
        self.write_carry(batch, coefficients, options, previous)?;
        let steps = duration / options.step;
        let events = options.max_events as f64 + 1.0;
        let most_trials = if adaptive {
            // Every step trial, accepted or rejected, is one of MAX_ADAPTIVE_ATTEMPTS.
            MAX_ADAPTIVE_ATTEMPTS as f64 + 2.0 + events * (MAX_BISECTIONS as f64 + 3.0)
        } else {
            steps / MIN_STEP_FRACTION + 2.0 + events * (MAX_BISECTIONS as f64 + 3.0)
        };
        self.dispatch_until_done(&columns, steps + 16.0, most_trials, adaptive)?;
        self.store(batch, state_width, duration)
    }
}

/// The template rows of `contacts`' (x, y, z) rows in order, each contact a constraint of the
/// kernel's layout with slip and normal rows, none repeated.
fn contact_rows(
    batch: &Batch,
    layout: &Layout,
    contacts: &[ConstraintId],
    accepted: &str,
) -> Result<Vec<usize>> {
    let template = batch.template();
    let mut rows = Vec::with_capacity(3 * contacts.len());
    for (k, contact) in contacts.iter().enumerate() {
        if contacts[..k].contains(contact) {
            return Err(unsupported(
                format!("constraint {} is named twice", contact.0),
                accepted,
            ));
        }
        let slot = template.constraint(*contact)?;
        let [Some(x), Some(y), Some(z)] = slot.constraint.report_slots() else {
            return Err(unsupported(
                format!(
                    "{} has no slip and normal rows",
                    slot.constraint.kind_name()
                ),
                accepted,
            ));
        };
        let placement = layout.placements.get(contact.0).ok_or_else(|| {
            unsupported("a contact is not in the kernel's layout".into(), accepted)
        })?;
        if placement.rows != 3 {
            return Err(unsupported(
                format!("a contact with {} rows", placement.rows),
                accepted,
            ));
        }
        let first = placement.first_row;
        rows.extend([first + x, first + y, first + z]);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::{GROUND, PointOnPlaneContact, SphereOnPlaneContact, SystemTemplate};

    #[test]
    fn the_event_kernel_validates_in_both_precisions() {
        let mut t = SystemTemplate::new();
        let ball = t.add_free_body("ball");
        t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true))
            .unwrap();
        let layout = Layout::new(&t).unwrap();
        for precision in [Precision::F32, Precision::F64] {
            for adaptive in [false, true] {
                let source = event_kernel_source(precision, &layout, 64, [0, 1, 2], adaptive);
                if let Err(e) = source.check() {
                    panic!("{precision:?}, adaptive {adaptive}: {e}");
                }
            }
        }
    }

    #[test]
    fn the_several_contact_event_kernel_validates_for_a_brick_and_two_balls() {
        let mut brick = SystemTemplate::new();
        let body = brick.add_free_body("brick");
        for (x, y) in [(0.4, 0.25), (0.4, -0.25), (-0.4, 0.25), (-0.4, -0.25)] {
            let corner = PointOnPlaneContact::new(GROUND, body).with_follower_point([x, y, -0.1]);
            brick.add_constraint(corner).unwrap();
        }
        let mut balls = SystemTemplate::new();
        for name in ["a", "b"] {
            let ball = balls.add_free_body(name);
            balls
                .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true))
                .unwrap();
        }
        for (template, contacts) in [(brick, 4), (balls, 2)] {
            let layout = Layout::new(&template).unwrap();
            let shape = SpaceShape::new(contacts, 0).unwrap();
            let rows: Vec<usize> = (0..3 * contacts).collect();
            for precision in [Precision::F32, Precision::F64] {
                for adaptive in [false, true] {
                    let source = general_event_kernel_source(
                        precision, &layout, 1, shape, &rows, 60_000, adaptive,
                    );
                    if let Err(e) = source.check() {
                        panic!("{contacts} contacts, {precision:?}, adaptive {adaptive}: {e}");
                    }
                }
            }
            assert!(assembly_loops(&layout) > 0);
        }
    }
}
