//! The names a function's locals take in the engine (`y'` for `y`), the label of their
//! deletion (`del y'`) and the key of their frame's map (`y`), made once per name rather than
//! at every call, which makes each local anew and deletes it when the call ends.
//!
//! Two locals of one name alive in the engine at once (two calls in flight on the workers, a
//! recursive call, a local deleted and made again before its deletion ran) are named apart:
//! `y'` for the first, then `y'2`, `y'3`, each the first whose variable's deletion has run, so
//! that a view never shows two variables of one name, as if one op waited for the other's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustc_hash::FxHashMap;

/// The engine's names of the locals made so far, by the name in the source: one set of names
/// for each local of that name that was alive at once with the others.
#[derive(Default)]
pub(crate) struct LocalNames {
    by_name: FxHashMap<Arc<str>, Vec<Names>>,
}

/// What a local named `y` in the source is called in the engine.
pub(crate) struct Names {
    /// `y`, shared by every call's map of locals.
    pub(crate) name: Arc<str>,
    /// Its variable's name, `y'` (or `y'2`, ...).
    pub(crate) var: Arc<str>,
    /// The label of the op that deletes it, `del y'`.
    pub(crate) deletion: Arc<str>,
    /// Whether a variable of this name is alive in the engine: set when a new local takes the
    /// name, cleared once its deletion has run.
    alive: Arc<AtomicBool>,
}

/// What deletes a local's variable: the deletion's label, and the name's flag to clear once
/// it has run (see [`LocalNames::deletion_of`]).
pub(crate) struct Deletion {
    /// The label of the deletion op, `del y'`.
    pub(crate) label: Arc<str>,
    alive: Arc<AtomicBool>,
}

impl Deletion {
    /// Frees the name for the next local called so: to be called when the deletion has run.
    pub(crate) fn ran(&self) {
        self.alive.store(false, Ordering::Release);
    }
}

impl LocalNames {
    /// The names of a new local called `name` in the source, taken until its variable's
    /// deletion runs: the first of its names whose variable is not alive, a new one if all are.
    pub(crate) fn of_new(&mut self, name: &str) -> &Names {
        if !self.by_name.contains_key(name) {
            self.by_name.insert(Arc::from(name), Vec::new());
        }
        let names = self.by_name.get_mut(name).expect("inserted above");
        let free = names.iter().position(|names| {
            names
                .alive
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        let index = match free {
            Some(index) => index,
            None => {
                let number = names.len() + 1;
                let var: Arc<str> = match number {
                    1 => Arc::from(format!("{name}'")),
                    _ => Arc::from(format!("{name}'{number}")),
                };
                names.push(Names {
                    name: names
                        .first()
                        .map_or_else(|| Arc::from(name), |first| first.name.clone()),
                    deletion: Arc::from(format!("del {var}")),
                    var,
                    alive: Arc::new(AtomicBool::new(true)),
                });
                names.len() - 1
            }
        };
        &names[index]
    }

    /// The deletion of the variable named `var`, if it is a local's made here.
    pub(crate) fn deletion_of(&self, var: &str) -> Option<Deletion> {
        let (name, number) = var.rsplit_once('\'')?;
        let index = match number {
            "" => 0,
            number => number.parse::<usize>().ok()?.checked_sub(1)?,
        };
        let names = self.by_name.get(name)?.get(index)?;
        (*names.var == *var).then(|| Deletion {
            label: names.deletion.clone(),
            alive: names.alive.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locals_names_are_made_once_and_found_by_its_variables_name() {
        let mut names = LocalNames::default();
        let first = names.of_new("y").var.clone();
        assert_eq!(&*first, "y'");
        names.deletion_of("y'").unwrap().ran();
        assert!(Arc::ptr_eq(&first, &names.of_new("y").var), "made once");
        assert_eq!(&*names.of_new("y").name, "y");
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
        let vars: Vec<String> = (0..3).map(|_| names.of_new("h").var.to_string()).collect();
        assert_eq!(vars, ["h'", "h'2", "h'3"]);
        // The second's deletion runs: the next local takes its name, then a new one.
        names.deletion_of("h'2").unwrap().ran();
        assert_eq!(&*names.of_new("h").var, "h'2");
        assert_eq!(&*names.of_new("h").var, "h'4");
        // Every deletion ran: the first name again.
        for var in ["h'", "h'2", "h'3", "h'4"] {
            names.deletion_of(var).unwrap().ran();
        }
        assert_eq!(&*names.of_new("h").var, "h'");
        assert_eq!(&*names.of_new("g").var, "g'", "another name is apart");
    }
}
