//! The SDK's memory allocator: power-of-two size classes, each with a free
//! list, carved from pages the wasm memory grows by. The default allocator
//! (dlmalloc) is about 7 KB of the SDK's wasm; this is a few hundred bytes.
//!
//! A block of class `c` is `2^c` bytes, aligned to its size (up to a page),
//! and goes back to its class's free list when freed, so repeated requests
//! (a 32 KB body per submission) reuse the same blocks. The price is up to
//! half a block of slack per allocation, which an SDK's few live objects
//! can afford. Wasm is single-threaded here (no shared memory), so the
//! state is a plain cell.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr::null_mut;

const PAGE: usize = 65_536;
/// Smallest block: 16 bytes (every Rust type's alignment fits).
const MIN_CLASS: usize = 4;
/// Classes up to 2^31 bytes: the whole 32-bit address space.
const CLASSES: usize = 32;

struct State {
    /// Head of each class's free list (a freed block holds the next pointer).
    free: [usize; CLASSES],
    /// Unused memory from the last growth: `[next, end)`.
    next: usize,
    end: usize,
}

pub struct Heap(UnsafeCell<State>);

// SAFETY: wasm32-unknown-unknown without atomics has a single thread.
unsafe impl Sync for Heap {}

impl Heap {
    pub const fn new() -> Self {
        Self(UnsafeCell::new(State { free: [0; CLASSES], next: 0, end: 0 }))
    }
}

/// The class of a layout: the smallest power of two that holds its size and
/// its alignment.
fn class_of(layout: Layout) -> usize {
    let size = layout.size().max(layout.align()).max(1 << MIN_CLASS);
    (usize::BITS - (size - 1).leading_zeros()) as usize
}

unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let class = class_of(layout);
        if class >= CLASSES {
            return null_mut();
        }
        // SAFETY: single-threaded (see above), and no re-entrancy: nothing
        // here allocates.
        let state = unsafe { &mut *self.0.get() };
        let head = state.free[class];
        if head != 0 {
            // SAFETY: `head` is a freed block of this class; its first word
            // holds the next free block.
            state.free[class] = unsafe { *(head as *const usize) };
            return head as *mut u8;
        }
        let size = 1usize << class;
        let align = size.min(PAGE);
        let start = state.next.checked_add(align - 1).map(|n| n & !(align - 1));
        if start.and_then(|start| start.checked_add(size)).is_none_or(|end| end > state.end) {
            // Grow by whole pages; what was left of the old region is dropped
            // (at most one block's worth).
            let pages = size.div_ceil(PAGE);
            let previous = core::arch::wasm32::memory_grow(0, pages);
            if previous == usize::MAX {
                return null_mut();
            }
            let (Some(next), Some(end)) = (previous.checked_mul(PAGE), (previous + pages).checked_mul(PAGE)) else {
                return null_mut();
            };
            state.next = next;
            state.end = end;
            let block = state.next;
            state.next += size;
            return block as *mut u8;
        }
        let start = start.unwrap_or_default(); // checked just above
        state.next = start + size;
        start as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let class = class_of(layout);
        // SAFETY: as in `alloc`; `ptr` is a block of this class, at least 16
        // bytes and aligned, so it can hold the free list's next pointer.
        let state = unsafe { &mut *self.0.get() };
        unsafe { *(ptr as *mut usize) = state.free[class] };
        state.free[class] = ptr as usize;
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Same class: the block already has room.
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if class_of(new_layout) == class_of(layout) {
            return ptr;
        }
        // SAFETY: as in `alloc`/`dealloc`; the blocks do not overlap.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
