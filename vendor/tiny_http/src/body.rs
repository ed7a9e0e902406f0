//! sortie patch: the buffer a request body is read into by the connection's thread (servers
//! with limits). A body of [`MAP_FROM`] bytes or more gets an anonymous memory mapping of its
//! own, unmapped when the request is dropped, so its memory returns to the system whatever
//! the allocator does: glibc's malloc raises its mmap threshold to the largest block freed,
//! so after one large body the next ones came from arenas that kept their pages, and the
//! daemon's RSS stayed hundreds of MiB above idle after a burst of large deliveries. Pages
//! of a mapping become resident only as bytes arrive, so a client that announces a large body
//! and sends little holds little memory.

use std::io::{self, Error as IoError, ErrorKind, Read};

use memmap2::MmapMut;

/// Bodies at least this large are read into a mapping of their own.
pub(crate) const MAP_FROM: usize = 128 * 1024;

pub(crate) enum BodyBuf {
    Heap(Vec<u8>),
    Mapped { map: MmapMut, len: usize },
}

impl AsRef<[u8]> for BodyBuf {
    fn as_ref(&self) -> &[u8] {
        match self {
            BodyBuf::Heap(v) => v,
            BodyBuf::Mapped { map, len } => &map[..*len],
        }
    }
}

impl BodyBuf {
    /// An empty buffer with room for `capacity` bytes.
    fn with_capacity(capacity: usize) -> io::Result<BodyBuf> {
        if capacity >= MAP_FROM {
            return Ok(BodyBuf::Mapped {
                map: MmapMut::map_anon(capacity)?,
                len: 0,
            });
        }
        let mut v = Vec::new();
        v.try_reserve_exact(capacity)
            .map_err(|_| IoError::new(ErrorKind::OutOfMemory, "cannot reserve the request body"))?;
        Ok(BodyBuf::Heap(v))
    }

    fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// Reads once from `source` into the room left, at most `max` more bytes: the bytes read.
    fn read_from<R: Read>(&mut self, source: &mut R, max: usize) -> io::Result<usize> {
        loop {
            let n = match self {
                BodyBuf::Mapped { map, len } => {
                    let end = (*len + max).min(map.len());
                    let n = source.read(&mut map[*len..end]);
                    if let Ok(n) = n {
                        *len += n;
                    }
                    n
                }
                BodyBuf::Heap(v) => {
                    let mut chunk = [0u8; 16 * 1024];
                    let want = max.min(chunk.len());
                    let n = source.read(&mut chunk[..want]);
                    if let Ok(n) = n {
                        v.extend_from_slice(&chunk[..n]);
                    }
                    n
                }
            };
            match n {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }
}

/// Reads a body of exactly `len` bytes.
pub(crate) fn read_exact<R: Read>(source: &mut R, len: usize) -> io::Result<BodyBuf> {
    let mut body = BodyBuf::with_capacity(len)?;
    while body.len() < len {
        if body.read_from(source, len - body.len())? == 0 {
            return Err(IoError::new(
                ErrorKind::ConnectionAborted,
                "Connection has been closed before we received enough data",
            ));
        }
    }
    Ok(body)
}

/// Reads `source` to its end; `None` when it holds more than `max` bytes.
pub(crate) fn read_capped<R: Read>(source: &mut R, max: usize) -> io::Result<Option<BodyBuf>> {
    let mut body = BodyBuf::with_capacity(max)?;
    while body.len() < max {
        if body.read_from(source, max - body.len())? == 0 {
            return Ok(Some(body));
        }
    }
    let mut one = [0u8; 1];
    loop {
        match source.read(&mut one) {
            Ok(0) => return Ok(Some(body)),
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_stay_on_the_heap_and_large_ones_are_mapped() {
        let small = vec![7u8; 1000];
        let b = read_exact(&mut &small[..], 1000).unwrap();
        assert!(matches!(b, BodyBuf::Heap(_)));
        assert_eq!(b.as_ref(), &small[..]);
        let large: Vec<u8> = (0..MAP_FROM + 5).map(|i| i as u8).collect();
        let b = read_exact(&mut &large[..], large.len()).unwrap();
        assert!(matches!(b, BodyBuf::Mapped { .. }));
        assert_eq!(b.as_ref(), &large[..]);
    }

    #[test]
    fn a_short_body_is_an_error_and_a_long_one_too_large() {
        let data = vec![1u8; 10];
        assert!(read_exact(&mut &data[..], 11).is_err());
        assert_eq!(read_capped(&mut &data[..], 10).unwrap().unwrap().as_ref(), &data[..]);
        assert!(read_capped(&mut &data[..], 9).unwrap().is_none());
        let large = vec![2u8; MAP_FROM * 2];
        assert!(read_capped(&mut &large[..], MAP_FROM).unwrap().is_none());
        let b = read_capped(&mut &large[..], MAP_FROM * 3).unwrap().unwrap();
        assert_eq!(b.as_ref().len(), MAP_FROM * 2);
    }
}
