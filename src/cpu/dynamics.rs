//! Free-body equations of motion in Simbody's coordinates `u = (w, v_origin)` (`physics.md` §1).
//!
//! With `c_G = R_GB c`, `S = [c_G]×`, `I_G = R_GB I_c R_GBᵀ`:
//! `M = [[I_G − m S S, m S], [−m S, m·1]]`,
//! `c(q, u) = [w × I_G w + m c_G × (w × (w × c_G)); m w × (w × c_G)]`,
//! forces `f = [c_G × (m g + F) + T; m g + F]` (gravity and applied force act through the COM).

use nalgebra::{Matrix6, Vector6};

use crate::constraints::BodyKinematics;
use crate::math::{Mat3, Vec3, cross_matrix, inertia_matrix};

/// Mass properties of a free body (body frame, about the COM).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MassProperties {
    /// Mass `m > 0`.
    pub mass: f64,
    /// COM offset `c` in the body frame.
    pub com: Vec3,
    /// Inertia about the COM in the body frame.
    pub inertia: Mat3,
}

impl MassProperties {
    /// From the batch's packed columns.
    pub fn from_columns(mass: f64, com: &[f64; 3], inertia: &[f64; 6]) -> Self {
        Self {
            mass,
            com: Vec3::from(*com),
            inertia: inertia_matrix(inertia),
        }
    }
}

/// Loads on a free body besides constraint forces, in Ground.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loads {
    /// Gravity vector.
    pub gravity: Vec3,
    /// Applied force through the COM.
    pub force: Vec3,
    /// Applied torque.
    pub torque: Vec3,
}

/// Mass matrix `M` of a free body at its pose.
pub fn mass_matrix(props: &MassProperties, rotation: &Mat3) -> Matrix6<f64> {
    let c_g = rotation * props.com;
    let s = cross_matrix(&c_g);
    let m = props.mass;
    let i_g = rotation * props.inertia * rotation.transpose();
    let mut mm = Matrix6::zeros();
    mm.fixed_view_mut::<3, 3>(0, 0)
        .copy_from(&(i_g - m * s * s));
    mm.fixed_view_mut::<3, 3>(0, 3).copy_from(&(m * s));
    mm.fixed_view_mut::<3, 3>(3, 0).copy_from(&(-m * s));
    mm.fixed_view_mut::<3, 3>(3, 3)
        .copy_from(&(m * Mat3::identity()));
    mm
}

/// `f − c(q, u)`: applied generalized forces minus velocity-product terms.
pub fn applied_minus_coriolis(
    props: &MassProperties,
    kin: &BodyKinematics,
    loads: &Loads,
) -> Vector6<f64> {
    let r = &kin.rotation;
    let w = kin.ang_vel;
    let c_g = r * props.com;
    let m = props.mass;
    let i_g = r * props.inertia * r.transpose();
    let w_x_c = w.cross(&w.cross(&c_g));
    let coriolis_ang = w.cross(&(i_g * w)) + m * c_g.cross(&w_x_c);
    let coriolis_lin = m * w_x_c;
    let f_com = m * loads.gravity + loads.force;
    let f_ang = c_g.cross(&f_com) + loads.torque;
    let mut out = Vector6::zeros();
    out.fixed_rows_mut::<3>(0)
        .copy_from(&(f_ang - coriolis_ang));
    out.fixed_rows_mut::<3>(3)
        .copy_from(&(f_com - coriolis_lin));
    out
}

/// Kinetic plus potential energy of a free body, `½ uᵀ M u − m g · p_com`.
pub fn energy(props: &MassProperties, kin: &BodyKinematics, gravity: &Vec3) -> f64 {
    let mm = mass_matrix(props, &kin.rotation);
    let u = Vector6::new(
        kin.ang_vel.x,
        kin.ang_vel.y,
        kin.ang_vel.z,
        kin.lin_vel.x,
        kin.lin_vel.y,
        kin.lin_vel.z,
    );
    let p_com = kin.origin + kin.rotation * props.com;
    0.5 * u.dot(&(mm * u)) - props.mass * gravity.dot(&p_com)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rotation_from_quaternion;

    /// Newton–Euler about the COM must give the same accelerations as `M u̇ = f − c`.
    #[test]
    fn mass_matrix_agrees_with_newton_euler_about_com() {
        let props = MassProperties {
            mass: 2.5,
            com: Vec3::new(0.1, -0.2, 0.05),
            inertia: inertia_matrix(&[0.3, 0.4, 0.5, 0.01, -0.02, 0.03]),
        };
        let rotation = rotation_from_quaternion(&[0.9, 0.1, -0.3, 0.2]).unwrap();
        let kin = BodyKinematics {
            rotation,
            origin: Vec3::new(1.0, 2.0, 3.0),
            ang_vel: Vec3::new(0.7, -1.1, 2.0),
            lin_vel: Vec3::new(0.3, 0.2, -0.1),
            ang_acc: Vec3::zeros(),
            lin_acc: Vec3::zeros(),
        };
        let loads = Loads {
            gravity: Vec3::new(0.0, 0.0, -9.81),
            force: Vec3::new(1.0, -2.0, 0.5),
            torque: Vec3::new(0.2, 0.1, -0.3),
        };
        let udot = mass_matrix(&props, &rotation)
            .cholesky()
            .unwrap()
            .solve(&applied_minus_coriolis(&props, &kin, &loads));
        let b = Vec3::new(udot[0], udot[1], udot[2]);
        let a_o = Vec3::new(udot[3], udot[4], udot[5]);
        let w = kin.ang_vel;
        let c_g = rotation * props.com;
        let i_g = rotation * props.inertia * rotation.transpose();
        let a_com = a_o + b.cross(&c_g) + w.cross(&w.cross(&c_g));
        let f_total = props.mass * loads.gravity + loads.force;
        assert!((props.mass * a_com - f_total).norm() < 1e-12);
        assert!((i_g * b + w.cross(&(i_g * w)) - loads.torque).norm() < 1e-12);
    }
}
