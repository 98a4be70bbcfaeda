//! Every request parser on any bytes: the AG-UI and HAI run requests (each one's fast strict
//! reading and its lenient one give the same answer; ids always there, or a 400), and the AAP
//! face's REST bodies. No panic; a refusal is `INVALID_REQUEST` with a message.
#![no_main]

use dialect_proxy::dialect::aap::types::{CreateSession, TurnRequest};
use dialect_proxy::dialect::agui::{read_request, read_request_lenient};
use dialect_proxy::dialect::field_error::parse_object;
use dialect_proxy::dialect::hai::{self, HistoryContent};
use dialect_proxy::error::{ErrorCode, Failure};
use dialect_proxy::event::RunAgentInput;
use dialect_proxy_fuzz::MAPPINGS;
use libfuzzer_sys::fuzz_target;

fn refused(failure: &Failure) {
    assert_eq!(failure.code, ErrorCode::InvalidRequest, "{failure}");
    assert!(!failure.message.is_empty());
}

/// A fast reading and its lenient one: the same input with both ids, or the same refusal.
fn agree(read: Result<RunAgentInput, Failure>, lenient: Result<RunAgentInput, Failure>) {
    match (&read, &lenient) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b);
            assert!(!a.thread_id.is_empty() && !a.run_id.is_empty());
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.message, b.message);
            refused(a);
        }
        _ => panic!("the readings differ: {read:?} against {lenient:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&select, body)) = data.split_first() else {
        return;
    };
    let mappings = &*MAPPINGS;
    match select % 4 {
        0 => agree(
            read_request(body, &mappings.agui),
            read_request_lenient(body, &mappings.agui),
        ),
        1 => {
            let ids = || {
                let mut n = 0;
                move || {
                    n += 1;
                    format!("minted-{n}")
                }
            };
            for content in [HistoryContent::Decode, HistoryContent::Verbatim] {
                agree(
                    hai::read_request(body, mappings, content, &mut ids()),
                    hai::read_request_lenient(body, mappings, content, &mut ids()),
                );
            }
        }
        2 => {
            if let Err(message) = parse_object::<CreateSession>(body) {
                assert!(!message.is_empty());
            }
        }
        _ => {
            if let Err(message) = parse_object::<TurnRequest>(body) {
                assert!(!message.is_empty());
            }
        }
    }
});
