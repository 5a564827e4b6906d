//! Unilateral contacts on other constraint kinds in a study: a `point_on_plane` contact made
//! unilateral against its closed forms (impact, friction impulse, sliding to a stop), and a
//! bilateral constraint beside unilateral contacts keeping its own closed form.

use simbatch::backend::Backend;
use simbatch::cli::run_study;
use simbatch::cli::scenario::Scenario;

use super::close;
use super::study::{col, results, scratch};

/// A `point_on_plane` contact made unilateral: a particle-like body (its contact point at its
/// centre of mass, so the contact force has no moment) thrown sideways at v₀ from a drawn
/// height h onto the ground, plastic impact (e = 0), friction μ. It lands at t₀ = √(2h/g),
/// x = v₀ t₀; the impact's friction impulse (sliding throughout: μ times the normal impulse
/// m √(2gh)) leaves v₁ = v₀ − μ √(2gh); it then slides, decelerating at μ g, and sticks
/// after v₁² / (2 μ g) more.
#[test]
fn a_unilateral_point_on_plane_meets_its_closed_forms() {
    const POINTS: &str = r#"
name = "points"
instances = 12
seed = 3

[[body]]
name = "puck"
mass = { uniform = [0.5, 2.0] }
inertia = { gyration = 0.05 }
position = [0.0, 0.0, { uniform = [0.01, 0.05] }]
velocity = [{ uniform = [1.0, 2.0] }, 0.0, 0.0]

[[constraint]]
kind = "point_on_plane"
plane = "ground"
body = "puck"
contact = "unilateral"
restitution = 0.0
friction = { uniform = [0.3, 0.6] }

[simulation]
integrator = "rk4"
step = 1e-3
duration = 1.2
backend = "cpu"
"#;
    let scenario = Scenario::parse("points.toml", POINTS).unwrap();
    let dir = scratch("points");
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    assert_eq!(rows.len(), 12);
    let g = 9.81;
    for (index, v) in &rows {
        let h = v[col(&columns, "puck.position.z")];
        let v0 = v[col(&columns, "puck.velocity.x")];
        let mu = v[col(&columns, "constraint[0].friction")];
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        close(
            v[col(&columns, "c0.first_impact_time")],
            (2.0 * h / g).sqrt(),
            1e-6,
            &format!("instance {index} first impact"),
        );
        // Sticking at the end, at rest on the ground, where friction stopped it.
        assert_eq!(v[col(&columns, "c0.mode")], 1.0, "instance {index} sticks");
        close(v[col(&columns, "puck.z")], 0.0, 1e-6, "on the ground");
        close(v[col(&columns, "puck.vx")], 0.0, 1e-9, "at rest");
        let t0 = (2.0 * h / g).sqrt();
        let v1 = v0 - mu * (2.0 * g * h).sqrt();
        assert!(v1 > 0.0);
        close(
            v[col(&columns, "puck.x")],
            v0 * t0 + v1 * v1 / (2.0 * mu * g),
            1e-6,
            &format!("instance {index} distance"),
        );
        close(
            v[col(&columns, "c0.last_mode_change_time")],
            t0 + v1 / (mu * g),
            1e-6,
            &format!("instance {index} sticks at"),
        );
        assert_eq!(
            v[col(&columns, "c0.impacts")],
            1.0,
            "instance {index}: one plastic impact"
        );
        // Energy: what is gone went into impacts and friction.
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-6,
            "instance {index}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bilateral constraint beside a unilateral contact in one instance: ball A bounces on the
/// ground (first impact at √(2h/g)), ball B rolls down a 20° incline on a bilateral rolling
/// contact — from rest it covers (5/14) g sin θ t² with the plane pushing m g cos θ.
#[test]
fn a_bilateral_constraint_beside_unilateral_contacts_keeps_its_closed_form() {
    const MIXED: &str = r#"
name = "mixed"
instances = 6
seed = 11

[[body]]
name = "a"
mass = 1.0
inertia = { solid_sphere = 0.1 }
position = [0.0, 0.0, { uniform = [0.3, 0.6] }]

[[body]]
name = "b"
mass = { uniform = [0.5, 2.0] }
inertia = { solid_sphere = 0.1 }
position = [5.0, -0.03420201433256687, 0.09396926207859084]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "a"
radius = 0.1
contact = "unilateral"
restitution = 0.5
friction = 0.5

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "b"
radius = 0.1
rolling = true
incline_deg = 20.0
plane_origin = [5.0, 0.0, 0.0]

[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.5
assemble = true
backend = "cpu"

[record]
events = true
"#;
    let scenario = Scenario::parse("mixed.toml", MIXED).unwrap();
    let dir = scratch("mixed");
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    let (g, theta, t) = (9.81f64, 20f64.to_radians(), 0.5f64);
    for (index, v) in &rows {
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        let h = v[col(&columns, "a.position.z")] - 0.1;
        close(
            v[col(&columns, "c0.first_impact_time")],
            (2.0 * h / g).sqrt(),
            1e-6,
            &format!("instance {index}: a's first impact"),
        );
        let p = [
            v[col(&columns, "b.x")] - 5.0,
            v[col(&columns, "b.y")] + 0.03420201433256687,
            v[col(&columns, "b.z")] - 0.09396926207859084,
        ];
        let travelled = p.iter().map(|x| x * x).sum::<f64>().sqrt();
        close(
            travelled,
            5.0 / 14.0 * g * theta.sin() * t * t,
            1e-6,
            &format!("instance {index}: b rolls"),
        );
        let m = v[col(&columns, "b.mass")];
        close(
            v[col(&columns, "c1.normal_force")],
            m * g * theta.cos(),
            1e-6,
            &format!("instance {index}: b's normal force"),
        );
        close(
            v[col(&columns, "c1.separation")],
            0.0,
            1e-8,
            "b stays on its plane",
        );
        assert!(
            v[col(&columns, "c1.lift_off_time")].is_nan(),
            "b never lifts off"
        );
        assert!(v[col(&columns, "max_position_error")] < 1e-6);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
