//! A trace file's output: written where the bytes are made, or on a thread of its own.
//!
//! A trace of a long run writes hundreds of megabytes, and each `write` call makes the kernel
//! copy the bytes into its page cache (allocating and accounting every new page): about a
//! third of the recording thread's time for a JSON trace. On a machine with cores to spare, an
//! [`OutputFile::on_thread`] gathers the bytes in large buffers and hands each full one to a
//! writer thread, so that the recording thread, which every view of the run waits for at its
//! end, only formats while the kernel's share runs beside it. At most [`IN_FLIGHT`] buffers wait
//! for the writer, so its memory stays bounded whatever the run's length; emptied buffers come
//! back to be filled again (a new buffer of this size would cost page faults on every use). On a
//! machine without, the same thread's copy would run on the cores the run needs, and read bytes
//! another core wrote: [`OutputFile::here`] writes each piece as it comes (the trace writers
//! hand over 64 KiB pieces).
//!
//! Reading or seeking (a spool read back at the end) first waits for every write, then goes
//! straight to the file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use dep_engine::lock;

/// How many bytes a buffer gathers before it goes to the writer thread.
const BUFFER_BYTES: usize = 1 << 20;
/// How many full buffers may wait for the writer thread before a write waits for it.
const IN_FLIGHT: usize = 3;

/// A file written here or on a thread of its own (see the module's documentation). The first
/// error a writer thread meets is returned by the next call that can return one (a write, a
/// flush, a read or a seek); after it, nothing more is written.
pub(crate) struct OutputFile {
    state: State,
}

enum State {
    /// Writes go to the writer thread.
    Writing(Writer),
    /// Every write is done: calls go to the file itself.
    Direct(File),
    /// The writer thread died without giving the file back.
    Lost,
}

/// The writer thread and what goes to it.
struct Writer {
    /// The bytes not yet handed over.
    buffer: Vec<u8>,
    to_thread: SyncSender<Message>,
    /// Buffers the thread has emptied, to fill again.
    emptied: Receiver<Vec<u8>>,
    /// The first error the thread met, until a call returns it.
    error: Arc<Mutex<Option<io::Error>>>,
    thread: JoinHandle<File>,
}

/// What the writer thread is asked to do.
enum Message {
    /// Write these bytes.
    Bytes(Vec<u8>),
    /// Flush the file, then answer.
    Flush(SyncSender<()>),
}

impl OutputFile {
    /// Writes to `file` here, each write as it comes.
    pub(crate) fn here(file: File) -> OutputFile {
        OutputFile {
            state: State::Direct(file),
        }
    }

    /// Writes to `file` on a new thread named `name`; if the OS refuses the thread, here.
    pub(crate) fn on_thread(file: File, name: &str) -> OutputFile {
        let (to_thread, from_writer) = mpsc::sync_channel::<Message>(IN_FLIGHT);
        let (give_back, emptied) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        let error = Arc::new(Mutex::new(None));
        let thread_error = Arc::clone(&error);
        // The file goes to the thread through a slot, so that a refused spawn leaves it here.
        let slot = Arc::new(Mutex::new(Some(file)));
        let thread_slot = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut file = lock(&thread_slot).take().expect("the file is in its slot");
                write_until_closed(&mut file, &from_writer, &give_back, &thread_error);
                file
            });
        let state = match spawned {
            Ok(thread) => State::Writing(Writer {
                buffer: Vec::with_capacity(BUFFER_BYTES),
                to_thread,
                emptied,
                error,
                thread,
            }),
            Err(_) => State::Direct(lock(&slot).take().expect("no thread took the file")),
        };
        OutputFile { state }
    }

    /// Waits for every write, then gives the file to the calls that follow.
    fn direct(&mut self) -> io::Result<&mut File> {
        if let State::Writing(_) = self.state {
            let State::Writing(writer) = std::mem::replace(&mut self.state, State::Lost) else {
                unreachable!("matched above");
            };
            let (file, error) = writer.finish();
            if let Some(file) = file {
                self.state = State::Direct(file);
            }
            if let Some(error) = error {
                return Err(error);
            }
        }
        match &mut self.state {
            State::Direct(file) => Ok(file),
            State::Writing(_) | State::Lost => Err(thread_lost()),
        }
    }
}

impl Writer {
    /// Hands the buffer to the thread and takes an emptied one (or a new one) to fill.
    fn hand_over(&mut self) -> io::Result<()> {
        self.take_error()?;
        let fresh = match self.emptied.try_recv() {
            Ok(emptied) => emptied,
            Err(_) => Vec::with_capacity(BUFFER_BYTES),
        };
        let full = std::mem::replace(&mut self.buffer, fresh);
        self.to_thread
            .send(Message::Bytes(full))
            .map_err(|_| thread_lost())
    }

    /// The thread's first error, once.
    fn take_error(&self) -> io::Result<()> {
        match lock(&self.error).take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Writes what is left, ends the thread and takes the file back, with the first error.
    fn finish(mut self) -> (Option<File>, Option<io::Error>) {
        let handed = if self.buffer.is_empty() {
            Ok(())
        } else {
            self.hand_over()
        };
        drop(self.to_thread);
        let file = self.thread.join().ok();
        let error = handed
            .err()
            .or_else(|| lock(&self.error).take())
            .or_else(|| file.is_none().then(thread_lost));
        (file, error)
    }
}

impl Write for OutputFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match &mut self.state {
            State::Writing(writer) => {
                // Handed over before it would grow past its room (a grown buffer would go
                // round at twice the size).
                if writer.buffer.len() + bytes.len() > BUFFER_BYTES && !writer.buffer.is_empty() {
                    writer.hand_over()?;
                }
                writer.buffer.extend_from_slice(bytes);
                if writer.buffer.len() >= BUFFER_BYTES {
                    writer.hand_over()?;
                }
                Ok(bytes.len())
            }
            State::Direct(file) => file.write(bytes),
            State::Lost => Err(thread_lost()),
        }
    }

    /// Waits until every byte written so far is in the file, and the file flushed.
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Writing(writer) => {
                if !writer.buffer.is_empty() {
                    writer.hand_over()?;
                }
                let (answer, answered) = mpsc::sync_channel(1);
                writer
                    .to_thread
                    .send(Message::Flush(answer))
                    .map_err(|_| thread_lost())?;
                answered.recv().map_err(|_| thread_lost())?;
                writer.take_error()
            }
            State::Direct(file) => file.flush(),
            State::Lost => Err(thread_lost()),
        }
    }
}

impl Read for OutputFile {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.direct()?.read(buffer)
    }
}

impl Seek for OutputFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.direct()?.seek(to)
    }
}

impl Drop for OutputFile {
    /// Writes what is left before the file closes (an error here has nobody to go to: callers
    /// that care flush first).
    fn drop(&mut self) {
        let _ = self.direct();
    }
}

/// The writer thread's loop: writes each buffer and gives it back emptied, until the sending
/// side is dropped. After the first error it writes nothing more, keeps the error for the
/// writing side, and goes on answering flushes.
fn write_until_closed(
    file: &mut File,
    messages: &Receiver<Message>,
    give_back: &SyncSender<Vec<u8>>,
    error: &Mutex<Option<io::Error>>,
) {
    let mut failed = false;
    for message in messages {
        let result = match message {
            Message::Bytes(mut bytes) => {
                let written = if failed {
                    Ok(())
                } else {
                    file.write_all(&bytes)
                };
                bytes.clear();
                // The writing side takes emptied buffers only when it needs one.
                let _ = give_back.try_send(bytes);
                written
            }
            Message::Flush(answer) => {
                let flushed = if failed { Ok(()) } else { file.flush() };
                let _ = answer.send(());
                flushed
            }
        };
        if let Err(first) = result {
            failed = true;
            *lock(error) = Some(first);
        }
    }
}

fn thread_lost() -> io::Error {
    io::Error::other("the thread writing the trace file stopped")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|index| (index * 7 % 251) as u8).collect()
    }

    #[test]
    fn every_byte_reaches_the_file_in_order() {
        let path = tempfile::NamedTempFile::new().unwrap().into_temp_path();
        let expected = bytes(5 * BUFFER_BYTES + 12_345);
        let mut file = OutputFile::on_thread(File::create(&path).unwrap(), "test-write");
        for piece in expected.chunks(65_537) {
            file.write_all(piece).unwrap();
        }
        file.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        // Writes go on after a flush.
        file.write_all(b"tail").unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap().len(), expected.len() + 4);
    }

    #[test]
    fn a_spool_reads_back_what_was_written() {
        let mut spool = OutputFile::on_thread(tempfile::tempfile().unwrap(), "test-spool");
        let expected = bytes(2 * BUFFER_BYTES + 99);
        spool.write_all(&expected).unwrap();
        spool.seek(SeekFrom::Start(0)).unwrap();
        let mut read = Vec::new();
        spool.read_to_end(&mut read).unwrap();
        assert_eq!(read, expected);
    }

    #[test]
    fn a_failed_write_is_returned_and_nothing_hangs() {
        // A file opened for reading only: every write of the thread fails.
        let path = tempfile::NamedTempFile::new().unwrap().into_temp_path();
        let mut file = OutputFile::on_thread(File::open(&path).unwrap(), "test-fail");
        let piece = bytes(BUFFER_BYTES);
        // More buffers than may wait for the thread: the writes must not block for ever.
        let mut first_error = None;
        for _ in 0..(4 * IN_FLIGHT) {
            if let Err(error) = file.write_all(&piece) {
                first_error = Some(error);
                break;
            }
        }
        let error = match first_error {
            Some(error) => error,
            None => file.flush().expect_err("the thread's error comes back"),
        };
        assert_ne!(error.kind(), io::ErrorKind::Other, "{error}");
    }
}
