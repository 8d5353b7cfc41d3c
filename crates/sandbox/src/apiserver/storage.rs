//! Durable object storage: SQLite on disk, an ordered map in memory, and the
//! event history that watches replay.
//!
//! Every write goes through [`Store::mutate`], which holds one lock, assigns
//! the next value of the single monotonic resourceVersion, writes the row in
//! a SQLite transaction and appends a watch event. Reads are served from
//! memory so list and watch stay fast with many objects; SQLite is read once
//! at start, which is what makes state survive a restart. The history of
//! events is kept in memory only, bounded: a watch older than the oldest
//! retained event gets 410 Gone, exactly as after an etcd compaction.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, params};
use serde_json::Value;
use tokio::sync::broadcast;

/// Where an object lives: `group/plural`, namespace (empty when
/// cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            resource: resource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub key: ObjectKey,
    pub type_: EventType,
    pub object: Arc<Value>,
    /// The object before this change (for selector transitions in watches).
    pub previous: Option<Arc<Value>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot open the database {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored object {0:?} is not valid JSON: {1}")]
    Corrupt(ObjectKey, serde_json::Error),
    #[error("the storage lock is poisoned")]
    Poisoned,
    #[error("cannot encode an object: {0}")]
    Encode(#[from] serde_json::Error),
}

struct State {
    rv: u64,
    objects: BTreeMap<ObjectKey, Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    /// Every change with a resourceVersion above this one is in `history`.
    oldest: u64,
    db: Connection,
}

impl State {
    /// The objects of `resource` (in `namespace`, or in all), in key order.
    fn objects_of(&self, resource: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let start = ObjectKey::new(resource, namespace.unwrap_or(""), "");
        self.objects
            .range(start..)
            .take_while(|(key, _)| {
                key.resource == resource && namespace.is_none_or(|ns| key.namespace == ns)
            })
            .map(|(_, value)| value.clone())
            .collect()
    }
}

pub struct Store {
    state: Mutex<State>,
    changes: broadcast::Sender<Arc<Change>>,
    history_limit: usize,
}

/// The outcome of starting a watch: the retained changes after the
/// requested version, and a live feed of later ones.
pub struct Subscription {
    pub backlog: Vec<Arc<Change>>,
    pub live: broadcast::Receiver<Arc<Change>>,
}

impl Store {
    pub fn open(path: &Path, history_limit: usize) -> Result<Self, StorageError> {
        let db = Connection::open(path).map_err(|source| StorageError::Open {
            path: path.display().to_string(),
            source,
        })?;
        db.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS objects (
                 resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                 rv INTEGER NOT NULL, body TEXT NOT NULL,
                 PRIMARY KEY (resource, namespace, name));
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
        )?;
        let rv: u64 = db
            .query_row("SELECT value FROM meta WHERE key = 'rv'", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|v| u64::try_from(v).unwrap_or(0))
            .unwrap_or(0);
        let mut objects = BTreeMap::new();
        {
            let mut statement =
                db.prepare("SELECT resource, namespace, name, body FROM objects")?;
            let rows = statement.query_map([], |row| {
                Ok((
                    ObjectKey {
                        resource: row.get(0)?,
                        namespace: row.get(1)?,
                        name: row.get(2)?,
                    },
                    row.get::<_, String>(3)?,
                ))
            })?;
            for row in rows {
                let (key, body) = row?;
                let value: Value = serde_json::from_str(&body)
                    .map_err(|error| StorageError::Corrupt(key.clone(), error))?;
                objects.insert(key, Arc::new(value));
            }
        }
        let (changes, _) = broadcast::channel(16_384);
        Ok(Self {
            state: Mutex::new(State {
                rv,
                objects,
                history: VecDeque::new(),
                oldest: rv,
                db,
            }),
            changes,
            history_limit: history_limit.max(1),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, StorageError> {
        self.state.lock().map_err(|_| StorageError::Poisoned)
    }

    /// The oldest version a watch or a continued list can start from.
    pub fn oldest_rv(&self) -> Result<u64, StorageError> {
        Ok(self.lock()?.oldest)
    }

    pub fn current_rv(&self) -> Result<u64, StorageError> {
        Ok(self.lock()?.rv)
    }

    pub fn get(&self, key: &ObjectKey) -> Result<Option<Arc<Value>>, StorageError> {
        Ok(self.lock()?.objects.get(key).cloned())
    }

    /// Objects of one resource, in one namespace or all, ordered by
    /// namespace and name, with the version the listing is consistent with.
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, Vec<Arc<Value>>), StorageError> {
        let state = self.lock()?;
        let items = state.objects_of(resource, namespace);
        Ok((state.rv, items))
    }

    /// Every stored key (for the garbage collector).
    pub fn all(&self) -> Result<Vec<(ObjectKey, Arc<Value>)>, StorageError> {
        let state = self.lock()?;
        Ok(state
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    /// Runs `f` with exclusive access; its writes commit together and are
    /// announced to watches in order.
    pub fn mutate<T, E: From<StorageError>>(
        &self,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut state = self.lock()?;
        let mut tx = Transaction {
            state: &mut state,
            pending: Vec::new(),
        };
        let result = f(&mut tx);
        let pending = std::mem::take(&mut tx.pending);
        if pending.is_empty() {
            return result;
        }
        let output = match result {
            Ok(output) => output,
            Err(error) => {
                // Writes made before the error stay (each is already
                // consistent); they must still reach watches.
                self.commit(&mut state, pending)?;
                return Err(error);
            }
        };
        self.commit(&mut state, pending)?;
        Ok(output)
    }

    fn commit(&self, state: &mut State, pending: Vec<Arc<Change>>) -> Result<(), StorageError> {
        let tx = state.db.transaction()?;
        for change in &pending {
            let key = &change.key;
            match change.type_ {
                EventType::Deleted => {
                    tx.execute(
                        "DELETE FROM objects WHERE resource = ?1 AND namespace = ?2 AND name = ?3",
                        params![key.resource, key.namespace, key.name],
                    )?;
                }
                _ => {
                    tx.execute(
                        "INSERT OR REPLACE INTO objects (resource, namespace, name, rv, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![
                            key.resource,
                            key.namespace,
                            key.name,
                            i64::try_from(change.rv).unwrap_or(i64::MAX),
                            serde_json::to_string(change.object.as_ref())?
                        ],
                    )?;
                }
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?1)",
            params![i64::try_from(state.rv).unwrap_or(i64::MAX)],
        )?;
        tx.commit()?;
        for change in pending {
            state.history.push_back(change.clone());
            // No receiver is not an error: nobody is watching.
            let _ = self.changes.send(change);
        }
        while state.history.len() > self.history_limit {
            if let Some(dropped) = state.history.pop_front() {
                state.oldest = dropped.rv;
            }
        }
        Ok(())
    }

    /// Starts a watch after `rv`; `None` when that version is older than the
    /// retained history (the caller answers 410 Gone).
    pub fn subscribe(&self, rv: u64) -> Result<Option<Subscription>, StorageError> {
        let state = self.lock()?;
        if rv < state.oldest {
            return Ok(None);
        }
        let backlog = state
            .history
            .iter()
            .filter(|c| c.rv > rv)
            .cloned()
            .collect();
        Ok(Some(Subscription {
            backlog,
            live: self.changes.subscribe(),
        }))
    }

    /// Starts a watch from the current state: every object as it is now,
    /// then later changes.
    pub fn snapshot_and_subscribe(
        &self,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<Snapshot, StorageError> {
        let state = self.lock()?;
        let items = state.objects_of(resource, namespace);
        Ok((state.rv, items, self.changes.subscribe()))
    }
}

/// The current objects of a resource, the version they are consistent
/// with, and the live feed of later changes.
pub type Snapshot = (u64, Vec<Arc<Value>>, broadcast::Receiver<Arc<Change>>);

/// Exclusive access to the store during one [`Store::mutate`].
pub struct Transaction<'a> {
    state: &'a mut State,
    pending: Vec<Arc<Change>>,
}

impl Transaction<'_> {
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.state.objects.get(key).cloned()
    }

    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let start = ObjectKey::new(resource, namespace.unwrap_or(""), "");
        self.state
            .objects
            .range(start..)
            .take_while(|(key, _)| {
                key.resource == resource && namespace.is_none_or(|ns| key.namespace == ns)
            })
            .map(|(_, value)| value.clone())
            .collect()
    }

    pub fn all(&self) -> Vec<(ObjectKey, Arc<Value>)> {
        self.state
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjectKey> {
        self.state
            .objects
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect()
    }

    /// Stores `object` under the next resourceVersion and returns it as
    /// stored.
    pub fn put(&mut self, key: ObjectKey, mut object: Value) -> Arc<Value> {
        self.state.rv += 1;
        let rv = self.state.rv;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let object = Arc::new(object);
        let previous = self.state.objects.insert(key.clone(), object.clone());
        let type_ = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.pending.push(Arc::new(Change {
            rv,
            key,
            type_,
            object: object.clone(),
            previous,
        }));
        object
    }

    /// Removes the object; watches see it with a fresh resourceVersion.
    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Value>> {
        let old = self.state.objects.remove(key)?;
        self.state.rv += 1;
        let rv = self.state.rv;
        let mut object = (*old).clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let object = Arc::new(object);
        self.pending.push(Arc::new(Change {
            rv,
            key: key.clone(),
            type_: EventType::Deleted,
            object: object.clone(),
            previous: Some(old),
        }));
        Some(object)
    }
}
