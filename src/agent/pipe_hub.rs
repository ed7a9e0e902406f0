//! One thread (`agent-pipes`) serving every agent process's stdout, stderr and exit, instead
//! of a reader and a waiter thread per process: the pipes are non-blocking and registered in
//! one `epoll` set, and the child's exit is noticed through a pidfd (`pidfd_open`, Linux ≥ 5.3)
//! in the same set. Where no pidfd can be opened, a waiter thread reaps that child as before.
//!
//! Per pipe, bytes reach its [`PipeSink`] in the order they were read; a sink that cannot pass
//! its lines on (the consumer's bounded channel is full) holds them, and its pipe leaves the set
//! until they are taken, so a flooding agent blocks on its own pipe without stalling the others.
//! The consumer wakes the hub through a [`Resume`] once it has taken its channel down to half,
//! so a held sink is offered again at once; the [`RETRY`] timer is only the fallback for a
//! consumer that takes lines without saying so. A stalled consumer costs nothing: its pipe is
//! out of the set and no wake comes.

use super::pipes::{Flush, PipeSink};
use super::stream::ExitInfo;
use crossbeam_channel::{Receiver, Sender};
use rustix::event::epoll;
use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStderr, ChildStdout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Stack of the short helper threads (an agent's stdin writer, the exit waiter where no pidfd
/// exists): they only copy bytes or wait, far below this.
pub(crate) const SMALL_STACK: usize = 64 << 10;
/// How often a held sink is offered its lines again when no [`Resume`] wake came.
const RETRY: Duration = Duration::from_millis(2);
/// [`RETRY`] in nanoseconds, as the hub thread reads it at each wait (a test turns the timer
/// off to show that the wakes alone carry a held sink through).
static RETRY_NS: AtomicU64 = AtomicU64::new(RETRY.as_nanos() as u64);
/// Bytes read from one pipe per readiness.
const READ_CHUNK: usize = 64 << 10;
/// Readiness events taken per wait.
const EVENTS_PER_WAIT: usize = 256;
/// The epoll datum of the wake-up eventfd.
const WAKE: u64 = u64::MAX;

/// One process handed to the hub: its pipes, what to do with their bytes, where its exit goes.
pub(crate) struct Watch {
    /// The process, its stdout and stderr already taken out.
    pub child: Child,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub out_sink: Box<dyn PipeSink + Send>,
    pub err_sink: Box<dyn PipeSink + Send>,
    /// Gets the exit once the child is reaped.
    pub exit_tx: Sender<ExitInfo>,
    /// Dropped when both pipes have ended and their sinks passed everything on.
    pub pipes_done: Option<Sender<()>>,
}

struct Hub {
    tx: Sender<Watch>,
    wake: OwnedFd,
}

static HUB: OnceLock<std::io::Result<Hub>> = OnceLock::new();

/// Shared by a sink and the consumer of its bounded channel: the sink marks that it holds
/// lines ([`Resume::hold`]), the consumer, having taken its channel down to half, wakes the
/// hub ([`Resume::taken`]), which then offers the held lines again: a refill of half a channel
/// per wake, not a wake per line.
///
/// No wake is lost: the sink marks, then offers once more before it reports
/// [`Flush::Held`]; the consumer takes, then reads the mark. With a sequentially consistent
/// fence between the two steps on each side, either the sink's second offer finds room or the
/// consumer's read finds the mark.
#[derive(Clone, Default)]
pub(crate) struct Resume(Arc<AtomicBool>);

impl Resume {
    /// The sink's side: its channel refused a line. The caller offers once more afterwards.
    pub(crate) fn hold(&self) {
        self.0.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The consumer's side, after each item it took: `len` items of `cap` are left.
    pub(crate) fn taken(&self, len: usize, cap: usize) {
        if len > cap / 2 {
            return;
        }
        fence(Ordering::SeqCst);
        if self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed) {
            wake_hub();
        }
    }
}

/// Makes the hub thread look at its held sinks (and new watches) now.
fn wake_hub() {
    if let Some(Ok(hub)) = HUB.get() {
        // The counter only has to become non-zero; an overflow (EAGAIN) means it already is.
        let _ = rustix::io::write(&hub.wake, &1u64.to_ne_bytes());
    }
}

/// Hands `watch` to the hub thread (started on first use). On failure the child is killed
/// and reaped, and the error says why.
pub(crate) fn watch(watch: Watch) -> std::io::Result<()> {
    let hub = HUB.get_or_init(start).as_ref();
    let hub = match hub {
        Ok(hub) => hub,
        Err(e) => {
            let mut child = watch.child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                e.kind(),
                format!("agent pipe thread: {e}"),
            ));
        }
    };
    if let Err(e) = hub.tx.send(watch) {
        let mut child = e.into_inner().child;
        let _ = child.kill();
        let _ = child.wait();
        return Err(std::io::Error::other("agent pipe thread has ended"));
    }
    wake_hub();
    Ok(())
}

fn start() -> std::io::Result<Hub> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let flags = rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
    let wake = rustix::event::eventfd(0, flags)?;
    epoll::add(
        &ep,
        &wake,
        epoll::EventData::new_u64(WAKE),
        epoll::EventFlags::IN,
    )?;
    let wake_reader = wake.try_clone()?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("agent-pipes".into())
        .spawn(move || Loop::new(ep, wake_reader, rx).run())?;
    Ok(Hub { tx, wake })
}

/// Which of an entry's descriptors an epoll datum names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Out = 0,
    Err = 1,
    Exit = 2,
}

fn datum(id: u64, slot: Slot) -> epoll::EventData {
    epoll::EventData::new_u64(id << 2 | slot as u64)
}

fn slot_of(datum: u64) -> (u64, Option<Slot>) {
    let slot = match datum & 3 {
        0 => Some(Slot::Out),
        1 => Some(Slot::Err),
        2 => Some(Slot::Exit),
        _ => None,
    };
    (datum >> 2, slot)
}

/// One pipe and its sink; `fd` is `None` once the pipe ended (the sink may still hold lines).
struct Pipe {
    fd: Option<OwnedFd>,
    sink: Box<dyn PipeSink + Send>,
    /// In the epoll set (not while the sink holds lines).
    armed: bool,
    /// The sink holds lines it could not pass on yet.
    held: bool,
}

impl Pipe {
    fn new(fd: OwnedFd, sink: Box<dyn PipeSink + Send>) -> Pipe {
        Pipe {
            fd: Some(fd),
            sink,
            armed: false,
            held: false,
        }
    }

    fn finished(&self) -> bool {
        self.fd.is_none() && !self.held
    }
}

struct Entry {
    out: Pipe,
    err: Pipe,
    /// The unreaped child and its pidfd; `None` once reaped (or when a waiter thread has it).
    child: Option<(Child, OwnedFd)>,
    exit_tx: Sender<ExitInfo>,
    pipes_done: Option<Sender<()>>,
}

impl Entry {
    fn pipe(&mut self, slot: Slot) -> &mut Pipe {
        if slot == Slot::Out {
            &mut self.out
        } else {
            &mut self.err
        }
    }
}

struct Loop {
    ep: OwnedFd,
    wake: OwnedFd,
    rx: Receiver<Watch>,
    entries: HashMap<u64, Entry>,
    /// The entries with a held sink.
    held: BTreeSet<u64>,
    /// Scratch list of [`Self::held`] for one retry round (kept to save an allocation).
    retrying: Vec<u64>,
    next_id: u64,
    buf: Vec<u8>,
}

impl Loop {
    fn new(ep: OwnedFd, wake: OwnedFd, rx: Receiver<Watch>) -> Loop {
        Loop {
            ep,
            wake,
            rx,
            entries: HashMap::new(),
            held: BTreeSet::new(),
            retrying: Vec::new(),
            next_id: 0,
            buf: vec![0u8; READ_CHUNK],
        }
    }

    fn run(mut self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        loop {
            let any_held = !self.held.is_empty();
            let retry = Duration::from_nanos(RETRY_NS.load(Ordering::Relaxed));
            let retry = rustix::event::Timespec {
                tv_sec: retry.as_secs() as _,
                tv_nsec: retry.subsec_nanos() as _,
            };
            events.clear();
            let timeout = any_held.then_some(&retry);
            match epoll::wait(
                &self.ep,
                rustix::buffer::spare_capacity(&mut events),
                timeout,
            ) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    log::error!(error:% = e; "agent pipe thread: epoll wait failed");
                    std::thread::sleep(RETRY);
                }
            }
            for ev in &events {
                let data = ev.data.u64();
                if data == WAKE {
                    self.take_new();
                } else {
                    self.ready(data);
                }
            }
            if any_held {
                self.retry_held();
            }
        }
    }

    /// Drains the wake-up counter and registers every waiting watch.
    fn take_new(&mut self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut count);
        while let Ok(w) = self.rx.try_recv() {
            self.register(w);
        }
    }

    fn register(&mut self, w: Watch) {
        let id = self.next_id;
        self.next_id += 1;
        let out: OwnedFd = w.stdout.into();
        let err: OwnedFd = w.stderr.into();
        for fd in [&out, &err] {
            if let Err(e) = set_nonblocking(fd.as_fd()) {
                log::warn!(error:% = e; "agent pipe: cannot make non-blocking");
            }
        }
        let child = match pidfd(&w.child) {
            Some(fd) => Some((w.child, fd)),
            None => {
                spawn_waiter(w.child, w.exit_tx.clone());
                None
            }
        };
        let mut entry = Entry {
            out: Pipe::new(out, w.out_sink),
            err: Pipe::new(err, w.err_sink),
            child,
            exit_tx: w.exit_tx,
            pipes_done: w.pipes_done,
        };
        for slot in [Slot::Out, Slot::Err] {
            arm(&self.ep, id, slot, entry.pipe(slot));
        }
        if let Some((child, fd)) = &entry.child
            && let Err(e) = epoll::add(&self.ep, fd, datum(id, Slot::Exit), epoll::EventFlags::IN)
        {
            log::warn!(pid:% = child.id(), error:% = e; "agent pipe: cannot watch pidfd");
            if let Some((child, _)) = entry.child.take() {
                spawn_waiter(child, entry.exit_tx.clone());
            }
        }
        self.entries.insert(id, entry);
        self.settle(id);
    }

    fn ready(&mut self, data: u64) {
        let (id, slot) = slot_of(data);
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        match slot {
            Some(Slot::Exit) => reap(&self.ep, entry),
            Some(slot) => read_pipe(&self.ep, id, slot, entry.pipe(slot), &mut self.buf),
            None => {}
        }
        self.settle(id);
    }

    fn retry_held(&mut self) {
        let mut held = std::mem::take(&mut self.retrying);
        held.clear();
        held.extend(self.held.iter().copied());
        for &id in &held {
            if let Some(entry) = self.entries.get_mut(&id) {
                for slot in [Slot::Out, Slot::Err] {
                    let pipe = entry.pipe(slot);
                    if pipe.held {
                        offer(&self.ep, id, slot, pipe);
                    }
                }
            }
            self.settle(id);
        }
        self.retrying = held;
    }

    /// Notes whether the entry holds lines, signals the end of its pipes, and forgets an entry
    /// that has nothing left to do.
    fn settle(&mut self, id: u64) {
        let Some(entry) = self.entries.get_mut(&id) else {
            self.held.remove(&id);
            return;
        };
        if entry.out.held || entry.err.held {
            self.held.insert(id);
        } else {
            self.held.remove(&id);
        }
        let pipes_finished = entry.out.finished() && entry.err.finished();
        if pipes_finished {
            entry.pipes_done = None;
            if entry.child.is_none() {
                self.entries.remove(&id);
            }
        }
    }
}

/// Puts a pipe with an open descriptor into the set, unless its sink holds lines.
fn arm(ep: &OwnedFd, id: u64, slot: Slot, pipe: &mut Pipe) {
    if pipe.armed || pipe.held {
        return;
    }
    let Some(fd) = &pipe.fd else { return };
    match epoll::add(ep, fd, datum(id, slot), epoll::EventFlags::IN) {
        Ok(()) => pipe.armed = true,
        Err(e) => {
            close(ep, pipe);
            pipe.sink.end(Some(std::io::Error::from(e)));
            offer(ep, id, slot, pipe);
        }
    }
}

/// Takes a pipe out of the set and closes it.
fn close(ep: &OwnedFd, pipe: &mut Pipe) {
    if let Some(fd) = pipe.fd.take()
        && pipe.armed
    {
        let _ = epoll::delete(ep, &fd);
    }
    pipe.armed = false;
}

/// One read from a ready pipe into its sink; closes it on end of stream, an error or the
/// sink's word. Then the sink passes its lines on, or the pipe leaves the set until it can.
fn read_pipe(ep: &OwnedFd, id: u64, slot: Slot, pipe: &mut Pipe, buf: &mut [u8]) {
    let Some(fd) = &pipe.fd else { return };
    match rustix::io::read(fd, &mut *buf) {
        Ok(0) => {
            close(ep, pipe);
            pipe.sink.end(None);
        }
        Ok(n) => {
            if !pipe.sink.data(&buf[..n]) {
                close(ep, pipe);
            }
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return,
        Err(e) => {
            close(ep, pipe);
            pipe.sink.end(Some(std::io::Error::from(e)));
        }
    }
    offer(ep, id, slot, pipe);
}

/// Lets the sink pass on what it holds; disarms the pipe while it still holds, re-arms it when
/// it has passed everything on, closes it when nobody takes its lines any more.
fn offer(ep: &OwnedFd, id: u64, slot: Slot, pipe: &mut Pipe) {
    match pipe.sink.flush() {
        Flush::Clear => {
            pipe.held = false;
            arm(ep, id, slot, pipe);
        }
        Flush::Held => {
            pipe.held = true;
            if pipe.armed
                && let Some(fd) = &pipe.fd
            {
                let _ = epoll::delete(ep, fd);
                pipe.armed = false;
            }
        }
        Flush::Gone => {
            pipe.held = false;
            close(ep, pipe);
        }
    }
}

/// The child's pidfd became readable: it has exited; reap it and pass its exit on.
fn reap(ep: &OwnedFd, entry: &mut Entry) {
    let Some((child, fd)) = entry.child.as_mut() else {
        return;
    };
    let info = match child.try_wait() {
        Ok(None) => return,
        Ok(Some(st)) => ExitInfo {
            code: st.code(),
            signal: st.signal(),
        },
        Err(_) => ExitInfo::default(),
    };
    let _ = epoll::delete(ep, &*fd);
    entry.child = None;
    let _ = entry.exit_tx.send(info);
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> rustix::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)
}

/// A pidfd for the child, `None` where the kernel has none (then a waiter thread reaps it).
fn pidfd(child: &Child) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// The fallback without a pidfd: a thread owns the child and reaps it, so no zombie is left.
fn spawn_waiter(mut child: Child, exit_tx: Sender<ExitInfo>) {
    let spawned = std::thread::Builder::new()
        .name("agent-wait".into())
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let info = match child.wait() {
                Ok(st) => ExitInfo {
                    code: st.code(),
                    signal: st.signal(),
                },
                Err(_) => ExitInfo::default(),
            };
            let _ = exit_tx.send(info);
        });
    if let Err(e) = spawned {
        log::error!(error:% = e; "agent pipe: cannot start a waiter thread");
    }
}

/// Turns the fallback timer off for the rest of the process (an hour instead of [`RETRY`]):
/// from then on only a [`Resume`] wake offers a held sink its lines again.
#[cfg(test)]
pub(crate) fn retry_timer_off() {
    RETRY_NS.store(3_600_000_000_000, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::process::{Command, Stdio};

    /// Whole chunks into a bounded channel, `None` at the end; holds what the channel refuses.
    struct Chunks {
        tx: Sender<Option<Vec<u8>>>,
        pending: VecDeque<Option<Vec<u8>>>,
        resume: Resume,
    }
    impl Chunks {
        fn new(tx: Sender<Option<Vec<u8>>>, resume: Resume) -> Chunks {
            Chunks {
                tx,
                pending: VecDeque::new(),
                resume,
            }
        }
    }
    impl PipeSink for Chunks {
        fn data(&mut self, chunk: &[u8]) -> bool {
            self.pending.push_back(Some(chunk.to_vec()));
            true
        }
        fn end(&mut self, _error: Option<std::io::Error>) {
            self.pending.push_back(None);
        }
        fn flush(&mut self) -> Flush {
            while let Some(item) = self.pending.pop_front() {
                let sent = match self.tx.try_send(item) {
                    Err(crossbeam_channel::TrySendError::Full(item)) => {
                        self.resume.hold();
                        self.tx.try_send(item)
                    }
                    other => other,
                };
                match sent {
                    Ok(()) => {}
                    Err(crossbeam_channel::TrySendError::Full(item)) => {
                        self.pending.push_front(item);
                        return Flush::Held;
                    }
                    Err(crossbeam_channel::TrySendError::Disconnected(_)) => return Flush::Gone,
                }
            }
            Flush::Clear
        }
    }

    /// Everything a [`Chunks`] receiver gets until the end.
    fn collect(rx: &Receiver<Option<Vec<u8>>>, resume: &Resume) -> Vec<u8> {
        let mut all = Vec::new();
        loop {
            let item = rx.recv_timeout(Duration::from_secs(30));
            resume.taken(rx.len(), rx.capacity().unwrap_or(0));
            match item {
                Ok(Some(chunk)) => all.extend_from_slice(&chunk),
                Ok(None) => return all,
                Err(e) => panic!("no end of stream: {e}"),
            }
        }
    }

    struct Collect(std::sync::Arc<std::sync::Mutex<(Vec<u8>, bool)>>);
    impl PipeSink for Collect {
        fn data(&mut self, chunk: &[u8]) -> bool {
            if let Ok(mut c) = self.0.lock() {
                c.0.extend_from_slice(chunk);
            }
            true
        }
        fn end(&mut self, error: Option<std::io::Error>) {
            if let Ok(mut c) = self.0.lock() {
                c.1 = error.is_none();
            }
        }
    }

    fn sh(script: &str) -> (Child, ChildStdout, ChildStderr) {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        (child, out, err)
    }

    #[test]
    fn both_pipes_and_the_exit_reach_their_receivers() {
        let (child, stdout, stderr) = sh("echo out; echo err >&2; echo out2; exit 3");
        let (out_tx, out_rx) = crossbeam_channel::bounded(256);
        let err = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), false)));
        let (exit_tx, exit_rx) = crossbeam_channel::bounded(1);
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let resume = Resume::default();
        watch(Watch {
            child,
            stdout,
            stderr,
            out_sink: Box::new(Chunks::new(out_tx, resume.clone())),
            err_sink: Box::new(Collect(err.clone())),
            exit_tx,
            pipes_done: Some(done_tx),
        })
        .expect("watch");
        let exit = exit_rx.recv_timeout(Duration::from_secs(30)).expect("exit");
        assert_eq!(exit.code, Some(3));
        assert!(done_rx.recv_timeout(Duration::from_secs(30)).is_err());
        assert_eq!(collect(&out_rx, &resume), b"out\nout2\n");
        let err = err.lock().expect("lock");
        assert_eq!(err.0, b"err\n");
        assert!(err.1, "stderr ended cleanly");
    }

    #[test]
    fn a_full_consumer_holds_its_pipe_and_loses_no_line() {
        // 2000 lines through a 4-chunk channel: every line arrives, in order.
        let (child, stdout, stderr) =
            sh("i=0; while [ $i -lt 2000 ]; do echo $i; i=$((i+1)); done");
        let (out_tx, out_rx) = crossbeam_channel::bounded(4);
        let err = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), false)));
        let (exit_tx, _exit_rx) = crossbeam_channel::bounded(1);
        let resume = Resume::default();
        watch(Watch {
            child,
            stdout,
            stderr,
            out_sink: Box::new(Chunks::new(out_tx, resume.clone())),
            err_sink: Box::new(Collect(err)),
            exit_tx,
            pipes_done: None,
        })
        .expect("watch");
        let got = String::from_utf8(collect(&out_rx, &resume)).expect("utf-8");
        let want: String = (0..2000).map(|i| format!("{i}\n")).collect();
        assert_eq!(got, want);
    }
}
