//! The user's assembly conditions steer position and velocity assembly; the GPU's limits on a
//! constraint are typed errors.

use super::*;

/// Balls near tilted planes (on Ground and on a free plane body), with a rolling contact that
/// declares assembly conditions, or not.
fn balls(n: usize, assembly: bool, free_plane: bool, seed: u64) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let plane = if free_plane {
        t.add_free_body("plate")
    } else {
        GROUND
    };
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(MySphereOnPlane {
            bodies: [plane, ball],
            rolling: true,
            assembly,
        })
        .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        let mut u = |lo: f64, hi: f64| lo + (hi - lo) * r.unit();
        let frame = [
            1.0,
            u(-0.3, 0.3),
            u(-0.3, 0.3),
            u(-0.3, 0.3),
            u(-1.0, 1.0),
            u(-1.0, 1.0),
            u(-0.5, 0.5),
        ];
        b.set_param(c, "plane_frame", i, &frame).unwrap();
        b.set_param(c, "radius", i, &[u(0.1, 0.5)]).unwrap();
        b.set_param(
            c,
            "sphere_center",
            i,
            &[u(-0.1, 0.1), u(-0.1, 0.1), u(-0.1, 0.1)],
        )
        .unwrap();
        if assembly {
            b.set_param(c, "contact_xy", i, &[u(-0.5, 0.5), u(-0.5, 0.5)])
                .unwrap();
        }
        b.set_q(
            ball,
            i,
            [
                1.0,
                u(-0.5, 0.5),
                u(-0.5, 0.5),
                u(-0.5, 0.5),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(0.0, 1.0),
            ],
        )
        .unwrap();
        b.set_u(
            ball,
            i,
            [
                u(-2.0, 2.0),
                u(-2.0, 2.0),
                u(-2.0, 2.0),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
            ],
        )
        .unwrap();
        if free_plane {
            b.set_q(
                plane,
                i,
                [
                    1.0,
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                ],
            )
            .unwrap();
            b.set_u(
                plane,
                i,
                [
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                ],
            )
            .unwrap();
        }
    }
    (b, ball, c)
}

/// The contact geometry and motion of instance `i`, through the constraint's own `report` and
/// kinematics (the test reads them back the way a user would).
fn contact_of(batch: &Batch, c: ConstraintId, i: usize) -> Contact {
    let sys = batch.instance_system(i).unwrap();
    let slot = &batch.template().constraints()[c.0];
    let kin: Vec<BodyKinematics> = slot
        .constraint
        .bodies()
        .iter()
        .map(|b| sys.kinematics[b.index()])
        .collect();
    let columns: Vec<Vec<f64>> = slot
        .constraint
        .params()
        .iter()
        .map(|p| batch.param(c, p.name).unwrap().0.to_vec())
        .collect();
    let widths: Vec<usize> = slot
        .constraint
        .params()
        .iter()
        .map(|p| p.default.len())
        .collect();
    contact(&Params::new(&columns, &widths, i), &kin[0], &kin[1])
}

/// Position assembly on the declared condition puts the contact exactly where `contact_xy`
/// says, on the plane — the closed form `O = P_o + x₀ Px + y₀ Py + r Pz` — where assembly on
/// the constraint's own rows only closes the gap to the plane, leaving the contact near where
/// it started. Velocity assembly on the
/// declared condition also stops the spin about the normal, which the own rows leave alone.
#[test]
fn assembly_conditions_steer_position_and_velocity_assembly() {
    for free_plane in [false, true] {
        let n = 200;
        let (mut declared, _, c) = balls(n, true, free_plane, 5);
        let (mut own, _, c_own) = balls(n, false, free_plane, 5);
        let before: Vec<Contact> = (0..n).map(|i| contact_of(&own, c_own, i)).collect();

        let report = assemble_positions(&mut declared, &AssemblyOptions::default()).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let report = assemble_positions(&mut own, &AssemblyOptions::default()).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let mut worst_declared = 0.0f64;
        let mut worst_own = 0.0f64;
        let mut own_elsewhere = 0;
        let (xy, _) = declared.param(c, "contact_xy").unwrap();
        for i in 0..n {
            let k = contact_of(&declared, c, i);
            let target = [xy[2 * i], xy[2 * i + 1]];
            let expected = k.plane_origin
                + target[0] * k.axes[0]
                + target[1] * k.axes[1]
                + k.radius * k.axes[2];
            worst_declared = worst_declared.max((k.center - expected).amax());
            // Own rows: only the height is closed; the contact stays near where it started.
            let k_own = contact_of(&own, c_own, i);
            worst_own = worst_own.max(k_own.height.abs());
            let offset = k_own.center - k_own.plane_origin;
            let in_plane = [offset.dot(&k_own.axes[0]), offset.dot(&k_own.axes[1])];
            let start = before[i].center - before[i].plane_origin;
            let start = [start.dot(&before[i].axes[0]), start.dot(&before[i].axes[1])];
            let moved = (in_plane[0] - start[0]).hypot(in_plane[1] - start[1]);
            let off_target = (in_plane[0] - target[0]).hypot(in_plane[1] - target[1]);
            if off_target > 1e-3 && moved < off_target {
                own_elsewhere += 1;
            }
        }
        println!(
            "free plane {free_plane}: declared condition {worst_declared:.1e} from the closed form; own rows: height {worst_own:.1e}, {own_elsewhere}/{n} contacts left nearer their start than the target"
        );
        assert!(worst_declared <= 1e-10, "{worst_declared}");
        assert!(worst_own <= 1e-10, "{worst_own}");
        assert!(own_elsewhere >= n * 9 / 10, "{own_elsewhere}/{n}");

        let report = assemble_velocities(&mut declared, None).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let report = assemble_velocities(&mut own, None).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let mut worst_slip = 0.0f64;
        let mut worst_spin = 0.0f64;
        let mut own_spin = 0.0f64;
        for i in 0..n {
            let spin = |b: &Batch, c: ConstraintId| {
                let sys = b.instance_system(i).unwrap();
                let bodies = b.template().constraints()[c.0].constraint.bodies().to_vec();
                let k = contact_of(b, c, i);
                (sys.kinematics[bodies[1].index()].ang_vel
                    - sys.kinematics[bodies[0].index()].ang_vel)
                    .dot(&k.axes[2])
            };
            worst_slip = worst_slip
                .max(contact_of(&declared, c, i).slip.amax())
                .max(contact_of(&own, c_own, i).slip.amax());
            worst_spin = worst_spin.max(spin(&declared, c).abs());
            own_spin = own_spin.max(spin(&own, c_own).abs());
        }
        println!(
            "free plane {free_plane}: slip {worst_slip:.1e}; spin about the normal {worst_spin:.1e} declared, up to {own_spin:.2} on own rows"
        );
        assert!(worst_slip <= 1e-10, "{worst_slip}");
        assert!(worst_spin <= 1e-10, "{worst_spin}");
        assert!(
            own_spin > 0.1,
            "the own rows should leave the spin: {own_spin}"
        );
    }
}

/// A constraint with 4 rows or 33 parameter values runs on the CPU and is refused by the GPU
/// layout with an error naming the limit (no adapter needed).
#[test]
fn gpu_limits_on_a_constraint_are_typed_errors() {
    #[derive(Debug)]
    struct Wide {
        bodies: [BodyId; 1],
        rows: usize,
        values: usize,
    }
    impl Constraint for Wide {
        fn kind_name(&self) -> &'static str {
            "wide"
        }
        fn bodies(&self) -> &[BodyId] {
            &self.bodies
        }
        fn params(&self) -> Vec<ParamSpec> {
            vec![ParamSpec {
                name: "values",
                default: vec![0.0; self.values],
                check: Check::Finite,
            }]
        }
        fn row_levels(&self) -> &[RowLevel] {
            const ALL: &[RowLevel; 6] = &[RowLevel::Acceleration; 6];
            &ALL[..self.rows]
        }
        fn report_slots(&self) -> &[Option<usize>] {
            &[]
        }
        fn evaluate(&self, _: &Params<'_>, _: &[BodyKinematics], rows: &mut [Row]) {
            for (k, row) in rows.iter_mut().enumerate() {
                row.jacobian[0][k] = 1.0;
            }
        }
        fn wgsl(&self) -> Option<WgslConstraint> {
            Some(WgslConstraint {
                file: "wide.wgsl".into(),
                source: String::new(),
                evaluate: "array<Row, 3>()".into(),
                report: None,
            })
        }
    }
    for (rows, values, limit) in [(4, 1, "at most 3"), (1, 33, "at most 32")] {
        let mut t = SystemTemplate::new();
        let body = t.add_free_body("body");
        t.add_constraint(Wide {
            bodies: [body],
            rows,
            values,
        })
        .unwrap();
        // Five instances: a full chunk of lanes and a partial one (or one partial chunk of
        // eight lanes), whose writes of the empty report columns must not split rows of none.
        let batch = Batch::new(t, 5).unwrap();
        assert_eq!(batch.evaluate().flagged(), 0, "runs on the CPU");
        match simbatch::gpu::layout::Layout::new(batch.template()) {
            Err(e @ simbatch::Error::Gpu(_)) => {
                let message = e.to_string();
                assert!(message.contains(limit), "{message}");
                assert!(message.contains("wide"), "{message}");
            }
            other => panic!("expected a GPU limit error, got {other:?}"),
        }
    }
    // Assembly conditions are bounded on every path.
    #[derive(Debug)]
    struct TooManyAssemblyRows([BodyId; 1]);
    impl Constraint for TooManyAssemblyRows {
        fn kind_name(&self) -> &'static str {
            "too_many_assembly_rows"
        }
        fn bodies(&self) -> &[BodyId] {
            &self.0
        }
        fn params(&self) -> Vec<ParamSpec> {
            Vec::new()
        }
        fn row_levels(&self) -> &[RowLevel] {
            &[RowLevel::Position]
        }
        fn report_slots(&self) -> &[Option<usize>] {
            &[]
        }
        fn evaluate(&self, _: &Params<'_>, _: &[BodyKinematics], _: &mut [Row]) {}
        fn assembly_position_rows(&self) -> usize {
            7
        }
    }
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let e = t.add_constraint(TooManyAssemblyRows([body])).unwrap_err();
    assert!(
        e.to_string()
            .contains("7 position assembly rows; accepted 0..=6"),
        "{e}"
    );
}
