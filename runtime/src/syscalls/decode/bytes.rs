//! Reading fixed-size kernel structures out of tracee memory: whole
//! structures or nothing, and native-endian fields at byte offsets.

use super::strings::read_bytes;
use crate::memory::ReadMemory;

/// Exactly `len` bytes at `addr`, or None when any of them is unreadable.
pub fn read_exact(mem: &dyn ReadMemory, addr: u64, len: usize) -> Option<Vec<u8>> {
    read_bytes(mem, addr, len).filter(|b| b.len() == len)
}

fn field<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    b[off..off + N]
        .try_into()
        .expect("field inside the structure")
}

pub fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes(field(b, off))
}

pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(field(b, off))
}

pub fn i32_at(b: &[u8], off: usize) -> i32 {
    i32::from_ne_bytes(field(b, off))
}

pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(field(b, off))
}

pub fn i64_at(b: &[u8], off: usize) -> i64 {
    i64::from_ne_bytes(field(b, off))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn fields_and_whole_reads() {
        let mut b = 0x0102_0304_0506_0708u64.to_ne_bytes().to_vec();
        b.extend_from_slice(&(-2i32).to_ne_bytes());
        assert_eq!(u64_at(&b, 0), 0x0102_0304_0506_0708);
        assert_eq!(i64_at(&b, 0), 0x0102_0304_0506_0708);
        assert_eq!(i32_at(&b, 8), -2);
        assert_eq!(u32_at(&b, 8), 0xffff_fffe);
        assert_eq!(u16_at(&b, 8), 0xfffe);
        let mem = Mem::new(0x1000, &b);
        assert_eq!(read_exact(&mem, 0x1000, 12), Some(b.clone()));
        assert_eq!(read_exact(&mem, 0x1000, 13), None);
        assert_eq!(read_exact(&mem, 0x2000, 1), None);
    }
}
