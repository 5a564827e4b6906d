//! Pictures: a rendered frame of a known scene checked pixel by pixel, decorations checked on
//! closed-form forces, environments' `rgb_array` pictures; `study.rs`: replays of study
//! instances equal to the study's own results, the GIF decoded with its frame count, the HTML
//! player opened in headless Chromium, and plot tick labels that differ.

mod study;

use std::path::PathBuf;

use simbatch::constraints::Decoration;
use simbatch::cpu::unilateral::{Coefficients, ContactMode, EventOptions, UnilateralContact};
use simbatch::prelude::*;
use simbatch::render::{
    Canvas, ConstraintPicture, ContactState, InstanceFrame, Layout, RenderOptions, Renderer, Scene,
    Track, capture,
};

pub(super) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simbatch-render-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const IDENTITY: [[f64; 3]; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

/// One frame of a ball of radius 0.2 at `center` over the ground plane (or the plane alone).
fn ball_scene(center: Option<[f64; 3]>) -> Scene {
    let mut decorations = vec![Decoration::Plane {
        origin: [0.0; 3],
        axes: IDENTITY,
        half_width: 1.0,
    }];
    if let Some(c) = center {
        decorations.push(Decoration::Sphere {
            center: c,
            radius: 0.2,
            axes: IDENTITY,
        });
    }
    Scene {
        up: [0.0, 0.0, 1.0],
        tracks: vec![Track {
            instance: 0,
            inputs: vec![],
            frames: vec![InstanceFrame {
                time: 0.0,
                status: 0,
                bodies: vec![],
                constraints: vec![ConstraintPicture {
                    kind: "sphere_on_plane",
                    state: ContactState::Bilateral,
                    decorations,
                }],
            }],
        }],
    }
}

fn fixed_view(center: [f64; 3]) -> RenderOptions {
    RenderOptions {
        width: 320,
        height: 240,
        samples: 1,
        labels: false,
        view: Some((center, 1.0)),
        layout: Layout::Panels,
    }
}

/// Pixels where two pictures differ, as (x, y).
fn differing(a: &Canvas, b: &Canvas) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for y in 0..a.height() {
        for x in 0..a.width() {
            if a.get(x, y) != b.get(x, y) {
                out.push((x as f64 + 0.5, y as f64 + 0.5));
            }
        }
    }
    out
}

#[test]
fn a_ball_at_the_view_centre_lands_on_the_image_centre_with_its_projected_size() {
    // The fixed camera looks at the view centre, so a ball there is drawn around the image
    // centre; its drawn area is that of a disc of radius f r / d (pinhole camera, focal length
    // f = (h/2) / tan(fov/2) in pixels, d the eye's distance to the ball).
    let center = [0.0, 0.0, 0.2];
    let options = fixed_view(center);
    let with = ball_scene(Some(center));
    let without = ball_scene(None);
    let a = Renderer::new(&with, options).unwrap().frame(0).unwrap();
    let b = Renderer::new(&without, options).unwrap().frame(0).unwrap();
    let ball = differing(&a, &b);
    assert!(ball.len() > 100, "the ball is drawn: {} pixels", ball.len());
    let n = ball.len() as f64;
    let (cx, cy) = ball
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    assert!(
        (cx - 160.0).abs() < 1.5 && (cy - 120.0).abs() < 1.5,
        "centre ({cx}, {cy})"
    );
    let renderer = Renderer::new(&with, options).unwrap();
    let cam = renderer.camera_of(0).unwrap();
    let d = (cam.eye - nalgebra::Vector3::from(center)).norm();
    let focal = 120.0 / (0.5 * simbatch::render::camera::FIELD_OF_VIEW).tan();
    let expected = focal * 0.2 / d;
    let drawn = (n / std::f64::consts::PI).sqrt();
    assert!(
        (drawn / expected - 1.0).abs() < 0.05,
        "radius {drawn} px, pinhole {expected} px"
    );
    // Below the ball on the picture lies the plane (blue-grey, not the background); the top
    // corner sees past the square of half-width 1.
    let below = a.get(160, (120.0 + expected + 12.0) as usize).unwrap();
    assert!(
        below[2] > below[0] + 15,
        "plane colour below the ball: {below:?}"
    );
    assert_eq!(a.get(2, 2).unwrap(), [246, 246, 244]);
    // A ball moved along the camera's right axis moves right on the picture by f x / d.
    let shifted = [cam.right.x * 0.3, cam.right.y * 0.3, 0.2];
    let moved = Renderer::new(&ball_scene(Some(shifted)), options)
        .unwrap()
        .frame(0)
        .unwrap();
    let pts = differing(&moved, &b);
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / pts.len() as f64;
    let d_shift = (cam.eye - nalgebra::Vector3::from(shifted)).dot(&(-cam.forward));
    let expected_x = 160.0 + focal * 0.3 / d_shift;
    assert!(
        (mx - expected_x).abs() < 2.0,
        "x {mx}, expected {expected_x}"
    );
}

#[test]
fn render_settings_are_checked() {
    let scene = ball_scene(Some([0.0, 0.0, 0.2]));
    for (w, h, s) in [(8, 240, 1), (320, 9000, 1), (320, 240, 0), (320, 240, 9)] {
        let options = RenderOptions {
            width: w,
            height: h,
            samples: s,
            ..RenderOptions::default()
        };
        let err = Renderer::new(&scene, options).unwrap_err().to_string();
        assert!(err.contains("render"), "{err}");
    }
    let empty = Scene {
        up: [0.0, 0.0, 1.0],
        tracks: vec![],
    };
    assert!(Renderer::new(&empty, RenderOptions::default()).is_err());
}

fn ball_batch(unilateral_height: f64) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.3, -0.2, unilateral_height])
        .unwrap();
    batch
        .set_mass_properties(ball, 0, 2.0, [0.0; 3], [0.008, 0.008, 0.008, 0.0, 0.0, 0.0])
        .unwrap();
    (batch, ball, c)
}

#[test]
fn a_resting_ball_is_pictured_with_its_weight_at_the_contact_point() {
    let (batch, _, _) = ball_batch(0.1);
    let frame = capture(&batch, 0).unwrap();
    assert_eq!(frame.bodies.len(), 1);
    assert_eq!(frame.bodies[0].origin, [0.3, -0.2, 0.1]);
    let d = &frame.constraints[0].decorations;
    let force = d
        .iter()
        .find_map(|d| match d {
            Decoration::Force { point, force } => Some((*point, *force)),
            _ => None,
        })
        .unwrap();
    // m g up, at the contact point under the centre.
    assert!((force.1[2] - 2.0 * 9.81).abs() < 1e-9 && force.1[0].abs() < 1e-12);
    assert!((force.0[0] - 0.3).abs() < 1e-12 && force.0[2].abs() < 1e-12);
    assert!(
        d.iter()
            .any(|d| matches!(d, Decoration::Sphere { radius, .. } if *radius == 0.1))
    );
    assert!(
        d.iter()
            .any(|d| matches!(d, Decoration::Plane { half_width, .. } if *half_width == 1.0))
    );
}

#[test]
fn a_unilateral_contact_in_the_air_is_open_with_no_force_and_touching_it_rolls() {
    use simbatch::cpu::unilateral::contact_multipliers;
    for (height, open) in [(0.6, true), (0.1, false)] {
        let (batch, _, c) = ball_batch(height);
        let contacts = [UnilateralContact {
            constraint: c,
            coefficients: Coefficients::with_friction(0.5, 0.6).unwrap(),
        }];
        let (lambda, modes) = contact_multipliers(
            &batch,
            0,
            &contacts,
            &[ContactMode::Stick],
            &EventOptions::default(),
        )
        .unwrap();
        if open {
            assert_eq!(modes, vec![ContactMode::Open]);
            assert!(lambda.iter().all(|l| *l == 0.0));
        } else {
            assert_eq!(modes, vec![ContactMode::Stick]);
            // The normal row carries the weight (Simbody's sign: λz = −m g).
            assert!(
                lambda.iter().any(|l| (l + 2.0 * 9.81).abs() < 1e-9),
                "{lambda:?}"
            );
        }
    }
}

#[test]
fn environments_render_rgb_arrays_of_their_state() {
    use simbatch::env::{EnvOptions, VectorEnv, make_task};
    for name in simbatch::env::TASK_NAMES {
        let task = make_task(name, &[]).unwrap();
        let mut env = VectorEnv::new(task, 2, EnvOptions::default()).unwrap();
        let mut obs = vec![0.0f32; 2 * env.spec().observation.dim()];
        env.reset(Some(3), None, &mut obs).unwrap();
        let a = env.render(0, 160, 120).unwrap();
        assert_eq!(
            (a.width(), a.height(), a.pixels().len()),
            (160, 120, 160 * 120 * 3)
        );
        let drawn = a
            .pixels()
            .chunks(3)
            .filter(|p| *p != [246, 246, 244])
            .count();
        assert!(drawn > 2000, "{name}: {drawn} pixels drawn");
        assert_eq!(a, env.render(0, 160, 120).unwrap(), "{name}: deterministic");
        assert!(env.render(2, 160, 120).is_err());
    }
}

#[test]
fn a_custom_constraint_is_pictured_as_its_bodies_frames() {
    // A pendulum rod (custom, no decorations of its own): its body is drawn as its axes.
    let mut t = SystemTemplate::new();
    let bob = t.add_free_body("bob");
    t.add_constraint(simbatch::custom::DistanceRod::new(
        bob,
        [0.0; 3],
        [0.0, 0.0, 1.0],
        1.0,
    ))
    .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_q(bob, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        .unwrap();
    let frame = capture(&batch, 0).unwrap();
    assert!(frame.constraints[0].decorations.is_empty());
    assert_eq!(frame.bodies[0].axes, IDENTITY);
    let scene = Scene {
        up: [0.0, 0.0, 1.0],
        tracks: vec![Track {
            instance: 0,
            inputs: vec![],
            frames: vec![frame],
        }],
    };
    let options = fixed_view([0.0, 0.0, 0.0]);
    let picture = Renderer::new(&scene, options).unwrap().frame(0).unwrap();
    // The x axis red, y green, z blue, from the image centre.
    let count = |f: &dyn Fn([u8; 3]) -> bool| {
        (0..240)
            .flat_map(|y| (0..320).map(move |x| (x, y)))
            .filter(|&(x, y)| f(picture.get(x, y).unwrap()))
            .count()
    };
    assert!(
        count(&|c| c[0] > 170 && c[1] < 90 && c[2] < 90) > 10,
        "x axis"
    );
    assert!(
        count(&|c| c[1] > 130 && c[0] < 90 && c[2] < 90) > 10,
        "y axis"
    );
    assert!(
        count(&|c| c[2] > 170 && c[0] < 90 && c[1] < 110) > 10,
        "z axis"
    );
}
