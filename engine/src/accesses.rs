//! An op's accesses as the engine keeps them: each variable once, the read-and-written ones
//! (writes the op also reads) first among the writes.

use std::collections::HashSet;
use std::ops::Deref;

use crate::sync::Arc;
use crate::{Var, VarId};

/// An op's reads and writes, normalized once and shared by every op pushed with them: a
/// statement inside a loop (or a replayed graph's op) pushes the same set each time for the cost
/// of a reference count, with no copy, sort or allocation (see [`crate::OpSpec::access_set`]).
#[derive(Clone)]
pub struct AccessSet(Arc<Accesses>);

impl AccessSet {
    /// The accesses of ops that read `reads` and write `writes` (either may repeat a variable or
    /// name one the other names; a variable both read and written counts as written).
    pub fn new(reads: Vec<Var>, writes: Vec<Var>) -> AccessSet {
        AccessSet(Arc::new(Accesses::normalized(reads, writes)))
    }

    /// Whether `self` and `other` are the same set (one allocation), as a statement's pushes
    /// share it.
    pub(crate) fn same_as(&self, other: &AccessSet) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The variables only read, each once.
    pub fn reads(&self) -> &[Var] {
        &self.0.reads
    }

    /// The variables written (read-and-written ones first), each once.
    pub fn writes(&self) -> &[Var] {
        &self.0.writes
    }
}

impl Deref for AccessSet {
    type Target = Accesses;
    fn deref(&self) -> &Accesses {
        &self.0
    }
}

/// An op's accesses as the engine keeps them: no variable twice; a variable both read and
/// written is a write, listed first among the writes so that its error still skips the op.
pub struct Accesses {
    pub(crate) reads: Vec<Var>,
    pub(crate) writes: Vec<Var>,
    /// How many of `writes`, at the front, the op also reads.
    pub(crate) n_read_writes: usize,
    /// Every access's index (reads, then writes) in the order of its variable's id: the order
    /// in which a push locks the variables, sorted once here rather than on every push.
    pub(crate) lock_order: Vec<usize>,
}

impl Accesses {
    /// The variable of access `index` (reads first, then writes).
    pub(crate) fn var_at(&self, index: usize) -> &Var {
        match index.checked_sub(self.reads.len()) {
            None => &self.reads[index],
            Some(write) => &self.writes[write],
        }
    }

    /// How many accesses the op has.
    pub(crate) fn len(&self) -> usize {
        self.reads.len() + self.writes.len()
    }

    /// The accesses of an op that reads `reads` and writes `writes` (either may repeat a
    /// variable, or name one the other names).
    pub(crate) fn normalized(mut reads: Vec<Var>, mut writes: Vec<Var>) -> Accesses {
        dedup_by_id(&mut writes);
        dedup_by_id(&mut reads);
        // Long lists (bulks) are looked up through a set; short ones by a scan.
        let contains = |vars: &[Var], set: &Option<HashSet<VarId>>, id: VarId| match set {
            Some(set) => set.contains(&id),
            None => vars.iter().any(|var| var.id() == id),
        };
        let read_set = (reads.len() > 16).then(|| reads.iter().map(Var::id).collect());
        // A stable sort: the read-and-written ones first, each part in its order.
        writes.sort_by_key(|write| !contains(&reads, &read_set, write.id()));
        let n_read_writes = writes
            .iter()
            .take_while(|write| contains(&reads, &read_set, write.id()))
            .count();
        let written = &writes[..n_read_writes];
        let written_set = (written.len() > 16).then(|| written.iter().map(Var::id).collect());
        reads.retain(|read| !contains(written, &written_set, read.id()));
        let mut accesses = Accesses {
            reads,
            writes,
            n_read_writes,
            lock_order: Vec::new(),
        };
        let mut lock_order: Vec<usize> = (0..accesses.len()).collect();
        lock_order.sort_unstable_by_key(|&index| accesses.var_at(index).id());
        accesses.lock_order = lock_order;
        accesses
    }
}

fn dedup_by_id(vars: &mut Vec<Var>) {
    // Long lists (bulked sequences) are sorted by id; short ones keep their order, in time
    // linear in practice.
    if vars.len() > 16 {
        vars.sort_unstable_by_key(Var::id);
        vars.dedup_by_key(|var| var.id());
        return;
    }
    let mut index = 1;
    while index < vars.len() {
        if vars[..index]
            .iter()
            .any(|earlier| earlier.id() == vars[index].id())
        {
            vars.remove(index);
        } else {
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineConfig};

    use super::*;

    #[test]
    fn accesses_are_normalized_and_locked_in_id_order() {
        let engine = Engine::new(EngineConfig::default());
        let (a, b, c) = (
            engine.new_var("a"),
            engine.new_var("b"),
            engine.new_var("c"),
        );
        // Reads c, b (twice) and a; writes a and c: a and c are read-writes, b a plain read.
        let set = AccessSet::new(
            vec![c.clone(), b.clone(), b.clone(), a.clone()],
            vec![c.clone(), a.clone()],
        );
        let ids = |vars: &[Var]| vars.iter().map(Var::id).collect::<Vec<_>>();
        assert_eq!(ids(set.reads()), vec![b.id()]);
        assert_eq!(ids(set.writes()), vec![c.id(), a.id()]);
        assert_eq!(set.n_read_writes, 2);
        let locked: Vec<VarId> = set
            .lock_order
            .iter()
            .map(|&index| set.var_at(index).id())
            .collect();
        assert_eq!(locked, vec![a.id(), b.id(), c.id()]);
    }
}
