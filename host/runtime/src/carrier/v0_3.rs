//! `switchyard:carrier/carrier@0.3.0` carriers, answering in 0.4.0's types.
//! The two versions share every type but `intake`, and differ in two
//! functions: a 0.3.0 `received` answers no spans, and its `publish-batch`
//! takes one record per message (a [`super::PackedBatch`] unpacked).

use wasmtime::Store;

use super::Intake;
use crate::bindings::carrier_v0_3::Carrier;
use crate::sandbox::SandboxState;

pub(super) fn received(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    handle: u64,
    data: &[u8],
    now_ms: u64,
) -> wasmtime::Result<Intake> {
    let answer = b
        .switchyard_carrier0_3_0_protocol()
        .call_received(s, handle, data, now_ms)?;
    Ok(Intake {
        actions: answer.actions,
        consumed: answer.consumed,
        claim: answer.claim,
        deliveries: Vec::new(),
    })
}
