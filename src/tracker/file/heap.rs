//! Hands the allocator's free pages back to the system after a large file was parsed.
//!
//! Parsing a large tracker file allocates and frees tens of megabytes of small blocks (the
//! previous parse once its last reader lets go, the decode's temporaries, a rewrite's element
//! trees). glibc keeps freed small blocks inside its arenas for reuse, and pages that hold
//! nothing but free blocks stay resident. `malloc_trim` gives back every whole free page of
//! every arena (scale bench, 100 sessions over 20,000 issues, peak RSS with the trim 84–85
//! MiB, without it 90–105 MiB). It walks the free lists holding each arena's lock, a few
//! milliseconds here (up to 160 ms on a loaded machine), so it runs at most once per
//! [`MIN_INTERVAL`]: a burst of hand-offs, each a rewrite and a re-parse, pays for one.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Files from this size on are followed by a trim; smaller parses leave little behind.
pub const LARGE_FILE: usize = 1 << 20;

/// The shortest time between two trims.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// When the last trim ran.
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Returns whole free pages held by the allocator to the system, unless that was done less
/// than [`MIN_INTERVAL`] ago.
pub fn release_free_pages() {
    let now = Instant::now();
    {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| now.duration_since(at) < MIN_INTERVAL) {
            return;
        }
        *last = Some(now);
    }
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: `malloc_trim` takes each arena's lock itself and only releases memory that no
    // allocation holds; its result (whether anything was released) needs no handling.
    unsafe {
        malloc_trim(0);
    }
}

/// Other allocators return memory on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
