//! The HTML player: one self-contained page (no network; the scene is inline JSON and the
//! player is inline script drawing on a 2-D canvas) that plays the instances in 3-D with orbit
//! controls (drag to turn, wheel to zoom), a time slider, play/pause, and each instance's
//! inputs beside it.

use serde_json::{Value, json};

use crate::constraints::Decoration;
use crate::render::draw::PALETTE;
use crate::render::{Layout, Scene, state_colour};

const PLAYER: &str = include_str!("player.html");

fn decoration(d: &Decoration) -> Value {
    match d {
        Decoration::Plane {
            origin,
            axes,
            half_width,
        } => json!({"t": "plane", "o": origin, "a": axes, "h": half_width}),
        Decoration::Sphere {
            center,
            radius,
            axes,
        } => json!({"t": "sphere", "c": center, "r": radius, "a": axes}),
        Decoration::Point { position, radius } => json!({"t": "point", "p": position, "r": radius}),
        Decoration::ContactPoint { position } => json!({"t": "cp", "p": position}),
        Decoration::Force { point, force } => json!({"t": "force", "p": point, "f": force}),
    }
}

/// The scene as the player's JSON.
pub fn scene_json(scene: &Scene, title: &str, speed: f64, layout: Layout) -> Value {
    let tracks: Vec<Value> = scene
        .tracks
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let frames: Vec<Value> = t
                .frames
                .iter()
                .map(|f| {
                    json!({
                        "t": f.time,
                        "s": f.status,
                        "b": f.bodies.iter().map(|b| json!({"n": b.name, "free": b.free, "o": b.origin, "a": b.axes})).collect::<Vec<_>>(),
                        "c": f.constraints.iter().map(|c| json!({
                            "k": c.kind,
                            "st": c.state.name(),
                            "col": state_colour(c.state),
                            "d": c.decorations.iter().map(decoration).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({
                "instance": t.instance,
                "colour": PALETTE[k % PALETTE.len()],
                "inputs": t.inputs.iter().map(|(n, v)| json!([n, v])).collect::<Vec<_>>(),
                "frames": frames,
            })
        })
        .collect();
    let layout = match layout {
        Layout::Panels => "panels",
        Layout::Overlay => "overlay",
    };
    json!({"title": title, "up": scene.up, "speed": speed, "layout": layout, "tracks": tracks})
}

/// The page for `scene`.
pub fn page(scene: &Scene, title: &str, speed: f64, layout: Layout) -> String {
    // Non-finite numbers become null in JSON; the player skips them.
    let data = scene_json(scene, title, speed, layout)
        .to_string()
        .replace("</", "<\\/");
    let title = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    PLAYER
        .replace("__TITLE__", &title)
        .replace("__SCENE__", &data)
}
