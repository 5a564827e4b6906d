// Entry point of the evaluation kernel; twin of src/cpu/evaluate.rs. One thread per instance.
//
// The host prepends, before the other files, a prelude (`real`, REAL_EPSILON, RANK_TOLERANCE,
// is_finite_real) and the layout constants of the template (src/gpu/layout/mod.rs):
//   NB, NF, NU, ROWS and array capacities NB_CAP, NF_CAP, NU_CAP, ROWS_CAP, ROWS_NU_CAP,
//   ROWS_ROWS_CAP (each ≥ 1); GRAVITY_IN, TIME_IN, WORK_IN; the offsets of each body field from
//   its body's prefix (FREE_Q_AT, PRESCRIBED_POSE_AT, …) and of a constraint's columns from its
//   prefix (CONSTRAINT_ENABLED_AT, …), generated from the host's field order so host and kernel
//   cannot disagree; MOTION_PARAMS_CAP; ROW_LEVEL (per row: 0 position, 1 velocity,
//   2 acceleration, as `RowLevel`); OUT_STATUS, OUT_UDOT, OUT_UDOT0; PARAMS_CAP.
// and, generated per template (src/gpu/codegen.rs), straight-line code with every body index,
// mobility column and input prefix a literal: load_state(i), load_free_bodies(i) (each free
// body's mass properties, loads and inverses, once per thread), assemble_bodies(i, state,
// gravity), assemble_rows(i, kin, baumgarte) and store_constraint_outputs(i, solved), which call
// the one-body and one-constraint functions below once per body or constraint of the template,
// and per constraint c constraint_rows_c / constraint_report_c, per driven body b
// prescribed_motion_b, which call the constraint's or law's own WGSL (`Constraint::wgsl`,
// `MotionLaw::wgsl`). No code here walks the template or knows a constraint kind.
// and input_at(prefix, width, i), the index of instance i's first value of the input column of
// logical prefix `prefix` (the prefixes above): a per-instance column is a segment of
// `capacity × width` values (value k of instance i at at · capacity + i · width + k), a shared
// one a single row after them (at VARYING_WIDTH · capacity + its offset). Output columns are
// all per instance: value k of instance i of the output column with prefix p (in units of
// widths) sits at p · capacity + i · width + k.

// Twin of `Launch` (src/gpu/buffers.rs).
struct Launch {
    // Instances this dispatch runs, and the chunk's instance count (the input segments' length).
    count: u32,
    capacity: u32,
    // Stepping kernel only: substeps per dispatch, and integrator | (Baumgarte mode << 8).
    steps: u32,
    mode: u32,
    // Evaluation kernel: the dispatch runs instances first … first + count − 1 of the chunk
    // and writes their outputs in segments `out_capacity` long (a slice of the chunk).
    first: u32,
    out_capacity: u32,
    _pad: vec2<u32>,
}

@group(0) @binding(0) var<uniform> launch: Launch;
@group(0) @binding(1) var<storage, read_write> input: array<real>; // written by the stepping kernel
@group(0) @binding(2) var<storage, read_write> output: array<real>;

// Status bits (NONFINITE_STATE, NONFINITE_RESULT, SINGULAR_MASS, STEP_FAILED,
// CONSTRAINT_VIOLATED) come from the host's prelude (`status` in src/batch/status.rs).

// Value k of instance i of the input column of logical prefix `prefix` (`width` values per
// instance), from the input buffer; `input_at` (generated per template) knows where each column
// is stored. The physics reads its inputs through `load` (generated with the layout), which
// serves the parameter columns from the thread's private copy (`cache_parameters`).
fn read_input(prefix: u32, width: u32, i: u32, k: u32) -> real {
    return input[input_at(prefix, width, i) + k];
}

fn load3(prefix: u32, width: u32, i: u32, k: u32) -> vec3<real> {
    return vec3<real>(load(prefix, width, i, k), load(prefix, width, i, k + 1u), load(prefix, width, i, k + 2u));
}

fn load4(prefix: u32, width: u32, i: u32, k: u32) -> vec4<real> {
    return vec4<real>(load3(prefix, width, i, k), load(prefix, width, i, k + 3u));
}

// Value k of the instance's column (prefix, width), in the order the host chose
// (`gpu::layout::OutputOrder`, the generated OUTPUT_VALUE_MAJOR): the instances' values of one
// kind side by side (GPUs: a warp's stores fill whole cache lines), or each instance's values
// side by side (CPU drivers).
fn store(prefix: u32, width: u32, i: u32, k: u32, value: real) {
    if OUTPUT_VALUE_MAJOR {
        output[(prefix + k) * launch.out_capacity + (i - launch.first)] = value;
    } else {
        output[prefix * launch.out_capacity + (i - launch.first) * width + k] = value;
    }
}

fn store3(prefix: u32, width: u32, i: u32, k: u32, value: vec3<real>) {
    store(prefix, width, i, k, value.x);
    store(prefix, width, i, k + 1u, value.y);
    store(prefix, width, i, k + 2u, value.z);
}

fn finite3(v: vec3<real>) -> bool {
    return is_finite_real(v.x) && is_finite_real(v.y) && is_finite_real(v.z);
}

fn finite_quaternion(q: vec4<real>) -> bool {
    return finite3(q.xyz) && is_finite_real(q.w) && dot(q, q) > 0.0;
}

// Positions and velocities of every body (Ground's and driven bodies' entries unused) and the
// time: the state the integrators advance; twin of `InstanceState` (src/cpu/evaluate.rs).
struct State {
    time: real,
    // Work on the free bodies, (driven, applied): integrated with the state.
    work: vec2<real>,
    quaternion: array<vec4<real>, NB_CAP>,
    origin: array<vec3<real>, NB_CAP>,
    ang_vel: array<vec3<real>, NB_CAP>,
    lin_vel: array<vec3<real>, NB_CAP>,
}

// Which constraints get Baumgarte terms (`BaumgarteMode`, src/cpu/evaluate.rs).
const BAUMGARTE_TEMPLATE: u32 = 0u;
const BAUMGARTE_ALL: u32 = 1u;
const BAUMGARTE_OFF: u32 = 2u;

// Time and work, the state every template has (`load_state` adds the bodies').
fn load_clock(i: u32) -> State {
    var s: State;
    s.time = load(TIME_IN, 1u, i, 0u);
    s.work = vec2<real>(load(WORK_IN, 2u, i, 0u), load(WORK_IN, 2u, i, 1u));
    return s;
}

// Body b's pose from the column at `pose` (q and origin, 7 wide) and velocity from the column at
// `velocity` (w and v, 6 wide): a free body's q and u, a prescribed body's pose and velocity.
fn load_body_state(s: ptr<function, State>, b: u32, pose: u32, velocity: u32, i: u32) {
    (*s).quaternion[b] = load4(pose, 7u, i, 0u);
    (*s).origin[b] = load3(pose, 7u, i, 4u);
    (*s).ang_vel[b] = load3(velocity, 6u, i, 0u);
    (*s).lin_vel[b] = load3(velocity, 6u, i, 3u);
}

// The bodies' half of an assembly (`assemble_bodies`, generated).
struct AssembledBodies {
    status: u32,
    kin: array<BodyKinematics, NB_CAP>,
    inverse: array<InverseMass, NF_CAP>,
    applied: array<real, NU_CAP>,
}

// Per-call values of the thread's free bodies: mass properties, loads and the inverses the
// closed form needs, by slot. The parameters do not change within a dispatch, so each entry
// point forms them once after `cache_parameters` (`load_free_bodies`, generated), as the CPU's
// lanes do once per chunk (`FreeBody`, `Chunk::load_body`, src/cpu/lanes): the stepping
// kernels evaluate the dynamics four or five times a step.
struct FreeBody {
    props: MassProperties,
    inverse: BodyInverseMass,
    force: vec3<real>,
    torque: vec3<real>,
}

var<private> free_bodies: array<FreeBody, NF_CAP>;

// Free body slot `slot` of instance i (input columns from prefix p: mass, com, inertia,
// applied_force, applied_torque).
fn load_free_body(i: u32, slot: u32, p: u32) {
    let props = MassProperties(load(p + FREE_MASS_AT, 1u, i, 0u), load3(p + FREE_COM_AT, 3u, i, 0u), inertia_matrix(load3(p + FREE_INERTIA_AT, 6u, i, 0u), load3(p + FREE_INERTIA_AT, 6u, i, 3u)));
    free_bodies[slot] = FreeBody(props, body_inverse_mass(props), load3(p + FREE_APPLIED_FORCE_AT, 3u, i, 0u), load3(p + FREE_APPLIED_TORQUE_AT, 3u, i, 0u));
}

// Free body b (slot `slot`, loaded by `load_free_body`) at pose (q, origin) and velocity
// (w, v): its kinematics, with accelerations 0 (the bias is aerr at u̇ = 0), M⁻¹ in closed form
// and f − c; `isotropic`: the kernel holds its inertia as constants k 1 (`inverse_mass_at`).
fn add_free_body(out: ptr<function, AssembledBodies>, gravity: vec3<real>, b: u32, slot: u32, q: vec4<real>, origin: vec3<real>, w: vec3<real>, v: vec3<real>, isotropic: bool) {
    if !(finite_quaternion(q) && finite3(origin) && finite3(w) && finite3(v)) {
        (*out).status |= NONFINITE_STATE;
    }
    let zero = vec3<real>(0.0, 0.0, 0.0);
    let kin = BodyKinematics(rotation_from_quaternion(q), origin, w, v, zero, zero);
    (*out).kin[b] = kin;
    let body = free_bodies[slot];
    (*out).inverse[slot] = inverse_mass_at(body.inverse, body.props.com, kin.rotation, isotropic);
    let f = applied_minus_coriolis(body.props, kin, gravity, body.force, body.torque, isotropic);
    for (var k = 0u; k < 6u; k++) {
        (*out).applied[6u * slot + k] = f[k];
    }
}

// Prescribed body b (input columns from prefix p: pose, velocity, acceleration) at pose
// (q, origin) and velocity (w, v), at its given acceleration.
fn add_prescribed_body(out: ptr<function, AssembledBodies>, i: u32, b: u32, p: u32, q: vec4<real>, origin: vec3<real>, w: vec3<real>, v: vec3<real>) {
    let bb = load3(p + PRESCRIBED_ACCELERATION_AT, 6u, i, 0u);
    let a = load3(p + PRESCRIBED_ACCELERATION_AT, 6u, i, 3u);
    if !(finite_quaternion(q) && finite3(origin) && finite3(w) && finite3(v) && finite3(bb) && finite3(a)) {
        (*out).status |= NONFINITE_STATE;
    }
    (*out).kin[b] = BodyKinematics(rotation_from_quaternion(q), origin, w, v, bb, a);
}

// Driven body b at the motion its law gives at the state's time (every stage time when
// stepping); twin of the law branch of `kinematics_into` (src/cpu/evaluate.rs).
fn add_driven_body(out: ptr<function, AssembledBodies>, b: u32, k: BodyKinematics) {
    if !(finite3(k.rotation[0]) && finite3(k.rotation[1]) && finite3(k.rotation[2]) && finite3(k.origin) && finite3(k.ang_vel) && finite3(k.lin_vel) && finite3(k.ang_acc) && finite3(k.lin_acc)) {
        (*out).status |= NONFINITE_STATE;
    }
    (*out).kin[b] = k;
}

// The rows' half of an assembly (`assemble_rows`, generated).
struct AssembledRows {
    jacobian: array<real, ROWS_NU_CAP>,
    bias_acceleration: array<real, ROWS_CAP>,
    bias: array<real, ROWS_CAP>,
    rows: array<Row, ROWS_CAP>,
    enabled: array<u32, ROWS_CAP>,
}

// The mobility column of a body without mobilities (Ground, prescribed): no block in G.
const NO_COLUMN: u32 = 0xffffffffu;

// A constraint's `n` rows, the template's rows first … first + n − 1, between bodies whose
// blocks of G start at columns `column_a` and `column_b` (NO_COLUMN: none); its enabled flag and
// Baumgarte time constant from its input prefix p, Baumgarte terms when `baumgarte` asks for
// them (BAUMGARTE_TEMPLATE: when the template's `stabilized` says so). Disabled constraints keep
// zero rows in G and b: in a minimum-norm solve a zero row gets λ = 0 and changes nothing else,
// exactly as dropping it does on the CPU.
fn add_constraint_rows(out: ptr<function, AssembledRows>, i: u32, rows: array<Row, 3>, n: u32, first: u32, p: u32, column_a: u32, column_b: u32, stabilized: bool, baumgarte: u32) {
    let enabled = load(p + CONSTRAINT_ENABLED_AT, 1u, i, 0u) != 0.0;
    var inv_t: real = 0.0;
    if baumgarte == BAUMGARTE_ALL || (baumgarte == BAUMGARTE_TEMPLATE && stabilized) {
        inv_t = 1.0 / load(p + CONSTRAINT_BAUMGARTE_AT, 1u, i, 0u);
    }
    for (var r = 0u; r < n; r++) {
        let at = first + r;
        let row = rows[r];
        (*out).rows[at] = row;
        (*out).enabled[at] = u32(enabled);
        if enabled {
            if column_a != NO_COLUMN {
                for (var k = 0u; k < 3u; k++) {
                    (*out).jacobian[at * NU + column_a + k] += row.jac_a_ang[k];
                    (*out).jacobian[at * NU + column_a + 3u + k] += row.jac_a_lin[k];
                }
            }
            if column_b != NO_COLUMN {
                for (var k = 0u; k < 3u; k++) {
                    (*out).jacobian[at * NU + column_b + k] += row.jac_b_ang[k];
                    (*out).jacobian[at * NU + column_b + 3u + k] += row.jac_b_lin[k];
                }
            }
            (*out).bias_acceleration[at] = row.acceleration_error;
            // α = β = 1/T: b ← b − 2α ė − β² e (physics.md §4).
            (*out).bias[at] = -row.acceleration_error - 2.0 * inv_t * row.velocity_error - inv_t * inv_t * row.position_error;
        }
    }
}

// Instance i assembled at `state` (parameters from the input columns): twin of
// `InstanceSystem` (src/cpu/evaluate.rs).
struct Assembled {
    status: u32,
    kin: array<BodyKinematics, NB_CAP>,
    inverse: array<InverseMass, NF_CAP>,
    applied: array<real, NU_CAP>,
    jacobian: array<real, ROWS_NU_CAP>,
    bias_acceleration: array<real, ROWS_CAP>,
    bias: array<real, ROWS_CAP>,
    rows: array<Row, ROWS_CAP>,
    enabled: array<u32, ROWS_CAP>,
}

// Twin of `assemble_with` (src/cpu/evaluate.rs).
fn assemble_instance(i: u32, state: State, baumgarte: u32) -> Assembled {
    let gravity = load3(GRAVITY_IN, 3u, i, 0u);
    let bodies = assemble_bodies(i, state, gravity);
    var status = bodies.status;
    if !finite3(gravity) {
        status |= NONFINITE_STATE;
    }
    let rows = assemble_rows(i, bodies.kin, baumgarte);
    for (var k = 0u; k < ROWS * NU; k++) {
        if !is_finite_real(rows.jacobian[k]) {
            status |= NONFINITE_STATE;
        }
    }
    for (var k = 0u; k < ROWS; k++) {
        if !is_finite_real(rows.bias[k]) {
            status |= NONFINITE_STATE;
        }
    }
    for (var k = 0u; k < NU; k++) {
        if !is_finite_real(bodies.applied[k]) {
            status |= NONFINITE_STATE;
        }
    }

    return Assembled(status, bodies.kin, bodies.inverse, bodies.applied, rows.jacobian, rows.bias_acceleration, rows.bias, rows.rows, rows.enabled);
}

// M⁻¹ x and M⁻¹ Gᵀ, body by body, in closed form (`apply_inverse_mass`).
struct MassSolved {
    ok: bool,
    minv_x: array<real, NU_CAP>,
    minv_gt: array<real, ROWS_NU_CAP>, // row r holds M⁻¹ G_rᵀ
}

// `mass_solve(inverse, x, g)` (twin of the lane path's `u̇₀` and `Y = M⁻¹ Gᵀ` blocks,
// src/cpu/lanes/dynamics.rs) is generated per template, straight-line, with the products below
// (src/gpu/solve.rs `dense_products`). Arguments by value: naga 30's SPIR-V writer panics on
// pointers to struct members passed to functions.

// Everything the outputs and the integrators need from one assembly and solve.
struct Solved {
    status: u32,
    kin: array<BodyKinematics, NB_CAP>,
    udot: array<real, NU_CAP>,
    udot_unconstrained: array<real, NU_CAP>,
    multipliers: array<real, ROWS_CAP>,
    jacobian: array<real, ROWS_NU_CAP>,
    bias_acceleration: array<real, ROWS_CAP>,
    rows: array<Row, ROWS_CAP>,
    enabled: array<u32, ROWS_CAP>,
}

// `gram_matrix` (A = G M⁻¹ Gᵀ), `g_times` (G x) and `minv_gt_times` (M⁻¹ Gᵀ x) are generated
// per template, straight-line (src/gpu/solve.rs `dense_products`); the projection (step.wgsl)
// and the event kernels share them.

// Assembles and solves instance i at `state`: twin of `solve` (src/cpu/solver.rs).
fn solve_instance(i: u32, state: State, baumgarte: u32) -> Solved {
    var sys = assemble_instance(i, state, baumgarte);
    var status = sys.status;
    var jacobian = sys.jacobian;
    var bias = sys.bias;

    // u̇₀ = M⁻¹ (f − c) and Y = M⁻¹ Gᵀ.
    let mass = mass_solve(sys.inverse, sys.applied, jacobian);
    if !mass.ok {
        status |= SINGULAR_MASS;
    }
    var udot_unconstrained = mass.minv_x;
    var minv_gt = mass.minv_gt;

    // (G M⁻¹ Gᵀ) λ = G u̇₀ − b.
    let a_mat = gram_matrix(jacobian, minv_gt);
    let g_udot = g_times(jacobian, udot_unconstrained);
    var rhs_rows: array<real, ROWS_CAP>;
    for (var r = 0u; r < ROWS; r++) {
        rhs_rows[r] = g_udot[r] - bias[r];
    }
    let multipliers = solve_multipliers(a_mat, rhs_rows, sys.enabled);
    let correction = minv_gt_times(minv_gt, multipliers);
    var udot: array<real, NU_CAP>;
    for (var k = 0u; k < NU; k++) {
        udot[k] = udot_unconstrained[k] - correction[k];
        if !is_finite_real(udot[k]) {
            status |= NONFINITE_RESULT;
        }
    }

    return Solved(status, sys.kin, udot, udot_unconstrained, multipliers, jacobian, sys.bias_acceleration, sys.rows, sys.enabled);
}

// A constraint's row outputs: its `n` rows, the template's rows first … first + n − 1, output
// columns from prefix o (position, velocity and acceleration errors, multipliers, body forces,
// power) and Jacobian rows and bias k from prefix jac. Returns its multipliers in internal row
// order.
fn store_constraint_rows(i: u32, solved: ptr<function, Solved>, n: u32, first: u32, o: u32, jac: u32) -> vec3<real> {
    let zero = vec3<real>(0.0, 0.0, 0.0);
    var lambda = zero;
    var force_a_ang = zero;
    var force_a_lin = zero;
    var force_b_ang = zero;
    var force_b_lin = zero;
    var power: real = 0.0;
    for (var r = 0u; r < n; r++) {
        let at = first + r;
        let row = (*solved).rows[at];
        var aerr: real = 0.0;
        if (*solved).enabled[at] != 0u {
            lambda[r] = (*solved).multipliers[at];
            aerr = (*solved).bias_acceleration[at];
            for (var k = 0u; k < NU; k++) {
                aerr += (*solved).jacobian[at * NU + k] * (*solved).udot[k];
            }
        }
        store(o, n, i, r, row.position_error);
        store(o + n, n, i, r, row.velocity_error);
        store(o + 2u * n, n, i, r, aerr);
        store(o + 3u * n, n, i, r, lambda[r]);
        power -= lambda[r] * row.velocity_error;
        force_a_ang += lambda[r] * row.jac_a_ang;
        force_a_lin += lambda[r] * row.jac_a_lin;
        force_b_ang += lambda[r] * row.jac_b_ang;
        force_b_lin += lambda[r] * row.jac_b_lin;
        // G rows and k, for the readback that asks for them.
        for (var k = 0u; k < NU; k++) {
            store(jac, n * NU, i, r * NU + k, (*solved).jacobian[at * NU + k]);
        }
        store(jac + n * NU, n, i, r, (*solved).bias_acceleration[at]);
    }
    // The fixed-width columns after the four per-row ones (the layout's `OUT_*_AT`).
    let forces = o + 4u * n;
    store3(forces, OUT_BODY_FORCES_WIDTH, i, 0u, force_a_ang);
    store3(forces, OUT_BODY_FORCES_WIDTH, i, 3u, force_a_lin);
    store3(forces, OUT_BODY_FORCES_WIDTH, i, 6u, force_b_ang);
    store3(forces, OUT_BODY_FORCES_WIDTH, i, 9u, force_b_lin);
    store(forces + OUT_POWER_AT, 1u, i, 0u, power);
    return lambda;
}

// A constraint's report (contact point, separation, contact force) into its output columns
// (prefix o, n rows).
fn store_contact_report(i: u32, o: u32, n: u32, report: ContactReport) {
    let forces = o + 4u * n;
    store3(forces + OUT_CONTACT_POINT_AT, 3u, i, 0u, report.contact_point);
    store(forces + OUT_SEPARATION_AT, 1u, i, 0u, report.separation);
    store3(forces + OUT_CONTACT_FORCE_AT, 3u, i, 0u, report.contact_force);
}

fn evaluate_instance(i: u32) {
    var solved = solve_instance(i, load_state(i), BAUMGARTE_TEMPLATE);
    for (var k = 0u; k < NU; k++) {
        store(OUT_UDOT, NU, i, k, solved.udot[k]);
        store(OUT_UDOT0, NU, i, k, solved.udot_unconstrained[k]);
    }
    let status = solved.status | store_constraint_outputs(i, &solved);
    store(OUT_STATUS, 1u, i, 0u, real(status));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= launch.count {
        return;
    }
    cache_parameters(launch.first + id.x);
    load_free_bodies(launch.first + id.x);
    evaluate_instance(launch.first + id.x);
}
