//! A tracee memory made of one buffer at a fixed address, for unit tests.

use crate::memory::{Fault, ReadMemory};

pub struct Mem {
    base: u64,
    bytes: Vec<u8>,
}

impl Mem {
    pub fn new(base: u64, bytes: &[u8]) -> Mem {
        Mem {
            base,
            bytes: bytes.to_vec(),
        }
    }

    /// An empty memory: every read faults.
    pub fn none() -> Mem {
        Mem::new(0, &[])
    }
}

impl ReadMemory for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault> {
        let fault = Fault {
            addr,
            errno: libc::EFAULT,
        };
        let off = addr.checked_sub(self.base).ok_or(fault)? as usize;
        if off >= self.bytes.len() {
            return Err(fault);
        }
        let n = buf.len().min(self.bytes.len() - off);
        buf[..n].copy_from_slice(&self.bytes[off..off + n]);
        Ok(n)
    }
}
