//! `simbatch bench --unilateral`: event-driven runs of unilateral contact, on the CPU's event
//! path and on the GPU's event kernels, through the one façade the studies use
//! (`backend::UnilateralRunner`): bouncing balls (one contact, the one-contact kernel) and
//! sliding bricks (four corners, the several-contact kernel).

use super::{CliError, Row, Timing, gpu_bytes_per_instance, host_bytes_per_instance, time};
use crate::backend::UnilateralRunner;
use crate::batch::Batch;
use crate::contact::{Coefficients, ContactRecord, EventOptions};
use crate::gpu::{GpuDevice, GpuOptions, Precision};
use crate::model::ConstraintId;
use crate::scenarios::{bouncing_balls, sliding_bricks};

/// A unilateral benchmark system: its start, its contacts, each instance's coefficients.
type System = (Batch, Vec<ConstraintId>, Vec<Vec<Coefficients>>);

/// A builder of a [`System`] of `n` instances.
type Build = fn(usize) -> crate::Result<System>;

/// The bouncing balls with their one contact's coefficients as lists.
fn balls(n: usize) -> crate::Result<System> {
    let (batch, contact, coefficients) = bouncing_balls(n)?;
    let per = coefficients.into_iter().map(|k| vec![k]).collect();
    Ok((batch, vec![contact], per))
}

/// Bytes a call's records hold (the call's own per-instance memory).
fn record_bytes(records: &[Option<Vec<ContactRecord>>]) -> usize {
    std::mem::size_of_val(records)
        + records
            .iter()
            .flatten()
            .map(|r| std::mem::size_of_val(r.as_slice()))
            .sum::<usize>()
}

/// The unilateral rows at `n` instances of each system: each call runs `k` ms (`--substeps`) of
/// event-driven stepping from the same start (the states stored back first, on both backends,
/// so the GPU keeps its buffers and uploads only the state columns).
#[allow(clippy::too_many_arguments)]
pub(super) fn rows(
    args: &super::BenchArgs,
    n: usize,
    cpu: bool,
    device: &Option<std::sync::Arc<GpuDevice>>,
    workgroups: &[u32],
    precision: Precision,
    gpu_name: &str,
    report: &mut impl FnMut(Row<'_>, f64, Timing),
) -> Result<(), CliError> {
    let systems: [(&str, Build); 2] = [
        ("bouncing ball (unilateral)", balls),
        ("brick 4 corners (unilateral)", sliding_bricks),
    ];
    let fixed = EventOptions::default();
    // Error control: Merson steps within 1e-6, at most 20 ms (the same simulated time a call,
    // counted in the same 1 ms units as the fixed steps' rows).
    let controlled = EventOptions {
        step: 0.02,
        accuracy: Some(1e-6),
        ..fixed
    };
    let variants: Vec<(&str, EventOptions)> = [
        ("fixed", "events", fixed),
        ("rkm", "events-rkm", controlled),
    ]
    .into_iter()
    .filter(|(name, _, _)| args.events.iter().any(|e| e == name))
    .map(|(_, integrator, options)| (integrator, options))
    .collect();
    for ((system, build), &(integrator, options)) in systems
        .into_iter()
        .flat_map(|s| variants.iter().map(move |v| (s, v)))
    {
        let (start, contacts, coefficients) = build(n)?;
        let states: Vec<Vec<f64>> = (0..n).map(|i| start.state_of(i).to_vec()).collect();
        let restore = |batch: &mut Batch| {
            for (i, y) in states.iter().enumerate() {
                batch.store_values(i, start.time()[i], y, 0);
            }
            batch.touch_state_columns();
        };
        let fresh = vec![None; n];
        for &k in &args.substeps {
            let duration = k as f64 * fixed.step;
            let row = |backend, bytes_per_instance, workgroup_size, handed_to_cpu| Row {
                system,
                n,
                backend,
                integrator,
                substeps: k,
                what: "steps",
                bytes_per_instance,
                workgroup_size,
                handed_to_cpu,
            };
            if cpu {
                let mut runner = UnilateralRunner::cpu(&contacts);
                let mut batch = start.clone();
                let mut returned = 0;
                let s = time(
                    || {
                        restore(&mut batch);
                        let call =
                            runner.run(&mut batch, &coefficients, duration, &options, &fresh)?;
                        returned = record_bytes(&call.records);
                        Ok(())
                    },
                    args.seconds,
                )?;
                let bytes = host_bytes_per_instance(&batch, returned.div_ceil(n));
                report(row("cpu", bytes, None, None), (n * k) as f64, s);
            }
            for (d, &workgroup) in device
                .iter()
                .flat_map(|d| workgroups.iter().map(move |w| (d, w)))
            {
                let gpu_options = GpuOptions {
                    workgroup_size: Some(workgroup),
                    fold_shared: args.gpu_unfolded.then_some(false),
                    ..GpuOptions::default()
                };
                let mut batch = start.clone();
                let mut runner =
                    UnilateralRunner::gpu(d.clone(), &batch, &contacts, precision, gpu_options)?;
                if let Some(note) = runner.note() {
                    println!("{system}: GPU row skipped: {note}");
                    continue;
                }
                let mut handed = 0;
                let s = time(
                    || {
                        restore(&mut batch);
                        let call =
                            runner.run(&mut batch, &coefficients, duration, &options, &fresh)?;
                        handed = handed.max(call.handed_to_cpu());
                        Ok(())
                    },
                    args.seconds,
                )?;
                let bytes = gpu_bytes_per_instance(runner.device_bytes(), n);
                report(
                    row(gpu_name, bytes, Some(workgroup), Some(handed)),
                    (n * k) as f64,
                    s,
                );
            }
        }
    }
    Ok(())
}
