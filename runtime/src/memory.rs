//! Reading a tracee's memory (for `user_string`, syscall argument decoding).

/// A read that failed at `addr` (SystemTap reports these as
/// "user string copy fault -14 at 0x... [man error::fault]").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub addr: u64,
    /// A positive errno value (usually EFAULT).
    pub errno: i32,
}

/// Something whose memory can be read: a traced process, or a buffer in tests.
pub trait ReadMemory {
    /// Copies up to `buf.len()` bytes starting at `addr`. Returns how many
    /// were copied (fewer when the range runs into an unmapped page), or a
    /// fault when not even the first byte is readable.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault>;
}
