//! A child process in its own process group, waited on with a deadline and killable as a
//! whole group. Generic (nothing hook-specific) so other supervisors can reuse it.
//!
//! Waiting uses a helper thread blocked in `waitid(WEXITED | WNOWAIT)`: it wakes when the
//! leader exits *without reaping it*, so the leader's pid (= the group id) cannot be recycled
//! while we may still signal the group. The owner then reaps with `Child::wait`.

use std::io;
use std::process::{Child, Command, ExitStatus};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded, never, select};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

/// How a bounded wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The leader exited (and was reaped) with this status.
    Exited(ExitStatus),
    /// The deadline passed first; the group is still running.
    TimedOut,
    /// The cancel channel fired (or its sender was dropped) first; the group is still running.
    Cancelled,
}

/// A spawned process that leads its own process group.
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    pid: Pid,
    /// Receives one message (or disconnects) once the leader has exited (not yet reaped).
    exited: Receiver<()>,
    status: Option<ExitStatus>,
}

/// Spawns `cmd` as the leader of a new process group. `cmd` is consumed and dropped right after
/// the spawn so the parent's copies of any pipe ends it holds are closed (readers see EOF when
/// the child side closes).
pub fn spawn_in_new_group(mut cmd: Command) -> io::Result<GroupChild> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    drop(cmd);
    let pid = Pid::from_child(&child);
    let (tx, rx) = bounded(1);
    let waiter = thread::Builder::new()
        .name(format!("pgwait-{}", child.id()))
        .spawn(move || {
            // Retry only on EINTR; any other outcome means "exited" or "cannot wait".
            while let Err(Errno::INTR) = waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {}
            let _ = tx.send(());
        });
    if let Err(e) = waiter {
        // Without a waiter we cannot honour deadlines: do not leave the group running.
        let _ = kill_process_group(pid, Signal::KILL);
        let _ = child.wait();
        return Err(e);
    }
    Ok(GroupChild {
        child,
        pid,
        exited: rx,
        status: None,
    })
}

impl GroupChild {
    /// The leader's pid, which is also the process group id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the leader exits or `timeout` passes. `Ok(None)` means it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        match self.wait_timeout_or_cancel(timeout, &never())? {
            WaitOutcome::Exited(status) => Ok(Some(status)),
            WaitOutcome::TimedOut | WaitOutcome::Cancelled => Ok(None),
        }
    }

    /// Waits until the leader exits, `timeout` passes, or `cancel` receives a message or is
    /// disconnected (an owner that went away counts as cancellation).
    pub fn wait_timeout_or_cancel(
        &mut self,
        timeout: Duration,
        cancel: &Receiver<()>,
    ) -> io::Result<WaitOutcome> {
        if let Some(status) = self.status {
            return Ok(WaitOutcome::Exited(status));
        }
        let exited = self.exited.clone();
        select! {
            recv(exited) -> _ => self.reap().map(WaitOutcome::Exited),
            recv(cancel) -> _ => Ok(WaitOutcome::Cancelled),
            default(timeout) => Ok(WaitOutcome::TimedOut),
        }
    }

    /// Sends SIGKILL to every process in the group. A group that is already gone is not an error.
    pub fn kill_group(&self) -> io::Result<()> {
        crate::process_signal::signal_group(self.pid.as_raw_nonzero().get() as u32, Signal::KILL)
    }

    /// Kills the whole group and reaps the leader. SIGKILL cannot be caught, so this returns
    /// promptly.
    pub fn kill_and_reap(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.kill_group()?;
        // Wait for the exit notification first so the waiter thread is never left waiting on
        // a pid that we reaped (and the OS might recycle).
        let _ = self.exited.recv();
        self.reap()
    }

    fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for GroupChild {
    /// A group child is never leaked: if the owner bailed out early, kill and reap it.
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.kill_and_reap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_child_exit_is_reported() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("exit 7");
        let mut child = match spawn_in_new_group(cmd) {
            Ok(c) => c,
            Err(e) => panic!("spawn sh: {e}"),
        };
        let status = child.wait_timeout(Duration::from_secs(30));
        assert_eq!(status.ok().flatten().and_then(|s| s.code()), Some(7));
    }

    #[test]
    fn running_child_times_out_then_is_killed() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut child = match spawn_in_new_group(cmd) {
            Ok(c) => c,
            Err(e) => panic!("spawn sleep: {e}"),
        };
        assert!(matches!(
            child.wait_timeout(Duration::from_millis(50)),
            Ok(None)
        ));
        let status = child.kill_and_reap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.ok().and_then(|s| s.signal()), Some(9));
    }

    #[test]
    fn cancel_wins_over_a_long_deadline() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut child = match spawn_in_new_group(cmd) {
            Ok(c) => c,
            Err(e) => panic!("spawn sleep: {e}"),
        };
        let (tx, rx) = bounded(1);
        let _ = tx.send(());
        let outcome = child.wait_timeout_or_cancel(Duration::from_secs(3600), &rx);
        assert!(matches!(outcome, Ok(WaitOutcome::Cancelled)));
        assert!(child.kill_and_reap().is_ok());
    }
}
