//! The `[simulation]` table: integrator, drift control, duration, backend, precision.

use toml::Spanned;

use super::parser::RawSimulation;
use super::*;
use crate::backend::Backend;
use crate::cli::CliError;
use crate::gpu::Precision;
use crate::step::{Integrator, Stabilization, StepOptions};

impl Parser<'_> {
    pub(super) fn simulation(
        &mut self,
        s: &Spanned<RawSimulation>,
    ) -> Result<Simulation, CliError> {
        let loc = self.loc;
        let raw = s.get_ref();
        let positive =
            |v: &Option<Spanned<f64>>, name: &str, default: Option<f64>| -> Result<f64, CliError> {
                match v {
                    Some(x) if x.get_ref().is_finite() && *x.get_ref() > 0.0 => Ok(*x.get_ref()),
                    Some(x) => Err(loc.at(
                        x.span(),
                        format!("simulation.{name}"),
                        format!("got {}; accepted: a finite number > 0", x.get_ref()),
                    )),
                    None => default.ok_or_else(|| {
                        loc.at(
                            s.span(),
                            format!("simulation.{name}"),
                            "missing; accepted: a finite number > 0",
                        )
                    }),
                }
            };
        let duration = positive(&Some(raw.duration.clone()), "duration", None)?;
        let integrator_name = raw
            .integrator
            .as_ref()
            .map_or("rkm", |i| i.get_ref().as_str());
        let integrator = match integrator_name {
            "euler" => Integrator::SemiImplicitEuler {
                step: positive(&raw.step, "step", None)?,
            },
            "rk4" => Integrator::Rk4 {
                step: positive(&raw.step, "step", None)?,
            },
            "rkm" => {
                let accuracy = positive(&raw.accuracy, "accuracy", Some(1e-3))?;
                if accuracy >= 1.0 {
                    return Err(loc.at(
                        raw.accuracy.as_ref().map_or(0..0, |a| a.span()),
                        "simulation.accuracy",
                        format!("got {accuracy}; accepted: a number in (0, 1)"),
                    ));
                }
                Integrator::RungeKuttaMerson {
                    accuracy,
                    max_step: positive(&raw.max_step, "max_step", Some(duration))?,
                }
            }
            other => {
                return Err(loc.at(
                    raw.integrator.as_ref().map_or(0..0, |i| i.span()),
                    "simulation.integrator",
                    format!("{other:?}; accepted: euler, rk4, rkm"),
                ));
            }
        };
        for (name, v, applies) in [
            ("step", &raw.step, integrator_name != "rkm"),
            ("accuracy", &raw.accuracy, integrator_name == "rkm"),
            ("max_step", &raw.max_step, integrator_name == "rkm"),
        ] {
            if let Some(v) = v
                && !applies
            {
                return Err(loc.at(v.span(), format!("simulation.{name}"), format!("does not apply to integrator {integrator_name:?}; accepted: step (euler, rk4), accuracy and max_step (rkm)")));
            }
        }
        let default_tolerance = match integrator {
            Integrator::RungeKuttaMerson { accuracy, .. } => accuracy / 10.0,
            _ => 1e-6,
        };
        let stabilization = match raw
            .stabilization
            .as_ref()
            .map_or("projection", |x| x.get_ref().as_str())
        {
            "none" => Stabilization::None,
            "projection" => Stabilization::Projection {
                tolerance: positive(&raw.tolerance, "tolerance", Some(default_tolerance))?,
            },
            "baumgarte" => Stabilization::Baumgarte,
            other => {
                return Err(loc.at(
                    raw.stabilization.as_ref().map_or(0..0, |x| x.span()),
                    "simulation.stabilization",
                    format!("{other:?}; accepted: none, projection, baumgarte"),
                ));
            }
        };
        // The tolerance is projection's: beside another stabilization nothing reads it. Such
        // files ran before this note and still run; the note says the value has no effect.
        if let Some(t) = &raw.tolerance
            && !matches!(stabilization, Stabilization::Projection { .. })
        {
            let note = loc.at(
                t.span(),
                "simulation.tolerance",
                format!(
                    "ignored: stabilization {:?} does not project (set stabilization = \
                     \"projection\" to use it)",
                    raw.stabilization
                        .as_ref()
                        .map_or("", |x| x.get_ref().as_str())
                ),
            );
            log::warn!("simbatch: {note}");
        }
        let options = StepOptions {
            integrator,
            stabilization,
        };
        options
            .validate()
            .map_err(|e| loc.at(s.span(), "simulation", e.to_string()))?;
        let (step, field, span) = match integrator {
            Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => {
                (step, "simulation.step", raw.step.as_ref().map(|x| x.span()))
            }
            Integrator::RungeKuttaMerson { max_step, .. } => (
                max_step,
                "simulation.max_step",
                raw.max_step.as_ref().map(|x| x.span()),
            ),
        };
        if duration / step > crate::step::MAX_FIXED_STEPS_PER_CALL {
            return Err(loc.at(
                span.unwrap_or(0..0),
                field,
                format!(
                    "got {step}: at least {:e} steps per instance over duration = {duration}; \
                     accepted: a step ≥ duration / {:e}",
                    duration / step,
                    crate::step::MAX_FIXED_STEPS_PER_CALL
                ),
            ));
        }
        let backend = match &raw.backend {
            None => Backend::Auto,
            Some(b) => b.get_ref().parse().map_err(|_| {
                loc.at(
                    b.span(),
                    "simulation.backend",
                    format!("{:?}; accepted: auto, cpu, gpu", b.get_ref()),
                )
            })?,
        };
        let precision = match &raw.precision {
            None => Precision::F32,
            Some(p) => p.get_ref().parse().map_err(|_| {
                loc.at(
                    p.span(),
                    "simulation.precision",
                    format!("{:?}; accepted: f32, f64", p.get_ref()),
                )
            })?,
        };
        Ok(Simulation {
            options,
            duration,
            assemble: raw.assemble.unwrap_or(true),
            backend,
            precision,
        })
    }
}

/// Baumgarte terms act only on the constraints that set `baumgarte_time`, and a time constant
/// only under `stabilization = "baumgarte"`: when one is given without the other nothing it
/// asks for happens, and the run says so on standard error, naming the file, line and key
/// (such files ran silently before and still run).
pub(super) fn baumgarte_notes(
    loc: &Located<'_>,
    raw: &super::parser::Raw,
    constraints: &[ConstraintSpec],
    simulation: &Simulation,
) {
    let timed = constraints.iter().position(|c| {
        matches!(
            c,
            ConstraintSpec::PointToGround {
                baumgarte_time: Some(_),
                ..
            }
        )
    });
    let baumgarte = matches!(simulation.options.stabilization, Stabilization::Baumgarte);
    let note = match timed {
        None if baumgarte => loc.at(
            raw.simulation
                .get_ref()
                .stabilization
                .as_ref()
                .map_or(0..0, |s| s.span()),
            "simulation.stabilization",
            "\"baumgarte\" stabilizes only the constraints that set baumgarte_time, and none \
             does: nothing is stabilized (set baumgarte_time on a point_to_ground constraint, \
             or stabilization = \"projection\")",
        ),
        Some(k) if !baumgarte => loc.at(
            raw.constraint
                .get(k)
                .and_then(|c| c.baumgarte_time.as_ref())
                .map_or(0..0, |t| t.span()),
            format!("constraint[{k}].baumgarte_time"),
            "ignored: only stabilization = \"baumgarte\" uses it",
        ),
        _ => return,
    };
    log::warn!("simbatch: {note}");
}
