//! Component bytes by digest, read from the plugin registry once per
//! replica: a rebuild of a chain or an evaluator does not fetch them again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchyard_store::{Store, StoreError};

/// The registry's component bytes this replica has read, by SHA-256.
#[derive(Debug)]
pub struct ComponentBytes {
    store: Store,
    held: Mutex<HashMap<String, Arc<Vec<u8>>>>,
}

impl ComponentBytes {
    /// An empty cache over `store`'s registry.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            held: Mutex::default(),
        }
    }

    /// The bytes of the component with this digest.
    pub async fn get(&self, sha256: &str) -> Result<Arc<Vec<u8>>, StoreError> {
        if let Some(bytes) = self.held.lock().expect("bytes lock").get(sha256) {
            return Ok(bytes.clone());
        }
        let bytes = Arc::new(self.store.plugin_bytes(sha256).await?);
        self.held
            .lock()
            .expect("bytes lock")
            .insert(sha256.to_string(), bytes.clone());
        Ok(bytes)
    }
}
