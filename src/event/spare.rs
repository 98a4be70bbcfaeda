//! Spare event vectors: two per thread, for the vectors that carry events from one stage of a
//! translation to the next within a single call.
//!
//! The reader, the sequencer and the writer hand events on in vectors that are empty again when
//! the call that filled them returns (`Pipeline::push` and the others). Kept by each stream,
//! those vectors lived as long as the stream: four events (280 bytes each) make 1,120 bytes,
//! the allocator's 1,280-byte class, and a stream held up to three of them, made when it first
//! read an event off the fast path and made again after every quiet spell (which let them go).
//! How many a gateway held then followed its streams' timing, and under the soak that class was
//! where the allocator's pages drifted while the program's own allocations stayed flat
//! (`benches/ALLOCATOR.md`). Lent by the thread, there are two per thread whatever the streams.
//!
//! Hand-written, as no crate offers a per-thread free list of `Vec<T>`: a spare is taken out of
//! its `Cell` and put back, never borrowed, so a third loan under way, or one while the thread
//! is ending, gets a new vector instead of a panic.

use std::cell::Cell;

use super::Event;

/// A vector that grew past this many events (a burst of events in one read) goes back to the
/// allocator rather than staying with the thread.
const MAX_KEPT_EVENTS: usize = 64;

thread_local! {
    /// Two: a call has at most two loans at once (the reader's output, and within it the
    /// AG-UI reader's resolved events or the sequencer's output). A slot without capacity is
    /// empty.
    static SPARES: [Cell<Vec<Event>>; 2] = const { [Cell::new(Vec::new()), Cell::new(Vec::new())] };
}

/// An empty vector: one of this thread's spares, or a new one that allocates when first pushed
/// to. Give it back ([`give_back`]) when its events have been taken.
#[inline]
pub fn lend() -> Vec<Event> {
    SPARES
        .try_with(|[first, second]| {
            let spare = first.take();
            if spare.capacity() > 0 {
                spare
            } else {
                second.take()
            }
        })
        .unwrap_or_default()
}

/// Keeps `events`' allocation for the thread's next [`lend`]; what it still holds is dropped.
#[inline]
pub fn give_back(mut events: Vec<Event>) {
    if events.capacity() == 0 || events.capacity() > MAX_KEPT_EVENTS {
        return;
    }
    events.clear();
    // Both slots taken: the older spare goes back to the allocator. A thread that is ending
    // drops `events` with the closure.
    let _ = SPARES.try_with(|[first, second]| {
        let before = first.replace(events);
        if before.capacity() > 0 {
            drop(second.replace(before));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventBase, RunStarted};

    fn event() -> Event {
        Event::RunStarted(RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            protocol_version: None,
            parent_run_id: None,
            input: None,
            base: EventBase::default(),
        })
    }

    #[test]
    fn a_vector_given_back_is_lent_again_empty() {
        let mut events = lend();
        events.push(event());
        let at = events.as_ptr();
        give_back(events);
        let again = lend();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the allocation is the one given back");
        give_back(again);
    }

    #[test]
    fn nested_loans_are_distinct_and_the_thread_keeps_two() {
        let lent: Vec<Vec<Event>> = (0..4)
            .map(|_| {
                let mut v = lend();
                v.push(event());
                v
            })
            .collect();
        let at: Vec<_> = lent.iter().map(|v| v.as_ptr()).collect();
        assert!(at.windows(2).all(|w| w[0] != w[1]));
        lent.into_iter().for_each(give_back);
        // The last two given back are kept, newest first; a third loan is a new vector.
        let (a, b, c) = (lend(), lend(), lend());
        assert_eq!(a.as_ptr(), at[3]);
        assert_eq!(b.as_ptr(), at[2]);
        assert_eq!(c.capacity(), 0);
        give_back(a);
        give_back(b);
    }

    #[test]
    fn a_vector_grown_by_a_burst_is_not_kept() {
        // Empty the pool so that what is lent next is new.
        while lend().capacity() > 0 {}
        let mut burst = lend();
        burst.extend((0..MAX_KEPT_EVENTS + 1).map(|_| event()));
        give_back(burst);
        assert_eq!(lend().capacity(), 0);
    }
}
