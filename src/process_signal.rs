//! Signalling a whole process group. Agents and hooks each run as the leader of a group of
//! their own, so grandchildren (MCP sidecars, background jobs a hook left behind) are reached
//! too; one helper keeps the "a group that is already gone is fine" rule in one place.

use std::io;

pub use rustix::process::Signal;

/// Sends `signal` to the process group led by `pid`. A group that no longer exists is not an
/// error; a pid outside the kernel's range is reported as invalid input.
pub fn signal_group(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    match rustix::process::kill_process_group(pid, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_group_is_not_an_error() {
        // Pids this high are never handed out (the kernel's maximum is 2^22).
        assert!(signal_group(i32::MAX as u32, Signal::KILL).is_ok());
    }

    #[test]
    fn zero_and_out_of_range_pids_are_refused() {
        assert!(signal_group(0, Signal::TERM).is_err());
        assert!(signal_group(u32::MAX, Signal::TERM).is_err());
    }
}
