//! The isolate's queue of spans waiting for export, as a value: one export
//! at a time per isolate, batching what came meanwhile; a bounded queue
//! (spans beyond it are dropped and counted for one log line); an export's
//! turn bounded ([`EXPORT_TURN_MS`]: one request's `waitUntil` exports for a
//! while, then leaves the rest to the next request); an export under way
//! longer than [`super::answer::EXPORT_LOST_MS`] presumed lost with its request and taken
//! over. The edge keeps one in a thread-local, posts the batches it hands
//! out and logs what it reports; the clock is passed in.

use super::answer::{EXPORT_TURN_MS, export_busy, queue_room};

/// Items (spans) waiting for an export, and the export under way.
#[derive(Debug)]
pub struct ExportQueue<T> {
    /// Waiting, oldest first.
    queued: Vec<T>,
    /// An export is under way, since then.
    exporting: Option<u64>,
    /// Items dropped (a full queue) since the last report.
    dropped: u64,
}

impl<T> Default for ExportQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ExportQueue<T> {
    /// An empty queue, no export under way.
    pub const fn new() -> Self {
        Self { queued: Vec::new(), exporting: None, dropped: 0 }
    }

    /// Queues `items` (those beyond `max_queued` dropped and counted) and
    /// says whether the caller exports now: when no export is under way
    /// (or the one under way was lost), it becomes the one, from `now_ms`;
    /// else the export under way takes what was queued.
    pub fn offer(&mut self, items: Vec<T>, max_queued: usize, now_ms: u64) -> bool {
        let room = queue_room(max_queued, self.queued.len(), items.len());
        self.dropped += (items.len() - room) as u64;
        self.queued.extend(items.into_iter().take(room));
        if export_busy(self.exporting, now_ms) {
            return false;
        }
        self.exporting = Some(now_ms);
        true
    }

    /// The next batch (at most `max` items, oldest first) of the export
    /// that started at `started_ms`, or `None` once the queue is empty or
    /// its turn is over at `now_ms` (the rest waits for the next request).
    pub fn next_batch(&mut self, max: usize, started_ms: u64, now_ms: u64) -> Option<Vec<T>> {
        let turn_over = now_ms.saturating_sub(started_ms) >= EXPORT_TURN_MS;
        let n = self.queued.len().min(max);
        (!turn_over && n > 0).then(|| self.queued.drain(..n).collect())
    }

    /// The export ended: no export is under way, and how many items were
    /// dropped since the last report (`None` when none: nothing to log).
    pub fn finish(&mut self) -> Option<u64> {
        self.exporting = None;
        Some(std::mem::take(&mut self.dropped)).filter(|&dropped| dropped > 0)
    }

    /// How many items wait.
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// Whether none wait.
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::telemetry::answer::EXPORT_LOST_MS;

    #[test]
    fn the_first_offer_exports_and_later_ones_leave_their_items_to_it() {
        let mut queue = ExportQueue::new();
        assert!(queue.offer(vec![1, 2], 10, 1_000), "no export under way: this one exports");
        assert!(!queue.offer(vec![3], 10, 1_001), "one is under way: it takes these too");
        assert_eq!(queue.next_batch(2, 1_000, 1_002), Some(vec![1, 2]));
        assert_eq!(queue.next_batch(2, 1_000, 1_003), Some(vec![3]));
        assert_eq!(queue.next_batch(2, 1_000, 1_004), None, "empty: the export ends");
        assert_eq!(queue.finish(), None, "nothing dropped: nothing to log");
        assert!(queue.offer(vec![4], 10, 2_000), "the export ended: the next offer exports");
    }

    #[test]
    fn a_full_queue_drops_the_rest_and_reports_them_once() {
        let mut queue = ExportQueue::new();
        assert!(queue.offer(vec![1, 2, 3], 4, 0));
        assert!(!queue.offer(vec![4, 5, 6], 4, 1));
        assert_eq!(queue.len(), 4);
        assert_eq!(queue.finish(), Some(2));
        assert_eq!(queue.finish(), None, "reported once");
    }

    #[test]
    fn an_export_s_turn_ends_and_a_lost_export_is_taken_over() {
        let mut queue = ExportQueue::new();
        assert!(queue.offer(vec![1, 2, 3], 10, 0));
        assert_eq!(queue.next_batch(1, 0, 1), Some(vec![1]));
        assert_eq!(queue.next_batch(1, 0, EXPORT_TURN_MS), None, "its turn is over: the rest waits");
        assert_eq!(queue.len(), 2);
        // Its request went away without finishing: still under way until
        // presumed lost, then taken over.
        assert!(!queue.offer(vec![], 10, EXPORT_LOST_MS - 1));
        assert!(queue.offer(vec![], 10, EXPORT_LOST_MS));
        assert_eq!(queue.next_batch(5, EXPORT_LOST_MS, EXPORT_LOST_MS + 1), Some(vec![2, 3]));
        assert!(queue.is_empty());
    }
}
