//! The event kernels' sources: the stepping kernel (RK4, or RKM for a kernel under error
//! control) with the event constants, the laws and the machine of the one-contact kernel
//! (stage 1) or of the several-contact one (stage 2), and the loop bound the several-contact
//! kernel counts for the stepping kernel's code.

use super::carry::{event_constants, general_event_constants};
use crate::gpu::Precision;
use crate::gpu::contact_laws::general::{
    CONTACT_IMPACT_GENERAL, CONTACT_LAWS_GENERAL, CONTACT_PHASES_GENERAL, SpaceShape,
};
use crate::gpu::layout::Layout;
use crate::gpu::shader::{INTEGRATOR_RK4, INTEGRATOR_RKM};
use crate::gpu::shader::{KernelSource, stepping_source};

/// The stepping kernel an event kernel is built on: its `INTEGRATOR` is RKM where the kernel
/// runs under error control (`adaptive`: Merson steps, each accepted within
/// `EventOptions::accuracy`), else RK4 (fixed steps).
fn stepping_base(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    adaptive: bool,
) -> KernelSource {
    let integrator = if adaptive {
        INTEGRATOR_RKM
    } else {
        INTEGRATOR_RK4
    };
    stepping_source(precision, layout, workgroup_size, integrator, false)
}

/// `shaders/event_step.wgsl`.
pub const EVENT_STEP: &str = include_str!("../../../shaders/event_step.wgsl");
/// `shaders/event_trial.wgsl`.
pub const EVENT_TRIAL: &str = include_str!("../../../shaders/event_trial.wgsl");
/// `shaders/event_machine.wgsl`.
pub const EVENT_MACHINE: &str = include_str!("../../../shaders/event_machine.wgsl");

/// `shaders/event_contacts.wgsl`.
pub const EVENT_CONTACTS: &str = include_str!("../../../shaders/event_contacts.wgsl");
/// `shaders/event_contacts_trial.wgsl`.
pub const EVENT_CONTACTS_TRIAL: &str = include_str!("../../../shaders/event_contacts_trial.wgsl");
/// `shaders/event_machine_general.wgsl`.
pub const EVENT_MACHINE_GENERAL: &str = include_str!("../../../shaders/event_machine_general.wgsl");

/// The event kernel for a template's layout whose contact has the rows `rows` (x, y, z): the
/// stepping kernel (RK4, or RKM under error control: `adaptive`), the event constants, the
/// contact laws and `event_step.wgsl`.
pub fn event_kernel_source(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    rows: [usize; 3],
    adaptive: bool,
) -> KernelSource {
    let mut source = stepping_base(precision, layout, workgroup_size, adaptive);
    source.append("the event constants", &event_constants(rows));
    source.append(
        "contact_common.wgsl",
        crate::gpu::contact_laws::CONTACT_COMMON,
    );
    source.append("contact_laws.wgsl", crate::gpu::contact_laws::CONTACT_LAWS);
    source.append("event_machine.wgsl", EVENT_MACHINE);
    source.append("event_step.wgsl", EVENT_STEP);
    source.append("event_trial.wgsl", EVENT_TRIAL);
    source
}

/// The kinds of constraint whose rows run no loop of more than [`BUILT_IN_ROW_LOOPS`]
/// iterations per evaluation (the built-in ones: `point_to_ground` loops over its normals).
const BUILT_IN_KINDS: [&str; 3] = ["sphere_on_plane", "point_on_plane", "point_to_ground"];
const BUILT_IN_ROW_LOOPS: usize = 64;
/// What [`assembly_loops`] allows a custom constraint's rows or a driven body's law for loops
/// of its own per evaluation.
const OWN_LOOPS: usize = 1024;

/// A bound on the loop iterations of one assembly of the contact space and one pass of the
/// several-contact trial in the stepping kernel's code, which does not count its own loops (the
/// kernel adds it at every assembly): each free body's walk, each constraint's rows and
/// Jacobian entries, the finiteness checks, `mass_solve`, `gram_matrix` and two `minv_gt_times`
/// at the template's sizes, every iteration counted (loops the compiler unrolls included, so it
/// is never below what lavapipe's limiter counts); a built-in constraint's own loops at most
/// `BUILT_IN_ROW_LOOPS`, a custom constraint's or a driven body's law's `OWN_LOOPS`.
pub fn assembly_loops(layout: &Layout) -> u32 {
    let (rows, nu) = (layout.rows, layout.nu);
    let free = nu / 6;
    let own: usize = layout
        .placements
        .iter()
        .map(|p| {
            if BUILT_IN_KINDS.contains(&p.kind.as_str()) {
                BUILT_IN_ROW_LOOPS
            } else {
                OWN_LOOPS
            }
        })
        .sum::<usize>()
        + layout.bodies.iter().filter(|b| b.motion.is_some()).count() * OWN_LOOPS;
    let walks = 6 * layout.bodies.len() + 6 * free;
    let rows_in = 21 * layout.placements.len() + rows * nu + rows + nu;
    let mass = free * (7 + 7 * rows);
    let gram = rows * (1 + rows * (nu + 1));
    let response = 2 * nu * (rows + 1);
    let bound = walks + rows_in + mass + gram + response + own;
    bound.min(u32::MAX as usize) as u32
}

/// The several-contact event kernel for a template's layout whose contact space is `shape`,
/// with the template row of each of its rows in canonical order `space_rows`: the stepping
/// kernel (RK4, or RKM under error control: `adaptive`), the event constants, the several-contact laws, `event_machine_general.wgsl`,
/// `event_contacts.wgsl`, `event_contacts_trial.wgsl` and `event_trial.wgsl`. `loop_budget`: `SOFTWARE_LOOP_BUDGET` on a
/// software adapter, else `u32::MAX`.
pub fn general_event_kernel_source(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    shape: SpaceShape,
    space_rows: &[usize],
    loop_budget: u32,
    adaptive: bool,
) -> KernelSource {
    let mut source = stepping_base(precision, layout, workgroup_size, adaptive);
    source.append(
        "the event constants",
        &general_event_constants(
            shape.contacts,
            space_rows,
            assembly_loops(layout),
            loop_budget,
        ),
    );
    source.append("the contact space's constants", &shape.constants());
    source.append(
        "contact_common.wgsl",
        crate::gpu::contact_laws::CONTACT_COMMON,
    );
    for (name, text) in [
        ("contact_laws_general.wgsl", CONTACT_LAWS_GENERAL),
        ("contact_phases_general.wgsl", CONTACT_PHASES_GENERAL),
        ("contact_impact_general.wgsl", CONTACT_IMPACT_GENERAL),
        ("event_machine_general.wgsl", EVENT_MACHINE_GENERAL),
        ("event_contacts.wgsl", EVENT_CONTACTS),
        ("event_contacts_trial.wgsl", EVENT_CONTACTS_TRIAL),
        ("event_trial.wgsl", EVENT_TRIAL),
    ] {
        source.append(name, text);
    }
    source
}
