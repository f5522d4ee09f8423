//! Recursion that cannot overflow the stack. An API server accepts objects nested up to
//! 10,000 levels (its JSON decoder's limit), in a `managedFields` entry's `fieldsV1` as
//! anywhere else; the walks over field sets and values here recurse once per level, each
//! through [`guard`], which continues on a new stack segment (allocated on the heap,
//! freed on return) when the current one runs low. Cheap when it does not: a comparison
//! of the stack pointer with the thread's limit.

/// Left on the stack before a walk goes one level deeper (debug builds' frames are large).
const RED_ZONE: usize = 256 * 1024;

/// The size of each new stack segment.
const SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `f`, on a new stack segment when fewer than [`RED_ZONE`] bytes are left.
#[inline]
pub fn guard<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}
