//! A pool of activation buffers: released tensors give their memory back, later
//! allocations take the smallest buffer that fits, so steady-state runs allocate nothing.

use crate::tensor::AlignedBuf;

#[derive(Default)]
pub(crate) struct BufferPool {
    free: Vec<AlignedBuf>,
}

impl BufferPool {
    /// A buffer of `len` bytes (contents unspecified).
    pub fn take(&mut self, len: usize) -> AlignedBuf {
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut b = self.free.swap_remove(i);
                b.resize(len);
                b
            }
            None => AlignedBuf::zeroed(len),
        }
    }

    /// Returns a buffer to the pool.
    pub fn put(&mut self, buf: AlignedBuf) {
        if buf.capacity() > 0 {
            self.free.push(buf);
        }
    }

    /// Bytes held by free buffers.
    pub fn held_bytes(&self) -> usize {
        self.free.iter().map(AlignedBuf::capacity).sum()
    }
}
