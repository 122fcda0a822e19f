//! The top layer: the five channels and their loops, and the handlers of each request.
//!
//! One current-thread tokio runtime drives every socket; the session runs on the executor
//! thread (`executor.rs`), so a long cell never stalls heartbeat, control or iopub. The loops
//! are futures joined by one `select!` in [`serve`], not spawned tasks: when one ends (a
//! shutdown request, or an error receiving on a socket) the kernel ends with its result, and
//! no loop can die unnoticed.
//!
//! Loop kinds, each a closed `match`:
//! - heartbeat: echo every ping.
//! - shell: a reader takes messages off the socket as they arrive (so that the interrupt mark of
//!   a queued request is the one at its arrival, and requests queued behind a failed cell can be
//!   aborted, as `stop_on_error` asks); the handler answers them one at a time, between `busy`
//!   and `idle` on iopub.
//! - control: kernel_info, interrupt and shutdown, answered at once even while a cell runs.
//! - iopub: drains the one queue every part of the kernel publishes into.
//! - the starter's watch (`parent.rs`): ends the kernel with an error once the client process
//!   that started it (`JPY_PARENT_PID`) has ended.

use std::time::Duration;

use anyhow::Context as _;
use dep_interp as interp;
use jupyter_protocol as jp;
use tokio::sync::{mpsc, oneshot};
use zeromq::{Socket as _, SocketRecv as _, SocketSend as _};

use crate::complete::{self, Completeness};
use crate::executor::{self, Interrupts, Job};
use crate::iopub::{Iopub, IopubItem};
use crate::message::{self, ControlRequest, Identity, ShellRequest};
use crate::parent;
use crate::wire::{self, Signer};

/// Runs the kernel for a connection file until a shutdown request.
pub(crate) fn run(
    connection: jp::ConnectionInfo,
    session_config: interp::SessionConfig,
) -> anyhow::Result<()> {
    // Read first, before the process that started the kernel has time to end.
    let starter = parent::Starter::from_env();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(connection, session_config, starter))
}

/// What the request loops share.
struct Ctx {
    signer: Signer,
    identity: Identity,
    iopub: Iopub,
    interrupts: Interrupts,
    jobs: std::sync::mpsc::Sender<Job>,
}

/// A shell message as the reader took it off the socket.
struct Inbound {
    frames: Vec<bytes::Bytes>,
    /// The interrupt counter when it arrived.
    interrupt_mark: u64,
}

async fn serve(
    connection: jp::ConnectionInfo,
    session_config: interp::SessionConfig,
    starter: Option<parent::Starter>,
) -> anyhow::Result<()> {
    let signer =
        Signer::new(&connection.key, &connection.signature_scheme).map_err(anyhow::Error::msg)?;
    let identity = Identity::new();

    let mut heartbeat = zeromq::RepSocket::new();
    bind(&mut heartbeat, &connection.hb_url(), "heartbeat").await?;
    let mut shell = zeromq::RouterSocket::new();
    bind(&mut shell, &connection.shell_url(), "shell").await?;
    let mut control = zeromq::RouterSocket::new();
    bind(&mut control, &connection.control_url(), "control").await?;
    let mut iopub_socket = zeromq::PubSocket::new();
    bind(&mut iopub_socket, &connection.iopub_url(), "iopub").await?;
    // dep never asks for input, but clients expect the channel to exist.
    let mut stdin = zeromq::RouterSocket::new();
    bind(&mut stdin, &connection.stdin_url(), "stdin").await?;

    let (iopub_queue, iopub_items) = mpsc::unbounded_channel();
    let iopub = Iopub::new(iopub_queue, identity.clone());
    let interrupts = executor::interrupts();
    let session_config = interp::SessionConfig {
        observe: true,
        show_expression_values: true,
        ..session_config
    };
    let (jobs, _executor_thread) =
        executor::spawn(session_config, iopub.clone(), interrupts.clone())
            .context("starting the executor thread")?;
    let ctx = Ctx {
        signer: signer.clone(),
        identity: identity.clone(),
        iopub,
        interrupts,
        jobs,
    };

    let (shell_send, shell_recv) = shell.split();
    let (inbox, inbound) = mpsc::unbounded_channel();
    tokio::select! {
        result = heartbeat_loop(heartbeat) => result,
        result = iopub_loop(iopub_socket, iopub_items, &signer, &identity) => result,
        result = shell_reader(shell_recv, inbox, &ctx.interrupts) => result,
        result = shell_loop(shell_send, inbound, &ctx) => result,
        result = control_loop(control, &ctx) => result,
        result = parent::end_with(starter) => result,
    }
    // The executor thread may be in the middle of a cell: it is not joined, the process ends.
}

async fn bind(socket: &mut impl zeromq::Socket, url: &str, channel: &str) -> anyhow::Result<()> {
    socket
        .bind(url)
        .await
        .with_context(|| format!("binding the {channel} channel to {url}"))?;
    Ok(())
}

async fn heartbeat_loop(mut socket: zeromq::RepSocket) -> anyhow::Result<()> {
    loop {
        let ping = socket.recv().await.context("receiving a heartbeat")?;
        socket.send(ping).await.context("answering a heartbeat")?;
    }
}

async fn iopub_loop(
    mut socket: zeromq::PubSocket,
    mut items: mpsc::UnboundedReceiver<IopubItem>,
    signer: &Signer,
    identity: &Identity,
) -> anyhow::Result<()> {
    while let Some(item) = items.recv().await {
        match item {
            IopubItem::Message(mut message) => {
                message.zmq_identities = vec![identity.topic(&message.header.msg_type)];
                let frames = wire::encode(message::to_raw(&message), signer);
                socket
                    .send(zmq_message(frames)?)
                    .await
                    .context("publishing on iopub")?;
            }
            IopubItem::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
    Ok(())
}

async fn shell_reader(
    mut socket: zeromq::RouterRecvHalf,
    inbox: mpsc::UnboundedSender<Inbound>,
    interrupts: &Interrupts,
) -> anyhow::Result<()> {
    loop {
        let frames = socket
            .recv()
            .await
            .context("receiving on shell")?
            .into_vec();
        let interrupt_mark = interrupts.mark();
        if inbox
            .send(Inbound {
                frames,
                interrupt_mark,
            })
            .is_err()
        {
            return Ok(());
        }
    }
}

async fn shell_loop(
    mut socket: zeromq::RouterSendHalf,
    mut inbound: mpsc::UnboundedReceiver<Inbound>,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    // After a cell fails with `stop_on_error`, execute requests already waiting are aborted
    // (answered `aborted` without running), as ipykernel does; the first time the queue is
    // found empty ends that.
    let mut aborting = false;
    loop {
        let next = match inbound.try_recv() {
            Ok(next) => next,
            Err(_) => {
                aborting = false;
                match inbound.recv().await {
                    Some(next) => next,
                    None => return Ok(()),
                }
            }
        };
        let Some(request) = accept(ctx, "shell", next.frames, &mut socket).await else {
            continue;
        };
        ctx.iopub.status(&request, jp::ExecutionState::Busy);
        let outcome = handle_shell(ctx, &request, next.interrupt_mark, aborting).await;
        for reply in outcome.replies {
            send(&mut socket, ctx, reply).await;
        }
        ctx.iopub.status(&request, jp::ExecutionState::Idle);
        aborting |= outcome.abort_queue;
        if outcome.shutdown {
            ctx.iopub.flush().await;
            linger().await;
            return Ok(());
        }
    }
}

/// What handling a shell request produced.
#[derive(Default)]
struct ShellOutcome {
    replies: Vec<jp::JupyterMessage>,
    abort_queue: bool,
    shutdown: bool,
}

async fn handle_shell(
    ctx: &Ctx,
    request: &jp::JupyterMessage,
    interrupt_mark: u64,
    aborting: bool,
) -> ShellOutcome {
    let mut outcome = ShellOutcome::default();
    let reply = |content: jp::JupyterMessageContent| ctx.identity.child(request, content);
    match ShellRequest::from_content(&request.content) {
        ShellRequest::KernelInfo => outcome.replies.push(reply(kernel_info().into())),
        ShellRequest::Execute(execute) if aborting => {
            let _ = execute;
            outcome.replies.push(reply(
                jp::ExecuteReply {
                    status: jp::ReplyStatus::Aborted,
                    ..Default::default()
                }
                .into(),
            ));
        }
        ShellRequest::Execute(execute) => {
            let stop_on_error = execute.stop_on_error;
            let (done, answer) = oneshot::channel();
            let job = Job::Execute {
                parent: Box::new(request.clone()),
                request: execute,
                interrupt_mark,
                done,
            };
            let execute_reply = match run_job(ctx, job, answer).await {
                Some(execute_reply) => execute_reply,
                None => jp::ExecuteReply {
                    status: jp::ReplyStatus::Error,
                    error: Some(Box::new(kernel_bug())),
                    ..Default::default()
                },
            };
            outcome.abort_queue = stop_on_error && execute_reply.status == jp::ReplyStatus::Error;
            outcome.replies.push(reply(execute_reply.into()));
        }
        ShellRequest::Complete(complete) => {
            let cursor_pos = complete.cursor_pos;
            let (done, answer) = oneshot::channel();
            let complete_reply = run_job(
                ctx,
                Job::Complete {
                    request: complete,
                    done,
                },
                answer,
            )
            .await
            .unwrap_or_else(|| jp::CompleteReply {
                cursor_start: cursor_pos,
                cursor_end: cursor_pos,
                ..Default::default()
            });
            outcome.replies.push(reply(complete_reply.into()));
        }
        ShellRequest::Inspect(inspect) => {
            let (done, answer) = oneshot::channel();
            let inspect_reply = run_job(
                ctx,
                Job::Inspect {
                    request: inspect,
                    done,
                },
                answer,
            )
            .await
            .unwrap_or_default();
            outcome.replies.push(reply(inspect_reply.into()));
        }
        ShellRequest::IsComplete(is_complete) => {
            let verdict = match complete::completeness(&is_complete.code) {
                Completeness::Incomplete { indent } => jp::IsCompleteReply::incomplete(indent),
                Completeness::Complete if complete::is_invalid(&is_complete.code) => {
                    jp::IsCompleteReply::invalid()
                }
                Completeness::Complete => jp::IsCompleteReply::complete(),
            };
            outcome.replies.push(reply(verdict.into()));
        }
        ShellRequest::History => outcome
            .replies
            .push(reply(jp::HistoryReply::new(Vec::new()).into())),
        ShellRequest::CommInfo => outcome
            .replies
            .push(reply(jp::CommInfoReply::default().into())),
        ShellRequest::CommOpen(open) => {
            // dep has no comm targets: close the comm at once, as the spec asks.
            ctx.iopub.send(
                request,
                jp::CommClose {
                    comm_id: open.comm_id,
                    data: Default::default(),
                },
            );
        }
        ShellRequest::CommMessage => {}
        ShellRequest::Shutdown(shutdown) => {
            let shutdown_reply = jp::ShutdownReply {
                restart: shutdown.restart,
                status: jp::ReplyStatus::Ok,
                error: None,
            };
            outcome.replies.push(reply(shutdown_reply.into()));
            outcome.shutdown = true;
        }
        ShellRequest::Unsupported(msg_type) => {
            outcome.replies.push(ctx.identity.error_reply(
                request,
                &msg_type,
                "Unsupported",
                &format!("the dep kernel does not handle {msg_type}"),
            ));
        }
    }
    outcome
}

/// Hands a job to the executor and waits for its answer; `None` if the job panicked.
async fn run_job<T>(ctx: &Ctx, job: Job, answer: oneshot::Receiver<T>) -> Option<T> {
    ctx.jobs.send(job).ok()?;
    answer.await.ok()
}

fn kernel_bug() -> jp::ReplyError {
    jp::ReplyError {
        ename: "KernelError".to_string(),
        evalue: "the dep kernel hit a bug running this request (see its log); the session goes on"
            .to_string(),
        traceback: Vec::new(),
    }
}

async fn control_loop(mut socket: zeromq::RouterSocket, ctx: &Ctx) -> anyhow::Result<()> {
    loop {
        let frames = socket
            .recv()
            .await
            .context("receiving on control")?
            .into_vec();
        let Some(request) = accept(ctx, "control", frames, &mut socket).await else {
            continue;
        };
        ctx.iopub.status(&request, jp::ExecutionState::Busy);
        let reply = |content: jp::JupyterMessageContent| ctx.identity.child(&request, content);
        let mut shutdown = false;
        let answer = match ControlRequest::from_content(&request.content) {
            ControlRequest::KernelInfo => reply(kernel_info().into()),
            ControlRequest::Interrupt => {
                ctx.interrupts.interrupt();
                reply(jp::InterruptReply::new().into())
            }
            ControlRequest::Shutdown(shutdown_request) => {
                shutdown = true;
                let content = jp::ShutdownReply {
                    restart: shutdown_request.restart,
                    status: jp::ReplyStatus::Ok,
                    error: None,
                };
                // ipykernel also publishes the reply, so that every client learns of it.
                ctx.iopub.send(&request, content.clone());
                reply(content.into())
            }
            ControlRequest::Unsupported(msg_type) => ctx.identity.error_reply(
                &request,
                &msg_type,
                "Unsupported",
                &format!("the dep kernel does not handle {msg_type} on control"),
            ),
        };
        send(&mut socket, ctx, answer).await;
        ctx.iopub.status(&request, jp::ExecutionState::Idle);
        if shutdown {
            ctx.iopub.flush().await;
            linger().await;
            return Ok(());
        }
    }
}

/// Gives the sockets' writer tasks (zeromq runs one per peer on this runtime, fed by a queue)
/// time to write the last replies before the process exits: the crate has no ZMQ_LINGER, and
/// the client is waiting for the shutdown reply.
async fn linger() {
    tokio::time::sleep(LINGER).await;
}

/// How long the kernel lingers after a shutdown reply.
const LINGER: Duration = Duration::from_millis(50);

/// Checks and parses an incoming message. A bad signature or malformed frames are logged and
/// dropped; a signed message that is not a readable request gets an error reply.
async fn accept(
    ctx: &Ctx,
    channel: &str,
    frames: Vec<bytes::Bytes>,
    socket: &mut impl zeromq::SocketSend,
) -> Option<jp::JupyterMessage> {
    let raw = match wire::decode(frames, &ctx.signer) {
        Ok(raw) => raw,
        Err(error) => {
            eprintln!("dep kernel: dropped a {channel} message: {error}");
            return None;
        }
    };
    match message::parse(raw) {
        Ok(request) => Some(request),
        Err(bad) => {
            eprintln!(
                "dep kernel: unreadable {channel} message {}: {}",
                bad.msg_type, bad.problem
            );
            if let Some(parent) = &bad.parent {
                let reply =
                    ctx.identity
                        .error_reply(parent, &bad.msg_type, "BadRequest", &bad.problem);
                send(socket, ctx, reply).await;
            }
            None
        }
    }
}

/// Sends a reply on a ROUTER socket. A client that went away is logged, not fatal: the
/// kernel serves whoever connects next.
async fn send(socket: &mut impl zeromq::SocketSend, ctx: &Ctx, reply: jp::JupyterMessage) {
    let frames = wire::encode(message::to_raw(&reply), &ctx.signer);
    let result = match zmq_message(frames) {
        Ok(message) => socket.send(message).await.map_err(anyhow::Error::from),
        Err(error) => Err(error),
    };
    if let Err(error) = result {
        eprintln!(
            "dep kernel: could not send {}: {error:#}",
            reply.header.msg_type
        );
    }
}

fn zmq_message(frames: Vec<bytes::Bytes>) -> anyhow::Result<zeromq::ZmqMessage> {
    zeromq::ZmqMessage::try_from(frames).map_err(|_| anyhow::anyhow!("an empty message"))
}

fn kernel_info() -> jp::KernelInfoReply {
    jp::KernelInfoReply {
        status: jp::ReplyStatus::Ok,
        protocol_version: "5.3".to_string(),
        implementation: "dep".to_string(),
        implementation_version: env!("CARGO_PKG_VERSION").to_string(),
        language_info: jp::LanguageInfo {
            name: "dep".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            mimetype: Some("text/x-dep".to_string()),
            file_extension: Some(".dep".to_string()),
            // dep's comments, strings, numbers and most keywords look like Python's.
            pygments_lexer: Some("python".to_string()),
            codemirror_mode: Some(jp::CodeMirrorMode::Simple("python".to_string())),
            nbconvert_exporter: None,
        },
        banner: format!(
            "dep {}: a small tensor language run by an asynchronous dependency engine. %help lists the magics.",
            env!("CARGO_PKG_VERSION")
        ),
        help_links: Vec::new(),
        debugger: false,
        error: None,
    }
}
