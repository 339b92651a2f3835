//! Where intents are remembered: `localStorage` in browsers (survives
//! reloads), memory elsewhere or on request.
//!
//! Entries live under `onejob:v1:intent:<intent>` as JSON. An entry that does
//! not parse (corrupted, or written by something else) is removed and reported
//! as a warning; it never breaks a request.

use std::cell::RefCell;

use onejob_core::intent::IntentRecord;
use wasm_bindgen::JsCast;
use web_sys::Storage;

use crate::js;

const PREFIX: &str = "onejob:v1:intent:";

/// The most records kept: an app that never calls `resume()` must not grow
/// `localStorage` without bound. Past it the oldest records are dropped.
pub const MAX_INTENTS: usize = 500;
const DROPPED_FOR_ROOM: &str = "unresolved intent dropped: the store keeps at most 500 intents (MAX_INTENTS)";

/// Intent records, by intent id.
pub enum IntentStore {
    Local(Storage),
    /// Entries by name (few: a list beats a tree's code size).
    Memory(RefCell<Vec<(String, String)>>),
}

/// A record that was dropped: unreadable, or the oldest past [`MAX_INTENTS`].
pub struct Dropped {
    pub intent: String,
    pub reason: String,
}

impl IntentStore {
    /// `localStorage` when the host has a working one, else memory.
    pub fn auto() -> Self {
        Self::local().unwrap_or_else(Self::memory)
    }

    pub fn memory() -> Self {
        Self::Memory(RefCell::new(Vec::new()))
    }

    /// `localStorage`, if present and usable (it throws in some private modes).
    pub fn local() -> Option<Self> {
        let storage: Storage = js::global("localStorage")?.dyn_into().ok()?;
        let probe = [PREFIX, "__probe"].concat();
        storage.set_item(&probe, "1").ok()?;
        storage.remove_item(&probe).ok()?;
        Some(Self::Local(storage))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Local(_) => "local",
            Self::Memory(_) => "memory",
        }
    }

    /// The record of `intent`; `Err` when one was stored but unreadable (it is removed).
    pub fn load(&self, intent: &str) -> Result<Option<IntentRecord>, Dropped> {
        let Some(text) = self.get(&[PREFIX, intent].concat()) else { return Ok(None) };
        parse(intent, &text).map(Some).inspect_err(|_| {
            self.remove(intent);
        })
    }

    /// Saves a record, first making room for a new one (see [`MAX_INTENTS`]).
    /// `request_json` is its request as `SavedRequest::to_json` wrote it, once
    /// per submission (the body is not serialised again on every attempt).
    /// Returns the records dropped to make room; `Err` explains why the
    /// record could not be persisted (quota).
    pub fn save(&self, record: &IntentRecord, request_json: Option<&str>) -> Result<Vec<Dropped>, String> {
        let text = record.to_json_with(request_json);
        let name = [PREFIX, record.intent.as_str()].concat();
        let dropped = if self.get(&name).is_none() { self.make_room() } else { Vec::new() };
        match self {
            Self::Local(storage) => {
                storage.set_item(&name, &text).map_err(|_| "localStorage refused the write (quota?)".to_owned())?;
            }
            Self::Memory(map) => {
                let mut entries = map.borrow_mut();
                entries.retain(|(n, _)| *n != name);
                entries.push((name, text));
            }
        }
        Ok(dropped)
    }

    /// Drops the least recently updated records until one more fits.
    fn make_room(&self) -> Vec<Dropped> {
        if self.names().len() < MAX_INTENTS {
            return Vec::new();
        }
        let (mut records, mut dropped) = self.all();
        // Usually one to drop: a linear search beats linking a sort.
        while records.len() >= MAX_INTENTS {
            let oldest = (0..records.len()).min_by_key(|&i| records[i].updated_ms).unwrap_or(0);
            let record = records.swap_remove(oldest);
            self.remove(&record.intent);
            dropped.push(Dropped { intent: record.intent, reason: DROPPED_FOR_ROOM.into() });
        }
        dropped
    }

    pub fn remove(&self, intent: &str) -> bool {
        let name = [PREFIX, intent].concat();
        let existed = self.get(&name).is_some();
        match self {
            Self::Local(storage) => {
                let _ = storage.remove_item(&name);
            }
            Self::Memory(map) => {
                map.borrow_mut().retain(|(n, _)| *n != name);
            }
        }
        existed
    }

    /// Every readable record, and the unreadable ones it removed.
    pub fn all(&self) -> (Vec<IntentRecord>, Vec<Dropped>) {
        let mut records = Vec::new();
        let mut dropped = Vec::new();
        for name in self.names() {
            let intent = name.get(PREFIX.len()..).unwrap_or_default().to_owned();
            match self.load(&intent) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => {}
                Err(d) => dropped.push(d),
            }
        }
        (records, dropped)
    }

    /// The storage names of every entry.
    fn names(&self) -> Vec<String> {
        match self {
            Self::Local(storage) => {
                let len = storage.length().unwrap_or(0);
                (0..len).filter_map(|i| storage.key(i).ok().flatten()).filter(|k| k.starts_with(PREFIX)).collect()
            }
            Self::Memory(map) => map.borrow().iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    fn get(&self, name: &str) -> Option<String> {
        match self {
            Self::Local(storage) => storage.get_item(name).ok().flatten(),
            Self::Memory(map) => map.borrow().iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        }
    }
}

fn parse(intent: &str, text: &str) -> Result<IntentRecord, Dropped> {
    let record = IntentRecord::from_json_with(text, &js::JsNumbers)
        .map_err(|e| Dropped { intent: intent.to_owned(), reason: ["unreadable entry dropped: ", &e].concat() })?;
    if record.intent != intent {
        return Err(Dropped { intent: intent.to_owned(), reason: "entry belongs to another intent; dropped".into() });
    }
    Ok(record)
}
