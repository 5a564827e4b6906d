//! The evaluation kernel's two output orders (`gpu::layout::OutputOrder`): value-major, the
//! default on GPUs, and instance-major, the default on CPU drivers such as lavapipe, give the
//! same bits — every output, a selection, the Jacobians, in f32 and f64, through chunks and
//! several slices — and the CPU's answers. CI's lavapipe would otherwise run only its own
//! default. Also the readback in pieces smaller than a slice, and the kernel's dispatches timed
//! on the device's own clock.

use std::sync::Arc;

use crate::common::device;

use simbatch::golden::{Report, compare_evaluations};
use simbatch::gpu::layout::{Layout, OutputOrder};
use simbatch::prelude::*;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch, point_to_ground_batch};

const ORDERS: [OutputOrder; 2] = [OutputOrder::InstanceMajor, OutputOrder::ValueMajor];

/// An evaluator in `order` whose chunks hold 700 instances (so a batch of thousands takes
/// several chunks, each several output slices).
fn evaluator(
    device: &Arc<GpuDevice>,
    batch: &Batch,
    precision: Precision,
    order: OutputOrder,
) -> GpuEvaluator {
    let layout = Layout::for_batch(batch).unwrap();
    let bytes = precision.bytes() as u64;
    let options = GpuOptions {
        max_binding_bytes: Some(
            (layout.varying_width as u64 * 700 + layout.shared_width as u64) * bytes,
        ),
        output_order: Some(order),
        ..GpuOptions::default()
    };
    let e = GpuEvaluator::new(device.clone(), batch, precision, options).unwrap();
    assert_eq!(e.output_order(), order);
    e
}

#[test]
fn both_output_orders_give_the_same_bits_and_the_cpus_answers() {
    let Some(device) = device() else { return };
    // The default follows the adapter.
    let (rolling, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 2500, 31).unwrap();
    let default = GpuEvaluator::new(
        device.clone(),
        &rolling,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    assert_eq!(
        default.output_order(),
        OutputOrder::for_adapter(device.info.device_type)
    );
    let (ground, _, _) = point_to_ground_batch(2000, 32, 3, true, true).unwrap();
    let (point, _, _) = contact_batch(ContactKind::Point, PlaneBody::Prescribed, 1500, 33).unwrap();
    let mut precisions = vec![(Precision::F32, 2e-4)];
    if device.supports_f64 {
        precisions.push((Precision::F64, 1e-9));
    }
    for (name, batch) in [
        ("rolling sphere, free plane", &rolling),
        ("point to ground, 3 normals", &ground),
        ("point on a prescribed plane", &point),
    ] {
        let cpu = batch.evaluate();
        for &(precision, tol) in &precisions {
            let what = format!("{name}, {precision:?}");
            let [mut a, mut b] = ORDERS.map(|order| evaluator(&device, batch, precision, order));
            let (every_a, jac_a) = a.evaluate_with_jacobians(batch).unwrap();
            let (every_b, jac_b) = b.evaluate_with_jacobians(batch).unwrap();
            assert!(a.chunk_count() > 1, "{what}: several chunks");
            assert!(
                a.slice_count() > a.chunk_count(),
                "{what}: several slices a chunk"
            );
            // `assert!`, not `assert_eq!`: a failure would print megabytes of values.
            assert!(every_a == every_b, "{what}: every output differs");
            assert!(jac_a == jac_b, "{what}: Jacobians and bias differ");
            assert!(every_a == a.evaluate(batch).unwrap(), "{what}");
            let mut dyn_a = Evaluation::default();
            let mut dyn_b = Evaluation::default();
            a.evaluate_outputs_into(batch, Outputs::DYNAMICS, &mut dyn_a)
                .unwrap();
            b.evaluate_outputs_into(batch, Outputs::DYNAMICS, &mut dyn_b)
                .unwrap();
            assert!(dyn_a == dyn_b, "{what}: u̇ and λ differ");
            assert!(
                dyn_a.udot == every_a.udot,
                "{what}: u̇ differs from every output's"
            );
            // Not both wrong the same way: the CPU's answers.
            let mut report = Report::default();
            compare_evaluations(&every_b, &cpu, tol, &mut report).unwrap();
            assert!(report.passed(), "{what}:\n{report}");
        }
    }
}

/// A slice read back through staging smaller than itself, in pieces of 97 instances (one
/// copy per value and piece when value-major, one per column when instance-major), gives the
/// bits of a readback in one piece: every output, the Jacobians, and u̇ and λ alone (whose
/// pieces are longer: staging holds more of their narrower rows), in both orders, through one
/// slice and through several chunks of several slices each.
#[test]
fn readback_in_pieces_changes_no_bit() {
    let Some(device) = device() else { return };
    let (batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 2500, 41).unwrap();
    let layout = Layout::for_batch(&batch).unwrap();
    let output_bytes = layout.output_width as u64 * 4;
    let chunked = (layout.varying_width as u64 * 700 + layout.shared_width as u64) * 4;
    for order in ORDERS {
        for binding in [None, Some(chunked)] {
            let what = format!("{order:?}, binding {binding:?}");
            let make = |staging_bytes| {
                let options = GpuOptions {
                    max_binding_bytes: binding,
                    output_order: Some(order),
                    staging_bytes,
                    ..GpuOptions::default()
                };
                GpuEvaluator::new(device.clone(), &batch, Precision::F32, options).unwrap()
            };
            let mut whole = make(None);
            let mut pieces = make(Some(97 * output_bytes));
            let (every_a, jac_a) = whole.evaluate_with_jacobians(&batch).unwrap();
            let (every_b, jac_b) = pieces.evaluate_with_jacobians(&batch).unwrap();
            assert_eq!(whole.slice_count(), pieces.slice_count(), "{what}");
            assert!(every_a == every_b, "{what}: every output differs");
            assert!(jac_a == jac_b, "{what}: Jacobians and bias differ");
            let mut dyn_a = Evaluation::default();
            let mut dyn_b = Evaluation::default();
            whole
                .evaluate_outputs_into(&batch, Outputs::DYNAMICS, &mut dyn_a)
                .unwrap();
            pieces
                .evaluate_outputs_into(&batch, Outputs::DYNAMICS, &mut dyn_b)
                .unwrap();
            assert!(dyn_a == dyn_b, "{what}: u̇ and λ differ");
            assert!(dyn_b.udot == every_b.udot, "{what}: u̇ differs");
            // Two staging buffers of 97 instances' outputs, not one of the slice's.
            assert!(
                pieces.device_bytes() < whole.device_bytes(),
                "{what}: {} B against {} B",
                pieces.device_bytes(),
                whole.device_bytes()
            );
        }
        let cpu = batch.evaluate();
        let mut report = Report::default();
        let ev = {
            let options = GpuOptions {
                output_order: Some(order),
                staging_bytes: Some(97 * output_bytes),
                ..GpuOptions::default()
            };
            let mut e = GpuEvaluator::new(device.clone(), &batch, Precision::F32, options).unwrap();
            e.evaluate(&batch).unwrap()
        };
        compare_evaluations(&ev, &cpu, 2e-4, &mut report).unwrap();
        assert!(report.passed(), "{order:?}:\n{report}");
    }
}

/// The kernel timed on the device's own clock (timestamp queries, the bench's `evaluations
/// (kernel, device clock)` row): where the adapter has them, a positive span no longer than the
/// host's wait for the same dispatches, through one slice and through several chunks; where it
/// has none, no figure.
#[test]
fn the_kernel_timed_on_the_device_clock_fits_inside_the_hosts_wait() {
    let Some(device) = device() else { return };
    let (batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 5000, 8).unwrap();
    let layout = Layout::for_batch(&batch).unwrap();
    let chunked = GpuOptions {
        max_binding_bytes: Some(
            (layout.varying_width as u64 * 700 + layout.shared_width as u64) * 4,
        ),
        ..GpuOptions::default()
    };
    for options in [GpuOptions::default(), chunked] {
        let mut e = GpuEvaluator::new(device.clone(), &batch, Precision::F32, options).unwrap();
        e.dispatch(&batch).unwrap();
        let host = std::time::Instant::now();
        let timed = e.dispatch_timed(&batch).unwrap();
        let waited = host.elapsed().as_secs_f64();
        match timed {
            Some(t) => assert!(
                t > 0.0 && t <= waited,
                "{t} s on the device, {waited} s waited"
            ),
            None => assert!(!device.supports_timestamps),
        }
    }
}
