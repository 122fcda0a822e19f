//! What every rank must agree on before a collective moves any data: which collective it is,
//! its root, and the shape of the values each rank gives. Each rank describes its side in a
//! [`CollectiveHeader`]; [`disagreement`] compares every rank's and says what differs, in the
//! same words on every communicator (simulated ranks compare the headers directly; MPI ranks
//! gather them, [`CollectiveHeader::encode`]d in a fixed number of words, before posting the
//! collective itself, so that a mismatch is dep's error and never MPI's).

use std::sync::{Mutex, PoisonError};

use crate::tensor::shape::fmt_shape;

/// Which collective a rank runs, with its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveKind {
    /// `allreduce(x)`.
    AllReduce,
    /// `broadcast(x, root)`.
    Broadcast(usize),
    /// `reduce(x, root)`.
    Reduce(usize),
    /// `allgather(x)`.
    AllGather,
}

impl CollectiveKind {
    /// The statement's name.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::Broadcast(_) => "broadcast",
            CollectiveKind::Reduce(_) => "reduce",
            CollectiveKind::AllGather => "allgather",
        }
    }

    /// Its root, for a broadcast or a reduce.
    pub fn root(self) -> Option<usize> {
        match self {
            CollectiveKind::Broadcast(root) | CollectiveKind::Reduce(root) => Some(root),
            CollectiveKind::AllReduce | CollectiveKind::AllGather => None,
        }
    }

    /// As a sentence names it: `allreduce`, `broadcast with root 1`.
    fn described(self) -> String {
        match self.root() {
            Some(root) => format!("{} with root {root}", self.name()),
            None => self.name().to_string(),
        }
    }

    fn code(self) -> (u64, u64) {
        match self {
            CollectiveKind::AllReduce => (1, 0),
            CollectiveKind::Broadcast(root) => (2, root as u64),
            CollectiveKind::Reduce(root) => (3, root as u64),
            CollectiveKind::AllGather => (4, 0),
        }
    }

    fn from_code(code: u64, root: u64) -> Option<CollectiveKind> {
        let root = usize::try_from(root).ok()?;
        Some(match code {
            1 => CollectiveKind::AllReduce,
            2 => CollectiveKind::Broadcast(root),
            3 => CollectiveKind::Reduce(root),
            4 => CollectiveKind::AllGather,
            _ => return None,
        })
    }
}

/// The most dimensions a header spells out; a shape of more is known by its first
/// `SPELLED - 1` and a hash of all of them.
const SPELLED: usize = 10;

/// One rank's side of a collective: which, where in the script, and the shape it gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectiveHeader {
    /// The collective and its root.
    pub kind: CollectiveKind,
    /// The line of its statement (0: unknown).
    pub line: u32,
    /// How many dimensions the shape has.
    ndim: usize,
    /// The shape's dimensions: all of them, or the first `SPELLED - 1` of a longer shape.
    dims: Vec<usize>,
    /// A hash of every dimension of a shape longer than `SPELLED` (0 otherwise).
    hash: u64,
}

impl CollectiveHeader {
    /// How many words [`CollectiveHeader::encode`] gives.
    pub const WORDS: usize = 5 + SPELLED;

    /// The header of a collective `kind` at `line` giving values of `shape`.
    pub fn new(kind: CollectiveKind, line: u32, shape: &[usize]) -> CollectiveHeader {
        let (dims, hash) = if shape.len() <= SPELLED {
            (shape.to_vec(), 0)
        } else {
            (shape[..SPELLED - 1].to_vec(), shape_hash(shape))
        };
        CollectiveHeader {
            kind,
            line,
            ndim: shape.len(),
            dims,
            hash,
        }
    }

    /// The header in [`CollectiveHeader::WORDS`] words, for ranks that exchange it as data.
    pub fn encode(&self) -> [u64; CollectiveHeader::WORDS] {
        let (code, root) = self.kind.code();
        let mut words = [0; CollectiveHeader::WORDS];
        words[..5].copy_from_slice(&[
            code,
            root,
            u64::from(self.line),
            self.ndim as u64,
            self.hash,
        ]);
        for (word, dim) in words[5..].iter_mut().zip(&self.dims) {
            *word = *dim as u64;
        }
        words
    }

    /// The header [`CollectiveHeader::encode`] gave `words`; `None` if they are not one.
    pub fn decode(words: &[u64]) -> Option<CollectiveHeader> {
        if words.len() != CollectiveHeader::WORDS {
            return None;
        }
        let kind = CollectiveKind::from_code(words[0], words[1])?;
        let ndim = usize::try_from(words[3]).ok()?;
        let spelled = if ndim <= SPELLED { ndim } else { SPELLED - 1 };
        let dims = words[5..5 + spelled]
            .iter()
            .map(|&dim| usize::try_from(dim).ok())
            .collect::<Option<Vec<usize>>>()?;
        Some(CollectiveHeader {
            kind,
            line: u32::try_from(words[2]).ok()?,
            ndim,
            dims,
            hash: words[4],
        })
    }

    fn same_shape(&self, other: &CollectiveHeader) -> bool {
        (self.ndim, &self.dims, self.hash) == (other.ndim, &other.dims, other.hash)
    }

    /// The shape as errors show it: `[2, 3]`, or its first dimensions and how many it has.
    fn shape_text(&self) -> String {
        if self.dims.len() == self.ndim {
            return fmt_shape(&self.dims);
        }
        let first: Vec<String> = self.dims.iter().map(ToString::to_string).collect();
        format!("[{}, ...] ({} dimensions)", first.join(", "), self.ndim)
    }

    fn at_line(&self) -> String {
        match self.line {
            0 => String::new(),
            line => format!(" (line {line})"),
        }
    }
}

/// A hash of a shape (FNV-1a over its dimensions): the same on every rank and every build.
fn shape_hash(shape: &[usize]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for dim in shape {
        for byte in (*dim as u64).to_le_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// The messages of the failures this process saw that every rank sees alike (see
/// [`fails_on_every_rank`]).
static FAILED_ON_EVERY_RANK: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes `message` as a failure every rank of the job sees alike, at the same collective (each
/// compares the same headers), and returns it: rank 0 alone reports such a failure, and it does
/// not end the job for the others, which fail there by themselves (every rank's report of one
/// mistake said the same thing several times, and under mpirun the first rank to abort cut the
/// others' reports short).
pub fn fails_on_every_rank(message: String) -> String {
    let mut noted = FAILED_ON_EVERY_RANK
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if !noted.contains(&message) {
        noted.push(message.clone());
    }
    message
}

/// Whether `report` (an error as a rank reports it) is of a failure every rank sees alike
/// ([`fails_on_every_rank`]).
pub fn failed_on_every_rank(report: &str) -> bool {
    FAILED_ON_EVERY_RANK
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|message| report.contains(message.as_str()))
}

/// What the ranks disagree on in collective number `seq` (from 0, in push order), given every
/// rank's header in rank order: a different collective or root than rank 0's, or a shape other
/// than the root's (rank 0's for an allreduce or an allgather). `None` when they agree. Every
/// rank that compares the same headers gets the same message, noted as one that fails on every
/// rank.
pub fn disagreement(seq: u64, headers: &[CollectiveHeader]) -> Option<String> {
    first_disagreement(seq, headers).map(fails_on_every_rank)
}

/// [`disagreement`]'s message, not noted.
fn first_disagreement(seq: u64, headers: &[CollectiveHeader]) -> Option<String> {
    let first = headers.first()?;
    if let Some((rank, other)) = headers
        .iter()
        .enumerate()
        .find(|(_, header)| header.kind != first.kind)
    {
        return Some(format!(
            "collective number {}: rank {rank} runs {}{} but rank 0 runs {}{}; every rank must run the same collectives, with the same root, in the same order",
            seq + 1,
            other.kind.described(),
            other.at_line(),
            first.kind.described(),
            first.at_line(),
        ));
    }
    let reference = first.kind.root().unwrap_or(0);
    let expected = headers.get(reference)?;
    let (rank, other) = headers
        .iter()
        .enumerate()
        .find(|(_, header)| !header.same_shape(expected))?;
    Some(format!(
        "{}: rank {rank} has shape {} but rank {reference} has {}; every rank must give the same shape",
        first.kind.name(),
        other.shape_text(),
        expected.shape_text(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: CollectiveKind, line: u32, shape: &[usize]) -> CollectiveHeader {
        CollectiveHeader::new(kind, line, shape)
    }

    #[test]
    fn a_header_survives_its_encoding_whatever_its_shape() {
        for shape in [vec![], vec![3], vec![2, 3], (1..=10).collect::<Vec<_>>()] {
            let sent = header(CollectiveKind::Reduce(2), 7, &shape);
            assert_eq!(CollectiveHeader::decode(&sent.encode()), Some(sent));
        }
        let long: Vec<usize> = (1..=12).collect();
        let sent = header(CollectiveKind::AllGather, 1, &long);
        let got = CollectiveHeader::decode(&sent.encode()).expect("a header");
        assert_eq!(got, sent);
        assert_eq!(
            got.shape_text(),
            "[1, 2, 3, 4, 5, 6, 7, 8, 9, ...] (12 dimensions)"
        );
        assert_eq!(
            CollectiveHeader::decode(&[9; CollectiveHeader::WORDS]),
            None
        );
        assert_eq!(CollectiveHeader::decode(&[1; 3]), None);
    }

    #[test]
    fn shapes_must_agree_not_only_their_sizes() {
        let all = CollectiveKind::AllReduce;
        assert_eq!(
            disagreement(0, &[header(all, 2, &[2, 3]), header(all, 2, &[2, 3])]),
            None
        );
        assert_eq!(
            disagreement(0, &[header(all, 2, &[2, 3]), header(all, 2, &[3, 2])]).as_deref(),
            Some("allreduce: rank 1 has shape [3, 2] but rank 0 has [2, 3]; every rank must give the same shape")
        );
        assert_eq!(
            disagreement(0, &[header(all, 2, &[2]), header(all, 2, &[3])]).as_deref(),
            Some("allreduce: rank 1 has shape [3] but rank 0 has [2]; every rank must give the same shape")
        );
        // A broadcast's shapes are compared with its root's.
        let from1 = CollectiveKind::Broadcast(1);
        let shapes = [
            header(from1, 1, &[2]),
            header(from1, 1, &[3]),
            header(from1, 1, &[3]),
        ];
        assert_eq!(
            disagreement(4, &shapes).as_deref(),
            Some("broadcast: rank 0 has shape [2] but rank 1 has [3]; every rank must give the same shape")
        );
        // Long shapes differing only past what is spelled out differ by their hash.
        let mut long: Vec<usize> = (1..=12).collect();
        let a = header(all, 1, &long);
        long[11] = 99;
        assert!(disagreement(0, &[a.clone(), header(all, 1, &long)]).is_some());
        assert_eq!(disagreement(0, &[a.clone(), a]), None);
    }

    #[test]
    fn collectives_and_roots_must_agree() {
        let kinds = [
            header(CollectiveKind::AllReduce, 2, &[1]),
            header(CollectiveKind::Broadcast(1), 3, &[1]),
        ];
        assert_eq!(
            disagreement(0, &kinds).as_deref(),
            Some("collective number 1: rank 1 runs broadcast with root 1 (line 3) but rank 0 runs allreduce (line 2); every rank must run the same collectives, with the same root, in the same order")
        );
        let roots = [
            header(CollectiveKind::Reduce(0), 1, &[1]),
            header(CollectiveKind::Reduce(1), 1, &[1]),
        ];
        assert!(disagreement(2, &roots)
            .expect("a disagreement")
            .starts_with("collective number 3: rank 1 runs reduce with root 1 (line 1) but rank 0 runs reduce with root 0 (line 1)"));
    }
}
