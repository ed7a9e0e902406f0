//! Hands the allocator's free pages back to the system after a large file was parsed.
//!
//! Parsing a large tracker file allocates and frees tens of megabytes of small blocks (the
//! previous parse once its last reader lets go, the decode's temporaries, a rewrite's
//! element trees). glibc keeps freed small blocks inside its arenas for reuse, and pages that
//! hold nothing but free blocks stay resident: at 20,000 issues, a hundred hand-offs (each a
//! rewrite and a re-parse) left over 100 MiB resident that no allocation used. `malloc_trim`
//! gives back every whole free page of every arena; it costs one walk of the free lists, paid
//! once per parse of a file of at least [`LARGE_FILE`].

/// Files from this size on are followed by a trim; smaller parses leave little behind.
pub const LARGE_FILE: usize = 1 << 20;

/// Returns whole free pages held by the allocator to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_pages() {
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
pub fn release_free_pages() {}
