//! The one cache of what is built once per contract and kept for the life of the program: the
//! IR of a generic contract (one per instantiation, [`per_type`]), the renderings a backend is
//! sent ([`Constraint::of`](crate::Constraint::of), [`per_type`]) and the validator's plan for
//! flat objects ([`per_spec`], keyed by the contract's `'static` spec).
//!
//! Each entry is built outside the lock, since building one may ask for another (a contract's
//! renderings ask for its nested contracts' specs), and the first one stored is kept. Lookups go
//! through a per-thread list first, so that one takes no lock once its thread has seen the entry
//! (a generic contract's `contract_spec()` is asked for on every read of it). The validator keeps
//! a typed list of its plans in front of this one (`validate/flat.rs` says why).
//!
//! A leaf of the crate: it imports nothing else of it.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// What an entry is kept under, and the type of the entry (one key may hold several kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// Built per Rust type.
    Type(TypeId, TypeId),
    /// Built per `'static` value, by its address.
    Address(usize, TypeId),
}

type Entry = &'static (dyn Any + Send + Sync);

/// The entry for `key`, built by `build` the first time.
fn entry(key: Key, build: impl FnOnce() -> Box<dyn Any + Send + Sync>) -> Entry {
    thread_local! {
        static LOCAL: RefCell<Vec<(Key, Entry)>> = const { RefCell::new(Vec::new()) };
    }
    static SHARED: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    // `try_with`: a thread being torn down has no local list; the shared map serves it.
    let local = LOCAL
        .try_with(|list| {
            list.borrow()
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, e)| *e)
        })
        .ok()
        .flatten();
    if let Some(found) = local {
        return found;
    }
    let shared = SHARED.get_or_init(Default::default);
    let stored = shared
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .copied();
    let found = match stored {
        Some(found) => found,
        None => {
            let built = build();
            let mut map = shared.lock().unwrap_or_else(|e| e.into_inner());
            *map.entry(key).or_insert_with(|| Box::leak(built))
        }
    };
    let _ = LOCAL.try_with(|list| list.borrow_mut().push((key, found)));
    found
}

/// The value of type `V` built for the Rust type `T`, by `build` on the first call.
pub(crate) fn per_type<T: 'static, V: Send + Sync + 'static>(
    build: impl FnOnce() -> V,
) -> &'static V {
    let key = Key::Type(TypeId::of::<T>(), TypeId::of::<V>());
    downcast(entry(key, || Box::new(build())))
}

/// The value of type `V` built for `owner`, a value that lives as long as the program (a
/// contract's spec), by `build` on the first call.
pub(crate) fn per_spec<S, V: Send + Sync + 'static>(
    owner: &'static S,
    build: impl FnOnce() -> V,
) -> &'static V {
    let key = Key::Address(std::ptr::from_ref(owner) as usize, TypeId::of::<V>());
    downcast(entry(key, || Box::new(build())))
}

/// The entry as the `V` it was stored as: every key names the entry's type, so the cast holds.
fn downcast<V: 'static>(entry: Entry) -> &'static V {
    match entry.downcast_ref::<V>() {
        Some(v) => v,
        None => unreachable!("a cache key names the type of its entry"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_built_once_per_key_and_kind() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        struct A;
        struct B;
        let build = |n: u32| {
            BUILT.fetch_add(1, Ordering::SeqCst);
            n
        };
        let a1 = per_type::<A, u32>(|| build(1));
        let a2 = per_type::<A, u32>(|| build(2));
        let b = per_type::<B, u32>(|| build(3));
        let a_text = per_type::<A, String>(|| "a".to_owned());
        assert_eq!((*a1, *a2, *b, a_text.as_str()), (1, 1, 3, "a"));
        assert!(std::ptr::eq(a1, a2));
        assert_eq!(BUILT.load(Ordering::SeqCst), 2);

        static OWNER_1: u8 = 1;
        static OWNER_2: u8 = 2;
        let o1 = per_spec(&OWNER_1, || 10u64);
        let o2 = per_spec(&OWNER_2, || 20u64);
        let o1_again = per_spec(&OWNER_1, || 30u64);
        assert_eq!((*o1, *o2, *o1_again), (10, 20, 10));
    }

    #[test]
    fn an_entry_may_ask_for_another_while_it_is_built() {
        struct Outer;
        struct Inner;
        let outer = per_type::<Outer, Vec<u32>>(|| {
            let inner = per_type::<Inner, u32>(|| 7);
            vec![*inner, *inner + 1]
        });
        assert_eq!(outer, &[7, 8]);
    }

    #[test]
    fn threads_share_the_first_entry_stored() {
        struct Shared;
        let addresses: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    s.spawn(move || std::ptr::from_ref(per_type::<Shared, u32>(|| i)) as usize)
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        assert_eq!(addresses.len(), 4);
        assert!(
            addresses.iter().all(|a| *a == addresses[0]),
            "{addresses:?}"
        );
    }
}
