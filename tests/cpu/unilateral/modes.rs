//! The mode determination (§3) on an incline for a sphere (c) and a brick with redundant corners
//! (d), liftoff and closing, and both laws through the engine's own sphere rows.

use nalgebra::{DVector, Matrix3, Vector3};
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ImpactContact, ImpactLaw, ModeContact, impact, solve_modes,
};

use super::{Body, close, engine_sphere, incline, point_rows, space, stick, tolerances};

#[test]
fn sphere_on_incline_rolls_below_the_critical_angle_and_slides_above() {
    // (c): m = 2, r = 0.3, μ_s = 0.2, μ_d = 0.15, x up the slope.
    let body = Body::sphere(2.0, 0.3);
    let k = Coefficients::new(0.0, 0.2, 0.15).unwrap();
    let tol = tolerances(2.0);
    let contact = [Vector3::new(0.0, 0.0, -0.3)];
    let (g, s, free) = incline(25f64.to_radians(), &contact, &body);
    let out = solve_modes(&s, &free, &[stick(k)], &tol).unwrap();
    assert_eq!(out.modes, vec![ContactMode::Stick]);
    for (got, want) in out
        .multipliers
        .iter()
        .zip([-2.3690772272, 0.0, -17.7817587817])
    {
        close(*got, want, 1e-9, "25° λ");
    }
    let gravity = 9.81
        * Vector3::new(
            -(25f64.to_radians()).sin(),
            0.0,
            -(25f64.to_radians()).cos(),
        );
    let udot0 = DVector::from_vec(vec![0.0, 0.0, 0.0, gravity.x, gravity.y, gravity.z]);
    let udot = &udot0 - body.inverse_mass() * g.transpose() * &out.multipliers;
    close(udot[3], -2.9613465341, 1e-9, "25° a");

    let theta = 40f64.to_radians();
    let (g, s, free) = incline(theta, &contact, &body);
    let out = solve_modes(&s, &free, &[stick(k)], &tol).unwrap();
    assert_eq!(
        out.modes,
        vec![ContactMode::Slide {
            direction: [-1.0, 0.0]
        }]
    );
    for (got, want) in out
        .multipliers
        .iter()
        .zip([-2.2544687961, 0.0, -15.0297919740])
    {
        close(*got, want, 1e-9, "40° λ");
    }
    let gravity = 9.81 * Vector3::new(-theta.sin(), 0.0, -theta.cos());
    let udot0 = DVector::from_vec(vec![0.0, 0.0, 0.0, gravity.x, gravity.y, gravity.z]);
    let udot = &udot0 - body.inverse_mass() * g.transpose() * &out.multipliers;
    close(udot[3], -5.1785120530, 1e-9, "40° a");
    // Spinning up backwards (ω_y < 0 rolls down the slope, towards −x).
    close(udot[1], -9.3936199837, 1e-9, "40° angular acceleration");
    // Sliding stays sliding at 40° once it slides; it keeps its direction.
    let sliding = ModeContact {
        mode: ContactMode::Slide {
            direction: [-1.0, 0.0],
        },
        slip: [-0.5, 0.0],
        ..stick(k)
    };
    let again = solve_modes(&s, &free, &[sliding], &tol).unwrap();
    assert_eq!(again.multipliers, out.multipliers);
}

#[test]
fn brick_on_incline_holds_with_pruning_and_slides_past_tan_mu() {
    // (d): m = 3, half-dims 0.4 (slope) × 0.25 × 0.1 (normal), μ_s = 0.5, μ_d = 0.4.
    let body = Body::brick(3.0, [0.4, 0.25, 0.1], &Matrix3::identity());
    let k = Coefficients::new(0.0, 0.5, 0.4).unwrap();
    let tol = tolerances(3.0);
    // Downhill corners first (x = −0.4), then uphill.
    let corners: Vec<Vector3<f64>> = [[-0.4, -0.25], [-0.4, 0.25], [0.4, -0.25], [0.4, 0.25]]
        .iter()
        .map(|[x, y]| Vector3::new(*x, *y, -0.1))
        .collect();
    let contacts = [stick(k); 4];

    // 20°: sticks with the minimum-norm split (reference-cases.md A7).
    let (_, s, free) = incline(20f64.to_radians(), &corners, &body);
    let out = solve_modes(&s, &free, &contacts, &tol).unwrap();
    assert!(out.modes.iter().all(|m| *m == ContactMode::Stick));
    for (p, z) in [-7.542891759, -7.542891759, -6.284685156, -6.284685156]
        .iter()
        .enumerate()
    {
        close(out.multipliers[3 * p + 2], *z, 1e-9, "20° λz");
        close(out.multipliers[3 * p], -2.516413205, 1e-9, "20° λx");
    }

    // 25°: the minimum-norm split breaks the uphill cones; pruning makes them impending and the
    // brick holds.
    let (_, s, free) = incline(25f64.to_radians(), &corners, &body);
    let out = solve_modes(&s, &free, &contacts, &tol).unwrap();
    assert!(
        out.modes.iter().all(|m| *m == ContactMode::Stick),
        "{:?}",
        out.modes
    );
    for p in 0..4 {
        let (x, z) = if p < 2 {
            (-3.2734246825, -7.4455130083)
        } else {
            (-2.9454030390, -5.8908060779)
        };
        close(out.multipliers[3 * p], x, 1e-9, "25° λx");
        close(out.multipliers[3 * p + 2], z, 1e-9, "25° λz");
    }
    assert!(out.acceleration.amax() < 1e-9);

    // 30°: slides down at g (sin θ − μ_d cos θ), without rotating.
    let theta = 30f64.to_radians();
    let (g, s, free) = incline(theta, &corners, &body);
    let out = solve_modes(&s, &free, &contacts, &tol).unwrap();
    for mode in &out.modes {
        let ContactMode::Slide { direction } = mode else {
            panic!("30°: {:?}", out.modes);
        };
        assert!((direction[0] + 1.0).abs() < 1e-12 && direction[1].abs() < 1e-12);
    }
    for p in 0..4 {
        let z = if p < 2 { -7.0089600992 } else { -5.7346037175 };
        close(out.multipliers[3 * p + 2], z, 1e-9, "30° λz");
        close(out.multipliers[3 * p], -0.4 * z.abs(), 1e-9, "30° λx");
    }
    let gravity = 9.81 * Vector3::new(-theta.sin(), 0.0, -theta.cos());
    let udot0 = DVector::from_vec(vec![0.0, 0.0, 0.0, gravity.x, gravity.y, gravity.z]);
    let udot = &udot0 - body.inverse_mass() * g.transpose() * &out.multipliers;
    close(udot[3], -1.5067163155, 1e-9, "30° a");
    for k in 0..3 {
        assert!(udot[k].abs() < 1e-9, "30° no rotation: {}", udot[k]);
    }
}

#[test]
fn a_pulling_contact_lifts_off_and_a_closing_one_is_added() {
    // A sphere pulled away from the plane harder than gravity lifts off; an open touching
    // contact accelerated into the plane closes (sliding, since it slips).
    let body = Body::sphere(1.0, 0.1);
    let k = Coefficients::new(0.0, 0.5, 0.5).unwrap();
    let tol = tolerances(1.0);
    let g = point_rows(&[Vector3::new(0.0, 0.0, -0.1)]);
    let s = space(&g, &body);
    let away = &g * DVector::from_vec(vec![0.0, 0.0, 0.0, 0.0, 0.0, 5.0]);
    let out = solve_modes(&s, &away, &[stick(k)], &tol).unwrap();
    assert_eq!(out.modes, vec![ContactMode::Open]);
    assert_eq!(out.multipliers.amax(), 0.0);
    let into = &g * DVector::from_vec(vec![0.0, 0.0, 0.0, 0.0, 0.0, -9.81]);
    let open = ModeContact {
        mode: ContactMode::Open,
        slip: [0.0, 2.0],
        ..stick(k)
    };
    let out = solve_modes(&s, &into, &[open], &tol).unwrap();
    assert_eq!(
        out.modes,
        vec![ContactMode::Slide {
            direction: [0.0, 1.0]
        }]
    );
    close(out.multipliers[2], -9.81, 1e-12, "λz");
    close(out.multipliers[1], 0.5 * 9.81, 1e-12, "λy = μ_d |λz| ŝ");
    // Not touching: stays open whatever the acceleration.
    let far = ModeContact {
        touching: false,
        ..open
    };
    assert_eq!(
        solve_modes(&s, &into, &[far], &tol).unwrap().modes,
        vec![ContactMode::Open]
    );
}

#[test]
fn the_engines_sphere_rows_give_the_reference_modes_and_impacts() {
    use simbatch::cpu::unilateral::InstanceContacts;
    // (c) through the engine's rows: rolling at 25°, sliding at 40°.
    let k = Coefficients::new(0.0, 0.2, 0.15).unwrap();
    for (deg, want, a) in [
        (25.0, [-2.3690772272, 0.0, -17.7817587817], -2.9613465341),
        (40.0, [-2.2544687961, 0.0, -15.0297919740], -5.1785120530),
    ] {
        let theta = f64::to_radians(deg);
        let (batch, contact) = engine_sphere(theta, 2.0, 0.3, [0.0; 6]);
        let system = batch.instance_system(0).unwrap();
        let contacts = InstanceContacts::new(&system, batch.template(), &[contact]).unwrap();
        assert!(contacts.separation[0].abs() < 1e-15);
        let out = solve_modes(
            &contacts.space,
            &contacts.free_acceleration,
            &[stick(k)],
            &tolerances(2.0),
        )
        .unwrap();
        let [x, y, z] = contacts.space.contacts()[0];
        for (row, w) in [x, y, z].into_iter().zip(want) {
            close(out.multipliers[row], w, 1e-9, &format!("{deg}° λ"));
        }
        // Acceleration of the centre along the slope, Px = (cos θ, 0, sin θ).
        let udot = contacts.udot(&out.multipliers);
        close(
            udot[3] * theta.cos() + udot[5] * theta.sin(),
            a,
            1e-9,
            &format!("{deg}° a"),
        );
    }
    // (e) through the engine's rows, on level ground: v⁻ = (3, 0, −4), ω⁻ = (0, −20, 0).
    let (batch, contact) = engine_sphere(0.0, 1.0, 0.1, [0.0, -20.0, 0.0, 3.0, 0.0, -4.0]);
    let system = batch.instance_system(0).unwrap();
    let contacts = InstanceContacts::new(&system, batch.template(), &[contact]).unwrap();
    let [x, _, z] = contacts.space.contacts()[0];
    close(contacts.velocity[x], 5.0, 1e-12, "slip");
    close(contacts.velocity[z], -4.0, 1e-12, "approach");
    let c = ImpactContact {
        coefficients: Coefficients::with_friction(0.6, 0.3).unwrap(),
        participates: true,
    };
    let out = impact(
        &contacts.space,
        &contacts.velocity,
        13.3,
        &[c],
        ImpactLaw::Poisson,
        &tolerances(1.0),
    )
    .unwrap();
    let du = contacts.velocity_change(&out.impulse);
    let u_plus: Vec<f64> = [0.0, -20.0, 0.0, 3.0, 0.0, -4.0]
        .iter()
        .zip(du.iter())
        .map(|(a, b)| a + b)
        .collect();
    for (got, want) in u_plus
        .iter()
        .zip([0.0, 15.7142857143, 0.0, 1.5714285714, 0.0, 2.4])
    {
        close(*got, want, 1e-9, "u⁺");
    }
}
