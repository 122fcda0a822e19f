//! The event bookkeeping of one device buffer, as plain data: which CUDA events a stream must
//! wait on before it reads, writes or frees the buffer (MXNet RFC 18951).
//!
//! A GPU op completes its engine dependencies as soon as its kernels are *enqueued*. What still
//! orders the kernels on the device is this log: the event recorded after the last kernel that
//! wrote the buffer (and on which stream), and, per stream, the event after the latest kernel
//! that read it. The rules:
//!
//! - same stream: nothing to wait for (a stream runs its kernels in order);
//! - a read on stream S waits for the writer's event if the writer ran on another stream;
//! - a write (and a free, which is a write that ends the buffer) on S also waits for the latest
//!   read on every other stream;
//! - a CPU consumer waits (blocking) only for the writer's event.
//!
//! The log is generic over the event type so that these rules are tested without CUDA; the
//! runtime instantiates it with shared CUDA events.

/// A CUDA stream of one device: `(device index, stream index)`. Streams of different devices
/// are always "other streams".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamId {
    /// The device (`gpuN`).
    pub device: u16,
    /// The stream of that device (the engine worker `gpuN:sK` uses stream K).
    pub stream: u16,
}

/// One recorded access: the stream it was enqueued on and the event recorded after it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Access<E> {
    stream: StreamId,
    event: E,
}

/// The accesses of one buffer that later accesses on other streams must wait for.
///
/// Invariant: at most one reader entry per stream (a later read on a stream supersedes an
/// earlier one, since the stream runs them in order), so the log stays as small as the number
/// of streams; a write clears the readers.
#[derive(Debug)]
pub(crate) struct AccessLog<E> {
    writer: Option<Access<E>>,
    readers: Vec<Access<E>>,
}

impl<E: Clone> AccessLog<E> {
    /// A log with no recorded access yet: the buffer was allocated on its home stream, and
    /// anything that has happened to it so far happened on that stream.
    pub(crate) fn new() -> Self {
        AccessLog {
            writer: None,
            readers: Vec::new(),
        }
    }

    /// Whether a writer event was ever recorded.
    pub(crate) fn has_writer(&self) -> bool {
        self.writer.is_some()
    }

    /// The events a kernel on `stream` that reads the buffer must wait on.
    pub(crate) fn waits_before_read(&self, stream: StreamId) -> Vec<E> {
        self.writer
            .iter()
            .filter(|access| access.stream != stream)
            .map(|access| access.event.clone())
            .collect()
    }

    /// The events a kernel on `stream` that overwrites the buffer must wait on: the writer and
    /// the latest reader of every other stream.
    pub(crate) fn waits_before_write(&self, stream: StreamId) -> Vec<E> {
        self.writer
            .iter()
            .chain(&self.readers)
            .filter(|access| access.stream != stream)
            .map(|access| access.event.clone())
            .collect()
    }

    /// The events the buffer's free on `stream` must wait on (a free is a final write).
    pub(crate) fn waits_before_free(&self, stream: StreamId) -> Vec<E> {
        self.waits_before_write(stream)
    }

    /// The event a CPU consumer blocks on before copying the buffer to the host, if any.
    pub(crate) fn host_wait(&self) -> Option<E> {
        self.writer.as_ref().map(|access| access.event.clone())
    }

    /// Notes a read enqueued on `stream`, followed by `event`.
    pub(crate) fn note_read(&mut self, stream: StreamId, event: E) {
        match self
            .readers
            .iter_mut()
            .find(|access| access.stream == stream)
        {
            Some(access) => access.event = event,
            None => self.readers.push(Access { stream, event }),
        }
    }

    /// Notes a write enqueued on `stream`, followed by `event`; earlier reads are now ordered
    /// before it, so they are forgotten.
    pub(crate) fn note_write(&mut self, stream: StreamId, event: E) {
        self.writer = Some(Access { stream, event });
        self.readers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S0: StreamId = StreamId {
        device: 0,
        stream: 0,
    };
    const S1: StreamId = StreamId {
        device: 0,
        stream: 1,
    };
    const G1: StreamId = StreamId {
        device: 1,
        stream: 0,
    };

    #[test]
    fn same_stream_waits_for_nothing() {
        let mut log = AccessLog::new();
        log.note_write(S0, "w");
        assert!(log.waits_before_read(S0).is_empty());
        log.note_read(S0, "r0");
        assert!(log.waits_before_write(S0).is_empty());
        assert!(log.waits_before_free(S0).is_empty());
    }

    #[test]
    fn another_stream_waits_for_the_writer_without_the_cpu() {
        let mut log = AccessLog::new();
        log.note_write(S0, "w");
        assert_eq!(log.waits_before_read(S1), vec!["w"]);
        assert_eq!(
            log.waits_before_read(G1),
            vec!["w"],
            "another device is another stream"
        );
        assert_eq!(log.host_wait(), Some("w"));
    }

    #[test]
    fn a_write_waits_for_reads_on_other_streams_and_then_forgets_them() {
        let mut log = AccessLog::new();
        log.note_write(S0, "w0");
        log.note_read(S1, "r1a");
        log.note_read(S1, "r1b");
        log.note_read(S0, "r0");
        log.note_read(G1, "g");
        // The latest read per stream supersedes the earlier ones.
        assert_eq!(log.waits_before_write(S0), vec!["r1b", "g"]);
        assert_eq!(log.waits_before_write(S1), vec!["w0", "r0", "g"]);
        log.note_write(S1, "w1");
        assert_eq!(log.waits_before_write(S0), vec!["w1"]);
        assert_eq!(log.waits_before_read(S1), Vec::<&str>::new());
    }

    #[test]
    fn a_free_waits_for_the_last_users_on_other_streams() {
        // The buffer lives on S0; S1 read it last. Freeing on S0 must not overtake that read.
        let mut log = AccessLog::new();
        assert!(!log.has_writer());
        assert!(log.waits_before_free(S0).is_empty(), "never shared");
        log.note_write(S0, 1);
        log.note_read(S1, 2);
        assert_eq!(log.waits_before_free(S0), vec![2]);
        assert!(log.has_writer());
    }

    #[test]
    fn the_log_stays_as_small_as_the_number_of_streams() {
        let mut log = AccessLog::new();
        for step in 0..1000 {
            let stream = if step % 2 == 0 { S0 } else { S1 };
            log.note_read(stream, step);
        }
        assert_eq!(log.readers.len(), 2);
    }
}
