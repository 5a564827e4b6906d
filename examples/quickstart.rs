//! Builds 100 000 mixed systems — rolling and sliding balls on random inclines, balls on spinning
//! turntables, falling sticks pinned by a no-slip point, bricks standing on four contact points —
//! with randomized parameters, places each in consistent contact, evaluates them all on the f64
//! CPU path and prints a summary.
//!
//! `cargo run --release --example quickstart [-- N]` (N = total instances, default 100 000).

use std::time::Instant;

use nalgebra::Vector3;
use simbatch::math::rotation_from_quaternion;
use simbatch::prelude::*;

/// SplitMix64: a small, reproducible generator for the example's draws.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

fn axis_angle(axis: Vector3<f64>, angle: f64) -> [f64; 4] {
    let a = axis.normalize() * (angle / 2.0).sin();
    [(angle / 2.0).cos(), a.x, a.y, a.z]
}

fn pose(q: [f64; 4], p: Vector3<f64>) -> [f64; 7] {
    [q[0], q[1], q[2], q[3], p.x, p.y, p.z]
}

/// Row of the summary table.
struct Summary {
    name: &'static str,
    n: usize,
    flagged: usize,
    max_perr: f64,
    max_verr: f64,
    max_aerr: f64,
    mean_normal_force: f64,
    seconds: f64,
}

fn summarize(
    name: &'static str,
    batch: &Batch,
    normal_force: impl Fn(&Evaluation, usize) -> f64,
) -> Summary {
    let start = Instant::now();
    let ev = batch.evaluate();
    let seconds = start.elapsed().as_secs_f64();
    let max_abs = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let ok: Vec<usize> = (0..ev.len)
        .filter(|i| ev.status[*i] == status::OK)
        .collect();
    Summary {
        name,
        n: batch.len(),
        flagged: ev.flagged(),
        max_perr: ev
            .constraints
            .iter()
            .map(|c| max_abs(&c.position_errors))
            .fold(0.0, f64::max),
        max_verr: ev
            .constraints
            .iter()
            .map(|c| max_abs(&c.velocity_errors))
            .fold(0.0, f64::max),
        max_aerr: ev
            .constraints
            .iter()
            .map(|c| max_abs(&c.acceleration_errors))
            .fold(0.0, f64::max),
        mean_normal_force: ok.iter().map(|i| normal_force(&ev, *i)).sum::<f64>()
            / ok.len().max(1) as f64,
        seconds,
    }
}

/// Balls on random inclines (Ground planes), rolling or sliding, started in contact with
/// rolling-consistent velocities.
fn balls_on_inclines(n: usize, rolling: bool, rng: &mut Rng) -> Result<(Batch, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, rolling))?;
    let mut b = Batch::new(t, n)?;
    for i in 0..n {
        let (m, r) = (rng.uniform(0.5, 3.0), rng.uniform(0.05, 0.3));
        let com = Vector3::new(
            rng.uniform(-0.2, 0.2),
            rng.uniform(-0.2, 0.2),
            rng.uniform(-0.2, 0.2),
        ) * r;
        let k = 0.4 * m * r * r;
        b.set_mass_properties(
            ball,
            i,
            m,
            com.into(),
            [
                k * rng.uniform(0.8, 1.2),
                k * rng.uniform(0.8, 1.2),
                k,
                0.0,
                0.0,
                0.0,
            ],
        )?;
        let tilt = rng.uniform(0.0, 40f64.to_radians());
        let heading = rng.uniform(0.0, std::f64::consts::TAU);
        let axis = Vector3::new(heading.cos(), heading.sin(), 0.0);
        let frame = pose(axis_angle(axis, tilt), Vector3::zeros());
        b.set_param(c, "plane_frame", i, &frame)?;
        b.set_param(c, "radius", i, &[r])?;
        // Body origin at the COM: the sphere centre sits at −com in the body frame.
        b.set_param(c, "sphere_center", i, (-com).as_slice())?;
        let r_gp = rotation_from_quaternion(&frame[..4]).expect("unit quaternion");
        let (px, pz) = (r_gp.column(0).into_owned(), r_gp.column(2).into_owned());
        let center = r * pz + rng.uniform(-1.0, 1.0) * px;
        let v = rng.uniform(-2.0, 2.0) * px;
        let w = pz.cross(&v) / r + rng.uniform(-1.0, 1.0) * pz;
        let q_rot = axis_angle(
            Vector3::new(rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), 1.0),
            rng.uniform(0.0, 3.0),
        );
        let rot = rotation_from_quaternion(&q_rot).expect("unit quaternion");
        let o_b = rot * (-com);
        let origin = center - o_b;
        let v_origin = v - w.cross(&o_b);
        b.set_q(ball, i, pose(q_rot, origin))?;
        b.set_u(ball, i, [w.x, w.y, w.z, v_origin.x, v_origin.y, v_origin.z])?;
    }
    Ok((b, c))
}

/// Solid balls rolling on turntables (prescribed bodies spinning at Ω about their normal).
fn balls_on_turntables(n: usize, rng: &mut Rng) -> Result<(Batch, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("turntable");
    let ball = t.add_free_body("ball");
    let c = t.add_constraint(SphereOnPlaneContact::new(table, ball, true))?;
    let mut b = Batch::new(t, n)?;
    for i in 0..n {
        let (m, r, omega) = (
            rng.uniform(0.2, 2.0),
            rng.uniform(0.05, 0.2),
            rng.uniform(0.5, 4.0),
        );
        let k = 0.4 * m * r * r;
        b.set_mass_properties(ball, i, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])?;
        b.set_param(c, "radius", i, &[r])?;
        b.set_velocity(table, i, [0.0, 0.0, omega, 0.0, 0.0, 0.0])?;
        let n_z = Vector3::z();
        let center = Vector3::new(rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), r);
        let v = Vector3::new(rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 0.0);
        // No slip at C: v − r w × n = Ω n × p_C  ⇒  w = n × (v − Ω n × p_C) / r (+ spin about n).
        let p_c = center - r * n_z;
        let w = n_z.cross(&(v - omega * n_z.cross(&p_c))) / r + rng.uniform(-1.0, 1.0) * n_z;
        b.set_q(ball, i, pose([1.0, 0.0, 0.0, 0.0], center))?;
        b.set_u(ball, i, [w.x, w.y, w.z, v.x, v.y, v.z])?;
    }
    Ok((b, c))
}

/// Uniform sticks standing on a no-slip tip, released at rest at random tilts.
fn pinned_sticks(n: usize, rng: &mut Rng) -> Result<(Batch, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let stick = t.add_free_body("stick");
    let c = t.add_constraint(PointOnPlaneContact::new(GROUND, stick))?;
    let mut b = Batch::new(t, n)?;
    for i in 0..n {
        let (m, l, phi, heading) = (
            rng.uniform(0.5, 2.0),
            rng.uniform(0.5, 1.5),
            rng.uniform(0.0, 1.2),
            rng.uniform(0.0, std::f64::consts::TAU),
        );
        let i_t = m * l * l / 12.0;
        let i_a = 0.5 * m * (0.01 * l) * (0.01 * l);
        b.set_mass_properties(stick, i, m, [0.0; 3], [i_t, i_t, i_a, 0.0, 0.0, 0.0])?;
        b.set_param(c, "follower_point", i, &[0.0, 0.0, -l / 2.0])?;
        let axis = Vector3::new(-heading.sin(), heading.cos(), 0.0);
        let q = axis_angle(axis, phi);
        let up = rotation_from_quaternion(&q).expect("unit quaternion") * Vector3::z();
        b.set_q(stick, i, pose(q, 0.5 * l * up))?;
    }
    Ok((b, c))
}

/// Bricks standing on four RBDL point contacts (redundant rows: minimum-norm multipliers).
fn bricks_on_points(n: usize, rng: &mut Rng) -> Result<(Batch, Vec<ConstraintId>)> {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut corners = Vec::new();
    for (sx, sy) in [(-1.0, -1.0), (-1.0, 1.0), (1.0, -1.0), (1.0, 1.0)] {
        corners.push(t.add_constraint(PointToGround::new(
            brick,
            [sx, sy, -1.0],
            &[[0.0, 0.0, 1.0]],
        )?)?);
    }
    let mut b = Batch::new(t, n)?;
    for i in 0..n {
        let h = [
            rng.uniform(0.1, 0.5),
            rng.uniform(0.1, 0.5),
            rng.uniform(0.05, 0.2),
        ];
        let m = rng.uniform(1.0, 5.0);
        let (a2, b2, c2) = (4.0 * h[0] * h[0], 4.0 * h[1] * h[1], 4.0 * h[2] * h[2]);
        b.set_mass_properties(
            brick,
            i,
            m,
            [0.0; 3],
            [
                m / 12.0 * (b2 + c2),
                m / 12.0 * (a2 + c2),
                m / 12.0 * (a2 + b2),
                0.0,
                0.0,
                0.0,
            ],
        )?;
        for (c, (sx, sy)) in
            corners
                .iter()
                .zip([(-1.0, -1.0), (-1.0, 1.0), (1.0, -1.0), (1.0, 1.0)])
        {
            b.set_param(*c, "point", i, &[sx * h[0], sy * h[1], -h[2]])?;
        }
        b.set_q(
            brick,
            i,
            [
                1.0,
                0.0,
                0.0,
                0.0,
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                h[2],
            ],
        )?;
        b.set_applied_force(
            brick,
            i,
            [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), 0.0],
        )?;
    }
    Ok((b, corners))
}

fn main() -> Result<()> {
    let total: usize = std::env::args()
        .nth(1)
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("N must be a positive integer, got {s:?}"))
        })
        .unwrap_or(100_000);
    let share = |f: f64| ((total as f64 * f).round() as usize).max(1);
    let mut rng = Rng(2026);
    let build = Instant::now();
    let (rolling, c_rolling) = balls_on_inclines(share(0.3), true, &mut rng)?;
    let (sliding, c_sliding) = balls_on_inclines(share(0.2), false, &mut rng)?;
    let (turntables, c_table) = balls_on_turntables(share(0.2), &mut rng)?;
    let (sticks, c_stick) = pinned_sticks(share(0.2), &mut rng)?;
    let (bricks, corners) = bricks_on_points(share(0.1), &mut rng)?;
    let build_s = build.elapsed().as_secs_f64();

    // Physical normal force on the ball/follower = −λz (Simbody's sign); on the brick, the sum
    // of RBDL physical forces along the normals.
    let plane_normal = |c: ConstraintId| {
        move |ev: &Evaluation, i: usize| -ev.constraints[c.0].multipliers_of(i).unwrap()[2]
    };
    let rows = vec![
        summarize("rolling ball on incline", &rolling, plane_normal(c_rolling)),
        summarize("sliding ball on incline", &sliding, plane_normal(c_sliding)),
        summarize("ball on turntable", &turntables, plane_normal(c_table)),
        summarize("stick on no-slip point", &sticks, plane_normal(c_stick)),
        summarize("brick on 4 point contacts", &bricks, |ev, i| {
            corners
                .iter()
                .map(|c| {
                    ev.constraints[c.0]
                        .contact_force
                        .as_ref()
                        .map_or(0.0, |f| f[i][2])
                })
                .sum()
        }),
    ];
    let n: usize = rows.iter().map(|r| r.n).sum();
    let eval_s: f64 = rows.iter().map(|r| r.seconds).sum();
    println!(
        "simbatch quickstart: {n} systems in {} batches, f64 CPU path on {} threads (built in {:.2} s)\n",
        rows.len(),
        rayon::current_num_threads(),
        build_s
    );
    println!(
        "{:<27} {:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "batch", "N", "flagged", "max|perr|", "max|verr|", "max|aerr|", "mean N [N]", "time [ms]"
    );
    for r in &rows {
        println!(
            "{:<27} {:>8} {:>8} {:>10.2e} {:>10.2e} {:>10.2e} {:>12.4} {:>9.1}",
            r.name,
            r.n,
            r.flagged,
            r.max_perr,
            r.max_verr,
            r.max_aerr,
            r.mean_normal_force,
            r.seconds * 1e3
        );
    }
    println!(
        "\nevaluated {n} instances in {:.1} ms: {:.0} instance-evaluations/s; {} flagged",
        eval_s * 1e3,
        n as f64 / eval_s,
        rows.iter().map(|r| r.flagged).sum::<usize>()
    );
    println!("max|aerr| is the acceleration error at the constrained u̇: the solve's residual.");
    Ok(())
}
