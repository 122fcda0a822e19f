//! The names a function's locals take in the engine (`y'` for `y`), the label of their
//! deletion (`del y'`) and the key of their frame's map (`y`), made once per name rather than
//! at every call, which makes each local anew and deletes it when the call ends.
//!
//! Two locals of one name alive in the engine at once (two calls in flight on the workers, a
//! recursive call, a local deleted and made again before its deletion ran) are named apart:
//! `y'` for the first, then `y'2`, `y'3`, each new local taking the first whose variable's
//! deletion has run, so that a view never shows two variables of one name, as if one op waited
//! for the other's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::slot::lock;

/// The engine's names of the locals made so far, by the name in the source.
#[derive(Default)]
pub(crate) struct LocalNames {
    by_name: FxHashMap<Arc<str>, Namesakes>,
}

/// The names of the locals called alike in the source: one for each of them that was alive
/// at once with the others, and which of those are free.
#[derive(Default)]
struct Namesakes {
    names: Vec<Names>,
    /// The indices of the names whose variable's deletion has run, lowest first: the
    /// deletions, which may run on any thread, put them back.
    free: Arc<Mutex<BinaryHeap<Reverse<usize>>>>,
}

/// What a local named `y` in the source is called in the engine.
struct Names {
    /// `y`, shared by every call's map of locals.
    name: Arc<str>,
    /// Its variable's name, `y'` (or `y'2`, ...).
    var: Arc<str>,
    /// The label of the op that deletes it, `del y'`.
    deletion: Arc<str>,
}

/// What deletes a local's variable: the deletion's label, and where to give its name back
/// once it has run (see [`LocalNames::deletion_of`]).
pub(crate) struct Deletion {
    /// The label of the deletion op, `del y'`.
    pub(crate) label: Arc<str>,
    index: usize,
    free: Arc<Mutex<BinaryHeap<Reverse<usize>>>>,
}

impl Deletion {
    /// Frees the name for the next local called so: to be called when the deletion has run.
    pub(crate) fn ran(&self) {
        lock(&self.free).push(Reverse(self.index));
    }
}

impl LocalNames {
    /// The name a new local called `name` in the source is bound under in its frame's map and
    /// its variable's name, taken until its variable's deletion runs: the lowest of its names
    /// whose variable is not alive, a new one if all are.
    pub(crate) fn of_new(&mut self, name: &str) -> (Arc<str>, Arc<str>) {
        if let Some(namesakes) = self.by_name.get_mut(name) {
            return namesakes.take(name);
        }
        self.by_name.entry(Arc::from(name)).or_default().take(name)
    }

    /// The deletion of the variable named `var`, if it is a local's made here.
    pub(crate) fn deletion_of(&self, var: &str) -> Option<Deletion> {
        let number = var.trim_end_matches(|c: char| c.is_ascii_digit());
        let (head, number) = var.split_at(number.len());
        let name = head.strip_suffix('\'')?;
        let index = match number {
            "" => 0,
            number => number.parse::<usize>().ok()?.checked_sub(1)?,
        };
        let namesakes = self.by_name.get(name)?;
        let names = namesakes.names.get(index)?;
        (*names.var == *var).then(|| Deletion {
            label: names.deletion.clone(),
            index,
            free: namesakes.free.clone(),
        })
    }
}

impl Namesakes {
    /// The lowest free name, taken, or a new one: its frame's key and its variable's name.
    fn take(&mut self, name: &str) -> (Arc<str>, Arc<str>) {
        if let Some(Reverse(index)) = lock(&self.free).pop() {
            let names = &self.names[index];
            return (names.name.clone(), names.var.clone());
        }
        let number = self.names.len() + 1;
        let var: Arc<str> = match number {
            1 => Arc::from(format!("{name}'")),
            _ => Arc::from(format!("{name}'{number}")),
        };
        let name = (self.names.first()).map_or_else(|| Arc::from(name), |first| first.name.clone());
        self.names.push(Names {
            name: name.clone(),
            deletion: Arc::from(format!("del {var}")),
            var: var.clone(),
        });
        (name, var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locals_names_are_made_once_and_found_by_its_variables_name() {
        let mut names = LocalNames::default();
        let (name, first) = names.of_new("y");
        assert_eq!((&*name, &*first), ("y", "y'"));
        names.deletion_of("y'").unwrap().ran();
        let (again, same) = names.of_new("y");
        assert!(Arc::ptr_eq(&first, &same), "made once");
        assert!(Arc::ptr_eq(&name, &again), "made once");
        assert_eq!(&*names.of_new("y").0, "y");
        let deletion = names.deletion_of("y'2").unwrap();
        assert_eq!(&*deletion.label, "del y'2");
        assert_eq!(
            names.deletion_of("y").map(|_| ()),
            None,
            "a global of the same name"
        );
        assert_eq!(
            names.deletion_of("z'").map(|_| ()),
            None,
            "no local of that name made"
        );
        assert_eq!(names.deletion_of("y'1").map(|_| ()), None);
        assert_eq!(names.deletion_of("y'3").map(|_| ()), None);
        assert_eq!(names.deletion_of("f.x#3").map(|_| ()), None);
    }

    #[test]
    fn locals_of_one_name_alive_at_once_are_named_apart_and_names_are_reused_once_free() {
        let mut names = LocalNames::default();
        let vars: Vec<String> = (0..3).map(|_| names.of_new("h").1.to_string()).collect();
        assert_eq!(vars, ["h'", "h'2", "h'3"]);
        // The second's deletion runs: the next local takes its name, then a new one.
        names.deletion_of("h'2").unwrap().ran();
        assert_eq!(&*names.of_new("h").1, "h'2");
        assert_eq!(&*names.of_new("h").1, "h'4");
        // Every deletion ran: the first name again.
        for var in ["h'", "h'2", "h'3", "h'4"] {
            names.deletion_of(var).unwrap().ran();
        }
        assert_eq!(&*names.of_new("h").1, "h'");
        assert_eq!(&*names.of_new("g").1, "g'", "another name is apart");
    }
}
